#include "compiler/kernels/emit_llvm.h"

#include <cmath>
#include <fmt/format.h>

#include "compiler/kernels/ir_text.h"
#include "compiler/kernels/symbolic.h"

namespace sink::kernels {
namespace {

// Values of an expression's variables: x (= qk), i and j (1-based), all of one type.
struct ScoreEnv {
  std::string x, i, j;
};

std::string emit_expr(IrText& b, const Ty& t, const ExprNode& e, const ScoreEnv& env) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return emit_expr(b, t, e.args.at(k), env); };
  auto num = [&](double v) { return b.num(v, t); };
  switch (e.op) {
    case Op::Number: return num(e.number);
    case Op::Var: return e.name == "qk" ? env.x : e.name == "i" ? env.i : env.j;
    case Op::Neg: return b.fneg(t, arg(0));
    case Op::Add: return b.bin("fadd", t, arg(0), arg(1));
    case Op::Sub: return b.bin("fsub", t, arg(0), arg(1));
    case Op::Mul: return b.bin("fmul", t, arg(0), arg(1));
    case Op::Div: return b.bin("fdiv", t, arg(0), arg(1));
    case Op::Pow: return b.pow(t, arg(0), arg(1));
    case Op::Call: break;
  }
  const std::string& f = e.name;
  std::string a = arg(0);
  auto guarded_exp = [&](const std::string& v) { return b.exp(t, b.min(t, v, num(88))); };  // no inf
  if (f == "exp") return guarded_exp(a);
  if (f == "sigmoid") return b.bin("fdiv", t, num(1), b.bin("fadd", t, num(1), guarded_exp(b.fneg(t, a))));
  if (f == "elu") return b.select_gt0(t, a, a, b.bin("fsub", t, b.exp(t, b.min(t, a, num(0))), num(1)));
  if (f == "relu") return b.select_gt0(t, a, a, num(0));
  if (f == "tanh") return b.tanh(t, a);
  if (f == "softplus") {  // max(x, 0) + log1p(exp(-|x|)): no overflow
    return b.bin("fadd", t, b.max(t, a, num(0)), b.log1p(t, b.exp(t, b.fneg(t, b.abs(t, a)))));
  }
  if (f == "abs") return b.abs(t, a);
  if (f == "sqrt") return b.intrinsic("sqrt", t, a);
  if (f == "log") return b.log(t, a);
  if (f == "pow") return b.pow(t, a, arg(1));
  if (f == "__step") return b.select_gt0(t, a, num(1), num(0));
  if (f == "__sign") return b.select_gt0(t, a, num(1), b.select(b.fcmp("olt", t, a, b.zero(t)), t, num(-1), num(0)));
  if (f == "__elu_grad") return b.select_gt0(t, a, num(1), b.exp(t, b.min(t, a, num(0))));
  throw std::runtime_error("kernel generator: no code for function '" + f + "'");
}

// Lines of `text` with repeats dropped (declarations of three functions).
std::string unique_lines(const std::string& text) {
  std::string out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start + 1);
    if (out.find(line) == std::string::npos) out += line;
    start = end + 1;
  }
  return out;
}

void rename(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
}

// One block of kKeyBlock key columns j, j+1, ... of row i. Columns past hi
// are masked by `valid`; their row reads are clamped to column hi.
struct KeyBlock {
  std::vector<std::string> col;  // i64 column index per lane (clamped)
  std::string x;                 // logits, a lane vector
  std::string valid;             // <W x i1>
  std::string jpos;              // 1-based column positions as lane floats
};

class Generator {
 public:
  explicit Generator(const KernelSpec& s) : spec(s), score_grad(simplify(derivative(s.score))) {}

