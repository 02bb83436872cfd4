{
  // The tensor-core forward: a block of warps owns FWD_ROWS query rows, 16 ROW_FRAGS per warp, and streams
  // tiles of FWD_KEYS keys and values through shared memory, the next tile's copy overlapping this one's
  // products. Scores stay in registers: S = Q K^T on tensor cores, the algebra's fold on S's fragments, the
  // weights rounded to 16 bits as the A operand of O += W V. On Hopper (SINK_WGMMA) the products are warpgroup
  // multiplies reading swizzled tiles (kernels/cuda/tile_sm90.cuh), the rest the same code. OVERLAP (Hopper only):
  // FlashAttention-3's pipeline within a warpgroup, the products asynchronous: the next tile's S = Q K^T is issued
  // with this tile's O += W V, and the fold of those scores runs while O's product is in flight (three stages of
  // tiles: the next one's keys read while this one's values still are, the one after on its way).
#if SINK_WGMMA
  struct alignas(1024) Shared {
    store_t k_tile[FWD_STAGES][FWD_KEYS * D], v_tile[FWD_STAGES][FWD_KEYS * D];
  };
#else
  struct alignas(16) Shared {
    store_t k_tile[2][FWD_KEYS][PITCH], v_tile[2][FWD_KEYS][PITCH];
  };
#endif
  Shared& shared = shared_block<Shared, FWD_SHARED_BYTES>();
  auto &k_tile = shared.k_tile, &v_tile = shared.v_tile;
  // A warp owns M = ROW_FRAGS fragments of 16 rows; the lane holds two rows of each (h = 0, 1: frag_row(2 h)).
  constexpr int M = ROW_FRAGS;
  constexpr bool OF_PRODUCT = !POSITION_BIAS;  // the logit is the product's scaling alone
  const int warp = threadIdx.x / 32, lane = lane_id();
  const long long bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  const int n = (int)T;  // positions within the slice are 32-bit (tile.cuh)
  // The last row blocks first: under a causal mask they see the most keys, so the blocks that start last
  // are the short ones and the grid's tail packs tighter.
  const int first_row = ((n + FWD_ROWS - 1) / FWD_ROWS - 1 - (int)blockIdx.x) * FWD_ROWS;
  const int warp_row = first_row + 16 * M * warp;
  const int last_row = imin(first_row + FWD_ROWS - 1, n - 1);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, o += bh * T * D, stats += bh * 2 * T;
  if (POSITION_BIAS) g += head * g_step;
  if (KEY_BIAS) kstar += head * star_step, vstar += head * star_step;
  if (SINK_LOGIT) sink += head;
  unsigned qa[M][D / 16][4];
  float acc[M][D / 8][4];
  // SUM_OF_WEIGHTS: the rows' sums as W times a block of ones on the tensor cores, the rounded weights that O
  // sums; the block's eight columns each hold the sum, in every lane of the row (the four lanes' shares summed).
  // Otherwise P, the lane's share of its rows' sums of terms.
  float row_sum[M][4];
  const unsigned ones = pack_rn<HALF_MMA>(1.f, 1.f);
#pragma unroll
  for (int f = 0; f < M; ++f) {
    load_a_rows(qa[f], q, warp_row + 16 * f, n), zero(acc[f]);
#pragma unroll
    for (int e = 0; e < 4; ++e) row_sum[f][e] = 0;
  }
  // Rows from T on act as row T - 1 and are not written.
  int row[M][2], lo[M][2], hi[M][2];
  real pos_i[M][2], m[M][2], P[M][2];
#pragma unroll
  for (int f = 0; f < M; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[f][h] = imin(warp_row + 16 * f + frag_row(2 * h), n - 1), pos_i[f][h] = (real)(row[f][h] + 1);
      key_range(row[f][h], n, lo[f][h], hi[f][h]);
      m[f][h] = ONLINE ? SHIFT_FLOOR : -SINK_INF, P[f][h] = 0;
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
        if (KEY_BIAS) {
          fold_column(q_kstar[h] * SCALE_QK, pos_i[f][h], (real)0, (real)n, m[f][h], own, w, rescale);
#pragma unroll
          for (int nb = 0; nb < D / 8; ++nb)
            acc[f][nb][2 * h] = w * vstar[frag_col(nb, 0)], acc[f][nb][2 * h + 1] = w * vstar[frag_col(nb, 1)];
        }
        if (SINK_LOGIT) {
          fold_column(sink[0], pos_i[f][h], (real)0, (real)n, m[f][h], own, w, rescale);
          scale_row<D>(acc[f], h, rescale);
        }
        P[f][h] = lane % 4 == 0 ? own : (real)0;
        row_sum[f][2 * h] = row_sum[f][2 * h + 1] = own;
      }
    }
  }
  int block_lo, block_hi, first_hi, last_lo;
  key_range(first_row, n, block_lo, first_hi);
  key_range(last_row, n, last_lo, block_hi);
  float s[M][FWD_KEYS / 8][4];
  unsigned wa[M][FWD_KEYS / 16][4];  // the weights, O += W V's A (OVERLAP: read by the product until its wait)
  auto issue_scores = [&](int stage) { issue_abt<FWD_KEYS, M>(s, qa, k_tile[stage]); };
  int stage = 0;
  load_pair_async<FWD_KEYS, FWD_THREADS>(k_tile[0], v_tile[0], k, v, block_lo, block_hi);
  if (OVERLAP) {  // the first tile's products, the second tile on its way
    await_and_fetch<FWD_KEYS, FWD_THREADS>(k_tile, v_tile, 1, k, v, block_lo + FWD_KEYS, block_hi);
    issue_scores(0);
    await_products<0>(s);
  }
  for (int kb = block_lo; kb <= block_hi; kb += FWD_KEYS, stage = next_stage<FWD_STAGES>(stage)) {
    const bool more = kb + FWD_KEYS <= block_hi;
    if (!OVERLAP) {
      await_and_fetch<FWD_KEYS, FWD_THREADS>(k_tile, v_tile, next_stage<FWD_STAGES>(stage), k, v, kb + FWD_KEYS,
                                             block_hi);
      issue_scores(stage);
      await_products<0>(s);
    }
    // OVERLAP: the rescale of O's rows this tile's maxima ask for, applied once the product in flight has landed.
    real o_rescale[M][2];
    // Every row of the block sees every key of the tile (the code without masks), or the mask is decided per
    // element, a hidden pair computed as x = shift (any finite logit would do) and dropped by selects. BELOW:
    // the tile is at or below every row's diagonal (a position table read along it, tile.cuh's logit_along).
    // Without a position table S keeps the products q.k (OF_PRODUCT): the maximum is taken on them (the scale
    // is positive and rounding monotone, so the scaled maximum is the maximum of the scaled) and the scaling
    // goes into the exponent's multiply-add, one multiply a pair fewer. (Called with constants: once inlined,
    // each call is its own code.)
    auto fold_tile = [&](const bool FULL, const bool BELOW) {
#pragma unroll
      for (int f = 0; f < M; ++f) {
        // Four running maxima a row (and two sums), each over a quarter (a half) of the tile's columns: dependent
        // chains a quarter (a half) as long as one running maximum's, then combined (max is exact in any order).
        real tile_max[2][4], tile_sum[2][2] = {{0, 0}, {0, 0}};
        const real* along[2] = {g, g};
        if (POSITION_BIAS && BELOW) along[0] = below_keys(g, row[f][0], kb), along[1] = below_keys(g, row[f][1], kb);
#pragma unroll
        for (int nb = 0; nb < FWD_KEYS / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            const int j = kb + frag_col(nb, e);
            const bool seen = FULL || (j >= lo[f][h] && j <= hi[f][h]);
            const real x = OF_PRODUCT ? s[f][nb][e]
                           : BELOW    ? logit_along(s[f][nb][e], along[h], -(8 * nb + e % 2))
                                      : logit_of(s[f][nb][e], row[f][h], j, g);
            s[f][nb][e] = seen ? x : -SINK_INF;
            real& chain = tile_max[h][nb % 2 * 2 + e % 2];
            if (ONLINE) chain = nb < 2 ? s[f][nb][e] : r_fmax(chain, s[f][nb][e]);  // (unrolled: no select)
          }
        real shift[2] = {0, 0}, unit[2] = {1, 1};
        if (ONLINE) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const real lane_max =
                r_fmax(r_fmax(tile_max[h][0], tile_max[h][1]), r_fmax(tile_max[h][2], tile_max[h][3]));
            const real new_max = quad_max(lane_max) * (OF_PRODUCT ? SCALE_QK : (real)1);
            if (OVERLAP) o_rescale[f][h] = 1;
            if (new_max > m[f][h]) {  // fold_column's rescale, for the whole tile at once
              const real rescale = r_exp(m[f][h] - new_max);
              P[f][h] *= term_power(rescale);
              row_sum[f][2 * h] *= rescale, row_sum[f][2 * h + 1] *= rescale;
              if (OVERLAP)
                o_rescale[f][h] = rescale;
              else
                scale_row<D>(acc[f], h, rescale);
              m[f][h] = new_max;
            }
            shift[h] = shift_of(m[f][h]), unit[h] = r_exp(-shift[h]);
          }
        }
#pragma unroll
        for (int nb = 0; nb < FWD_KEYS / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            const bool hidden = !FULL && s[f][nb][e] == -SINK_INF;
            const real pos_j = (real)(kb + frag_col(nb, e) + 1);
            real x, sc;  // the logit, its score
            if (OF_PRODUCT) {
              const real product = hidden ? shift[h] * (1 / SCALE_QK) : s[f][nb][e];
              sc = score_of_product(product, shift[h], pos_i[f][h], pos_j, (real)n), x = product * SCALE_QK;
            } else {
              x = hidden ? shift[h] : s[f][nb][e], sc = score(x, shift[h], pos_i[f][h], pos_j, (real)n);
            }
            if (!SUM_OF_WEIGHTS) tile_sum[h][e % 2] += hidden ? (real)0 : norm_term(sc, x, unit[h]);
            s[f][nb][e] = hidden ? (real)0 : norm_weight(sc, x, unit[h]);
          }
        if (!SUM_OF_WEIGHTS) P[f][0] += tile_sum[0][0] + tile_sum[0][1], P[f][1] += tile_sum[1][0] + tile_sum[1][1];
      }
    };
    if (kb < last_lo || kb + FWD_KEYS - 1 > first_hi)
      fold_tile(false, false);
    else if (POSITION_BIAS && kb + FWD_KEYS - 1 > first_row)  // (without a table, one code for full tiles)
      fold_tile(true, false);
    else
      fold_tile(true, true);
    // OVERLAP: the tile before's O += W V lands, then takes this tile's rescale; the weights' registers are
    // rewritten only past this wait for the product that read them.
    if (OVERLAP) {
      await_products<0>(acc);
#pragma unroll
      for (int f = 0; f < M; ++f)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (ONLINE && o_rescale[f][h] != 1) scale_row<D>(acc[f], h, o_rescale[f][h]);
    }
