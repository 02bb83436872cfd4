#include "kernels/emit_cuda.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "kernels/cuda_source.h"
#include "kernels/cuda_text.h"
#include "kernels/kernel_abi.h"
#include "plan/score_functions.h"
#include "plan/symbolic.h"

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

// The score expression as a C expression over x (= qk, or the product q.k in the product form), fi and fj
// (1-based positions) and fT (the length).
std::string c_expr(const ExprNode& e) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return c_expr(e.args.at(k)); };
  switch (e.op) {
    case Op::Number: return number(e.number);
    case Op::Var:
      if (e.name == "qk" || e.name == kProduct) return "x";
      if (e.name == "i" || e.name == "j" || e.name == "T") return "f" + e.name;
      // The normaliser's (plan/normalizers.h); its x is the logit, as the score's qk is.
      if (e.name == "s" || e.name == "x" || e.name == "unit" || e.name == "P" || e.name == "Z" || e.name == "r" ||
          e.name == "shift")
        return e.name;
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
      {"__max", "r_fmax"}};
  for (const auto& [name, code] : primitives)
    if (e.name == name) return std::string(code) + "(" + arg(0) + (e.args.size() > 1 ? ", " + arg(1) : "") + ")";
  throw std::runtime_error("CUDA kernel generator: no code for primitive '" + e.name + "'");
}

// Halves `rows` until `bytes(rows)` fits the shared-memory budget.
int fit(int rows, size_t (*bytes)(int rows, int64_t d, size_t element), int64_t d, size_t element) {
  constexpr size_t kBudget = 40 * 1024;
  while (rows > 1 && bytes(rows, d, element) > kBudget) rows /= 2;
  return rows;
}

}  // namespace

std::string scalar_kernels_reason(const KernelSpec& spec, CudaStorage storage, int capability) {
  if (storage == CudaStorage::Real) return spec.f64 ? "double storage" : "float storage";
  if (spec.d_head % 16 != 0) return fmt::format("d_head {} is not a multiple of 16", spec.d_head);
  if (capability > 0 && capability < kTensorCoreCapability)
    return fmt::format("a GPU of compute capability {}.{}; the tensor-core kernels need {}.{} or newer",
                       capability / 10, capability % 10, kTensorCoreCapability / 10, kTensorCoreCapability % 10);
  return {};
}

namespace {

// backward_keys's static shared memory: two stages of [rows][d + 8] Q and dO tiles and four float rows (Z, 1 / Z,
// the shift, D); with fused_dq also the block's K rows, a [block][rows + 8] tile of dS^T and the tile's dQ share
// in float, [rows][d + 8] (what sm_90's bulk reductions read).
int backward_keys_shared_bytes(const CudaTiles& t, int64_t d) {
  const int rows = t.key_queries, pitch = static_cast<int>(d + 8);
  const int fused_rows = t.fused_dq ? t.key_rows : 1, dq_rows = t.fused_dq ? rows : 1;  // (one row otherwise)
  return 2 * 2 * rows * pitch * 2 + 2 * 4 * rows * 4 + fused_rows * pitch * 2 + fused_rows * (rows + 8) * 2 +
         dq_rows * pitch * 4;
}
constexpr int kStaticSharedLimit = 48 * 1024;

// Whether every tensor-core kernel of these tiles fits the shared memory a block may have (backward_keys's static
// arrays within 48 KiB; fused_dq's are dynamic).
bool fits_shared_memory(const CudaTiles& t, int64_t d) {
  const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
  return std::max({bytes.forward, bytes.queries, bytes.keys}) <= kCudaSharedLimit &&
         (t.fused_dq || backward_keys_shared_bytes(t, d) <= kStaticSharedLimit);
}

}  // namespace

