// The forward kernel: groups of kForwardRows query rows against blocks of
// kKeyBlock key columns. Each block's columns of k^T are loaded once for the
// whole group and each v row once per block; the online form rescales its
// running sums once per block (max-subtracted).
#include <cmath>
#include <fmt/format.h>

#include "kernels/kernel_abi.h"
#include "kernels/llvm/generator.h"

namespace sink::kernels {
namespace {
constexpr int kForwardRows = 4;
}

std::string Generator::forward() {
  IrText b = body();
  const Ty& L = b.lane;
  const std::string V = b.V;
  const int R = kForwardRows;
  const std::string head = "; forward: o and the per-row statistics stats[0][i], stats[1][i]\n" +
                           abi::host_signature(abi::kForwardSymbol, abi::kForward) + " {\nentry:\n";
  weights_buffer(b);
  open_loop(b, "qg", "0", "entry", "icmp slt i64 %qg, %T");
  RowGroup g = row_group(b, "%qg", R);
  std::vector<std::string> lo(R), hi(R), pos_i(R);
  for (int r = 0; r < R; ++r) {
    std::tie(lo[r], hi[r]) = key_range(b, g.index[r]);
    pos_i[r] = position(b, g.index[r]);
  }
  // Per row: acc (the sum of weights x v), the shift m (the online form) and the sum of terms P. The k* column
  // (value v*, every query sees it) and the sink logit (no value) are folded in first.
  std::vector<Carried> carried;
  for (int r = 0; r < R; ++r) {
    RowState row{b.num(spec.online ? norm.row->shift_floor : -INFINITY), b.num(0)};
    std::string acc0 = "zeroinitializer";
    auto fold = [&](const std::string& x, const std::string* value) {
      Folded f = fold_columns(b, b.scalar, row, x, pos_i[r], b.num(0));
      if (!f.rescale.empty()) acc0 = b.vscale(acc0, f.rescale);
      if (value) acc0 = b.vfma(acc0, f.weights, *value);
      row = f.row;
    };
    if (spec.key_bias) {
      b.comment("the k* column: every query sees it; its value is v*");
      const std::string vs = b.load_vec("%vstar");
      fold(b.fmul(b.dot(b.load_row("%q", g.index[r]), b.load_vec("%kstar")), b.num(scale_qk())), &vs);
    }
    if (spec.sink_logit) {
      b.comment("the sink logit b: one more column, with no value");
      fold(b.load("%sink", "0"), nullptr);
    }
    carried.push_back({fmt::format("%kb.acc{}", r), V, acc0});
    carried.push_back({fmt::format("%kb.m{}", r), b.F, row.m});
    carried.push_back({fmt::format("%kb.P{}", r), b.F, row.P});
  }
  open_loop(b, "kb", lo[0], "qg.body", "icmp sle i64 %kb, " + hi[R - 1], carried);
  std::vector<std::string> cols = clamped_lanes(b, "%kb", hi[R - 1]);
  std::string lanes = lane_indices(b, "%kb");
  const std::string vt = fmt::format("<{} x i64>", kKeyBlock);
  std::string jpos =
      b.op("sitofp " + vt + " " + b.op("add " + vt + " " + lanes + ", " + lane_ints(1, 0)) + " to " + L.ir);
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
    valid = and_visible_pairs(b, valid, splat_int(b, g.index[r]), lanes);
    const RowState row{fmt::format("%kb.m{}", r), fmt::format("%kb.P{}", r)};
    acc[r] = fmt::format("%kb.acc{}", r);
    // One rescale of the block's running sums as m grows (online, max-subtracted), not one per column.
    Folded f = fold_columns(b, L, row, xr, b.splat(L, pos_i[r]), jpos, valid);
    weights[r] = f.weights;
    if (!f.rescale.empty()) acc[r] = b.vscale(acc[r], f.rescale);
    next.push_back({row.m, spec.online ? f.row.m : row.m});
    next.push_back({row.P, f.row.P});
  }
  acc = weighted_rows(b, "pv", "kb.body", "%kb", hi[R - 1], {{"%v", weights, acc}})[0];
  for (int r = 0; r < R; ++r) next.push_back({fmt::format("%kb.acc{}", r), acc[r]});
  close_loop(b, "kb", kKeyBlock, next);
  for (int r = 0; r < R; ++r) {
    const RowState row{fmt::format("%kb.m{}", r), fmt::format("%kb.P{}", r)};
    const FinishedRow finished = finish_row(b, row);
    b.store_row(b.vscale(fmt::format("%kb.acc{}", r), b.fdiv(b.num(spec.alpha), finished.Z)), "%o", g.index[r]);
    b.store(finished.divisor, "%stats", g.index[r]);
    b.store(finished.shift_or_sum, "%stats", b.op("add i64 %Tp, " + g.index[r]));
  }
  close_loop(b, "qg", R);
  b.line("ret void");
  return head + finish(b) + "}\n";
}

}  // namespace sink::kernels
