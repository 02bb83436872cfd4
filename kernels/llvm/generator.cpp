#include "kernels/llvm/generator.h"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "plan/score_functions.h"
#include "plan/visibility.h"

namespace sink::kernels {
namespace {

// e^a - 1 for |a| <= 1/2 (the primitive's domain: its callers clamp), where e^a - 1 itself would cancel to a
// few digits (relative error eps / |a|): the Taylor series alone, at full precision by degree 9 (float) or 17.
std::string emit_expm1_small(IrText& b, const Ty& t, const std::string& a) {
  std::string series = b.num(1, t);
  for (int k = b.f64 ? 17 : 9; k >= 2; --k)  // expm1(a) = a (1 + a/2 (1 + a/3 (1 + ...)))
    series = b.bin("fadd", t, b.num(1, t), b.bin("fmul", t, b.bin("fmul", t, a, b.num(1.0 / k, t)), series));
  return b.bin("fmul", t, a, series);
}

}  // namespace

std::string emit_expr(IrText& b, const Ty& t, const ExprNode& e, const ScoreEnv& env) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return emit_expr(b, t, e.args.at(k), env); };
  auto num = [&](double v) { return b.num(v, t); };
  switch (e.op) {
    case Op::Number: return num(e.number);
    case Op::Var:
      if (e.name == "qk") return env.x;
      if (e.name == "i") return env.i;
      if (e.name == "j") return env.j;
      if (e.name == "T") {  // every kernel's sequence length, %T
        std::string length = b.op("sitofp i64 %T to " + b.F);
        return t.vector() ? b.splat(t, length) : length;
      }
      for (const auto& [name, value] : env.named)
        if (e.name == name) return value;
      throw std::runtime_error("kernel generator: no value for variable '" + e.name + "'");
    case Op::Neg: return b.fneg(t, arg(0));
    case Op::Add: return b.bin("fadd", t, arg(0), arg(1));
    case Op::Sub: return b.bin("fsub", t, arg(0), arg(1));
    case Op::Mul: return b.bin("fmul", t, arg(0), arg(1));
    case Op::Div: return b.bin("fdiv", t, arg(0), arg(1));
    case Op::Pow: return b.pow(t, arg(0), arg(1));
    case Op::Call: break;
  }
  // The language's functions expand into the primitives (plan/score_functions.h); only those have code here.
  if (!primitive_arity(e.name)) return emit_expr(b, t, expand_score_functions(e), env);
  const std::string& f = e.name;
  std::string a = arg(0);
  if (f == "__exp") return b.exp(t, a);
  if (f == "__expm1_small") return emit_expm1_small(b, t, a);
  if (f == "__log") return b.log(t, a);
  if (f == "__log1p") return b.log1p(t, a);
  if (f == "__tanh") return b.tanh(t, a);
  if (f == "__sqrt") return b.intrinsic("sqrt", t, a);
  if (f == "__abs") return b.abs(t, a);
  if (f == "__min") return b.min(t, a, arg(1));
  if (f == "__max") return b.max(t, a, arg(1));
  if (f == "__if_pos") return b.select_gt0(t, a, arg(1), arg(2));
  if (f == "__mod") {  // a - b floor(a / b)
    const std::string divisor = arg(1);
    const std::string quotient = b.intrinsic("floor", t, b.bin("fdiv", t, a, divisor));
    return b.bin("fsub", t, a, b.bin("fmul", t, divisor, quotient));
  }
  throw std::runtime_error("kernel generator: no code for primitive '" + f + "'");
}

Generator::Generator(const KernelSpec& s)
    : spec(s),
      score_grad(s.score_derivative()),
      norm(s.normalizer()),
      columns(column_algebra(norm, s.alpha, s.online)) {}

IrText Generator::body() const { return IrText(spec.d_head, kKeyBlock, spec.f64); }

std::string Generator::finish(IrText& b) {
  declarations_ += b.declarations();
  return b.text;
}

double Generator::scale_qk() const { return 1.0 / std::sqrt(static_cast<double>(spec.d_head)); }

void Generator::open_loop(IrText& b, const std::string& name, const std::string& start, const std::string& from_label,
                          const std::string& condition_rhs, const std::vector<Carried>& carried) {
  b.line("br label %" + name + ".head");
  b.label(name + ".head");
  b.line(fmt::format("%{0} = phi i64 [ {1}, %{2} ], [ %{0}.next, %{0}.latch ]", name, start, from_label));
  for (const auto& c : carried)
    b.line(
        fmt::format("{0} = phi {1} [ {2}, %{3} ], [ {0}.next, %{4}.latch ]", c.name, c.type, c.init, from_label, name));
  b.line("%" + name + ".more = " + condition_rhs);
  b.line(fmt::format("br i1 %{0}.more, label %{0}.body, label %{0}.exit", name));
  b.label(name + ".body");
}