std::vector<CudaTiles> cuda_tile_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  if (!chosen.tensor_cores) return {chosen};
  std::vector<CudaTiles> out = {chosen};
  const int64_t d = spec.d_head;
  // Rows per block 64 or 128; each kernel's streamed tiles the default's or half of them (16 rows at least: one
  // fragment), or the query-row kernels' twice them where that fits (FlashAttention-2's 128-key forward tiles at
  // d_head 64, 72 KiB; 64-key tiles for backward_queries from d_head 96 on); 16 or 32 rows per warp in the
  // query-row kernels (two fragments: each shared-memory read of a key tile feeds twice the products, for twice
  // the registers); registers for one block per multiprocessor, 168 a thread (three blocks of 4 warps: at d_head
  // 64 the backward kernels fit them with half tiles, where they otherwise take 250 and run two), or 128 (16 warps
  // a multiprocessor: the forward fits them without spilling, the backward kernels spill and lose).
  enum class Stream { Half, Default, Wide };
  struct Shape {
    int rows;
    Stream stream;
    int row_frags, min_blocks;
  };
  const Shape shapes[] = {{64, Stream::Half, 1, 1},  {64, Stream::Half, 1, 3},     {128, Stream::Default, 1, 1},
                          {128, Stream::Half, 1, 1}, {128, Stream::Default, 2, 1}, {64, Stream::Default, 1, 4},
                          {64, Stream::Wide, 1, 1}};
  for (const Shape& shape : shapes) {
    const auto part = [&](int stream) { return shape.stream == Stream::Half ? std::max(16, stream / 2) : stream; };
    CudaTiles t = chosen;
    t.forward_rows = t.key_rows = t.query_rows = shape.rows;
    t.forward_keys = part(chosen.forward_keys);
    t.key_queries = part(chosen.key_queries), t.query_keys = part(chosen.query_keys);
    if (shape.stream == Stream::Wide) {  // twice the query-row kernels' key tiles, each where it fits
      t.forward_keys *= 2, t.query_keys *= 2;
      const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
      if (bytes.forward > kCudaSharedLimit) t.forward_keys /= 2;
      if (bytes.queries > kCudaSharedLimit) t.query_keys /= 2;
    }
    t.row_frags = shape.row_frags, t.min_blocks = shape.min_blocks;
    if (!fits_shared_memory(t, d)) continue;
    const bool known = std::any_of(out.begin(), out.end(), [&](const CudaTiles& o) { return o.same_as(t); });
    if (!known && out.size() < 8) out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_fused_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  if (!chosen.tensor_cores) return {};
  const int64_t d = spec.d_head;
  // Key rows per block and query rows per tile: 64 or 128 keys (a block of 128 sums into dQ half as often) with
  // the default's queries or half of them (dQ's operands take registers the default's tile leaves), then a
  // quarter; 16 query rows at least (one fragment of dQ's rows). (32 keys, two warps, spilled at d_head 128.)
  const std::pair<int, int> shapes[] = {{64, 1}, {64, 2}, {128, 1}, {128, 2}, {64, 4}};  // (keys, divisor)
  std::vector<CudaTiles> out;
  for (const auto& [block, divisor] : shapes) {
    CudaTiles t = chosen;
    t.fused_dq = true;
    t.key_rows = block, t.key_queries = chosen.key_queries / divisor;
    if (t.key_queries >= 16 && fits_shared_memory(t, d) && out.size() < 4) out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_hopper_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  const int64_t d = spec.d_head;
  if (!chosen.tensor_cores || d % 32 != 0 || d > 128) return {};
  // (rows, keys, overlap): FlashAttention-3's forward has two or three warpgroups of 64 rows and 128-key tiles at
  // d_head 64, a producer warp and its products overlapping the fold; here one or two warpgroups, no producer warp.
  // 128-key tiles at d_head 64 alone: past it their scores and O's sums spill (ALiBi with k* and the sink logit at
  // d_head 96), and the pipelined form holds a tile's scores more. And only where each score is exp or sigmoid of
  // the product, without a position term: at d_head 64 ALiBi's forward spilled 64 bytes, softplus(x) (1 + tanh x)'s
  // 152, and p-norm's and softpick's took 243 of the 255 registers.
  const bool light_scores = !spec.position_bias && spec.score.op == ExprNode::Op::Call &&
                            (spec.score.name == "exp" || spec.score.name == "sigmoid") && spec.score.args.size() == 1 &&
                            spec.score.args[0].op == ExprNode::Op::Var && spec.score.args[0].name == "qk";
  struct Shape {
    int rows, keys;
    bool overlap;
  };
  const Shape shapes[] = {{64, 64, false}, {64, 64, true}, {128, 64, true}, {128, 128, true}};
  std::vector<CudaTiles> out;
  for (const Shape& shape : shapes) {
    if (shape.keys > 64 && (d > 64 || !light_scores)) continue;
    // The backward kernels' tiles the default's (64 rows, a warpgroup), but backward_keys's 64 queries a tile at
    // every d_head: its K and V rows in shared memory leave the registers for them (the default's 32 at d_head 96
    // and 16 at 128 hold those rows in registers), where no position table takes them.
    CudaTiles t = chosen;
    t.hopper = true, t.forward_rows = shape.rows, t.forward_keys = shape.keys, t.row_frags = 1;
    t.overlap = shape.overlap;
    if (!spec.position_bias) t.key_queries = 64;
    const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
    if (bytes.forward <= kCudaSharedLimit && std::max(bytes.keys, bytes.queries) <= kHopperSharedLimit)
      out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_hopper_fused_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  const int64_t d = spec.d_head;
  // One warpgroup of 64 keys and 64-query tiles (dQ's share is then one warpgroup product); its K and V rows in
  // shared memory (the products' A), its dK and dV sums, a tile's scores and gradients and dQ's share in
  // registers: 190-255 at d_head 64-128 without spilling (HopperFusedBackwardSpillsNothing), and not offered with
  // a position table, whose per-element reads take the registers the default's half tiles leave it.
  if (!chosen.tensor_cores || d % 32 != 0 || d > 128 || spec.position_bias) return {};
  CudaTiles t = chosen;
  t.hopper = true, t.fused_dq = true, t.key_rows = 64, t.key_queries = 64;
  if (cuda_shared_bytes(t, d).keys > kHopperSharedLimit) return {};
  return {t};
}

std::vector<CudaTiles> cuda_tuning_tiles(const KernelSpec& spec, CudaStorage storage, int capability) {
  std::vector<CudaTiles> out = cuda_tile_candidates(spec, storage);
  const std::vector<CudaTiles> fused = cuda_fused_candidates(spec, storage);
  out.insert(out.end(), fused.begin(), fused.end());
  if (capability == 0 || capability == kHopperCapability) {
    const std::vector<CudaTiles> hopper = cuda_hopper_candidates(spec, storage);
    out.insert(out.end(), hopper.begin(), hopper.end());
    const std::vector<CudaTiles> hopper_fused = cuda_hopper_fused_candidates(spec, storage);
    out.insert(out.end(), hopper_fused.begin(), hopper_fused.end());
  }
  return out;
}

namespace {
constexpr std::string_view kHopperDefinition = "#define SINK_WGMMA 1\n";
}  // namespace

bool needs_sm90a(std::string_view source) { return source.find(kHopperDefinition) != std::string_view::npos; }

CudaTiles cuda_tiles(const KernelSpec& spec, CudaStorage storage, int capability) {
  const int64_t d = spec.d_head;
  CudaTiles t;
  if (scalar_kernels_reason(spec, storage, capability).empty()) {
    // 16 rows per warp, four warps; two stages of two tiles of [rows][d + 8] 16-bit numbers (in dynamic shared
    // memory: 68 KiB for the forward's 64 keys at d_head 128, as FlashAttention-2's tiles take).
    t.tensor_cores = true;
    t.forward_rows = t.key_rows = t.query_rows = 64;
    t.min_blocks = 1;  // as many registers as a kernel needs: none spills (NVRTC's default aims at 128 and spills)
    t.forward_keys = 64;
    t.key_queries = t.query_keys = d <= 64 ? 64 : 32;
    // backward_keys holds the warp's K and V rows and its dK and dV sums in registers: 16 queries a tile
    // from d_head 128 on, or the registers spill.
    if (d >= 128) t.key_queries = 16;
    // With a position table, per-element reads of it the compiler hoists: half the queries a tile, or the
    // registers spill (ALiBi at d_head 64 and 96 on sm_90).
    if (spec.position_bias) t.key_queries = d <= 64 ? 32 : 16;
    // Past d_head 128, smaller tiles where they would not fit (d_head 192's 64-key tiles take 100 KiB).
    const auto over = [&](int CudaSharedBytes::* kernel) { return cuda_shared_bytes(t, d).*kernel > kCudaSharedLimit; };
    while (t.forward_keys > 16 && over(&CudaSharedBytes::forward)) t.forward_keys /= 2;
    while (t.key_queries > 16 && backward_keys_shared_bytes(t, d) > kStaticSharedLimit) t.key_queries /= 2;
    while (t.query_keys > 16 && over(&CudaSharedBytes::queries)) t.query_keys /= 2;
    if (!fits_shared_memory(t, d))
      throw std::runtime_error(fmt::format("CUDA kernels: d_head {} exceeds the tensor-core tiles' shared memory", d));
    return t;
  }
  const size_t element = spec.f64 ? 8 : 4;
  // forward: key and value tiles; backward_keys: its own k, v rows (padded
  // to d + 1, conflict-free) and query/dO tiles; backward_queries: its own q,
  // dO rows and key/value tiles.
  t.forward_keys = fit(32, [](int r, int64_t d, size_t e) { return 2 * r * d * e; }, d, element);
  t.key_queries =
      fit(32, [](int r, int64_t d, size_t e) { return (2 * 32 * (d + 1) + 2 * r * d + 3 * r) * e; }, d, element);
  t.query_keys = fit(32, [](int r, int64_t d, size_t e) { return (2 * 32 * (d + 1) + 2 * r * d) * e; }, d, element);
  if (t.key_queries < 4 || t.query_keys < 4) {  // d_head in the hundreds: fewer own rows
    t.key_rows = t.query_rows = 8;
    t.key_queries =
        fit(32, [](int r, int64_t d, size_t e) { return (2 * 8 * (d + 1) + 2 * r * d + 3 * r) * e; }, d, element);
    t.query_keys = fit(32, [](int r, int64_t d, size_t e) { return (2 * 8 * (d + 1) + 2 * r * d) * e; }, d, element);
  }
  return t;
}

CudaSharedBytes cuda_shared_bytes(const CudaTiles& t, int64_t d) {
  if (!t.tensor_cores) return {};
  // Two stages of two [rows][d + 8] tiles of 16-bit numbers (backward_keys's are static but where it sums dQ). The
  // Hopper kernels' are [rows][d], swizzled (backward_keys's beside four float rows a stage), in a struct of
  // 1024-byte alignment (its size a multiple of it) from the 1024-byte boundary the kernel finds (warp_sm80.cuh's
  // shared_block: up to 1008 bytes on).
  const auto tiles = [&](int rows) { return 2 * 2 * rows * static_cast<int>(d + 8) * 2; };
  // The Hopper backward_keys also holds the block's K and V rows, swizzled; fused, a tile of dS^T too and dQ's share
  // in float, [rows][d + 8].
  const auto hopper = [&](int rows, int float_rows, int stages, bool keys = false) {
    const int block = !keys ? 0
                            : 2 * t.key_rows * static_cast<int>(d) * 2 +
                                  (t.fused_dq ? t.key_rows * rows * 2 + rows * static_cast<int>(d + 8) * 4 : 0);
    return (stages * 2 * rows * static_cast<int>(d) * 2 + float_rows * stages * rows * 4 + block + 1023) / 1024 * 1024 +
           1024 - 16;
  };
  if (t.hopper)
    return {hopper(t.forward_keys, 0, t.streamed_stages()), hopper(t.query_keys, 0, t.streamed_stages()),
            hopper(t.key_queries, 4, 2, true)};
  return {tiles(t.forward_keys), tiles(t.query_keys), t.fused_dq ? backward_keys_shared_bytes(t, d) : 0};
}

int CudaSharedBytes::of(std::string_view kernel_symbol) const {
  return kernel_symbol == abi::kForwardSymbol               ? forward
         : kernel_symbol == abi::kCudaBackwardQueriesSymbol ? queries
         : kernel_symbol == abi::kCudaBackwardKeysSymbol    ? keys
                                                            : 0;
}

CudaStorage training_storage(const std::string& precision) {
  return precision == "bf16" ? CudaStorage::BFloat16 : CudaStorage::Real;
}

std::string CudaTiles::describe() const {
  return fmt::format("forward {}x{}, backward_keys {}x{}, backward_queries {}x{}, min_blocks {}, row_frags {}{}{}{}{}",
                     forward_rows, forward_keys, key_rows, key_queries, query_rows, query_keys, min_blocks, row_frags,
                     position_grad ? ", dg" : "", fused_dq ? ", fused dQ" : "", hopper ? ", wgmma" : "",
                     hopper && overlap ? ", overlapped" : "");
}

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
  out += "// sinklab attention kernel " + spec.hash() + " (CUDA, generated by kernels/emit_cuda.cpp)\n";
  out += "// " + spec.describe() + "\n";
  out += "// s(qk, i, j) = " + to_string(spec.score) + ";  ds/dqk = " + to_string(score_grad) + "\n";
  const char* stored = storage == CudaStorage::BFloat16  ? "bfloat16, float arithmetic"
                       : storage == CudaStorage::Float16 ? "half, float arithmetic"
                       : spec.f64                        ? "double"
                                                         : "float";
  out += fmt::format("// storage: {}\n\n", stored);
  out += spec.f64 ? "typedef double real;\n" : "typedef float real;\n";
  out += cuda_math_prelude(spec.f64, tiles.tensor_cores);
  out += storage == CudaStorage::BFloat16  ? cuda_bf16_storage()
         : storage == CudaStorage::Float16 ? cuda_fp16_storage()
                                           : cuda_real_storage();
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
  out += fmt::format("constexpr long long PREFIX = {}, WINDOW = {};\n", spec.prefix, spec.window);
  const NormalizerForm norm = spec.normalizer();
  out += fmt::format("#define ALPHA {}\n#define SCALE_QK {}\n#define SHIFT_FLOOR {}\n", number(spec.alpha),
                     number(scale_qk), number(norm.row->shift_floor));
  // What the tensor-core backward computes dx times (column_grad's dx_scale): the scaling itself, so that dS,
  // the gradient of q.k, costs no multiply per pair; or 1 where the scaling is a power of two (d_head 64), whose
  // multiply folds into the product before it (FMUL.D8).
  int exponent = 0;
  const bool power_of_two = std::frexp(scale_qk, &exponent) == 0.5;
  out += fmt::format("#define DX_SCALE {}\n", power_of_two ? "(real)1" : "SCALE_QK");
  // What the running sum of terms scales by when the row's shift grows by a rescale r: r to the terms' degree.
  const ExprNode rescale{ExprNode::Op::Var, 0, "r", {}}, degree{ExprNode::Op::Number, norm.term_degree, "", {}};
  out += "__device__ __forceinline__ real term_power(real r) { return " +
         (norm.term_degree == 1 ? std::string("r") : c_expr({ExprNode::Op::Pow, 0, "", {rescale, degree}})) + "; }\n";
  out += fmt::format(
      "constexpr int FWD_ROWS = {}, FWD_KEYS = {}, KEY_ROWS = {}, KEY_QUERIES = {}, QUERY_ROWS = {}, "
      "QUERY_KEYS = {}, ROW_THREADS = {};\n",
      tiles.forward_rows, tiles.forward_keys, tiles.key_rows, tiles.key_queries, tiles.query_rows, tiles.query_keys,
      tiles.row_threads);
  const std::string positions = "(real x, real shift, real fi, real fj, real fT) { return ";
  out += "__device__ __forceinline__ real score" + positions + c_expr(emitted(spec.score, "qk")) + "; }\n";
  out += "__device__ __forceinline__ real score_grad" + positions + c_expr(emitted(score_grad, "qk")) + "; }\n";
  // The same of the product q.k, where the logit is its scaling alone (no position table): the scaling folds
  // into the exponent's multiply-add.
  out +=
      "__device__ __forceinline__ real score_of_product" + positions + c_expr(emitted(spec.score, kProduct)) + "; }\n";
  out += "__device__ __forceinline__ real score_grad_of_product" + positions + c_expr(emitted(score_grad, kProduct)) +
         "; }\n";
  out += "// normalize = " + norm.row->name + ": P = sum_j term(s), Z = finish(P), A = alpha weight(s) / Z\n";
  const std::string column = "(real s, real x, real unit) { return ";
  const auto normaliser = [&](const ExprNode& e) { return c_expr(spec.online ? for_nonnegative_score(e) : e); };
  out += "__device__ __forceinline__ real norm_term" + column + normaliser(norm.term) + "; }\n";
  out += "__device__ __forceinline__ real norm_weight" + column + normaliser(norm.weight) + "; }\n";
  out += "__device__ __forceinline__ real norm_weight_slope" + column + normaliser(norm.weight_slope) + "; }\n";
  out += "__device__ __forceinline__ real norm_finish(real P, real unit) { return " + c_expr(norm.finish) + "; }\n";
  out += "__device__ __forceinline__ real norm_slope(real s, real x, real unit, real Z, real P) { return " +
         normaliser(norm.slope) + "; }\n";
  // The row's sum is the sum of its weights, and they are the online form's, in [0, 1] (softmax, with k*, a sink
  // logit, ALiBi, ...): the tensor-core forward takes the sum as W times a block of ones, beside O += W V, instead
  // of an addition per pair. (Weights of either sign would cancel in it to the 16-bit rounding of the largest.)
  flag("SUM_OF_WEIGHTS", spec.online && norm.term_degree == 1 && normaliser(norm.term) == normaliser(norm.weight));
  out += "\n";
  out += cuda_shared_functions();
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
    if (tiles.hopper) out += std::string(cuda_text::kWarpSm90) + cuda_text::kTileSm90;
  } else {
    const std::string reason = scalar_kernels_reason(spec, storage);
    out += fmt::format("// Scalar kernels, a row per thread: {}\n",
                       reason.empty() ? "tiles without tensor cores (a GPU older than 8.0, or a check)" : reason);
  }
  out += abi::cuda_signature(abi::kForwardSymbol, abi::kCudaForward, tiles.forward_threads(), tiles.min_blocks);
  out += tiles.tensor_cores ? fmt::format(" {}\n", cuda_text::kForward) : cuda_forward_body();
  out += abi::cuda_signature(abi::kCudaBackwardRowsSymbol, abi::kCudaBackwardRows, tiles.row_threads);
  out += tiles.tensor_cores ? fmt::format(" {}\n", cuda_text::kBackwardRows) : cuda_backward_rows_body();
  out +=
      abi::cuda_signature(abi::kCudaBackwardKeysSymbol, abi::kCudaBackwardKeys, tiles.key_threads(), tiles.min_blocks);
  out += tiles.tensor_cores ? fmt::format(" {}\n", cuda_text::kBackwardKeys) : cuda_backward_keys_body();
  out += abi::cuda_signature(abi::kCudaBackwardQueriesSymbol, abi::kCudaBackwardQueries, tiles.query_threads(),
                             tiles.min_blocks);
  out += tiles.tensor_cores ? fmt::format(" {}\n", cuda_text::kBackwardQueries) : cuda_backward_queries_body();
  out += abi::cuda_signature(abi::kProbeSymbol, abi::kCudaProbe, tiles.row_threads) + cuda_probe_body();
  return out;
}

}  // namespace sink::kernels
