// sink_backward_queries's body without tensor cores: dQ of a row per thread, keys through shared-memory tiles
{
  __shared__ real q_own[QUERY_ROWS][D + 1], do_own[QUERY_ROWS][D + 1];
  __shared__ real k_tile[QUERY_KEYS][D], v_tile[QUERY_KEYS][D];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_row = (long long)blockIdx.x * QUERY_ROWS, i = first_row + threadIdx.x;
  const bool is_row = i < T;
  const long long row = is_row ? i : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dq += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  for (int d = 0; d < D; ++d)
    q_own[threadIdx.x][d] = load(q, row * D + d), do_own[threadIdx.x][d] = load(dout, row * D + d);
  const real row_delta = delta[row], divisor = stats[row], inv_divisor = r_div(1, divisor),
             shift_or_sum = stats[T + row], pos_i = (real)(row + 1);
  real dq_acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) dq_acc[d] = KEY_BIAS ? kstar[head * star_step + d] * dx_kstar[bh * T + row] : (real)0;
  long long lo, hi, block_lo, block_hi, unused;
  key_range(row, T, lo, hi);
  key_range(first_row, T, block_lo, unused);
  key_range(imin(first_row + QUERY_ROWS - 1, T - 1), T, unused, block_hi);
  for (long long kb = block_lo; kb <= block_hi; kb += QUERY_KEYS) {
    __syncthreads();
    load_tiles<QUERY_KEYS, QUERY_ROWS>(k_tile, v_tile, k, v, kb, block_hi);
    __syncthreads();
    const int n = (int)imin(QUERY_KEYS, block_hi - kb + 1);
    for (int c = 0; c < n; ++c) {
      const long long j = kb + c;
      if (!is_row || !SEES(row, j, lo, hi, T)) continue;
      real x = 0, dA = 0;
#pragma unroll
      for (int d = 0; d < D; ++d)
        x += q_own[threadIdx.x][d] * k_tile[c][d], dA += do_own[threadIdx.x][d] * v_tile[c][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(row, j)];
      real A, dx;
      column_grad(x, pos_i, (real)(j + 1), (real)T, dA, row_delta, divisor, inv_divisor, shift_or_sum, A, dx);
      const real sdx = dx * SCALE_QK;
#pragma unroll
      for (int d = 0; d < D; ++d) dq_acc[d] += sdx * k_tile[c][d];
    }
  }
  if (!is_row) return;  // after the last barrier
#pragma unroll
  for (int d = 0; d < D; ++d) store(dq, row * D + d, dq_acc[d]);
}
