{
  // dQ on tensor cores, in the forward's order: a block owns QUERY_ROWS query rows (16 ROW_FRAGS per warp)
  // and streams key and value tiles. Per tile it recomputes S = Q K^T and dA = dO V^T, takes each pair's
  // logit gradient from the forward's row statistics (column_grad), and adds dS K. A pass of its own rather
  // than atomics from the key-side kernel: no float copy of dQ, no conversion pass, the same sums in every run.
  // OVERLAP (Hopper only): the forward's pipeline, the next tile's S and dA issued with this tile's dQ += dS K and
  // folded while it is in flight, over three stages of tiles.
#if SINK_WGMMA  // (Hopper: swizzled tiles that wgmma reads, kernels/cuda/tile_sm90.cuh)
  struct alignas(1024) Shared {
    store_t k_tile[QUERY_STAGES][QUERY_KEYS * D], v_tile[QUERY_STAGES][QUERY_KEYS * D];
  };
#else
  struct alignas(16) Shared {
    store_t k_tile[2][QUERY_KEYS][PITCH], v_tile[2][QUERY_KEYS][PITCH];
  };
#endif
  Shared& shared = shared_block<Shared, QUERY_SHARED_BYTES>();
  auto &k_tile = shared.k_tile, &v_tile = shared.v_tile;
  constexpr int M = ROW_FRAGS;  // 16-row fragments per warp, as in the forward
  const int warp = threadIdx.x / 32;
  const long long bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  const int n = (int)T;  // positions within the slice are 32-bit (tile.cuh)
  // The last row blocks first: under a causal mask they see the most keys, so the blocks that start last
  // are the short ones and the grid's tail packs tighter.
  const int first_row = ((n + QUERY_ROWS - 1) / QUERY_ROWS - 1 - (int)blockIdx.x) * QUERY_ROWS;
  const int warp_row = first_row + 16 * M * warp;
  const int last_row = imin(first_row + QUERY_ROWS - 1, n - 1);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dq += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  unsigned qa[M][D / 16][4], da[M][D / 16][4];
  int row[M][2], lo[M][2], hi[M][2];
  real pos_i[M][2], row_delta[M][2], divisor[M][2], inv_divisor[M][2], shift_or_sum[M][2];
  float dq_acc[M][D / 8][4];
#pragma unroll
  for (int f = 0; f < M; ++f) {
    load_a_rows(qa[f], q, warp_row + 16 * f, n);
    load_a_rows(da[f], dout, warp_row + 16 * f, n);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = imin(warp_row + 16 * f + frag_row(2 * h), n - 1);
      row[f][h] = r, pos_i[f][h] = (real)(r + 1);
      key_range(r, n, lo[f][h], hi[f][h]);
      row_delta[f][h] = delta[r] * DX_SCALE;  // (times column_grad's dx_scale)
      backward_statistics(stats[r], stats[T + r], divisor[f][h], inv_divisor[f][h], shift_or_sum[f][h]);
    }
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dq_acc[f][nb][e] =
            KEY_BIAS ? kstar[head * star_step + frag_col(nb, e)] * dx_kstar[bh * T + row[f][e / 2]] : 0.f;
  }
  int block_lo, block_hi, first_hi, last_lo;
  key_range(first_row, n, block_lo, first_hi);
  key_range(last_row, n, last_lo, block_hi);
  float s[M][QUERY_KEYS / 8][4], dA[M][QUERY_KEYS / 8][4];
  unsigned sa[M][QUERY_KEYS / 16][4];   // dS, dQ += dS K's A (OVERLAP: read by the product until its wait)
  auto issue_scores = [&](int stage) {  // (on Hopper, both products in flight at once)
    issue_abt<QUERY_KEYS, M>(s, qa, k_tile[stage]);
    issue_abt<QUERY_KEYS, M>(dA, da, v_tile[stage]);
  };
  int stage = 0;
  load_pair_async<QUERY_KEYS, QUERY_THREADS>(k_tile[0], v_tile[0], k, v, block_lo, block_hi);
  if (OVERLAP) {  // the first tile's products, the second tile on its way
    await_and_fetch<QUERY_KEYS, QUERY_THREADS>(k_tile, v_tile, 1, k, v, block_lo + QUERY_KEYS, block_hi);
    issue_scores(0);
    await_products<0>(s, dA);
  }
  for (int kb = block_lo; kb <= block_hi; kb += QUERY_KEYS, stage = next_stage<QUERY_STAGES>(stage)) {
    const bool more = kb + QUERY_KEYS <= block_hi;
    if (!OVERLAP) {
      await_and_fetch<QUERY_KEYS, QUERY_THREADS>(k_tile, v_tile, next_stage<QUERY_STAGES>(stage), k, v, kb + QUERY_KEYS,
                                                 block_hi);
      issue_scores(stage);
      await_products<0>(s, dA);
    }
    const bool full = kb >= last_lo && kb + QUERY_KEYS - 1 <= first_hi;
    // (Called with constants: once inlined, the full tile's code has no mask; BELOW as in the forward.)
    auto fold_tile = [&](const bool FULL, const bool BELOW) {
#pragma unroll
      for (int f = 0; f < M; ++f) {
        const real* along[2] = {g, g};
        if (POSITION_BIAS && BELOW) along[0] = below_keys(g, row[f][0], kb), along[1] = below_keys(g, row[f][1], kb);
#pragma unroll
        for (int nb = 0; nb < QUERY_KEYS / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            // (A key after block_hi is hidden.)
            const int j = FULL ? kb + frag_col(nb, e) : imin(kb + frag_col(nb, e), block_hi);
            // (Without a position table, of the product q.k: the scaling folds into the exponent.)
            const real x = !POSITION_BIAS ? s[f][nb][e]
                           : BELOW        ? logit_along(s[f][nb][e], along[h], -(8 * nb + e % 2))
                                          : logit_of(s[f][nb][e], row[f][h], j, g);
            real A, dx;
            column_grad<!POSITION_BIAS>(x, pos_i[f][h], (real)(j + 1), (real)n, dA[f][nb][e], row_delta[f][h],
                                        divisor[f][h], inv_divisor[f][h], shift_or_sum[f][h], A, dx, DX_SCALE);
            s[f][nb][e] = FULL || (kb + frag_col(nb, e) <= hi[f][h] && j >= lo[f][h]) ? dx * (SCALE_QK / DX_SCALE)
                                                                                      : (real)0;  // dS
          }
      }
    };
    if (!full)
      fold_tile(false, false);
    else if (POSITION_BIAS && kb + QUERY_KEYS - 1 > first_row)
      fold_tile(true, false);
    else
      fold_tile(true, true);
    // OVERLAP: dS's registers are rewritten only past the wait for the tile before's product, which read them.
    if (OVERLAP) await_products<0>(dq_acc);
#pragma unroll
    for (int f = 0; f < M; ++f) as_a<QUERY_KEYS>(sa[f], s[f]);
    if (OVERLAP && more) {  // the next tile's products, on the tensor cores while this tile's dS K sums into dQ
      // (every warp is past its wait for the tile before: its stage takes the one after next)
      await_and_fetch<QUERY_KEYS, QUERY_THREADS>(k_tile, v_tile, next_stage<QUERY_STAGES>(stage, 2), k, v,
                                                 kb + 2 * QUERY_KEYS, block_hi);
      issue_scores(next_stage<QUERY_STAGES>(stage));
    }
    issue_ab<QUERY_KEYS, M>(dq_acc, sa, k_tile[stage]);
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
