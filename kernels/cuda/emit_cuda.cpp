#include "kernels/cuda/emit_cuda.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "kernels/cuda/cuda_source.h"
#include "kernels/cuda/cuda_text.h"
#include "kernels/kernel_abi.h"
#include "plan/column_algebra.h"
#include "plan/score_functions.h"
#include "plan/symbolic.h"
#include "plan/visibility.h"

namespace sink::kernels {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "SINK_INF" : "(-SINK_INF)";
  return fmt::format("(real)({})", format_number(v));
}

// The value of an expression of numbers alone (the normalisers' exponents, such as p - 1).
std::optional<double> constant_value(const ExprNode& e) {
  using Op = ExprNode::Op;
  if (e.op == Op::Number) return e.number;
  if (e.op == Op::Var || e.op == Op::Call) return std::nullopt;
  std::vector<double> a;
  for (const auto& arg : e.args)
    if (auto v = constant_value(arg))
      a.push_back(*v);
    else
      return std::nullopt;
  switch (e.op) {
    case Op::Neg: return -a.at(0);
    case Op::Add: return a.at(0) + a.at(1);
    case Op::Sub: return a.at(0) - a.at(1);
    case Op::Mul: return a.at(0) * a.at(1);
    default: return std::nullopt;  // division and powers: leave them to the kernel's own rounding
  }
}

// Whether `e` calls one of the transcendental primitives (a special-function instruction or a series).
bool calls_transcendental(const ExprNode& e) {
  if (e.op == ExprNode::Op::Call && (e.name == "__exp" || e.name == "__expm1_small")) return true;
  for (const ExprNode& a : e.args)
    if (calls_transcendental(a)) return true;
  return false;
}

// The online form evaluates s at qk - m, m the row's running maximum: at most 0 (the backward's recomputed
// products differ from the forward's by rounding), where exp's overflow clamp min(qk, 88) is qk itself. Without
// it the same values, one instruction a pair fewer.
ExprNode without_overflow_clamps(const ExprNode& e) {
  ExprNode out = e;
  for (ExprNode& a : out.args) a = without_overflow_clamps(a);
  if (out.op != ExprNode::Op::Call || out.name != "__min") return out;
  for (int k = 0; k < 2; ++k) {
    const ExprNode &a = out.args.at(k), &bound = out.args.at(1 - k);
    if (a.op == ExprNode::Op::Var && a.name == "qk" && bound.op == ExprNode::Op::Number && bound.number > 0) return a;
  }
  return out;
}

// The variable the product form's score functions take: q.k itself, before the logit's scaling.
constexpr const char* kProduct = "product";