void Generator::close_loop(IrText& b, const std::string& name, int64_t step,
                           const std::vector<std::pair<std::string, std::string>>& next) {
  for (const auto& [carried, value] : next) {
    const std::string placeholder = carried + ".next";
    for (size_t at = b.text.find(placeholder); at != std::string::npos;
         at = b.text.find(placeholder, at + value.size()))
      b.text.replace(at, placeholder.size(), value);
  }
  b.line("br label %" + name + ".latch");
  b.label(name + ".latch");
  b.line(fmt::format("%{0}.next = add i64 %{0}, {1}", name, step));
  b.line("br label %" + name + ".head");
  b.label(name + ".exit");
}

RowGroup Generator::row_group(IrText& b, const std::string& first, int rows) {
  RowGroup g;
  std::string last = b.op("sub i64 %T, 1");
  for (int r = 0; r < rows; ++r) {
    std::string raw = r == 0 ? first : b.op(fmt::format("add i64 {}, {}", first, r));
    g.real.push_back(b.op("icmp slt i64 " + raw + ", %T", "real"));
    g.index.push_back(b.op("select i1 " + g.real.back() + ", i64 " + raw + ", i64 " + last, "row"));
  }
  return g;
}

std::string Generator::index_expr(IrText& b, const ExprNode& e,
                                  const std::vector<std::pair<std::string, std::string>>& values, bool lanes) {
  using Op = ExprNode::Op;
  const std::string type = lanes ? fmt::format("<{} x i64>", kKeyBlock) : "i64";
  const std::string flags = lanes ? fmt::format("<{} x i1>", kKeyBlock) : "i1";
  const std::string zero = lanes ? "zeroinitializer" : "0";
  auto arg = [&](size_t k) { return index_expr(b, e.args.at(k), values, lanes); };
  auto choose = [&](const std::string& condition, const std::string& a, const std::string& c) {
    return b.op(fmt::format("select {} {}, {} {}, {} {}", flags, condition, type, a, type, c));
  };
  switch (e.op) {
    case Op::Number: {
      const auto n = static_cast<int64_t>(e.number);
      return lanes ? lane_ints(n, 0) : std::to_string(n);
    }
    case Op::Var:
      for (const auto& [name, value] : values)
        if (name == e.name) return value;
      break;
    case Op::Neg: return b.op(fmt::format("sub {} {}, {}", type, zero, arg(0)));
    case Op::Add: return b.op(fmt::format("add {} {}, {}", type, arg(0), arg(1)));
    case Op::Sub: return b.op(fmt::format("sub {} {}, {}", type, arg(0), arg(1)));
    case Op::Call: {
      if (e.name != "__min" && e.name != "__max" && e.name != "__if_pos" && e.name != "__mod") break;
      const std::string a = arg(0), c = arg(1);
      if (e.name == "__mod") {  // srem truncates: add the divisor to a negative remainder
        const std::string r = b.op(fmt::format("srem {} {}, {}", type, a, c));
        return b.op(fmt::format("srem {} {}, {}", type, b.op(fmt::format("add {} {}, {}", type, r, c)), c));
      }
      if (e.name == "__if_pos") return choose(b.op(fmt::format("icmp sgt {} {}, {}", type, a, zero)), c, arg(2));
      return choose(b.op(fmt::format("icmp {} {} {}, {}", e.name == "__min" ? "slt" : "sgt", type, a, c)), a, c);
    }
    default: break;
  }
  throw std::runtime_error("LLVM kernel generator: no integer form for '" + to_string(e) + "'");
}

std::pair<std::string, std::string> Generator::key_range(IrText& b, const std::string& i, bool lanes) {
  const Visibility& v = spec.rule;
  const std::vector<std::pair<std::string, std::string>> values{{"i", i}, {"T", lanes ? splat_int(b, "%T") : "%T"}};
  return {index_expr(b, v.first_key, values, lanes), index_expr(b, v.last_key, values, lanes)};
}

std::pair<std::string, std::string> Generator::query_range(IrText& b, const std::string& j) {
  const Visibility& v = spec.rule;
  return {index_expr(b, v.first_query, {{"j", j}, {"T", "%T"}}), index_expr(b, v.last_query, {{"j", j}, {"T", "%T"}})};
}

