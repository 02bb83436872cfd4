// The forward kernel: groups of kForwardRows query rows against blocks of
// kKeyBlock key columns. Each block's columns of k^T are loaded once for the
// whole group and each v row once per block; softmax rescales its running
// sums once per block (online, max-subtracted).
#include <cmath>
#include <fmt/format.h>

#include "kernels/generator.h"
#include "kernels/kernel_abi.h"

namespace sink::kernels {
namespace {
constexpr int kForwardRows = 4;
}

std::string Generator::forward(bool nvptx) {
  IrText b = body(nvptx);
  const Ty& L = b.lane;
  const std::string V = b.V;
  const int R = kForwardRows;
  std::string head;
  if (nvptx) {
    // One thread per (batch x head) slice: the same loops, offset by the
    // slice; g, k* and v* by its head (slice mod heads) times their step,
    // T and d_head for per-head tensors, 0 for head-shared ones.
    static constexpr std::array<std::string_view, 4> kSliceSizes = {"slices", "heads", "g_step", "star_step"};
    head = abi::ptx_signature(abi::kForwardSymbol, abi::kForward, kSliceSizes) + " {\nentry:\n";
    b.text += "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
              "  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n  %base = mul i32 %ctaid, %ntid\n"
              "  %slice32 = add i32 %base, %tid\n  %slice = zext i32 %slice32 to i64\n"
              "  %inside = icmp slt i64 %slice, %slices\n  br i1 %inside, label %start, label %exit\nstart:\n";
    b.text += fmt::format("  %rows = mul i64 %slice, %T\n  %elems = mul i64 %rows, {}\n", spec.d_head);
    for (const char* p : {"q", "v", "o"})
      b.text += fmt::format("  %{0} = getelementptr inbounds {1}, ptr %{0}0, i64 %elems\n", p, b.F);
    b.text += fmt::format("  %kt.elems = mul i64 %slice, %Tp\n  %kt.offset = mul i64 %kt.elems, {}\n", spec.d_head);
    b.text += "  %kt = getelementptr inbounds " + b.F + ", ptr %kt0, i64 %kt.offset\n";
    b.text += "  %stats.offset = mul i64 %slice, %Tp\n  %stats.offset2 = mul i64 %stats.offset, 2\n";
    b.text += "  %stats = getelementptr inbounds " + b.F + ", ptr %stats0, i64 %stats.offset2\n";
    b.text += "  %head = urem i64 %slice, %heads\n  %g.offset = mul i64 %head, %g_step\n"
              "  %star.offset = mul i64 %head, %star_step\n";
    b.text += "  %g = getelementptr inbounds " + b.F + ", ptr %g0, i64 %g.offset\n";
    for (const char* p : {"kstar", "vstar"})
      b.text += fmt::format("  %{0} = getelementptr inbounds {1}, ptr %{0}0, i64 %star.offset\n", p, b.F);
    b.text += "  %sink = getelementptr inbounds " + b.F + ", ptr %sink0, i64 %head\n";
    weights_buffer(b);
  } else {
    head = "; forward: o and the per-row statistics stats[0][i], stats[1][i]\n" +
           abi::host_signature(abi::kForwardSymbol, abi::kForward) + " {\nentry:\n";
  }
  if (!nvptx) weights_buffer(b);  // (the GPU kernel's is in block "start")
  open_loop(b, "qg", "0", nvptx ? "start" : "entry", "icmp slt i64 %qg, %T");
  RowGroup g = row_group(b, "%qg", R);
  std::vector<std::string> lo(R), hi(R), fi(R);
  for (int r = 0; r < R; ++r) {
    std::tie(lo[r], hi[r]) = key_range(b, g.index[r]);
    fi[r] = position(b, g.index[r]);
  }
  // Per row: acc (sum of weights x v), and m, l (softmax), m, P (exp under
  // a scale-free normaliser: P = sum term(exp(x - m))), or P alone.
  std::vector<Carried> carried;
  // softpick's shift c = max(0, row max) keeps e^-c <= 1: it starts at 0, not -inf.
  const std::string first_max = spec.softpick() ? b.num(0) : b.num(-INFINITY);
  for (int r = 0; r < R; ++r) {
    std::string m0 = first_max, l0 = b.num(0), S0 = b.num(0), P0 = b.num(0), acc0 = "zeroinitializer";
    if (spec.key_bias) {
      b.comment("the k* column: every query sees it; its value is v*");
      std::string xs = b.fmul(b.dot(b.load_row("%q", g.index[r]), b.load_vec("%kstar")), b.num(scale_qk()));
      std::string vs = b.load_vec("%vstar");
      if (spec.softpick()) {
        m0 = b.max(b.scalar, xs, b.num(0));
        std::string u = softpick_term(b, b.scalar, xs, m0);
        l0 = b.abs(b.scalar, u), acc0 = b.vscale(vs, b.max(b.scalar, u, b.num(0)));
      } else if (spec.online_max()) {
        m0 = xs, l0 = b.num(1), acc0 = vs;  // exp(x* - m) = 1 with m = x*; so is 1^p
      } else {
        std::string ss = emit_expr(b, b.scalar, spec.score, {xs, fi[r], b.num(0)});
        S0 = ss, P0 = row_term(b, b.scalar, ss), acc0 = b.vscale(vs, ss);
      }
    }
    if (spec.sink_logit) {
      b.comment("the sink logit b: exp(b - m) joins the denominator, with no value");
      std::string sink = b.load("%sink", "0");
      if (spec.key_bias) {
        std::string m = b.max(b.scalar, m0, sink);
        std::string keep = b.exp(b.scalar, b.fsub(m0, m));
        l0 = b.fadd(b.fmul(l0, keep), b.exp(b.scalar, b.fsub(sink, m))), acc0 = b.vscale(acc0, keep), m0 = m;
      } else {
        m0 = sink, l0 = b.num(1);
      }
    }
    carried.push_back({fmt::format("%kb.acc{}", r), V, acc0});
    carried.push_back({fmt::format("%kb.s{}", r), b.F, spec.online_max() ? m0 : S0});
    carried.push_back({fmt::format("%kb.t{}", r), b.F, spec.online_max() ? l0 : P0});
  }
  open_loop(b, "kb", lo[0], "qg.body", "icmp sle i64 %kb, " + hi[R - 1], carried);
  std::vector<std::string> cols = clamped_lanes(b, "%kb", hi[R - 1]);
  std::string lanes = lane_indices(b, "%kb");
  const std::string vt = fmt::format("<{} x i64>", kKeyBlock);
  std::string jpos;
  if (!spec.softmax) jpos = b.op("sitofp " + vt + " " + b.op("add " + vt + " " + lanes + ", " + lane_ints(1, 0)) + " to " + L.ir);
  std::vector<std::string> x = block_dots(b, "%q", g, "%kt", "%kb");
  std::vector<std::string> weights(R), acc(R);
  std::vector<std::pair<std::string, std::string>> next;
  for (int r = 0; r < R; ++r) {
    std::string xr = b.bin("fmul", L, x[r], b.num(scale_qk(), L));
    if (spec.position_bias) {
      std::string bias = "poison";
      for (int w = 0; w < kKeyBlock; ++w) bias = b.insert(bias, b.load("%g", dist(b, g.index[r], cols[w])), w);
      xr = b.bin("fadd", L, xr, bias);
    }
    std::string above = b.op("icmp sge " + vt + " " + lanes + ", " + splat_int(b, lo[r]));
    std::string below = b.op("icmp sle " + vt + " " + lanes + ", " + splat_int(b, hi[r]));
    std::string valid = b.op(fmt::format("and <{} x i1> {}, {}", kKeyBlock, above, below), "valid");
    const std::string s = fmt::format("%kb.s{}", r), t = fmt::format("%kb.t{}", r);
    acc[r] = fmt::format("%kb.acc{}", r);
    if (spec.softpick()) {
      // Terms (e^x - 1) e^-c: rescaled by e^(c_old - c_new) as c grows, as softmax's are.
      std::string masked = b.select(valid, L, xr, b.num(-INFINITY, L));
      std::string c_new = b.max(b.scalar, s, b.reduce_max(L, masked));
      std::string corr = b.exp(b.scalar, b.fsub(s, c_new));
      std::string u = b.select(valid, L, softpick_term(b, L, xr, c_new), b.zero(L));
      weights[r] = b.max(L, u, b.zero(L));
      next.push_back({s, c_new});
      next.push_back({t, b.fadd(b.fmul(t, corr), b.reduce_add(L, b.abs(L, u)))});
      acc[r] = b.vscale(acc[r], corr);
    } else if (spec.softmax || spec.shifted_exp()) {
      std::string masked = b.select(valid, L, xr, b.num(-INFINITY, L));
      std::string m_new = b.max(b.scalar, s, b.reduce_max(L, masked));
      // A row that has seen no key yet keeps m = -inf: subtract 0 there, not inf - inf.
      std::string none = b.fcmp("oeq", b.scalar, m_new, b.num(-INFINITY));
      std::string m_sub = b.select(none, b.scalar, b.num(0), m_new);
      std::string corr = b.exp(b.scalar, b.fsub(s, m_sub));
      weights[r] = b.exp(L, b.bin("fsub", L, masked, b.splat(L, m_sub)));
      next.push_back({s, m_new});
      if (spec.softmax) {
        next.push_back({t, b.fadd(b.fmul(t, corr), b.reduce_add(L, weights[r]))});
      } else {  // the weights are scaled by corr, their terms by corr^degree (p-th powers: corr^p)
        std::string corr_p = b.exp(b.scalar, b.fmul(b.fsub(s, m_sub), b.num(norm.term_degree)));
        next.push_back({t, b.fadd(b.fmul(t, corr_p), row_term(b, L, weights[r], valid))});
      }
      acc[r] = b.vscale(acc[r], corr);
    } else {
      std::string sc = emit_expr(b, L, spec.score, {xr, b.splat(L, fi[r]), jpos});
      weights[r] = b.select(valid, L, sc, b.zero(L));
      next.push_back({s, s});  // (unused: the row's state is P alone)
      next.push_back({t, b.fadd(t, row_term(b, L, weights[r], valid))});
    }
  }
  acc = weighted_rows(b, "pv", "kb.body", "%kb", hi[R - 1], {{"%v", weights, acc}})[0];
  for (int r = 0; r < R; ++r) next.push_back({fmt::format("%kb.acc{}", r), acc[r]});
  close_loop(b, "kb", kKeyBlock, next);
  for (int r = 0; r < R; ++r) {
    const std::string s = fmt::format("%kb.s{}", r), t = fmt::format("%kb.t{}", r), a = fmt::format("%kb.acc{}", r);
    std::string second = b.op("add i64 %Tp, " + g.index[r]);
    if (spec.softpick()) {
      // Z = sum |e^x - 1| + eps, shifted by e^-c like its terms.
      std::string Z = b.fadd(t, b.fmul(b.num(kSoftpickEps), b.exp(b.scalar, b.fneg(b.scalar, s))));
      b.store_row(b.vscale(a, b.fdiv(b.num(spec.alpha), Z)), "%o", g.index[r]);
      b.store(Z, "%stats", g.index[r]);
      b.store(s, "%stats", second);
    } else if (spec.softmax) {
      b.store_row(b.vscale(a, b.fdiv(b.num(spec.alpha), t)), "%o", g.index[r]);
      // m and l apart, not m + log l: with large logits the sum would lose log l's digits.
      b.store(s, "%stats", g.index[r]);
      b.store(t, "%stats", second);
    } else {
      // Z and P; for exp under a scale-free normaliser, Z and the row max m
      // (whose slopes read no P).
      std::string Z = safe(b, finish_row(b, t));
      b.store_row(b.vscale(a, b.fdiv(b.num(spec.alpha), Z)), "%o", g.index[r]);
      b.store(Z, "%stats", g.index[r]);
      b.store(spec.shifted_exp() ? s : t, "%stats", second);
    }
  }
  close_loop(b, "qg", R);
  if (nvptx) {
    b.line("br label %exit");
    b.label("exit");
  }
  b.line("ret void");
  std::string decl = nvptx ? "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\ndeclare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
                             "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n\n!nvvm.annotations = !{!0}\n"
                             "!0 = !{ptr @sink_forward, !\"kernel\", i32 1}\n"
                           : "";
  return head + finish(b) + "}\n" + decl;
}

}  // namespace sink::kernels