  std::string module(Target target) {
    std::string out;
    out += "; sinklab attention kernel " + spec.hash() + "\n";
    out += "; " + spec.describe() + "\n";
    out += "; s(qk, i, j)  = " + to_string(spec.score) + "\n";
    out += "; ds/dqk       = " + to_string(score_grad) + "   (symbolic, compiler/kernels/symbolic.cpp)\n";
    out += spec.softmax ? "; recognised as softmax: online, max-subtracted form\n" : "";
    out += "; rows: query i sees keys j in [lo(i), hi(i)] (causal" + std::string(spec.prefix ? ", prefix" : "") +
           (spec.window ? ", window" : "") + ")" + (spec.key_bias ? "; the k* column comes first" : "") + "\n";
    out += fmt::format("; keys in blocks of {}: one vector of logits, one vectorized exp per block\n\n", kKeyBlock);
    if (target == Target::NVPTX) {
      out += "target triple = \"nvptx64-nvidia-cuda\"\n\n";
      out += forward(true);
    } else {
      out += forward(false) + "\n" + backward() + "\n" + probe();
    }
    return out + "\n" + unique_lines(declarations_);
  }

 private:
  const KernelSpec& spec;
  ExprNode score_grad;
  std::string declarations_;

  IrText body(bool nvptx = false) const { return IrText(spec.d_head, kKeyBlock, spec.f64, nvptx); }
  std::string finish(IrText& b) {
    declarations_ += b.declarations();
    return b.text;
  }

  double scale_qk() const { return 1.0 / std::sqrt(static_cast<double>(spec.d_head)); }

  // for (i = 0; i < T; ++i): the loop over query rows.
  static void open_rows(IrText& b, const std::string& entry) {
    b.label("row.head");
    b.line("%i = phi i64 [ 0, %" + entry + " ], [ %i.next, %row.end ]");
    b.line("%more = icmp slt i64 %i, %T");
    b.line("br i1 %more, label %row.body, label %exit");
    b.label("row.body");
  }
  static void close_rows(IrText& b) {
    b.line("%i.next = add i64 %i, 1");
    b.line("br label %row.head");
    b.label("exit");
    b.line("ret void");
  }

  // The column loop: col.head's phis come before, loop while j <= hi.
  static void enter_cols(IrText& b, const std::string& hi) {
    b.line("%cols = icmp sle i64 %j, " + hi);
    b.line("br i1 %cols, label %col.body, label %row.end");
    b.label("col.body");
  }
  static void close_cols(IrText& b, int step) {
    b.line(fmt::format("%j.next = add i64 %j, {}", step));
    b.line("br label %col.head");
    b.label("row.end");
  }

  // The allowed key range of row i: [lo, hi].
  std::pair<std::string, std::string> key_range(IrText& b, const std::string& i) {
    std::string lo = "0";
    if (spec.window > 0) {
      std::string start = b.op(fmt::format("sub i64 {}, {}", i, spec.window - 1));
      std::string pos = b.op("icmp sgt i64 " + start + ", 0");
      lo = b.op("select i1 " + pos + ", i64 " + start + ", i64 0", "lo");
    }
    std::string hi = i;
    if (spec.prefix > 0) {
      std::string in_prefix = b.op(fmt::format("icmp slt i64 {}, {}", i, spec.prefix));
      std::string last = b.op(fmt::format("select i1 {}, i64 {}, i64 {}", in_prefix, spec.prefix - 1, i));
      std::string later = b.op("icmp sgt i64 " + i + ", " + last);
      hi = b.op("select i1 " + later + ", i64 " + i + ", i64 " + last, "hi");
    }
    return {lo, hi};
  }

  // x_ij = scale <q_i, k_j> + g(|i - j|)
  std::string logit(IrText& b, const std::string& qi, const std::string& kj, const std::string& i, const std::string& j) {
    std::string x = b.fmul(b.dot(qi, kj), b.num(scale_qk()));
    if (!spec.position_bias) return x;
    return b.fadd(x, b.load("%g", dist(b, i, j)));
  }