// e as a qk + b shift + c (a, b, c numbers) in the product q.k and the shift, if it is one.
struct Affine {
  double product = 0, shift = 0, constant = 0;
};
std::optional<Affine> affine_in_product(const ExprNode& e) {
  using Op = ExprNode::Op;
  if (e.op == Op::Var && e.name == kProduct) return Affine{1, 0, 0};
  if (e.op == Op::Var && e.name == "shift") return Affine{0, 1, 0};
  if (const std::optional<double> v = constant_value(e)) return Affine{0, 0, *v};
  auto scaled = [](std::optional<Affine> a, double by) -> std::optional<Affine> {
    if (a) a->product *= by, a->shift *= by, a->constant *= by;
    return a;
  };
  switch (e.op) {
    case Op::Neg: return scaled(affine_in_product(e.args.at(0)), -1);
    case Op::Add:
    case Op::Sub: {
      std::optional<Affine> a = affine_in_product(e.args.at(0)),
                            b = scaled(affine_in_product(e.args.at(1)), e.op == Op::Sub ? -1 : 1);
      if (!a || !b) return std::nullopt;
      return Affine{a->product + b->product, a->shift + b->shift, a->constant + b->constant};
    }
    case Op::Mul:
      for (int k = 0; k < 2; ++k)
        if (const std::optional<double> v = constant_value(e.args.at(k)))
          return scaled(affine_in_product(e.args[1 - k]), *v);
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The online form's score s = e^(qk - m) is never negative, where the normalisers are written for scores of
// either sign (p-norm's |s| and sign(s)): there |s| is s and -s > 0 never holds. (Fewer instructions and
// registers per pair: with them p-norm's backward_keys spilled.)
ExprNode for_nonnegative_score(const ExprNode& e) {
  using Op = ExprNode::Op;
  ExprNode out = e;
  for (ExprNode& a : out.args) a = for_nonnegative_score(a);
  auto is_s = [](const ExprNode& a) { return a.op == Op::Var && a.name == "s"; };
  if (out.op == Op::Call && out.name == "__abs" && is_s(out.args.at(0))) return out.args[0];
  if (out.op == Op::Call && out.name == "__if_pos" && out.args.at(0).op == Op::Neg && is_s(out.args[0].args.at(0)))
    return out.args.at(2);
  return out;
}

// The score expression as a C expression over x (= qk, or the product q.k in the product form), pos_i and pos_j
// (1-based positions) and length (the sequence's, T).
std::string c_expr(const ExprNode& e) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return c_expr(e.args.at(k)); };
  switch (e.op) {
    case Op::Number: return number(e.number);
    case Op::Var:
      if (e.name == "qk" || e.name == kProduct) return "x";
      if (e.name == "i" || e.name == "j" || e.name == "T")
        return e.name == "T" ? std::string("length") : "pos_" + e.name;
      // The normaliser's (plan/normalizers.h); its x is the logit, as the score's qk is.
      // The normaliser's (plan/normalizers.h), its x the logit as the score's qk is, and the column algebra's
      // (plan/column_algebra.h): each a parameter of the function the expression is printed in.
      for (const char* name :
           {"s", "x", "unit", "P", "Z", "r", "shift", "m", "m_new", "m_or_P", "inv_Z", "dA", "delta", "ds", "dx_scale"})
        if (e.name == name) return e.name;
      throw std::runtime_error("CUDA kernel generator: no value for variable '" + e.name + "'");
    // (fmt, not "(" + ...: GCC 12 warns of a false -Wrestrict on a literal plus a string.)
    case Op::Neg: return fmt::format("(-{})", arg(0));
    case Op::Add: return fmt::format("({} + {})", arg(0), arg(1));
    case Op::Sub: return fmt::format("({} - {})", arg(0), arg(1));
    case Op::Mul: return fmt::format("({} * {})", arg(0), arg(1));
    case Op::Div: return fmt::format("r_div({}, {})", arg(0), arg(1));
    case Op::Pow: {
      // A small whole exponent (p-norm's p = 2, its terms' degree) as products: powf is a library call with
      // branches, forty times the instructions.
      const std::optional<double> n = constant_value(e.args.at(1));
      if (n && *n == std::floor(*n) && *n >= 1 && *n <= 8)
        return fmt::format("r_powi<{}>({})", static_cast<int>(*n), arg(0));
      return fmt::format("r_pow({}, {})", arg(0), arg(1));
    }
    case Op::Call: break;
  }
  // The language's functions expand into the primitives (plan/score_functions.h); only those have code here.
  if (!primitive_arity(e.name)) return c_expr(expand_score_functions(e));
  // e^(a q.k + b shift + c), the product form's exponential, and e^min(that, bound), the direct form's
  // (its overflow clamp): in 16-bit storage one multiply-add into the exponent of 2, the logit's scaling and
  // log2 e folded into one constant, where the scaling, the subtraction and the multiply were three.
  if (e.name == "__exp") {
    const ExprNode& arg = e.args.at(0);
    std::optional<double> bound;
    const ExprNode* inner = &arg;
    if (arg.op == ExprNode::Op::Call && arg.name == "__min")
      for (int k = 0; k < 2 && !bound; ++k)
        if ((bound = constant_value(arg.args.at(k)))) inner = &arg.args.at(1 - k);
    if (const std::optional<Affine> a = affine_in_product(*inner); a && a->product != 0) {
      std::string offset = a->shift == 0    ? ""
                           : a->shift == 1  ? "shift"
                           : a->shift == -1 ? "-shift"
                                            : fmt::format("{} * shift", number(a->shift));
      if (offset.empty())
        offset = number(a->constant);
      else if (a->constant != 0)
        offset = fmt::format("{} + {}", offset, number(a->constant));
      if (bound) return fmt::format("r_exp_affine_min(x, {}, {}, {})", number(a->product), offset, number(*bound));
      return fmt::format("r_exp_affine(x, {}, {})", number(a->product), offset);
    }
  }
  // e^(a - shift), the online form's exponential: in 16-bit storage one multiply-add into the exponent of 2
  // where a subtraction and a multiply were two.
  if (e.name == "__exp" && e.args.at(0).op == ExprNode::Op::Sub && e.args[0].args.at(1).op == ExprNode::Op::Var &&
      e.args[0].args[1].name == "shift")
    return fmt::format("r_exp_diff({}, shift)", c_expr(e.args[0].args[0]));
  // A choice with a transcendental side as a function, not `?:`: its arguments are evaluated before it, so
  // both sides are straight-line code and the choice a select. (As `?:`, such a side became a branch per score
  // element, and softpick's e^x - 1, needed by its term and its weight, was computed twice, once in each
  // branch.) Cheap sides stay `?:`, which the compiler turns into selects itself: as functions there, the
  // longer straight-line code made stablemax's and p-norm's backward_keys spill registers.
  if (e.name == "__if_pos" && (calls_transcendental(e.args[1]) || calls_transcendental(e.args[2])))
    return fmt::format("r_if_pos({}, {}, {})", arg(0), arg(1), arg(2));
  if (e.name == "__if_pos") return fmt::format("({} > (real)0 ? {} : {})", arg(0), arg(1), arg(2));
  static const std::pair<const char*, const char*> primitives[] = {
      {"__exp", "r_exp"},   {"__expm1_small", "r_expm1_small"},
      {"__log", "r_log"},   {"__log1p", "r_log1p"},
      {"__tanh", "r_tanh"}, {"__sqrt", "r_sqrt"},
      {"__abs", "r_fabs"},  {"__min", "r_fmin"},
      {"__max", "r_fmax"},  {"__mod", "r_mod"}};
  for (const auto& [name, code] : primitives)
    if (e.name == name) return std::string(code) + "(" + arg(0) + (e.args.size() > 1 ? ", " + arg(1) : "") + ")";
  throw std::runtime_error("CUDA kernel generator: no code for primitive '" + e.name + "'");
}

