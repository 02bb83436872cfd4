#include "compiler/kernels/emit_llvm.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "compiler/kernels/symbolic.h"

namespace sink::kernels {
namespace {

std::string flt(double v) {
  // LLVM spells float constants as the hex of the double holding the float.
  double d = static_cast<float>(v);
  if (std::isinf(d)) return d > 0 ? "0x7FF0000000000000" : "0xFFF0000000000000";
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  return fmt::format("0x{:016X}", bits);
}

// One function body being written: fresh SSA names and the text.
class Body {
 public:
  Body(int64_t d, bool nvptx_target = false) : D(d), V(fmt::format("<{} x float>", d)), nvptx(nvptx_target) {}
  const int64_t D;
  const std::string V;
  const bool nvptx;  // no libm on the GPU: exp and log through the PTX ex2/lg2 instructions
  std::string text;

  std::string exp(const std::string& a) {
    if (!nvptx) return call1("llvm.exp.f32", a);
    return call1("llvm.nvvm.ex2.approx.f", fmul(a, "0x3FF7154760000000"));  // log2(e)
  }
  std::string log(const std::string& a) {
    if (!nvptx) return call1("llvm.log.f32", a);
    return fmul(call1("llvm.nvvm.lg2.approx.f", a), "0x3FE62E4300000000");  // ln(2)
  }
  std::string pow(const std::string& a, const std::string& e) {
    if (!nvptx) return call2("llvm.pow.f32", a, e);
    return exp(fmul(e, log(a)));
  }
  std::string tanh(const std::string& a) {
    if (!nvptx) return call1("tanhf", a);
    std::string e2 = exp(fmul("0x4000000000000000", call2("llvm.minnum.f32", a, "0x4044000000000000")));  // x <= 40
    return fdiv(fsub(e2, "0x3FF0000000000000"), fadd(e2, "0x3FF0000000000000"));
  }
  std::string log1p(const std::string& a) {
    if (!nvptx) return call1("log1pf", a);
    return log(fadd("0x3FF0000000000000", a));
  }

  std::string fresh(const std::string& hint = "t") { return fmt::format("%{}{}", hint, counter_++); }
  std::string op(const std::string& rhs, const std::string& hint = "t") {
    std::string r = fresh(hint);
    text += "  " + r + " = " + rhs + "\n";
    return r;
  }
  void line(const std::string& s) { text += "  " + s + "\n"; }
  void label(const std::string& l) { text += l + ":\n"; }
  void comment(const std::string& c) { text += "  ; " + c + "\n"; }

  // Float helpers.
  std::string fadd(const std::string& a, const std::string& b) { return op("fadd float " + a + ", " + b); }
  std::string fsub(const std::string& a, const std::string& b) { return op("fsub float " + a + ", " + b); }
  std::string fmul(const std::string& a, const std::string& b) { return op("fmul float " + a + ", " + b); }
  std::string fdiv(const std::string& a, const std::string& b) { return op("fdiv float " + a + ", " + b); }
  std::string call1(const std::string& fn, const std::string& a) { return op("call float @" + fn + "(float " + a + ")"); }
  std::string call2(const std::string& fn, const std::string& a, const std::string& b) {
    return op("call float @" + fn + "(float " + a + ", float " + b + ")");
  }
  std::string select_gt0(const std::string& x, const std::string& yes, const std::string& no) {
    std::string c = op("fcmp ogt float " + x + ", 0.0");
    return op("select i1 " + c + ", float " + yes + ", float " + no);
  }

