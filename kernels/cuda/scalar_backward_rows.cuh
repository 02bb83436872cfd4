// sink_backward_rows's body without tensor cores: D = <dO_i, O_i> and the k* and sink-logit terms, a row per thread
{
  const long long bh = blockIdx.y, head = bh % H, i = (long long)blockIdx.x * ROW_THREADS + threadIdx.x;
  if (i >= T) return;  // (no barrier in this kernel)
  q += bh * T * D, o += bh * T * D, dout += bh * T * D, stats += bh * 2 * T, delta += bh * T;
  real row_delta = 0;
  for (int d = 0; d < D; ++d) row_delta += load(dout, i * D + d) * load(o, i * D + d);
  delta[i] = row_delta;
  const real divisor = stats[i], shift_or_sum = stats[T + i], pos_i = (real)(i + 1);
  real A, dx;
  if (KEY_BIAS) {  // the k* column: A and the logit's gradient, summed over rows by the caller
    kstar += head * star_step, vstar += head * star_step;
    real xs = 0, dA = 0;
    for (int d = 0; d < D; ++d) xs += load(q, i * D + d) * kstar[d], dA += load(dout, i * D + d) * vstar[d];
    column_grad(xs * SCALE_QK, pos_i, (real)0, (real)T, dA, row_delta, divisor, r_div(1, divisor), shift_or_sum, A, dx);
    astar[bh * T + i] = A, dx_kstar[bh * T + i] = dx * SCALE_QK;
  }
  if (SINK_LOGIT) {  // no value (dA = 0): the logit's gradient is -D dZ/ds ds/db / Z
    column_grad(sink[head], pos_i, (real)0, (real)T, (real)0, row_delta, divisor, r_div(1, divisor), shift_or_sum, A,
                dx);
    dsink[bh * T + i] = dx;
  }
}
