{
  // dQ on tensor cores, in the forward's order: a block owns QUERY_ROWS query rows and streams key and value
  // tiles. Per tile it recomputes S = Q K^T and dA = dO V^T, takes each pair's logit gradient from the
  // forward's row statistics (column_grad), and adds dS K. A pass of its own rather than atomics from the
  // key-side kernel: no float copy of dQ, no conversion pass, the same sums in every run.
  __shared__ __align__(16) store_t k_tile[2][QUERY_KEYS][PITCH], v_tile[2][QUERY_KEYS][PITCH];
  const int warp = threadIdx.x / 32;
  const long long bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  const int n = (int)T;  // positions within the slice are 32-bit (tile.cuh)
  const int first_row = (int)blockIdx.x * QUERY_ROWS, warp_row = first_row + 16 * warp;
  const int last_row = imin(first_row + QUERY_ROWS - 1, n - 1);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dq += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  unsigned qa[D / 16][4], da[D / 16][4];
  load_a_rows(qa, q, warp_row, n);
  load_a_rows(da, dout, warp_row, n);
  int row[2], lo[2], hi[2];
  real fi[2], Dd[2], st0[2], inv_st0[2], st1[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row[h] = imin(warp_row + frag_row(2 * h), n - 1), fi[h] = (real)(row[h] + 1);
    key_range(row[h], n, lo[h], hi[h]);
    Dd[h] = delta[row[h]], st0[h] = stats[row[h]], inv_st0[h] = r_div(1, st0[h]), st1[h] = stats[T + row[h]];
  }
  float dq_acc[D / 8][4];
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dq_acc[nb][e] = KEY_BIAS ? kstar[head * star_step + frag_col(nb, e)] * sdxstar[bh * T + row[e / 2]] : 0.f;
  int block_lo, block_hi, first_hi, last_lo;
  key_range(first_row, n, block_lo, first_hi);
  key_range(last_row, n, last_lo, block_hi);
  int stage = 0;
  load_pair_async<QUERY_KEYS, QUERY_THREADS>(k_tile[0], v_tile[0], k, v, block_lo, block_hi);
  for (int kb = block_lo; kb <= block_hi; kb += QUERY_KEYS, stage ^= 1) {
    const bool more = kb + QUERY_KEYS <= block_hi;
    if (more)
      load_pair_async<QUERY_KEYS, QUERY_THREADS>(k_tile[stage ^ 1], v_tile[stage ^ 1], k, v, kb + QUERY_KEYS, block_hi);
    wait_for_stage(more);
    float s[QUERY_KEYS / 8][4], dA[QUERY_KEYS / 8][4];
    zero(s), zero(dA);
    mma_abt<QUERY_KEYS>(s, qa, k_tile[stage]);
    mma_abt<QUERY_KEYS>(dA, da, v_tile[stage]);
    const bool full = kb >= last_lo && kb + QUERY_KEYS - 1 <= first_hi;
    // (Called with a constant: once inlined, the full tile's code has no mask.)
    auto fold_tile = [&](const bool FULL) {
#pragma unroll
      for (int nb = 0; nb < QUERY_KEYS / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e / 2;
          const int j = FULL ? kb + frag_col(nb, e) : imin(kb + frag_col(nb, e), block_hi);  // (after block_hi: hidden)
          real A, dx;
          column_grad(logit_of(s[nb][e], row[h], j, g), fi[h], (real)(j + 1), (real)n, dA[nb][e], Dd[h], st0[h],
                      inv_st0[h], st1[h], A, dx);
          s[nb][e] = FULL || (kb + frag_col(nb, e) <= hi[h] && j >= lo[h]) ? dx * SCALE_QK : (real)0;
        }
    };
    if (full)
      fold_tile(true);
    else
      fold_tile(false);
    unsigned sa[QUERY_KEYS / 16][4];
    as_a<QUERY_KEYS>(sa, s);
    mma_ab<QUERY_KEYS>(dq_acc, sa, k_tile[stage]);
    __syncthreads();  // every warp is done with this stage before the next iteration's copy refills it
  }
  const float one[2] = {1, 1};
  store_rows(dq, dq_acc, warp_row, n, one);
}
