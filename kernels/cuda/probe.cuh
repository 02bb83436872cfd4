// sink_probe's body (every backend's CUDA path, scalar): a row's attention weights for the measurements
{
  // One element of row i of [T, S]: the weight w (A = alpha w / Z), the k* column first.
  const long long bh = blockIdx.y, head = bh % H, S = T + (KEY_BIAS ? 1 : 0);
  const long long e = (long long)blockIdx.x * ROW_THREADS + threadIdx.x;
  if (e >= T * S) return;
  const long long i = e / S, c = e % S;
  q += bh * T * D, k += bh * T * D, stats += bh * 2 * T, out += bh * T * S;
  const real pos_i = (real)(i + 1);
  real x = 0, pos_j = 0;
  if (KEY_BIAS && c == 0) {
    for (int d = 0; d < D; ++d) x += load(q, i * D + d) * kstar[head * star_step + d];
    x *= SCALE_QK;
  } else {
    const long long j = c - (KEY_BIAS ? 1 : 0);
    long long lo, hi;
    key_range(i, T, lo, hi);
    if (!SEES(i, j, lo, hi, T)) {
      out[e] = 0;
      return;
    }
    for (int d = 0; d < D; ++d) x += load(q, i * D + d) * load(k, j * D + d);
    x *= SCALE_QK;
    if (POSITION_BIAS) x += g[head * g_step + distance(i, j)];
    pos_j = (real)(j + 1);
  }
  out[e] = column_weight(x, pos_i, pos_j, (real)T, stats[T + i]);
}