std::string Generator::and_visible_pairs(IrText& b, const std::string& valid, const std::string& i,
                                         const std::string& j) {
  const Visibility& v = spec.rule;
  if (!v.checks_pairs()) return valid;
  const std::string pair = index_expr(b, v.pair, {{"i", i}, {"j", j}, {"T", splat_int(b, "%T")}}, true);
  const std::string seen = b.op(fmt::format("icmp sgt <{} x i64> {}, zeroinitializer", kKeyBlock, pair));
  return b.op(fmt::format("and <{} x i1> {}, {}", kKeyBlock, valid, seen), "valid");
}

std::string Generator::lane_ints(int64_t v0, int64_t step) {
  std::string out = "<";
  for (int w = 0; w < kKeyBlock; ++w) out += fmt::format("{}i64 {}", w ? ", " : "", v0 + step * w);
  return out + ">";
}

std::string Generator::splat_int(IrText& b, const std::string& v, const std::string& type) {
  const std::string vt = fmt::format("<{} x {}>", kKeyBlock, type);
  std::string ins = b.op("insertelement " + vt + " poison, " + type + " " + v + ", i64 0");
  return b.op(fmt::format("shufflevector {0} {1}, {0} poison, <{2} x i32> zeroinitializer", vt, ins, kKeyBlock));
}

std::string Generator::lane_indices(IrText& b, const std::string& start) {
  return b.op(fmt::format("add <{} x i64> {}, {}", kKeyBlock, splat_int(b, start), lane_ints(0, 1)), "lanes");
}

std::vector<std::string> Generator::clamped_lanes(IrText& b, const std::string& start, const std::string& last) {
  std::vector<std::string> out;
  for (int w = 0; w < kKeyBlock; ++w) {
    std::string raw = w == 0 ? start : b.op(fmt::format("add i64 {}, {}", start, w));
    std::string past = b.op("icmp sgt i64 " + raw + ", " + last);
    out.push_back(b.op("select i1 " + past + ", i64 " + last + ", i64 " + raw, "col"));
  }
  return out;
}

std::string Generator::dist(IrText& b, const std::string& i, const std::string& j) {
  std::string diff = b.op("sub i64 " + i + ", " + j);
  std::string neg = b.op("sub i64 " + j + ", " + i);
  std::string pos = b.op("icmp sge i64 " + diff + ", 0");
  return b.op("select i1 " + pos + ", i64 " + diff + ", i64 " + neg);
}

std::string Generator::position(IrText& b, const std::string& index) {
  return b.op("sitofp i64 " + b.op("add i64 " + index + ", 1") + " to " + b.F);
}

std::vector<std::string> Generator::block_dots(IrText& b, const std::string& rows, const RowGroup& g,
                                               const std::string& transposed, const std::string& start) {
  const Ty& L = b.lane;
  const size_t R = g.index.size();
  // Independent FMA chains: one per row, or more when there are few rows.
  const size_t chains = R >= 4 ? 1 : 4 / R;
  std::string base = b.element_ptr(transposed, start);
  std::vector<std::string> row_ptrs;
  for (const auto& i : g.index) {
    std::string p = b.row_ptr(rows, i);
    // An empty asm hides that the row is loop-invariant: otherwise LLVM hoists
    // all R x D broadcasts out of the block loop and spills them, where an
    // FMA can take its broadcast straight from the row in memory.
    p = b.op("call ptr asm sideeffect \"\", \"=r,0\"(ptr " + p + ")", "row");
    row_ptrs.push_back(p);
  }
  std::vector<std::vector<std::string>> acc(R, std::vector<std::string>(chains, b.zero(L)));
  for (int64_t d = 0; d < spec.d_head; ++d) {
    std::string offset = b.op(fmt::format("mul i64 %Tp, {}", d));
    std::string column =
        b.load_lanes(b.op(fmt::format("getelementptr inbounds {}, ptr {}, i64 {}", b.F, base, offset), "p"));
    for (size_t r = 0; r < R; ++r) {
      std::string element = b.load(row_ptrs[r], std::to_string(d));  // broadcast from memory
      std::string& a = acc[r][d % chains];
      a = b.fmuladd(L, column, b.splat(L, element), a);
    }
  }
  std::vector<std::string> out;
  for (size_t r = 0; r < R; ++r) {
    std::string sum = acc[r][0];
    for (size_t c = 1; c < chains; ++c) sum = b.bin("fadd", L, sum, acc[r][c]);
    out.push_back(sum);
  }
  return out;
}