  // Vector helpers over one row of d_head floats.
  std::string row_ptr(const std::string& base, const std::string& index) {
    std::string off = op("mul i64 " + index + ", " + std::to_string(D));
    return op("getelementptr inbounds float, ptr " + base + ", i64 " + off, "p");
  }
  std::string load_row(const std::string& base, const std::string& index) {
    return op("load " + V + ", ptr " + row_ptr(base, index) + ", align 4", "row");
  }
  std::string load_vec(const std::string& ptr) { return op("load " + V + ", ptr " + ptr + ", align 4", "row"); }
  void store_row(const std::string& value, const std::string& base, const std::string& index) {
    line("store " + V + " " + value + ", ptr " + row_ptr(base, index) + ", align 4");
  }
  // Reassociation lets LLVM reduce the product in a tree: the only fast-math flag we use.
  std::string dot(const std::string& a, const std::string& b) {
    std::string prod = op("fmul " + V + " " + a + ", " + b);
    return op("call reassoc float @llvm.vector.reduce.fadd." + vt() + "(float 0.0, " + V + " " + prod + ")", "dot");
  }
  std::string splat(const std::string& s) {
    std::string ins = op("insertelement " + V + " poison, float " + s + ", i64 0");
    return op("shufflevector " + V + " " + ins + ", " + V + " poison, <" + std::to_string(D) + " x i32> zeroinitializer", "splat");
  }
  std::string vfma(const std::string& acc, const std::string& scalar, const std::string& vec) {  // acc + scalar * vec
    std::string m = op("fmul " + V + " " + splat(scalar) + ", " + vec);
    return op("fadd " + V + " " + acc + ", " + m, "acc");
  }
  std::string vscale(const std::string& vec, const std::string& scalar) {
    return op("fmul " + V + " " + vec + ", " + splat(scalar));
  }
  void accumulate_row(const std::string& base, const std::string& index, const std::string& scalar, const std::string& vec) {
    std::string p = row_ptr(base, index);
    std::string old = op("load " + V + ", ptr " + p + ", align 4");
    line("store " + V + " " + vfma(old, scalar, vec) + ", ptr " + p + ", align 4");
  }
  void accumulate_vec(const std::string& ptr, const std::string& scalar, const std::string& vec) {
    std::string old = op("load " + V + ", ptr " + ptr + ", align 4");
    line("store " + V + " " + vfma(old, scalar, vec) + ", ptr " + ptr + ", align 4");
  }
  void accumulate_float(const std::string& base, const std::string& index, const std::string& value) {
    std::string p = op("getelementptr inbounds float, ptr " + base + ", i64 " + index, "p");
    std::string old = op("load float, ptr " + p + ", align 4");
    line("store float " + fadd(old, value) + ", ptr " + p + ", align 4");
  }
  std::string load_float(const std::string& base, const std::string& index) {
    std::string p = op("getelementptr inbounds float, ptr " + base + ", i64 " + index, "p");
    return op("load float, ptr " + p + ", align 4");
  }
  void store_float(const std::string& value, const std::string& base, const std::string& index) {
    std::string p = op("getelementptr inbounds float, ptr " + base + ", i64 " + index, "p");
    line("store float " + value + ", ptr " + p + ", align 4");
  }
  std::string vt() const { return fmt::format("v{}f32", D); }