constexpr std::string_view kHopperDefinition = "#define SINK_WGMMA 1\n";

// A visibility bound (plan/visibility.h) as a C expression over the integers i, j and T (its numbers take their
// type): the minimum and maximum are comparisons (`?:`), which compile to the integer min and max.
std::string c_index_expr(const ExprNode& e) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return c_index_expr(e.args.at(k)); };
  switch (e.op) {
    case Op::Number: return std::to_string(static_cast<long long>(e.number));  // (an int: T < 2^31)
    case Op::Var: return e.name;
    case Op::Neg: return fmt::format("(-{})", arg(0));
    case Op::Add: return fmt::format("({} + {})", arg(0), arg(1));
    case Op::Sub: return fmt::format("({} - {})", arg(0), arg(1));
    case Op::Call:
      if (e.name == "__min") return fmt::format("({0} < {1} ? {0} : {1})", arg(0), arg(1));
      if (e.name == "__max") return fmt::format("({0} > {1} ? {0} : {1})", arg(0), arg(1));
      if (e.name == "__if_pos") return fmt::format("({} > 0 ? {} : {})", arg(0), arg(1), arg(2));
      if (e.name == "__mod") return fmt::format("(({0} % {1} + {1}) % {1})", arg(0), arg(1));  // C's % truncates
      break;
    default: break;
  }
  throw std::runtime_error("CUDA kernel generator: no integer form for '" + to_string(e) + "'");
}

// key_range (the keys query i sees), query_range (the queries that may see key j) and visible_pair (whether
// query i sees key j inside its range: true for a rule of ranges alone, which the compiler folds away) over `index`.
std::string visibility_functions(const Visibility& v, const std::string& index) {
  return fmt::format(
      "__device__ __forceinline__ void key_range({0} i, {0} T, {0}& lo, {0}& hi) {{\n  lo = {1};\n  hi = {2};\n}}\n"
      "__device__ __forceinline__ void query_range({0} j, {0} T, {0}& first, {0}& last) {{\n  first = {3};\n"
      "  last = {4};\n}}\n"
      "__device__ __forceinline__ bool visible_pair({0} i, {0} j, {0} T) {{ return {5}; }}\n",
      index, c_index_expr(v.first_key), c_index_expr(v.last_key), c_index_expr(v.first_query),
      c_index_expr(v.last_query), v.checks_pairs() ? c_index_expr(v.pair) + " > 0" : "true");
}

}  // namespace

