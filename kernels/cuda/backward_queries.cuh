{
  // dQ on tensor cores, in the forward's order: a block owns QUERY_ROWS query rows (16 ROW_FRAGS per warp)
  // and streams key and value tiles. Per tile it recomputes S = Q K^T and dA = dO V^T, takes each pair's
  // logit gradient from the forward's row statistics (column_grad), and adds dS K. A pass of its own rather
  // than atomics from the key-side kernel: no float copy of dQ, no conversion pass, the same sums in every run.
  // OVERLAP (Hopper only): the forward's pipeline, the next tile's S and dA issued with this tile's dQ += dS K and
  // folded while it is in flight, over three stages of tiles.
  auto& shared = shared_block<KeyValueTiles<QUERY_KEYS, QUERY_STAGES>, QUERY_SHARED_BYTES>();
  constexpr int M = ROW_FRAGS;  // 16-row fragments per warp, as in the forward
  long long bh, head;
  int n, first_row, last_row, warp_row;
  place_row_block<QUERY_ROWS, M>(T, H, bh, head, n, first_row, last_row, warp_row);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dq += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  PackedTile<D> qa[M], da[M];
  WarpRows<M> rows;
  real row_delta[M][2], divisor[M][2], inv_divisor[M][2], shift_or_sum[M][2];
  FloatTile<D> dq_acc[M];
#pragma unroll
  for (int f = 0; f < M; ++f) {
    load_a_rows(qa[f], q, warp_row + 16 * f, n);
    load_a_rows(da[f], dout, warp_row + 16 * f, n);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = rows.set(f, h, warp_row, n);
      row_delta[f][h] = delta[r] * DX_SCALE;  // (times column_grad's dx_scale)
      backward_statistics(stats[r], stats[T + r], divisor[f][h], inv_divisor[f][h], shift_or_sum[f][h]);
    }
    if (KEY_BIAS)  // (dQ's k* term, kstar dx_kstar, first)
      dq_acc[f].set(
          [&](const Element& at) { return kstar[head * star_step + at.col()] * dx_kstar[bh * T + rows.row[f][at.h]]; });
    else
      dq_acc[f].zero();
  }
  const BlockKeys block = block_keys(first_row, last_row, n);
  auto keys = key_stream<QUERY_KEYS, QUERY_THREADS, QUERY_STAGES>(shared.k_tile, shared.v_tile, k, v, block.hi);
  FloatTile<QUERY_KEYS> s[M], dA[M];    // S = Q K^T, turned into dS; dA = dO V^T
  PackedTile<QUERY_KEYS> sa[M];         // dS, dQ += dS K's A (OVERLAP: read by the product until its wait)
  auto issue_scores = [&](int ahead) {  // (on Hopper, both products in flight at once)
    issue_abt<QUERY_KEYS, M>(s, qa, keys.keys(ahead));
    issue_abt<QUERY_KEYS, M>(dA, da, keys.values(ahead));
  };
  keys.start(block.lo);
  if (OVERLAP) keys.fetch(block.lo, 1), issue_scores(0), await_products<0>(s, dA);
  for (int kb = block.lo; kb <= block.hi; kb += QUERY_KEYS, keys.advance()) {
    if (!OVERLAP) keys.fetch(kb, 1), issue_scores(0), await_products<0>(s, dA);
    by_tile_kind<QUERY_KEYS>(block, kb, [&](const bool FULL, const bool BELOW) {
      gradient_tile<QUERY_KEYS>(s, dA, rows, row_delta, divisor, inv_divisor, shift_or_sum, kb, block.hi, n, g, FULL,
                                BELOW);
    });
    // OVERLAP: dS's registers are rewritten only past the wait for the tile before's product, which read them.
    if (OVERLAP) await_products<0>(dq_acc);
#pragma unroll
    for (int f = 0; f < M; ++f) as_a(sa[f], s[f]);
    // OVERLAP: the next tile's products, on the tensor cores while this tile's dS K sums into dQ (every warp is past
    // its wait for the tile before: its stage takes the one after next)
    if (OVERLAP && kb + QUERY_KEYS <= block.hi) keys.fetch(kb, 2), issue_scores(1);
    issue_ab<QUERY_KEYS, M>(dq_acc, sa, keys.keys());
    if (OVERLAP)
      await_products<1>(s, dA);  // the next tile's; dQ's product goes on through their fold
    else
      await_products<0>(dq_acc);
  }
  if (OVERLAP) await_products<0>(dq_acc);
  const float one[2] = {1, 1};
#pragma unroll
  for (int f = 0; f < M; ++f) store_rows(dq, dq_acc[f], warp_row + 16 * f, n, one);
}