  // |i - j|: the index into the per-distance position bias.
  static std::string dist(IrText& b, const std::string& i, const std::string& j) {
    std::string diff = b.op("sub i64 " + i + ", " + j);
    std::string neg = b.op("sub i64 " + j + ", " + i);
    std::string pos = b.op("icmp sge i64 " + diff + ", 0");
    return b.op("select i1 " + pos + ", i64 " + diff + ", i64 " + neg);
  }

  static std::string position(IrText& b, const std::string& index) {  // 1-based, as a scalar
    return b.op("sitofp i64 " + b.op("add i64 " + index + ", 1") + " to " + b.F);
  }

  static std::string lane_ints(int v0, int step) {
    std::string out = "<";
    for (int w = 0; w < kKeyBlock; ++w) out += fmt::format("{}i64 {}", w ? ", " : "", v0 + step * w);
    return out + ">";
  }
  static std::string splat_int(IrText& b, const std::string& v) {
    const std::string vt = fmt::format("<{} x i64>", kKeyBlock);
    std::string ins = b.op("insertelement " + vt + " poison, i64 " + v + ", i64 0");
    return b.op(fmt::format("shufflevector {0} {1}, {0} poison, <{2} x i32> zeroinitializer", vt, ins, kKeyBlock));
  }

  // <a, column c> for the block's columns c of a transposed [D, Tp] matrix:
  // D vector loads and FMAs, in four chains so they pipeline.
  std::string block_dot(IrText& b, const std::string& a, const std::string& transposed) {
    const Ty& L = b.lane;
    std::string base = b.element_ptr(transposed, "%j");
    std::vector<std::string> acc(4, b.zero(L));
    for (int64_t d = 0; d < spec.d_head; ++d) {
      std::string offset = b.op(fmt::format("mul i64 %Tp, {}", d));
      std::string p = b.op(fmt::format("getelementptr inbounds {}, ptr {}, i64 {}", b.F, base, offset), "p");
      acc[d % 4] = b.fmuladd(L, b.load_lanes(p), b.splat(L, b.extract_row(a, d)), acc[d % 4]);
    }
    return b.bin("fadd", L, b.bin("fadd", L, acc[0], acc[1]), b.bin("fadd", L, acc[2], acc[3]));
  }

  KeyBlock key_block(IrText& b, const std::string& qi, const std::string& hi) {
    const Ty& L = b.lane;
    KeyBlock blk;
    for (int w = 0; w < kKeyBlock; ++w) {
      std::string raw = w == 0 ? "%j" : b.op(fmt::format("add i64 %j, {}", w));
      std::string past = b.op("icmp sgt i64 " + raw + ", " + hi);
      blk.col.push_back(b.op("select i1 " + past + ", i64 " + hi + ", i64 " + raw, "col"));
    }
    blk.x = b.bin("fmul", L, block_dot(b, qi, "%kt"), b.num(scale_qk(), L));
    if (spec.position_bias) {
      std::string g = "poison";
      for (int w = 0; w < kKeyBlock; ++w) g = b.insert(g, b.load("%g", dist(b, "%i", blk.col[w])), w);
      blk.x = b.bin("fadd", L, blk.x, g);
    }
    const std::string vt = fmt::format("<{} x i64>", kKeyBlock);
    std::string cols = b.op("add " + vt + " " + splat_int(b, "%j") + ", " + lane_ints(0, 1));
    blk.valid = b.op("icmp sle " + vt + " " + cols + ", " + splat_int(b, hi), "valid");
    blk.jpos = b.op("sitofp " + vt + " " + b.op("add " + vt + " " + cols + ", " + lane_ints(1, 0)) + " to " + b.lane.ir);
    return blk;
  }

  // The normalizer Z from the running sum S (of s) and P (of |s|^p).
  std::string normalizer(IrText& b, const std::string& S, const std::string& P) {
    if (spec.normalize == "sum") return S;
    if (spec.normalize == "none") return b.num(1);
    if (spec.normalize == "abs_clamped") return b.max(b.scalar, b.abs(b.scalar, S), b.num(1));
    return b.pow(b.scalar, P, b.num(1.0 / spec.p));
  }