 private:
  int counter_ = 0;
};

// Scalar code for an expression of x (= qk), i and j (1-based, as floats).
struct ScoreEnv {
  std::string x, i, j;
};

std::string emit_expr(Body& b, const ExprNode& e, const ScoreEnv& env) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return emit_expr(b, e.args.at(k), env); };
  switch (e.op) {
    case Op::Number: return flt(e.number);
    case Op::Var: return e.name == "qk" ? env.x : e.name == "i" ? env.i : env.j;
    case Op::Neg: return b.op("fneg float " + arg(0));
    case Op::Add: return b.fadd(arg(0), arg(1));
    case Op::Sub: return b.fsub(arg(0), arg(1));
    case Op::Mul: return b.fmul(arg(0), arg(1));
    case Op::Div: return b.fdiv(arg(0), arg(1));
    case Op::Pow: return b.pow(arg(0), arg(1));
    case Op::Call: break;
  }
  const std::string& f = e.name;
  std::string a = arg(0);
  if (f == "exp") return b.exp(b.call2("llvm.minnum.f32", a, flt(88.0)));  // guard: no inf
  if (f == "sigmoid") {
    std::string den = b.fadd(flt(1), b.exp(b.call2("llvm.minnum.f32", b.op("fneg float " + a), flt(88.0))));
    return b.fdiv(flt(1), den);
  }
  if (f == "elu") return b.select_gt0(a, a, b.fsub(b.exp(b.call2("llvm.minnum.f32", a, flt(0))), flt(1)));
  if (f == "relu") return b.select_gt0(a, a, flt(0));
  if (f == "tanh") return b.tanh(a);
  if (f == "softplus") {  // max(x, 0) + log1p(exp(-|x|)): no overflow
    std::string neg_abs = b.op("fneg float " + b.call1("llvm.fabs.f32", a));
    return b.fadd(b.call2("llvm.maxnum.f32", a, flt(0)), b.log1p(b.exp(neg_abs)));
  }
  if (f == "abs") return b.call1("llvm.fabs.f32", a);
  if (f == "sqrt") return b.call1("llvm.sqrt.f32", a);
  if (f == "log") return b.log(a);
  if (f == "pow") return b.pow(a, arg(1));
  if (f == "__step") return b.select_gt0(a, flt(1), flt(0));
  if (f == "__sign") {
    std::string neg = b.op("fcmp olt float " + a + ", 0.0");
    return b.select_gt0(a, flt(1), b.op("select i1 " + neg + ", float " + flt(-1) + ", float 0.0"));
  }
  if (f == "__elu_grad") return b.select_gt0(a, flt(1), b.exp(b.call2("llvm.minnum.f32", a, flt(0))));
  throw std::runtime_error("kernel generator: no code for function '" + f + "'");
}

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
           (spec.window ? ", window" : "") + ")" + (spec.key_bias ? "; the k* column comes first" : "") + "\n\n";
    if (target == Target::NVPTX) {
      out += "target triple = \"nvptx64-nvidia-cuda\"\n\n";
      out += forward(true);
    } else {
      out += forward(false) + "\n" + backward() + "\n" + probe();
    }
    out += "\n" + declarations(target);
    return out;
  }

 private:
  const KernelSpec& spec;
  ExprNode score_grad;

  std::string declarations(Target target) const {
    std::string vt = fmt::format("v{}f32", spec.d_head);
    if (target == Target::NVPTX)
      return fmt::format(
          "declare float @llvm.nvvm.ex2.approx.f(float)\ndeclare float @llvm.nvvm.lg2.approx.f(float)\n"
          "declare float @llvm.sqrt.f32(float)\ndeclare float @llvm.fabs.f32(float)\n"
          "declare float @llvm.minnum.f32(float, float)\ndeclare float @llvm.maxnum.f32(float, float)\n"
          "declare float @llvm.vector.reduce.fadd.{}(float, <{} x float>)\n",
          vt, spec.d_head);
    return fmt::format(
        "declare float @llvm.exp.f32(float)\ndeclare float @llvm.log.f32(float)\ndeclare float @llvm.sqrt.f32(float)\n"
        "declare float @llvm.fabs.f32(float)\ndeclare float @llvm.pow.f32(float, float)\n"
        "declare float @llvm.minnum.f32(float, float)\ndeclare float @llvm.maxnum.f32(float, float)\n"
        "declare float @tanhf(float)\ndeclare float @log1pf(float)\n"
        "declare float @llvm.vector.reduce.fadd.{}(float, <{} x float>)\n",
        vt, spec.d_head);
  }

  double scale_qk() const { return 1.0 / std::sqrt(static_cast<double>(spec.d_head)); }

  // for (i = 0; i < T; ++i): the loop over query rows.
  static void open_rows(Body& b, const std::string& entry) {
    b.label("row.head");
    b.line("%i = phi i64 [ 0, %" + entry + " ], [ %i.next, %row.end ]");
    b.line("%more = icmp slt i64 %i, %T");
    b.line("br i1 %more, label %row.body, label %exit");
    b.label("row.body");
  }
  static void close_rows(Body& b) {
    b.line("%i.next = add i64 %i, 1");
    b.line("br label %row.head");
    b.label("exit");
    b.line("ret void");
  }

  // The end of col.head's phis: loop while j <= hi.
  static void enter_cols(Body& b, const std::string& hi) {
    b.line("%cols = icmp sle i64 %j, " + hi);
    b.line("br i1 %cols, label %col.body, label %row.end");
    b.label("col.body");
  }
  static void close_cols(Body& b) {
    b.line("%j.next = add i64 %j, 1");
    b.line("br label %col.head");
    b.label("row.end");
  }

  // The allowed key range of row i: [lo, hi].
  std::pair<std::string, std::string> key_range(Body& b, const std::string& i) {
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
  std::string logit(Body& b, const std::string& qi, const std::string& kj, const std::string& i, const std::string& j) {
    std::string x = b.fmul(b.dot(qi, kj), flt(scale_qk()));
    if (!spec.position_bias) return x;
    return b.fadd(x, b.load_float("%g", dist(b, i, j)));
  }

  // |i - j|: the index into the per-distance position bias.
  std::string dist(Body& b, const std::string& i, const std::string& j) {
    std::string diff = b.op("sub i64 " + i + ", " + j);
    std::string neg = b.op("sub i64 " + j + ", " + i);
    std::string pos = b.op("icmp sge i64 " + diff + ", 0");
    return b.op("select i1 " + pos + ", i64 " + diff + ", i64 " + neg);
  }

  std::string position(Body& b, const std::string& index) {  // 1-based, as float
    return b.op("sitofp i64 " + b.op("add i64 " + index + ", 1") + " to float");
  }

  // The normalizer Z from the running sum S (of s) and P (of |s|^p).
  std::string normalizer(Body& b, const std::string& S, const std::string& P) {
    if (spec.normalize == "sum") return S;
    if (spec.normalize == "none") return flt(1);
    if (spec.normalize == "abs_clamped") return b.call2("llvm.maxnum.f32", b.call1("llvm.fabs.f32", S), flt(1));
    return b.pow(P, flt(1.0 / spec.p));
  }

  // A zero Z (e.g. relu scores all zero) normalizes nothing.
  std::string safe(Body& b, const std::string& Z) {
    std::string tiny = b.op("fcmp olt float " + b.call1("llvm.fabs.f32", Z) + ", " + flt(1e-30));
    return b.op("select i1 " + tiny + ", float " + flt(1) + ", float " + Z, "Z");
  }

  std::string p_term(Body& b, const std::string& s) {
    if (spec.normalize != "pnorm") return flt(0);
    return b.pow(b.call1("llvm.fabs.f32", s), flt(spec.p));
  }

  std::string forward(bool nvptx) {
    Body b(spec.d_head, nvptx);
    const std::string V = b.V;
    std::string sig = "ptr noalias %q, ptr noalias %k, ptr noalias %v, ptr noalias %g, ptr noalias %kstar, "
                      "ptr noalias %vstar, ptr noalias %o, ptr noalias %stats, i64 %T";
    std::string head;
    if (nvptx) {
      // One thread per (batch x head) slice: the same row loop, offset by the slice.
      head = "define ptx_kernel void @sink_forward(ptr %q0, ptr %k0, ptr %v0, ptr %g, ptr %kstar, ptr %vstar, ptr %o0, "
             "ptr %stats0, i64 %T, i64 %slices) {\nentry:\n";
      b.text += "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
                "  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n  %base = mul i32 %ctaid, %ntid\n"
                "  %slice32 = add i32 %base, %tid\n  %slice = zext i32 %slice32 to i64\n"
                "  %inside = icmp slt i64 %slice, %slices\n  br i1 %inside, label %start, label %exit\nstart:\n";
      b.text += fmt::format("  %rows = mul i64 %slice, %T\n  %elems = mul i64 %rows, {}\n", spec.d_head);
      for (const char* p : {"q", "k", "v", "o"})
        b.text += fmt::format("  %{0} = getelementptr inbounds float, ptr %{0}0, i64 %elems\n", p);
      b.text += "  %two = mul i64 %rows, 2\n  %stats = getelementptr inbounds float, ptr %stats0, i64 %two\n";
      b.text += "  br label %row.head\n";
    } else {
      head = "; forward: o_i and per-row statistics (softmax: log-sum-exp; otherwise Z and the raw sum)\n"
             "define void @sink_forward(" + sig + ") {\nentry:\n  br label %row.head\n";
    }
    open_rows(b, nvptx ? "start" : "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string fi = position(b, "%i");
    // Initial state: empty, or the k* column already folded in.
    std::string m0 = flt(-INFINITY), l0 = flt(0), S0 = flt(0), P0 = flt(0), acc0 = "zeroinitializer";
    if (spec.key_bias) {
      b.comment("the k* column: every query sees it; its value is v*");
      std::string xs = b.fmul(b.dot(qi, b.load_vec("%kstar")), flt(scale_qk()));
      std::string vs = b.load_vec("%vstar");
      if (spec.softmax) {
        m0 = xs, l0 = flt(1), acc0 = vs;
      } else {
        std::string ss = emit_expr(b, spec.score, {xs, fi, flt(0)});
        S0 = ss, P0 = p_term(b, ss), acc0 = b.vscale(vs, ss);
      }
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    b.line("%acc = phi " + V + " [ " + acc0 + ", %row.body ], [ %acc.next, %col.body ]");
    if (spec.softmax) {
      b.line("%m = phi float [ " + m0 + ", %row.body ], [ %m.next, %col.body ]");
      b.line("%l = phi float [ " + l0 + ", %row.body ], [ %l.next, %col.body ]");
    } else {
      b.line("%S = phi float [ " + S0 + ", %row.body ], [ %S.next, %col.body ]");
      b.line("%P = phi float [ " + P0 + ", %row.body ], [ %P.next, %col.body ]");
    }
    enter_cols(b, hi);
    std::string kj = b.load_row("%k", "%j");
    std::string vj = b.load_row("%v", "%j");
    std::string x = logit(b, qi, kj, "%i", "%j");
    if (spec.softmax) {
      b.comment("online softmax: rescale the running sums when the maximum grows");
      std::string m_new = b.call2("llvm.maxnum.f32", "%m", x);
      std::string corr = b.exp(b.fsub("%m", m_new));
      std::string p = b.exp(b.fsub(x, m_new));
      b.line("%l.next = fadd float " + b.fmul("%l", corr) + ", " + p);
      b.line("%acc.next = fadd " + V + " " + b.vscale("%acc", corr) + ", " + b.vscale(vj, p));
      b.line("%m.next = fadd float " + m_new + ", 0.0");
    } else {
      std::string s = emit_expr(b, spec.score, {x, fi, position(b, "%j")});
      b.line("%S.next = fadd float %S, " + s);
      b.line("%P.next = fadd float %P, " + p_term(b, s));
      b.line("%acc.next = fadd " + V + " %acc, " + b.vscale(vj, s));
    }
    close_cols(b);
    std::string two_i = b.op("mul i64 %i, 2");
    std::string two_i1 = b.op("add i64 " + two_i + ", 1");
    if (spec.softmax) {
      std::string scale = b.fdiv(flt(spec.alpha), "%l");
      b.store_row(b.vscale("%acc", scale), "%o", "%i");
      b.store_float(b.fadd("%m", b.log("%l")), "%stats", two_i);
      b.store_float("%l", "%stats", two_i1);
    } else {
      std::string Z = safe(b, normalizer(b, "%S", "%P"));
      b.store_row(b.vscale("%acc", b.fdiv(flt(spec.alpha), Z)), "%o", "%i");
      b.store_float(Z, "%stats", two_i);
      b.store_float("%S", "%stats", two_i1);
    }
    close_rows(b);
    std::string decl = nvptx ? "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\ndeclare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
                               "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\n!nvvm.annotations = !{!0}\n"
                               "!0 = !{ptr @sink_forward, !\"kernel\", i32 1}\n"
                             : "";
    return head + b.text + "}\n" + decl;
  }

  // dZ/ds for one score s given the row's Z and raw sum S.
  std::string dZ_ds(Body& b, const std::string& s, const std::string& Z, const std::string& S) {
    if (spec.normalize == "sum") return flt(1);
    if (spec.normalize == "none") return flt(0);
    if (spec.normalize == "abs_clamped") {
      std::string over = b.op("fcmp ogt float " + b.call1("llvm.fabs.f32", S) + ", " + flt(1));
      std::string sign = emit_expr(b, ExprNode{ExprNode::Op::Call, 0, "__sign", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}},
                                   {S, "", ""});
      return b.op("select i1 " + over + ", float " + sign + ", float 0.0");
    }
    // pnorm: Z^(1-p) |s|^(p-1) sign(s)
    std::string sign = emit_expr(b, ExprNode{ExprNode::Op::Call, 0, "__sign", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}},
                                 {s, "", ""});
    std::string mag = b.pow(b.call1("llvm.fabs.f32", s), flt(spec.p - 1));
    return b.fmul(b.fmul(b.pow(Z, flt(1 - spec.p)), mag), sign);
  }

  // Gradient of one column: returns (A, dx) given x, s-position j (float) and dA.
  std::pair<std::string, std::string> column_grad(Body& b, const std::string& x, const std::string& fi, const std::string& fj,
                                                  const std::string& dA, const std::string& D, const std::string& st0,
                                                  const std::string& st1) {
    if (spec.softmax) {
      std::string A = b.fmul(flt(spec.alpha), b.exp(b.fsub(x, st0)));
      std::string dx = b.fmul(A, b.fsub(dA, b.fdiv(D, flt(spec.alpha))));
      return {A, dx};
    }
    ScoreEnv env{x, fi, fj};
    std::string s = emit_expr(b, spec.score, env);
    std::string A = b.fmul(flt(spec.alpha), b.fdiv(s, st0));
    std::string ds = b.fdiv(b.fsub(b.fmul(flt(spec.alpha), dA), b.fmul(D, dZ_ds(b, s, st0, st1))), st0);
    std::string dx = b.fmul(ds, emit_expr(b, score_grad, env));
    return {A, dx};
  }

  std::string backward() {
    Body b(spec.d_head);
    const std::string V = b.V;
    std::string out =
        "; backward: dq, dk, dv, the position-bias gradient by distance, and dk*, dv*\n"
        "define void @sink_backward(ptr noalias %q, ptr noalias %k, ptr noalias %v, ptr noalias %g, ptr noalias %kstar, "
        "ptr noalias %vstar, ptr noalias %o, ptr noalias %stats, ptr noalias %dout, ptr noalias %dq, ptr noalias %dk, "
        "ptr noalias %dv, ptr noalias %dg, ptr noalias %dkstar, ptr noalias %dvstar, i64 %T) {\nentry:\n"
        "  br label %row.head\n";
    open_rows(b, "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string doi = b.load_row("%dout", "%i");
    std::string D = b.dot(doi, b.load_row("%o", "%i"));
    std::string fi = position(b, "%i");
    std::string two_i = b.op("mul i64 %i, 2");
    std::string st0 = b.load_float("%stats", two_i);
    std::string st1 = b.load_float("%stats", b.op("add i64 " + two_i + ", 1"));
    std::string dq0 = "zeroinitializer";
    if (spec.key_bias) {
      b.comment("the k* column");
      std::string ks = b.load_vec("%kstar");
      std::string vs = b.load_vec("%vstar");
      std::string xs = b.fmul(b.dot(qi, ks), flt(scale_qk()));
      auto [A, dx] = column_grad(b, xs, fi, flt(0), b.dot(doi, vs), D, st0, st1);
      std::string sdx = b.fmul(dx, flt(scale_qk()));
      b.accumulate_vec("%dkstar", sdx, qi);
      b.accumulate_vec("%dvstar", A, doi);
      dq0 = b.vscale(ks, sdx);
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    b.line("%dqi = phi " + V + " [ " + dq0 + ", %row.body ], [ %dqi.next, %col.body ]");
    enter_cols(b, hi);
    std::string kj = b.load_row("%k", "%j");
    std::string vj = b.load_row("%v", "%j");
    std::string x = logit(b, qi, kj, "%i", "%j");
    auto [A, dx] = column_grad(b, x, fi, position(b, "%j"), b.dot(doi, vj), D, st0, st1);
    std::string sdx = b.fmul(dx, flt(scale_qk()));
    b.accumulate_row("%dv", "%j", A, doi);
    b.accumulate_row("%dk", "%j", sdx, qi);
    if (spec.position_bias) b.accumulate_float("%dg", dist(b, "%i", "%j"), dx);
    b.line("%dqi.next = fadd " + V + " %dqi, " + b.vscale(kj, sdx));
    close_cols(b);
    b.store_row("%dqi", "%dq", "%i");
    close_rows(b);
    return out + b.text + "}\n";
  }

  std::string probe() {
    Body b(spec.d_head);
    const int64_t cols = spec.key_bias ? 1 : 0;
    std::string out =
        "; probe: row i of the scores the sink metric reads, [T, T + k* column]: A for softmax, s otherwise\n"
        "define void @sink_probe(ptr noalias %q, ptr noalias %k, ptr noalias %g, ptr noalias %kstar, ptr noalias %stats, "
        "ptr noalias %out, i64 %T) {\nentry:\n  %S.cols = add i64 %T, " + std::to_string(cols) + "\n  br label %row.head\n";
    open_rows(b, "entry");
    auto [lo, hi] = key_range(b, "%i");
    std::string qi = b.load_row("%q", "%i");
    std::string fi = position(b, "%i");
    std::string st0 = b.load_float("%stats", b.op("mul i64 %i, 2"));
    std::string row0 = b.op("mul i64 %i, %S.cols");
    auto value = [&](const std::string& x, const std::string& fj) {
      if (spec.softmax) return b.fmul(flt(spec.alpha), b.exp(b.fsub(x, st0)));
      return emit_expr(b, spec.score, {x, fi, fj});
    };
    if (spec.key_bias) {
      std::string xs = b.fmul(b.dot(qi, b.load_vec("%kstar")), flt(scale_qk()));
      b.store_float(value(xs, flt(0)), "%out", row0);
    }
    b.line("br label %col.head");
    b.label("col.head");
    b.line("%j = phi i64 [ " + lo + ", %row.body ], [ %j.next, %col.body ]");
    enter_cols(b, hi);
    std::string x = logit(b, qi, b.load_row("%k", "%j"), "%i", "%j");
    std::string at = b.op("add i64 " + row0 + ", " + b.op("add i64 %j, " + std::to_string(cols)));
    b.store_float(value(x, position(b, "%j")), "%out", at);
    close_cols(b);
    close_rows(b);
    return out + b.text + "}\n";
  }
};

}  // namespace

std::string emit_llvm(const KernelSpec& spec, Target target) { return Generator(spec).module(target); }

}  // namespace sink::kernels