namespace {
constexpr int kMaxWeights = 3 * 4 * kKeyBlock;  // two sums and a scatter, four rows each
}

void Generator::weights_buffer(IrText& b) {
  b.line(fmt::format("%wbuf = alloca [{} x {}], align 64", kMaxWeights, b.F));
}

std::vector<std::vector<std::string>> Generator::weighted_rows(IrText& b, const std::string& name,
                                                               const std::string& from_label, const std::string& start,
                                                               const std::string& last,
                                                               const std::vector<WeightedSum>& sums,
                                                               const Scatter* scatter) {
  const size_t R = sums[0].weights.size();
  const size_t groups = sums.size() + (scatter ? 1 : 0);
  if (groups * R * kKeyBlock > kMaxWeights) throw std::logic_error("kernel generator: weights buffer too small");
  auto slot = [&](size_t m, size_t r) { return std::to_string((m * R + r) * kKeyBlock); };
  auto keep = [&](size_t m, size_t r, const std::string& weights) {
    b.line("store " + b.lane.ir + " " + weights + ", ptr " + b.element_ptr("%wbuf", slot(m, r)) + ", align 64");
  };
  for (size_t m = 0; m < sums.size(); ++m)
    for (size_t r = 0; r < R; ++r) keep(m, r, sums[m].weights[r]);
  if (scatter)
    for (size_t r = 0; r < R; ++r) keep(sums.size(), r, scatter->weights[r]);
  // Only the columns up to `last`: the rest have weight 0.
  std::string left = b.op("add i64 " + b.op("sub i64 " + last + ", " + start) + ", 1");
  std::string fewer = b.op(fmt::format("icmp slt i64 {}, {}", left, kKeyBlock));
  std::string count = b.op(fmt::format("select i1 {}, i64 {}, i64 {}", fewer, left, kKeyBlock), "count");
  std::vector<Carried> carried;
  auto acc_name = [&](size_t m, size_t r) { return fmt::format("%{}.a{}_{}", name, m, r); };
  for (size_t m = 0; m < sums.size(); ++m)
    for (size_t r = 0; r < R; ++r) carried.push_back({acc_name(m, r), b.V, sums[m].acc[r]});
  open_loop(b, name, "0", from_label, fmt::format("icmp slt i64 %{}, {}", name, count), carried);
  std::string col = b.op(fmt::format("add i64 {}, %{}", start, name));
  std::vector<std::pair<std::string, std::string>> next;
  for (size_t m = 0; m < sums.size(); ++m) {
    std::string row = b.load_row(sums[m].rows, col);
    for (size_t r = 0; r < R; ++r) {
      std::string weight = b.load("%wbuf", b.op(fmt::format("add i64 %{}, {}", name, slot(m, r))));
      next.push_back({acc_name(m, r), b.vfma(acc_name(m, r), weight, row)});
    }
  }
  if (scatter) {
    std::string target = b.load_row(scatter->target, col);
    for (size_t r = 0; r < R; ++r) {
      std::string weight = b.load("%wbuf", b.op(fmt::format("add i64 %{}, {}", name, slot(sums.size(), r))));
      target = b.vfma(target, weight, scatter->vectors[r]);
    }
    b.store_row(target, scatter->target, col);
  }
  close_loop(b, name, 1, next);
  std::vector<std::vector<std::string>> out(sums.size());
  for (size_t m = 0; m < sums.size(); ++m)
    for (size_t r = 0; r < R; ++r) out[m].push_back(acc_name(m, r));
  return out;
}

std::string Generator::shift_of(IrText& b, const std::string& m) {
  std::string none = b.fcmp("oeq", b.scalar, m, b.num(-INFINITY));
  return b.select(none, b.scalar, b.num(0), m);
}

