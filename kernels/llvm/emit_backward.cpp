// The backward kernel, in two passes (the FlashAttention-2 order):
//   1. rows: delta_i = <dO_i, O_i>, the k* column's dk*, dv* and its part of dq,
//      the sink logit's gradient;
//   2. groups of key rows against blocks of query columns (through q^T and
//      dO^T): dk and dv in registers, reading delta and the row statistics as
//      lane vectors; each dq row is read and written once per key group, not
//      per (query, key) pair; the position-bias gradient by distance.
#include <fmt/format.h>

#include "kernels/kernel_abi.h"
#include "kernels/llvm/generator.h"

namespace sink::kernels {
namespace {
// dk and dv rows of a key group live in registers: fewer rows for wide heads.
int key_rows(int64_t d_head) { return d_head >= 64 ? 2 : 4; }
}  // namespace

std::string Generator::backward() {
  IrText b = body();
  std::string out = "; backward: dq, dk, dv, the position-bias gradient by distance, dk*, dv* and the sink logit's\n" +
                    abi::host_signature(abi::kBackwardSymbol, abi::kBackward) + " {\nentry:\n";
  weights_buffer(b);
  backward_rows(b);
  backward_columns(b);
  b.line("ret void");
  return out + finish(b) + "}\n";
}

void Generator::backward_rows(IrText& b) {
  open_loop(b, "qr", "0", "entry", "icmp slt i64 %qr, %T");
  std::string do_row = b.load_row("%dout", "%qr");
  std::string D = b.dot(do_row, b.load_row("%o", "%qr"));
  b.store(D, "%delta", "%qr");
  std::string dq0 = "zeroinitializer";
  BackwardRow row;
  if (spec.key_bias || spec.sink_logit)
    row = backward_row(b, b.scalar, b.load("%stats", "%qr"), b.load("%stats", b.op("add i64 %Tp, %qr")));
  if (spec.key_bias) {
    b.comment("the k* column");
    std::string q_row = b.load_row("%q", "%qr");
    std::string ks = b.load_vec("%kstar"), vs = b.load_vec("%vstar");
    std::string xs = b.fmul(b.dot(q_row, ks), b.num(scale_qk()));
    auto [A, dx] = column_grad(b, b.scalar, xs, position(b, "%qr"), b.num(0), b.dot(do_row, vs), D, row);
    std::string sdx = b.fmul(dx, b.num(scale_qk()));
    b.accumulate_vec("%dkstar", sdx, q_row);
    b.accumulate_vec("%dvstar", A, do_row);
    dq0 = b.vscale(ks, sdx);
  }
  if (spec.sink_logit) {
    b.comment("the sink logit: its column has no value (dA = 0), so its gradient is -D dZ/ds ds/db / Z");
    auto [A, dx] = column_grad(b, b.scalar, b.load("%sink", "0"), position(b, "%qr"), b.num(0), b.num(0), D, row);
    b.accumulate("%dsink", "0", dx);
  }
  b.store_row(dq0, "%dq", "%qr");
  close_loop(b, "qr", 1);
}

void Generator::backward_columns(IrText& b) {
  const Ty& L = b.lane;
  const int R = key_rows(spec.d_head);
  const std::string vt = fmt::format("<{} x i64>", kKeyBlock);
  open_loop(b, "kg", "0", "qr.exit", "icmp slt i64 %kg, %T");
  RowGroup g = row_group(b, "%kg", R);
  // Queries that can see the group's keys: from those that see its first key to those that see its last.
  const std::string first = query_range(b, "%kg").first, last = query_range(b, g.index[R - 1]).second;
  std::string last_row = b.op("sub i64 %T, 1");
  std::vector<std::string> pos_j(R), k_rows(R);
  std::vector<Carried> carried;
  for (int r = 0; r < R; ++r) {
    pos_j[r] = position(b, g.index[r]);
    k_rows[r] = b.load_row("%k", g.index[r]);
    carried.push_back({fmt::format("%qb.dk{}", r), b.V, "zeroinitializer"});
    carried.push_back({fmt::format("%qb.dv{}", r), b.V, "zeroinitializer"});
  }
  open_loop(b, "qb", first, "kg.body", "icmp sle i64 %qb, " + last, carried);
  std::vector<std::string> rows = clamped_lanes(b, "%qb", last_row);
  std::string lanes = lane_indices(b, "%qb");
  std::string ipos =
      b.op("sitofp " + vt + " " + b.op("add " + vt + " " + lanes + ", " + lane_ints(1, 0)) + " to " + L.ir);
  std::vector<std::string> x = block_dots(b, "%k", g, "%qt", "%qb");
  std::vector<std::string> dA = block_dots(b, "%v", g, "%doutt", "%qb");
  const BackwardRow query_rows = backward_row(b, L, b.load_lanes(b.element_ptr("%stats", "%qb")),
                                              b.load_lanes(b.element_ptr("%stats", b.op("add i64 %Tp, %qb"))));
  std::string D = b.load_lanes(b.element_ptr("%delta", "%qb"));
  // Each query lane's key range, and whether the lane is a row at all.
  const auto [lo, hi] = key_range(b, lanes, true);
  std::string in_T = b.op("icmp slt " + vt + " " + lanes + ", " + splat_int(b, "%T"));
  std::vector<std::string> A(R), sdx(R), sdx_once(R);
  for (int r = 0; r < R; ++r) {
    std::string key = splat_int(b, g.index[r]);
    std::string xr = b.bin("fmul", L, x[r], b.num(scale_qk(), L));
    if (spec.position_bias) {
      std::string bias = "poison";
      for (int w = 0; w < kKeyBlock; ++w) bias = b.insert(bias, b.load("%g", dist(b, rows[w], g.index[r])), w);
      xr = b.bin("fadd", L, xr, bias);
    }
    auto [A_all, dx_all] = column_grad(b, L, xr, ipos, b.splat(L, pos_j[r]), dA[r], D, query_rows);
    std::string seen =
        b.op(fmt::format("and <{} x i1> {}, {}", kKeyBlock, b.op("icmp sle " + vt + " " + key + ", " + hi),
                         b.op("icmp sge " + vt + " " + key + ", " + lo)));
    std::string valid = b.op(fmt::format("and <{} x i1> {}, {}", kKeyBlock, seen, in_T), "valid");
    valid = and_visible_pairs(b, valid, lanes, key);
    A[r] = b.select(valid, L, A_all, b.zero(L));
    std::string dx = b.select(valid, L, dx_all, b.zero(L));
    sdx[r] = b.bin("fmul", L, dx, b.num(scale_qk(), L));
    // A clamped duplicate key recomputes its dk, dv (stored again, unchanged)
    // but must not add to dq or dg twice.
    std::string once = splat_int(b, g.real[r], "i1");
    sdx_once[r] = b.select(once, L, sdx[r], b.zero(L));
    if (spec.position_bias) {
      std::string dx_once = b.select(once, L, dx, b.zero(L));
      for (int w = 0; w < kKeyBlock; ++w) b.accumulate("%dg", dist(b, rows[w], g.index[r]), b.extract(dx_once, w));
    }
  }
  std::vector<std::string> dk(R), dv(R);
  for (int r = 0; r < R; ++r) dk[r] = fmt::format("%qb.dk{}", r), dv[r] = fmt::format("%qb.dv{}", r);
  Scatter dq{"%dq", sdx_once, k_rows};
  auto sums = weighted_rows(b, "qdkv", "qb.body", "%qb", last, {{"%dout", A, dv}, {"%q", sdx, dk}}, &dq);
  dv = sums[0], dk = sums[1];
  std::vector<std::pair<std::string, std::string>> next;
  for (int r = 0; r < R; ++r) {
    next.push_back({fmt::format("%qb.dk{}", r), dk[r]});
    next.push_back({fmt::format("%qb.dv{}", r), dv[r]});
  }
  close_loop(b, "qb", kKeyBlock, next);
  // A clamped duplicate key row stores the same values again.
  for (int r = 0; r < R; ++r) {
    b.store_row(fmt::format("%qb.dk{}", r), "%dk", g.index[r]);
    b.store_row(fmt::format("%qb.dv{}", r), "%dv", g.index[r]);
  }
  close_loop(b, "kg", R);
}

}  // namespace sink::kernels
