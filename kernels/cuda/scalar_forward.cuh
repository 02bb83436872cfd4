// sink_forward's body without tensor cores: a row per thread, keys through shared-memory tiles (float, double, or a
// GPU older than 8.0)
{
  __shared__ real k_tile[FWD_KEYS][D], v_tile[FWD_KEYS][D];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_row = (long long)blockIdx.x * FWD_ROWS, i = first_row + threadIdx.x;
  const bool is_row = i < T;
  const long long row = is_row ? i : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, o += bh * T * D, stats += bh * 2 * T;
  if (POSITION_BIAS) g += head * g_step;
  if (KEY_BIAS) kstar += head * star_step, vstar += head * star_step;
  if (SINK_LOGIT) sink += head;
  real qr[D], acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) qr[d] = load(q, row * D + d), acc[d] = 0;
  const real pos_i = (real)(row + 1);
  long long lo, hi, block_lo, block_hi, unused;
  key_range(row, T, lo, hi);
  // The running state (fold_column); the k* column (value v*, every query sees it) and the sink logit (no
  // value) first.
  real m = SHIFT_START, P = 0, w, rescale;
  if (KEY_BIAS) {
    real xs = 0;
#pragma unroll
    for (int d = 0; d < D; ++d) xs += qr[d] * kstar[d];
    fold_column(xs * SCALE_QK, pos_i, (real)0, (real)T, m, P, w, rescale);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = w * vstar[d];
  }
  if (SINK_LOGIT) {
    fold_column(sink[0], pos_i, (real)0, (real)T, m, P, w, rescale);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] *= rescale;
  }
  key_range(first_row, T, block_lo, unused);
  key_range(imin(first_row + FWD_ROWS - 1, T - 1), T, unused, block_hi);
  for (long long kb = block_lo; kb <= block_hi; kb += FWD_KEYS) {
    __syncthreads();
    load_tiles<FWD_KEYS, FWD_ROWS>(k_tile, v_tile, k, v, kb, block_hi);
    __syncthreads();
    const int n = (int)imin(FWD_KEYS, block_hi - kb + 1);
    for (int c = 0; c < n; ++c) {
      const long long j = kb + c;
      if (!is_row || !SEES(row, j, lo, hi, T)) continue;
      real x = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) x += qr[d] * k_tile[c][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(row, j)];
      fold_column(x, pos_i, (real)(j + 1), (real)T, m, P, w, rescale);
      if (rescale != (real)1) {
#pragma unroll
        for (int d = 0; d < D; ++d) acc[d] *= rescale;
      }
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] += w * v_tile[c][d];
    }
  }
  if (!is_row) return;  // after the last barrier
  const FinishedRow finished = finish_row(P, m);
  stats[row] = finished.divisor, stats[T + row] = finished.shift_or_sum;
  const real scale = ALPHA / finished.Z;
#pragma unroll
  for (int d = 0; d < D; ++d) store(o, row * D + d, acc[d] * scale);
}