bool needs_sm90a(std::string_view source) { return source.find(kHopperDefinition) != std::string_view::npos; }

std::string emit_cuda(const KernelSpec& spec, CudaStorage storage) {
  return emit_cuda(spec, storage, cuda_tiles(spec, storage));
}

std::string emit_cuda(const KernelSpec& spec, CudaStorage storage, const CudaTiles& tiles) {
  if (spec.f64 && storage != CudaStorage::Real)
    throw std::logic_error("CUDA kernels: 16-bit storage computes in float");
  const ExprNode score_grad = spec.score_derivative();
  // s and ds/dqk at qk = x - shift: the online form's shift (the row's running maximum), 0 in the direct form;
  // in the product form, at qk = SCALE_QK x - shift, x the product q.k.
  const double scale_qk = 1.0 / std::sqrt(static_cast<double>(spec.d_head));
  const auto emitted = [&](const ExprNode& e, const char* var) {  // (the masks select past a hidden pair's inf)
    const ExprNode shift{ExprNode::Op::Var, 0, "shift", {}};
    ExprNode logit{ExprNode::Op::Var, 0, var, {}};
    if (std::string(var) == kProduct)
      logit = {ExprNode::Op::Mul, 0, "", {logit, {ExprNode::Op::Number, scale_qk, "", {}}}};
    const ExprNode shifted{ExprNode::Op::Sub, 0, "", {logit, shift}};
    return substitute(spec.online ? without_overflow_clamps(expand_score_functions(e)) : e, "qk", shifted);
  };
  std::string out;
  out += "// sinklab attention kernel " + spec.hash() + " (CUDA, generated by kernels/cuda/emit_cuda.cpp)\n";
  out += "// " + spec.describe() + "\n";
  out += "// s(qk, i, j) = " + to_string(spec.score) + ";  ds/dqk = " + to_string(score_grad) + "\n";
  const char* stored = storage == CudaStorage::BFloat16  ? "bfloat16, float arithmetic"
                       : storage == CudaStorage::Float16 ? "half, float arithmetic"
                       : spec.f64                        ? "double"
                                                         : "float";
  out += fmt::format("// storage: {}\n\n", stored);
  out += spec.f64 ? "typedef double real;\n" : "typedef float real;\n";
  out += cuda_math_prelude(spec.f64, tiles.tensor_cores);
  out += cuda_storage(storage);
  auto flag = [&](const char* name, bool v) {
    out += fmt::format("constexpr bool {} = {};\n", name, v ? "true" : "false");
  };
  flag("ONLINE", spec.online);
  flag("KEY_BIAS", spec.key_bias);
  flag("SINK_LOGIT", spec.sink_logit);
  flag("POSITION_BIAS", spec.position_bias);
  flag("POSITION_GRAD", spec.position_bias && tiles.position_grad);
  flag("FUSED_DQ", tiles.tensor_cores && tiles.fused_dq);
  out += fmt::format("#define SINK_FUSED_DQ {}\n", tiles.tensor_cores && tiles.fused_dq ? 1 : 0);  // (for #if)
  out += tiles.tensor_cores && tiles.hopper ? std::string(kHopperDefinition) : "#define SINK_WGMMA 0\n";
  flag("OVERLAP", tiles.tensor_cores && tiles.hopper && tiles.overlap);
  out += fmt::format("constexpr int D = {};\n", spec.d_head);
  const NormalizerForm norm = spec.normalizer();
  // SHIFT_START: a row's shift before its first column (online, the normaliser's floor; direct, unread).
  out += fmt::format("#define ALPHA {}\n#define SCALE_QK {}\n#define SHIFT_START {}\n", number(spec.alpha),
                     number(scale_qk), number(spec.online ? norm.row->shift_floor : -INFINITY));
  // What the tensor-core backward computes dx times (column_grad's dx_scale): the scaling itself, so that dS,
  // the gradient of q.k, costs no multiply per pair; or 1 where the scaling is a power of two (d_head 64), whose
  // multiply folds into the product before it (FMUL.D8).
  int exponent = 0;
  const bool power_of_two = std::frexp(scale_qk, &exponent) == 0.5;
  out += fmt::format("#define DX_SCALE {}\n", power_of_two ? "(real)1" : "SCALE_QK");
  out += fmt::format(
      "constexpr int FWD_ROWS = {}, FWD_KEYS = {}, KEY_ROWS = {}, KEY_QUERIES = {}, QUERY_ROWS = {}, "
      "QUERY_KEYS = {}, ROW_THREADS = {};\n",
      tiles.forward_rows, tiles.forward_keys, tiles.key_rows, tiles.key_queries, tiles.query_rows, tiles.query_keys,
      tiles.row_threads);
  const std::string positions = "(real x, real shift, real pos_i, real pos_j, real length) { return ";
  out += "__device__ __forceinline__ real score" + positions + c_expr(emitted(spec.score, "qk")) + "; }\n";
  out += "__device__ __forceinline__ real score_grad" + positions + c_expr(emitted(score_grad, "qk")) + "; }\n";
  // The same of the product q.k, where the logit is its scaling alone (no position table): the scaling folds
  // into the exponent's multiply-add.
  out +=
      "__device__ __forceinline__ real score_of_product" + positions + c_expr(emitted(spec.score, kProduct)) + "; }\n";
  out += "__device__ __forceinline__ real score_grad_of_product" + positions + c_expr(emitted(score_grad, kProduct)) +
         "; }\n";
  out += "// normalize = " + norm.row->name + ": P = sum_j term(s), Z = finish(P), A = alpha weight(s) / Z\n";
  const auto normaliser = [&](const ExprNode& e) { return c_expr(spec.online ? for_nonnegative_score(e) : e); };
  const auto function = [&](const char* name, const char* parameters, const std::string& body) {
    out += fmt::format("__device__ __forceinline__ real {}({}) {{ return {}; }}\n", name, parameters, body);
  };
  function("norm_term", "real s, real x, real unit", normaliser(norm.term));
  function("norm_weight", "real s, real x, real unit", normaliser(norm.weight));
  // The column algebra (plan/column_algebra.h): the fold, the row's finish and the statistics it stores, the
  // backward's reading of them, a column's attention and logit gradient.
  const ColumnAlgebra columns = column_algebra(norm, spec.alpha, spec.online);
  function("fold_rescale", "real m, real m_new", c_expr(columns.rescale));
  function("term_rescale", "real r", c_expr(columns.term_rescale));
  out += fmt::format(
      "__device__ __forceinline__ real row_divisor(real P, real shift) {{ const real Z = {}; return {}; }}\n",
      c_expr(columns.row_finish), c_expr(columns.safe_divisor));
  function("stored_divisor", "real Z, real m, real P", c_expr(columns.stored_divisor));
  function("stored_shift_or_sum", "real Z, real m, real P", c_expr(columns.stored_shift_or_sum));
  function("backward_shift", "real Z, real m_or_P", c_expr(columns.backward_shift));
  function("backward_divisor", "real Z, real m_or_P", c_expr(columns.backward_divisor));
  function("column_attention", "real s, real x, real unit, real inv_Z", normaliser(columns.attention));
  function("logit_gradient",
           "real s, real x, real unit, real Z, real P, real dA, real delta, real inv_Z, real ds, real dx_scale",
           normaliser(columns.logit_gradient));
  // The row's sum is the sum of its weights, and they are the online form's, in [0, 1] (softmax, with k*, a sink
  // logit, ALiBi, ...): the tensor-core forward takes the sum as W times a block of ones, beside O += W V, instead
  // of an addition per pair. (Weights of either sign would cancel in it to the 16-bit rounding of the largest.)
  flag("SUM_OF_WEIGHTS", spec.online && norm.term_degree == 1 && normaliser(norm.term) == normaliser(norm.weight));
  out += "\n";
  // Which keys each query sees (plan/visibility.h): 64-bit positions for the scalar kernels; 32-bit ones, half the
  // registers and instructions per element mask, for the tensor-core kernels (T < 2^31, offsets stay 64-bit).
  const Visibility& visible = spec.rule;
  out +=
      "// Visibility: query i sees keys [lo, hi] (where visible_pair); key j is seen by queries in [first, last] at "
      "most\n";
  flag("CHECKS_PAIRS", visible.checks_pairs());
  out += visibility_functions(visible, "long long");
  if (tiles.tensor_cores) out += visibility_functions(visible, "int");
  // Whether query i, whose keys key_range gave as [lo, hi], sees key j: what every kernel asks, written once. A
  // macro, as the kernels wrote it inline before: a function call of the same text cost backward_keys 2 registers
  // and 112 instructions with a window at d_head 64 under NVRTC 13 (bench/kernel_anatomy).
  out += "#define SEES(i, j, lo, hi, T) ((j) >= (lo) && (j) <= (hi) && visible_pair((i), (j), (T)))\n";
  out += cuda_text::kColumns;
  if (tiles.tensor_cores) {
    out += "\n// Tensor cores: 16 rows per warp; shared tiles of [rows][D + 8]\n";
    out += fmt::format("constexpr bool HALF_MMA = {};\nconstexpr int PITCH = D + 8;\n",
                       storage == CudaStorage::Float16 ? "true" : "false");
    out += fmt::format("constexpr int FWD_THREADS = {}, KEY_THREADS = {}, QUERY_THREADS = {}, ROW_FRAGS = {};\n",
                       tiles.forward_threads(), tiles.key_threads(), tiles.query_threads(), tiles.row_frags);
    const CudaSharedBytes shared = cuda_shared_bytes(tiles, spec.d_head);
    out += fmt::format("constexpr int FWD_SHARED_BYTES = {}, QUERY_SHARED_BYTES = {}, KEY_SHARED_BYTES = {};\n",
                       shared.forward, shared.queries, shared.keys);
    out += fmt::format("constexpr int FWD_STAGES = {0}, QUERY_STAGES = {0};  // stages of key and value tiles\n",
                       tiles.streamed_stages());
    out += cuda_text::kWarpSm80;
    out += cuda_text::kTile;
    out += cuda_text::kLogits;
    if (tiles.hopper) out += std::string(cuda_text::kWarpSm90) + cuda_text::kTileSm90;
    out += cuda_text::kFold;
  } else {
    const std::string reason = scalar_kernels_reason(spec, storage);
    out += fmt::format("// Scalar kernels, a row per thread: {}\n",
                       reason.empty() ? "tiles without tensor cores (a GPU older than 8.0, or a check)" : reason);
  }
  // Each kernel: its signature (kernels/kernel_abi.h), then its body, on tensor cores or a row per thread.
  const auto kernel = [&](std::string_view symbol, const auto& arguments, int threads, int min_blocks,
                          const char* tensor_core_body, const char* scalar_body) {
    out += abi::cuda_signature(symbol, arguments, threads, min_blocks);
    out += fmt::format(" {}\n", tiles.tensor_cores ? tensor_core_body : scalar_body);
  };
  kernel(abi::kForwardSymbol, abi::kCudaForward, tiles.forward_threads(), tiles.min_blocks, cuda_text::kForward,
         cuda_text::kScalarForward);
  kernel(abi::kCudaBackwardRowsSymbol, abi::kCudaBackwardRows, tiles.row_threads, 0, cuda_text::kBackwardRows,
         cuda_text::kScalarBackwardRows);
  kernel(abi::kCudaBackwardKeysSymbol, abi::kCudaBackwardKeys, tiles.key_threads(), tiles.min_blocks,
         cuda_text::kBackwardKeys, cuda_text::kScalarBackwardKeys);
  kernel(abi::kCudaBackwardQueriesSymbol, abi::kCudaBackwardQueries, tiles.query_threads(), tiles.min_blocks,
         cuda_text::kBackwardQueries, cuda_text::kScalarBackwardQueries);
  kernel(abi::kProbeSymbol, abi::kCudaProbe, tiles.row_threads, 0, cuda_text::kProbe, cuda_text::kProbe);
  return out;
}

}  // namespace sink::kernels
