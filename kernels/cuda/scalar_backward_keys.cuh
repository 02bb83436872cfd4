// sink_backward_keys's body without tensor cores: dK, dV (and dg) of a key per thread, queries through shared-memory
// tiles
{
  // The block's own key and value rows, padded to D + 1 so the threads' rows fall in different banks.
  __shared__ real k_own[KEY_ROWS][D + 1], v_own[KEY_ROWS][D + 1];
  __shared__ real q_tile[KEY_QUERIES][D], do_tile[KEY_QUERIES][D];
  __shared__ real divisor_tile[KEY_QUERIES], shift_or_sum_tile[KEY_QUERIES], delta_tile[KEY_QUERIES];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_key = (long long)blockIdx.x * KEY_ROWS, j = first_key + threadIdx.x;
  const bool is_key = j < T;
  const long long key = is_key ? j : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dk += bh * T * D, dv += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_GRAD) dg += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  for (int d = 0; d < D; ++d)
    k_own[threadIdx.x][d] = load(k, key * D + d), v_own[threadIdx.x][d] = load(v, key * D + d);
  real dk_acc[D], dv_acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) dk_acc[d] = 0, dv_acc[d] = 0;
  const real pos_j = (real)(key + 1);
  long long first, last, unused;
  query_range(first_key, T, first, unused);
  query_range(imin(first_key + KEY_ROWS - 1, T - 1), T, unused, last);
  for (long long qb = first; qb <= last; qb += KEY_QUERIES) {
    __syncthreads();
    load_tiles<KEY_QUERIES, KEY_ROWS>(q_tile, do_tile, q, dout, qb, last);
    for (int r = threadIdx.x; r < KEY_QUERIES; r += KEY_ROWS) {
      const long long i = qb + r;
      divisor_tile[r] = i <= last ? stats[i] : (real)0;
      shift_or_sum_tile[r] = i <= last ? stats[T + i] : (real)0;
      delta_tile[r] = i <= last ? delta[i] : (real)0;
    }
    __syncthreads();
    const int n = (int)imin(KEY_QUERIES, last - qb + 1);
    for (int r = 0; r < n; ++r) {
      const long long i = qb + r;
      long long lo, hi;
      key_range(i, T, lo, hi);
      if (!is_key || !SEES(i, key, lo, hi, T)) continue;
      real x = 0, dA = 0;
#pragma unroll
      for (int d = 0; d < D; ++d)
        x += q_tile[r][d] * k_own[threadIdx.x][d], dA += do_tile[r][d] * v_own[threadIdx.x][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(i, key)];
      real A, dx;
      column_grad(x, (real)(i + 1), pos_j, (real)T, dA, delta_tile[r], divisor_tile[r], r_div(1, divisor_tile[r]),
                  shift_or_sum_tile[r], A, dx);
      const real sdx = dx * SCALE_QK;
#pragma unroll
      for (int d = 0; d < D; ++d) dv_acc[d] += A * do_tile[r][d], dk_acc[d] += sdx * q_tile[r][d];
      if (POSITION_GRAD) atomicAdd(&dg[distance(i, key)], dx);
    }
  }
  if (!is_key) return;  // after the last barrier
#pragma unroll
  for (int d = 0; d < D; ++d) store(dk, key * D + d, dk_acc[d]), store(dv, key * D + d, dv_acc[d]);
}