  // A zero Z (e.g. relu scores all zero) normalizes nothing.
  static std::string safe(IrText& b, const std::string& Z) {
    std::string tiny = b.fcmp("olt", b.scalar, b.abs(b.scalar, Z), b.num(1e-30));
    return b.select(tiny, b.scalar, b.num(1), Z);
  }

  // |s|^p summed over the lanes of s (p-norm), else 0.
  std::string p_term(IrText& b, const Ty& t, const std::string& s) {
    if (spec.normalize != "pnorm") return b.num(0);
    std::string powered = b.pow(t, b.abs(t, s), b.num(spec.p, t));
    return t.vector() ? b.reduce_add(t, powered) : powered;
  }

  std::string forward(bool nvptx) {
    IrText b = body(nvptx);
    const Ty& L = b.lane;
    const std::string V = b.V;
    std::string head;
    if (nvptx) {
      // One thread per (batch x head) slice: the same row loop, offset by the slice.
      head = "define ptx_kernel void @sink_forward(ptr %q0, ptr %kt0, ptr %v0, ptr %g, ptr %kstar, ptr %vstar, ptr %o0, "
             "ptr %stats0, i64 %T, i64 %Tp, i64 %slices) {\nentry:\n";
      b.text += "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
                "  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n  %base = mul i32 %ctaid, %ntid\n"
                "  %slice32 = add i32 %base, %tid\n  %slice = zext i32 %slice32 to i64\n"
                "  %inside = icmp slt i64 %slice, %slices\n  br i1 %inside, label %start, label %exit\nstart:\n";
      b.text += fmt::format("  %rows = mul i64 %slice, %T\n  %elems = mul i64 %rows, {}\n", spec.d_head);
      for (const char* p : {"q", "v", "o"})
        b.text += fmt::format("  %{0} = getelementptr inbounds {1}, ptr %{0}0, i64 %elems\n", p, b.F);
      b.text += fmt::format("  %kt.elems = mul i64 %slice, %Tp\n  %kt.offset = mul i64 %kt.elems, {}\n", spec.d_head);
      b.text += "  %kt = getelementptr inbounds " + b.F + ", ptr %kt0, i64 %kt.offset\n";
      b.text += "  %two = mul i64 %rows, 2\n  %stats = getelementptr inbounds " + b.F + ", ptr %stats0, i64 %two\n";
      b.text += "  br label %row.head\n";
    } else {
      head = "; forward: o_i and per-row statistics (softmax: the max m and the sum l of exp(x - m); otherwise Z and the raw sum)\n"
             "; kt: k transposed, [d_head, Tp], Tp >= T + " + std::to_string(kKeyBlock) + " (zero padded)\n"
             "define void @sink_forward(ptr noalias %q, ptr noalias %kt, ptr noalias %v, ptr noalias %g, ptr noalias %kstar, "
             "ptr noalias %vstar, ptr noalias %o, ptr noalias %stats, i64 %T, i64 %Tp) {\nentry:\n  br label %row.head\n";
    }
    open_rows(b, nvptx ? "start" : "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string fi = position(b, "%i");
    // Initial state: empty, or the k* column already folded in.
    std::string m0 = b.num(-INFINITY), l0 = b.num(0), S0 = b.num(0), P0 = b.num(0), acc0 = "zeroinitializer";
    if (spec.key_bias) {
      b.comment("the k* column: every query sees it; its value is v*");
      std::string xs = b.fmul(b.dot(qi, b.load_vec("%kstar")), b.num(scale_qk()));
      std::string vs = b.load_vec("%vstar");
      if (spec.softmax) {
        m0 = xs, l0 = b.num(1), acc0 = vs;
      } else {
        std::string ss = emit_expr(b, b.scalar, spec.score, {xs, fi, b.num(0)});
        S0 = ss, P0 = p_term(b, b.scalar, ss), acc0 = b.vscale(vs, ss);
      }
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    b.line("%acc = phi " + V + " [ " + acc0 + ", %row.body ], [ %acc.next, %col.body ]");
    const std::string s1 = spec.softmax ? "%m" : "%S", s2 = spec.softmax ? "%l" : "%P";
    b.line(s1 + " = phi " + b.F + " [ " + (spec.softmax ? m0 : S0) + ", %row.body ], [ " + s1 + ".next, %col.body ]");
    b.line(s2 + " = phi " + b.F + " [ " + (spec.softmax ? l0 : P0) + ", %row.body ], [ " + s2 + ".next, %col.body ]");
    enter_cols(b, hi);
    KeyBlock blk = key_block(b, qi, hi);
    std::string weights, next1, next2;
    std::string acc = "%acc";
    if (spec.softmax) {
      b.comment("online softmax: one rescale of the running sums per block");
      std::string x = b.select(blk.valid, L, blk.x, b.num(-INFINITY, L));
      std::string m_new = b.max(b.scalar, "%m", b.reduce_max(L, x));
      std::string corr = b.exp(b.scalar, b.fsub("%m", m_new));
      weights = b.exp(L, b.bin("fsub", L, x, b.splat(L, m_new)));
      next1 = m_new;
      next2 = b.fadd(b.fmul("%l", corr), b.reduce_add(L, weights));
      acc = b.vscale(acc, corr);
    } else {
      std::string s = emit_expr(b, L, spec.score, {blk.x, b.splat(L, fi), blk.jpos});
      weights = b.select(blk.valid, L, s, b.zero(L));
      next1 = b.fadd("%S", b.reduce_add(L, weights));
      next2 = b.fadd("%P", p_term(b, L, weights));
    }
    for (int w = 0; w < kKeyBlock; ++w) acc = b.vfma(acc, b.extract(weights, w), b.load_row("%v", blk.col[w]));
    rename(b.text, "%acc.next", acc);
    rename(b.text, s1 + ".next", next1);
    rename(b.text, s2 + ".next", next2);
    close_cols(b, kKeyBlock);
    std::string two_i = b.op("mul i64 %i, 2");
    std::string two_i1 = b.op("add i64 " + two_i + ", 1");
    if (spec.softmax) {
      b.store_row(b.vscale("%acc", b.fdiv(b.num(spec.alpha), "%l")), "%o", "%i");
      // m and l apart, not m + log l: with large logits the sum would lose log l's digits.
      b.store("%m", "%stats", two_i);
      b.store("%l", "%stats", two_i1);
    } else {
      std::string Z = safe(b, normalizer(b, "%S", "%P"));
      b.store_row(b.vscale("%acc", b.fdiv(b.num(spec.alpha), Z)), "%o", "%i");
      b.store(Z, "%stats", two_i);
      b.store("%S", "%stats", two_i1);
    }
    close_rows(b);
    std::string decl = nvptx ? "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\ndeclare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
                               "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\n!nvvm.annotations = !{!0}\n"
                               "!0 = !{ptr @sink_forward, !\"kernel\", i32 1}\n"
                             : "";
    return head + finish(b) + "}\n" + decl;
  }

  // dZ/ds for scores s given the row's Z and raw sum S (scalars).
  std::string dZ_ds(IrText& b, const Ty& t, const std::string& s, const std::string& Z, const std::string& S) {
    if (spec.normalize == "sum") return b.num(1, t);
    if (spec.normalize == "none") return b.zero(t);
    ExprNode sign_of_x{ExprNode::Op::Call, 0, "__sign", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
    if (spec.normalize == "abs_clamped") {
      std::string over = b.fcmp("ogt", b.scalar, b.abs(b.scalar, S), b.num(1));
      std::string d = b.select(over, b.scalar, emit_expr(b, b.scalar, sign_of_x, {S, "", ""}), b.num(0));
      return t.vector() ? b.splat(t, d) : d;
    }
    // pnorm: Z^(1-p) |s|^(p-1) sign(s)
    std::string z_term = b.pow(b.scalar, Z, b.num(1 - spec.p));
    if (t.vector()) z_term = b.splat(t, z_term);
    std::string mag = b.pow(t, b.abs(t, s), b.num(spec.p - 1, t));
    return b.bin("fmul", t, b.bin("fmul", t, z_term, mag), emit_expr(b, t, sign_of_x, {s, "", ""}));
  }

  // Gradient of columns (a scalar or a lane vector): returns (A, dx) given
  // logits x, positions, dA = <do_i, v_j> and the row's D = <do_i, o_i>, stats.
  std::pair<std::string, std::string> column_grad(IrText& b, const Ty& t, const std::string& x, const std::string& fi,
                                                  const std::string& fj, const std::string& dA, const std::string& D,
                                                  const std::string& st0, const std::string& st1) {
    auto splat = [&](const std::string& s) { return t.vector() ? b.splat(t, s) : s; };
    const std::string alpha = b.num(spec.alpha, t);
    if (spec.softmax) {  // A = alpha exp(x - m) / l
      std::string scale = splat(b.fdiv(b.num(spec.alpha), st1));
      std::string A = b.bin("fmul", t, scale, b.exp(t, b.bin("fsub", t, x, splat(st0))));
      std::string dx = b.bin("fmul", t, A, b.bin("fsub", t, dA, splat(b.fdiv(D, b.num(spec.alpha)))));
      return {A, dx};
    }
    ScoreEnv env{x, fi, fj};
    std::string s = emit_expr(b, t, spec.score, env);
    std::string Z = splat(st0);
    std::string A = b.bin("fmul", t, alpha, b.bin("fdiv", t, s, Z));
    std::string grad_s = b.bin("fsub", t, b.bin("fmul", t, alpha, dA), b.bin("fmul", t, splat(D), dZ_ds(b, t, s, st0, st1)));
    std::string dx = b.bin("fmul", t, b.bin("fdiv", t, grad_s, Z), emit_expr(b, t, score_grad, env));
    return {A, dx};
  }

  std::string backward() {
    IrText b = body();
    const Ty& L = b.lane;
    const std::string V = b.V;
    std::string out =
        "; backward: dq, dk, dv, the position-bias gradient by distance, and dk*, dv*; kt, vt as in forward\n"
        "define void @sink_backward(ptr noalias %q, ptr noalias %k, ptr noalias %kt, ptr noalias %v, ptr noalias %vt, "
        "ptr noalias %g, ptr noalias %kstar, ptr noalias %vstar, ptr noalias %o, ptr noalias %stats, ptr noalias %dout, "
        "ptr noalias %dq, ptr noalias %dk, ptr noalias %dv, ptr noalias %dg, ptr noalias %dkstar, ptr noalias %dvstar, "
        "i64 %T, i64 %Tp) {\nentry:\n"
        "  br label %row.head\n";
    open_rows(b, "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string doi = b.load_row("%dout", "%i");
    std::string D = b.dot(doi, b.load_row("%o", "%i"));
    std::string fi = position(b, "%i");
    std::string two_i = b.op("mul i64 %i, 2");
    std::string st0 = b.load("%stats", two_i);
    std::string st1 = b.load("%stats", b.op("add i64 " + two_i + ", 1"));
    std::string dq0 = "zeroinitializer";
    if (spec.key_bias) {
      b.comment("the k* column");
      std::string ks = b.load_vec("%kstar");
      std::string vs = b.load_vec("%vstar");
      std::string xs = b.fmul(b.dot(qi, ks), b.num(scale_qk()));
      auto [A, dx] = column_grad(b, b.scalar, xs, fi, b.num(0), b.dot(doi, vs), D, st0, st1);
      std::string sdx = b.fmul(dx, b.num(scale_qk()));
      b.accumulate_vec("%dkstar", sdx, qi);
      b.accumulate_vec("%dvstar", A, doi);
      dq0 = b.vscale(ks, sdx);
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    b.line("%dqi = phi " + V + " [ " + dq0 + ", %row.body ], [ %dqi.next, %col.body ]");
    enter_cols(b, hi);
    KeyBlock blk = key_block(b, qi, hi);
    std::string dA = block_dot(b, doi, "%vt");
    auto [A_all, dx_all] = column_grad(b, L, blk.x, b.splat(L, fi), blk.jpos, dA, D, st0, st1);
    // Masked lanes contribute exactly nothing.
    std::string A = b.select(blk.valid, L, A_all, b.zero(L));
    std::string dx = b.select(blk.valid, L, dx_all, b.zero(L));
    std::string sdx = b.bin("fmul", L, dx, b.num(scale_qk(), L));
    std::string dq = "%dqi";
    for (int w = 0; w < kKeyBlock; ++w) {
      std::string a_w = b.extract(A, w), sdx_w = b.extract(sdx, w);
      b.accumulate_row("%dv", blk.col[w], a_w, doi);
      b.accumulate_row("%dk", blk.col[w], sdx_w, qi);
      if (spec.position_bias) b.accumulate("%dg", dist(b, "%i", blk.col[w]), b.extract(dx, w));
      dq = b.vfma(dq, sdx_w, b.load_row("%k", blk.col[w]));
    }
    rename(b.text, "%dqi.next", dq);
    close_cols(b, kKeyBlock);
    b.store_row("%dqi", "%dq", "%i");
    close_rows(b);
    return out + finish(b) + "}\n";
  }

  // Measurement only: one column at a time.
  std::string probe() {
    IrText b = body();
    const int64_t cols = spec.key_bias ? 1 : 0;
    std::string out =
        "; probe: row i of the scores the sink metric reads, [T, T + k* column]: A for softmax, s otherwise\n"
        "define void @sink_probe(ptr noalias %q, ptr noalias %k, ptr noalias %g, ptr noalias %kstar, ptr noalias %stats, "
        "ptr noalias %out, i64 %T) {\nentry:\n  %S.cols = add i64 %T, " + std::to_string(cols) + "\n  br label %row.head\n";
    open_rows(b, "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string fi = position(b, "%i");
    std::string two_i = b.op("mul i64 %i, 2");
    std::string st0 = b.load("%stats", two_i);
    std::string softmax_scale = spec.softmax ? b.fdiv(b.num(spec.alpha), b.load("%stats", b.op("add i64 " + two_i + ", 1"))) : "";
    std::string row0 = b.op("mul i64 %i, %S.cols");
    auto value = [&](const std::string& x, const std::string& fj) {
      if (spec.softmax) return b.fmul(softmax_scale, b.exp(b.scalar, b.fsub(x, st0)));
      return emit_expr(b, b.scalar, spec.score, {x, fi, fj});
    };
    if (spec.key_bias) {
      std::string xs = b.fmul(b.dot(qi, b.load_vec("%kstar")), b.num(scale_qk()));
      b.store(value(xs, b.num(0)), "%out", row0);
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    enter_cols(b, hi);
    std::string x = logit(b, qi, b.load_row("%k", "%j"), "%i", "%j");
    std::string at = b.op("add i64 " + row0 + ", " + b.op("add i64 %j, " + std::to_string(cols)));
    b.store(value(x, position(b, "%j")), "%out", at);
    close_cols(b, 1);
    close_rows(b);
    return out + finish(b) + "}\n";
  }
};

}  // namespace

std::string emit_llvm(const KernelSpec& spec, Target target) { return Generator(spec).module(target); }

}  // namespace sink::kernels
