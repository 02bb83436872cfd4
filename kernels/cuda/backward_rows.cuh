{
  // The backward's per-row terms with 16-bit storage: D = <dO_i, O_i> (and, with k*, <q_i, k*> and
  // <dO_i, v*>), eight lanes to a row. Each lane sums every eighth element of the row, so the eight lanes of a
  // row read 8 neighbouring 16-bit numbers at a time and a warp reads 4 rows' neighbouring bytes: coalesced,
  // where a thread per row read 32 rows a D-element stride apart (on an H100, 87 us at 92 % of the memory
  // pipe for what is 11 us of bytes). The sums meet by shuffles; lane 0 of the eight finishes the row. Every
  // lane reaches every shuffle: rows from T on compute as row T - 1 and write nothing.
  constexpr int LANES = 8, ROWS_AT_ONCE = ROW_THREADS / LANES;
  const long long bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  q += bh * T * D, o += bh * T * D, dout += bh * T * D, stats += bh * 2 * T, delta += bh * T;
  if (KEY_BIAS) kstar += head * star_step, vstar += head * star_step;
  const int part = threadIdx.x % LANES;
  for (int pass = 0; pass < LANES; ++pass) {
    const long long wanted = (long long)blockIdx.x * ROW_THREADS + pass * ROWS_AT_ONCE + threadIdx.x / LANES;
    const long long i = wanted < T ? wanted : T - 1;
    real row_delta = 0, xs = 0, dA = 0;
    for (int d = part; d < D; d += LANES) {
      const real grad_out = load(dout, i * D + d);
      row_delta += grad_out * load(o, i * D + d);
      if (KEY_BIAS) xs += load(q, i * D + d) * kstar[d], dA += grad_out * vstar[d];
    }
#pragma unroll
    for (int m = 1; m < LANES; m *= 2) {
      row_delta += shfl_xor(row_delta, m);
      if (KEY_BIAS) xs += shfl_xor(xs, m), dA += shfl_xor(dA, m);
    }
    if (part != 0 || wanted >= T) continue;
    delta[i] = row_delta;
    const real divisor = stats[i], shift_or_sum = stats[T + i], pos_i = (real)(i + 1);
    real A, dx;
    if (KEY_BIAS) {  // the k* column: A and the logit's gradient, summed over rows by the caller
      column_grad(xs * SCALE_QK, pos_i, (real)0, (real)T, dA, row_delta, divisor, r_div(1, divisor), shift_or_sum, A,
                  dx);
      astar[bh * T + i] = A, dx_kstar[bh * T + i] = dx * SCALE_QK;
    }
    if (SINK_LOGIT) {  // no value (dA = 0): the logit's gradient is -D dZ/ds ds/db / Z
      column_grad(sink[head], pos_i, (real)0, (real)T, (real)0, row_delta, divisor, r_div(1, divisor), shift_or_sum, A,
                  dx);
      dsink[bh * T + i] = dx;
    }
  }
}