#pragma unroll
    for (int f = 0; f < M; ++f) {
      as_a<FWD_KEYS>(wa[f], s[f]);
      if (SUM_OF_WEIGHTS)
#pragma unroll
        for (int kk = 0; kk < FWD_KEYS / 16; ++kk) mma_16816<HALF_MMA>(row_sum[f], wa[f][kk], ones, ones);
    }
    if (OVERLAP && more) {  // the next tile's scores, on the tensor cores while this tile's weights sum into O
      // (every warp is past its wait for the tile before: its stage takes the one after next)
      await_and_fetch<FWD_KEYS, FWD_THREADS>(k_tile, v_tile, next_stage<FWD_STAGES>(stage, 2), k, v, kb + 2 * FWD_KEYS,
                                             block_hi);
      issue_scores(next_stage<FWD_STAGES>(stage));
    }
    issue_ab<FWD_KEYS, M>(acc, wa, v_tile[stage]);
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
      const real total = SUM_OF_WEIGHTS ? row_sum[f][2 * h] : quad_sum(P[f][h]);
      // Z and m apart, not m + log Z: with large logits the sum would lose log Z's digits.
      const real Z = safe(norm_finish(total, ONLINE ? r_exp(-shift_of(m[f][h])) : (real)1));
      if (lane % 4 == 0 && warp_row + 16 * f + frag_row(2 * h) < n)
        stats[row[f][h]] = Z, stats[T + row[f][h]] = ONLINE ? m[f][h] : total;
      scale[h] = r_div(ALPHA, Z);
    }
    store_rows(o, acc[f], warp_row + 16 * f, n, scale);
  }
}