Folded Generator::fold_columns(IrText& b, const Ty& t, const RowState& row, const std::string& x,
                               const std::string& pos_i, const std::string& pos_j, const std::string& valid) {
  auto lanes = [&](const std::string& scalar) { return t.vector() ? b.splat(t, scalar) : scalar; };
  auto visible = [&](const std::string& v) { return valid.empty() ? v : b.select(valid, t, v, b.zero(t)); };
  auto sum = [&](const std::string& v) { return t.vector() ? b.reduce_add(t, v) : v; };
  Folded out;
  std::string s, unit;
  if (spec.online) {
    std::string masked = valid.empty() ? x : b.select(valid, t, x, b.num(-INFINITY, t));
    out.row.m = b.max(b.scalar, row.m, t.vector() ? b.reduce_max(t, masked) : masked);
    // A row that has seen no column yet keeps m = -inf: shift by 0 there, not inf - inf.
    const std::string shift = shift_of(b, out.row.m);
    out.rescale = emit_expr(b, b.scalar, columns.rescale, named_values({{"m", row.m}, {"m_new", shift}}));
    // The weights scale by the rescale, the terms by term_rescale of it (p-th powers under the p-norm).
    std::string term_rescale = emit_expr(b, b.scalar, columns.term_rescale, named_values({{"r", out.rescale}}));
    s = emit_expr(b, t, spec.score, {b.bin("fsub", t, masked, lanes(shift)), pos_i, pos_j});
    unit = lanes(b.exp(b.scalar, b.fneg(b.scalar, shift)));
    out.row.P = b.fmul(row.P, term_rescale);
  } else {
    s = visible(emit_expr(b, t, spec.score, {x, pos_i, pos_j}));
    unit = b.num(1, t);
    out.row = row;
  }
  const ScoreEnv column = named_values({{"s", s}, {"x", x}, {"unit", unit}});
  out.row.P = b.fadd(out.row.P, sum(visible(emit_expr(b, t, norm.term, column))));
  out.weights = visible(emit_expr(b, t, norm.weight, column));
  return out;
}

FinishedRow Generator::finish_row(IrText& b, const RowState& row) {
  const std::string shift = spec.online ? shift_of(b, row.m) : b.num(0);
  const std::string finished_Z =
      emit_expr(b, b.scalar, columns.row_finish, named_values({{"P", row.P}, {"shift", shift}}));
  const std::string Z = emit_expr(b, b.scalar, columns.safe_divisor, named_values({{"Z", finished_Z}}));
  const ScoreEnv finished = named_values({{"Z", Z}, {"m", row.m}, {"P", row.P}});
  return {Z, emit_expr(b, b.scalar, columns.stored_divisor, finished),
          emit_expr(b, b.scalar, columns.stored_shift_or_sum, finished)};
}

std::string Generator::column_weight(IrText& b, const Ty& t, const std::string& x, const std::string& pos_i,
                                     const std::string& pos_j, const std::string& shift_or_sum) {
  const std::string xe = spec.online ? b.bin("fsub", t, x, shift_or_sum) : x;
  const std::string unit = spec.online ? b.exp(t, b.fneg(t, shift_or_sum)) : b.num(1, t);
  return emit_expr(b, t, norm.weight,
                   named_values({{"s", emit_expr(b, t, spec.score, {xe, pos_i, pos_j})}, {"x", x}, {"unit", unit}}));
}

BackwardRow Generator::backward_row(IrText& b, const Ty& t, const std::string& Z, const std::string& m_or_P) {
  // The stored statistics as they are (Z and m, or Z and P): A and dx are of degree 0 in (s, unit), so any shift
  // serves, and the algebra's backward_shift m + log Z, which spares a GPU a multiply per pair, would cost a CPU a libm
  // log per lane in every block of keys. One division per block instead of two per pair.
  return {Z, b.bin("fdiv", t, b.num(1, t), Z), m_or_P};
}

std::pair<std::string, std::string> Generator::column_grad(IrText& b, const Ty& t, const std::string& x,
                                                           const std::string& pos_i, const std::string& pos_j,
                                                           const std::string& dA, const std::string& D,
                                                           const BackwardRow& row) {
  // Online: s, its derivative and unit of x - m (shift_or_sum = m + log Z), and A and dx are as unshifted, being of
  // degree 0 in (s, unit). Direct: shift_or_sum = P.
  const std::string xe = spec.online ? b.bin("fsub", t, x, row.shift_or_sum) : x;
  const ScoreEnv at{xe, pos_i, pos_j};
  const ScoreEnv column = named_values({{"s", emit_expr(b, t, spec.score, at)},
                                        {"x", x},
                                        {"unit", spec.online ? b.exp(t, b.fneg(t, row.shift_or_sum)) : b.num(1, t)},
                                        {"Z", row.divisor},
                                        {"P", row.shift_or_sum},
                                        {"dA", dA},
                                        {"delta", D},
                                        {"inv_Z", row.inv_divisor},
                                        {"ds", emit_expr(b, t, score_grad, at)},
                                        {"dx_scale", b.num(1, t)}});
  return {emit_expr(b, t, columns.attention, column), emit_expr(b, t, columns.logit_gradient, column)};
}

}  // namespace sink::kernels
