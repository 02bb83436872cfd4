{
  // The tensor-core forward: a block of warps owns FWD_ROWS query rows, 16 ROW_FRAGS per warp, and streams
  // tiles of FWD_KEYS keys and values through shared memory, the next tile's copy overlapping this one's
  // products. Scores stay in registers: S = Q K^T on tensor cores, the algebra's fold on S's fragments, the
  // weights rounded to 16 bits as the A operand of O += W V. On Hopper (SINK_WGMMA) the products are warpgroup
  // multiplies reading swizzled tiles (kernels/cuda/tile_sm90.cuh), the rest the same code. OVERLAP (Hopper only):
  // FlashAttention-3's pipeline within a warpgroup, the products asynchronous: the next tile's S = Q K^T is issued
  // with this tile's O += W V, and the fold of those scores runs while O's product is in flight (three stages of
  // tiles: the next one's keys read while this one's values still are, the one after on its way).
  auto& shared = shared_block<KeyValueTiles<FWD_KEYS, FWD_STAGES>, FWD_SHARED_BYTES>();
  // A warp owns M = ROW_FRAGS fragments of 16 rows; the lane holds two rows of each (h = 0, 1: lane_row(h)).
  constexpr int M = ROW_FRAGS;
  long long bh, head;
  int n, first_row, last_row, warp_row;
  place_row_block<FWD_ROWS, M>(T, H, bh, head, n, first_row, last_row, warp_row);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, o += bh * T * D, stats += bh * 2 * T;
  if (POSITION_BIAS) g += head * g_step;
  if (KEY_BIAS) kstar += head * star_step, vstar += head * star_step;
  if (SINK_LOGIT) sink += head;
  PackedTile<D> qa[M];
  FloatTile<D> acc[M];
  RowState<M> state;
  const unsigned ones = pack_rn<HALF_MMA>(1.f, 1.f);
#pragma unroll
  for (int f = 0; f < M; ++f) load_a_rows(qa[f], q, warp_row + 16 * f, n), acc[f].zero(), state.row_sum[f].zero();
  WarpRows<M> rows;
#pragma unroll
  for (int f = 0; f < M; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rows.set(f, h, warp_row, n);
      state.m[f][h] = SHIFT_START, state.P[f][h] = 0;
    }
  // The k* column (value v*) and the sink logit (no value) first. The four lanes of a row fold them alike (the
  // same running state); one of them counts their terms in its share of the row's sum.
  if (KEY_BIAS || SINK_LOGIT) {
#pragma unroll
    for (int f = 0; f < M; ++f) {
      real q_kstar[2];
      if (KEY_BIAS) rows_dot(qa[f], kstar, q_kstar);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        real own = 0, w, rescale;
        real &m = state.m[f][h], pos_i = rows.pos_i[f][h];
        if (KEY_BIAS) {
          fold_column(q_kstar[h] * SCALE_QK, pos_i, (real)0, (real)n, m, own, w, rescale);
          acc[f].fill_row(h, [&](int c) { return w * vstar[c]; });
        }
        if (SINK_LOGIT) {
          fold_column(sink[0], pos_i, (real)0, (real)n, m, own, w, rescale);
          acc[f].scale_row(h, rescale);
        }
        state.P[f][h] = row_leader() ? own : (real)0;
        state.row_sum[f].fill_row(h, [&](int) { return own; });
      }
    }
  }
  const BlockKeys block = block_keys(first_row, last_row, n);
  auto keys = key_stream<FWD_KEYS, FWD_THREADS, FWD_STAGES>(shared.k_tile, shared.v_tile, k, v, block.hi);
  FloatTile<FWD_KEYS> s[M];    // S = Q K^T, folded into the weights W
  PackedTile<FWD_KEYS> wa[M];  // W, O += W V's A (OVERLAP: read by the product until its wait)
  keys.start(block.lo);
  if (OVERLAP) keys.fetch(block.lo, 1), issue_abt<FWD_KEYS, M>(s, qa, keys.keys()), await_products<0>(s);
  for (int kb = block.lo; kb <= block.hi; kb += FWD_KEYS, keys.advance()) {
    if (!OVERLAP) keys.fetch(kb, 1), issue_abt<FWD_KEYS, M>(s, qa, keys.keys()), await_products<0>(s);
    real o_rescale[M][2];  // OVERLAP: the rescale of O's rows this tile's maxima ask for
    by_tile_kind<FWD_KEYS>(block, kb, [&](const bool FULL, const bool BELOW) {
      fold_tile<FWD_KEYS>(s, state, acc, o_rescale, rows, kb, n, g, FULL, BELOW);
    });
    // OVERLAP: the tile before's O += W V lands, then takes this tile's rescale; the weights' registers are
    // rewritten only past this wait for the product that read them.
    if (OVERLAP) await_products<0>(acc), rescale_rows(acc, o_rescale);
    weights_operand<FWD_KEYS>(wa, s, state, ones);
    // OVERLAP: the next tile's scores, on the tensor cores while this tile's weights sum into O (every warp is past
    // its wait for the tile before: its stage takes the one after next)
    if (OVERLAP && kb + FWD_KEYS <= block.hi) keys.fetch(kb, 2), issue_abt<FWD_KEYS, M>(s, qa, keys.keys(1));
    issue_ab<FWD_KEYS, M>(acc, wa, keys.values());
    if (OVERLAP)
      await_products<1>(s);  // the next tile's scores; O's product goes on through their fold
    else
      await_products<0>(acc);
  }
  if (OVERLAP) await_products<0>(acc);
#pragma unroll
  for (int f = 0; f < M; ++f) {
    float scale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const real total = SUM_OF_WEIGHTS ? state.row_sum[f].row_value(h) : quad_sum(state.P[f][h]);
      const FinishedRow finished = finish_row(total, state.m[f][h]);
      if (row_leader() && WarpRows<M>::unclamped(f, h, warp_row) < n)
        stats[rows.row[f][h]] = finished.divisor, stats[T + rows.row[f][h]] = finished.shift_or_sum;
      scale[h] = r_div(ALPHA, finished.Z);
    }
    store_rows(o, acc[f], warp_row + 16 * f, n, scale);
  }
}
