// What every kernel computes per row and column, scalar and tensor-core: the fold, the row's finish, the column
// weight and gradient around the column algebra's functions (plan/column_algebra.h, printed by
// kernels/cuda/emit_cuda.cpp with the variant's norm_* and score*), the statistics the backward reads, and the scalar
// kernels' shared-memory tile loads.
__device__ __forceinline__ long long imin(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long imax(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long distance(long long i, long long j) { return i > j ? i - j : j - i; }

// Rows first.. of a and b (zero past `last`) into shared tiles of ROWS rows, by the block's THREADS threads.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tiles(real (*a_tile)[D], real (*b_tile)[D], const store_t* a, const store_t* b,
                                           long long first, long long last) {
  for (int e = threadIdx.x; e < ROWS * D; e += THREADS) {
    const long long r = first + e / D;
    a_tile[e / D][e % D] = r <= last ? load(a, r * D + e % D) : (real)0;
    b_tile[e / D][e % D] = r <= last ? load(b, r * D + e % D) : (real)0;
  }
}

// The online form's shift for a running max m: m, or 0 while m = -inf (no column seen yet).
__device__ __forceinline__ real shift_of(real m) { return m == -SINK_INF ? (real)0 : m; }

// The online fold's control, written once for the CUDA kernels (a column in fold_column, a tile in fold_tile): a
// logit x above the row's shift m grows it to x, the sum of terms P scales by term_rescale of the rescale, and the
// caller scales the weights and O so far by `rescale`. Whether m grew.
__device__ __forceinline__ bool grow_shift(real x, real& m, real& P, real& rescale) {
  if (!(x > m)) return false;
  rescale = fold_rescale(m, x);
  P *= term_rescale(rescale);
  m = x;
  return true;
}

// One column of logit x folded into a row's running state: the shift m (the online form's row max) and the
// sum of terms P. w: the column's weight (A = ALPHA w / Z at the end); rescale: what the weights so far
// are scaled by as m grows.
__device__ __forceinline__ void fold_column(real x, real pos_i, real pos_j, real length, real& m, real& P, real& w,
                                            real& rescale) {
  rescale = 1;
  if (ONLINE) {
    grow_shift(x, m, P, rescale);
    const real shift = shift_of(m), s = score(x, shift, pos_i, pos_j, length), unit = r_exp(-shift);
    P += norm_term(s, x, unit), w = norm_weight(s, x, unit);
  } else {
    const real s = score(x, (real)0, pos_i, pos_j, length);
    P += norm_term(s, x, (real)1), w = norm_weight(s, x, (real)1);
  }
}

// A row's finish, written once for the CUDA kernels: its divisor Z from the sum of terms P and the shift m (the
// column algebra's row_divisor; O is ALPHA / Z times what it summed), and the two statistics the row stores for the
// backward and the probe (stats[i], stats[T + i]).
struct FinishedRow {
  real Z, divisor, shift_or_sum;
};
__device__ __forceinline__ FinishedRow finish_row(real P, real m) {
  const real Z = row_divisor(P, shift_of(m));
  return {Z, stored_divisor(Z, m, P), stored_shift_or_sum(Z, m, P)};
}

// The weight w of a pair with logit x, from the row statistic shift_or_sum (m online, P direct).
__device__ __forceinline__ real column_weight(real x, real pos_i, real pos_j, real length, real shift_or_sum) {
  return ONLINE ? norm_weight(score(x, shift_or_sum, pos_i, pos_j, length), x, r_exp(-shift_or_sum))
                : norm_weight(score(x, (real)0, pos_i, pos_j, length), x, (real)1);
}

// The attention A of a pair with logit x and its gradient dx, from the forward's row statistics divisor = Z
// (and its reciprocal, which a caller computes once per row), shift_or_sum, dA = <dO_i, v_j> and row_delta = <dO_i,
// O_i>: dL/ds = (alpha dw/ds dA - D dZ/ds) / Z. Online, s, unit and ds/dx are of x - m, and A and dx are as unshifted,
// being of degree 0 in (s, unit). OF_PRODUCT: v is the product q.k, the logit its scaling alone (the tensor-core
// kernels without a position table), which folds into the exponent's multiply-add; else v is the logit. dx_scale: dx
// comes times it, and row_delta must (the tensor-core kernels want SCALE_QK dx, the gradient of q.k, and scale D once
// per row: then it costs no multiply per pair at any d_head).
template <bool OF_PRODUCT = false>
__device__ __forceinline__ void column_grad(real v, real pos_i, real pos_j, real length, real dA, real row_delta,
                                            real divisor, real inv_divisor, real shift_or_sum, real& A, real& dx,
                                            real dx_scale = 1) {
  const real x = OF_PRODUCT ? v * SCALE_QK : v, unit = ONLINE ? r_exp(-shift_or_sum) : (real)1;
  real s, slope;
  if (OF_PRODUCT) {
    const real shift = ONLINE ? shift_or_sum : (real)0;
    s = score_of_product(v, shift, pos_i, pos_j, length), slope = score_grad_of_product(v, shift, pos_i, pos_j, length);
  } else {
    // (x - m taken first, as the shift: backward_keys's m differs per column, so e^(x - m) as one multiply-add
    // would cost a multiply per column, and x - m is where the compiler folds the logit's scaling in.)
    const real xe = ONLINE ? x - shift_or_sum : x;
    s = score(xe, (real)0, pos_i, pos_j, length), slope = score_grad(xe, (real)0, pos_i, pos_j, length);
  }
  A = column_attention(s, x, unit, inv_divisor);
  dx = logit_gradient(s, x, unit, divisor, shift_or_sum, dA, row_delta, inv_divisor, slope, dx_scale);
}

// column_grad's statistics of a row from the forward's Z and shift_or_sum (the algebra's backward_shift and
// backward_divisor; online, the divisor is 1, and the multiply by 1 / Z per pair goes).
__device__ __forceinline__ void backward_statistics(real Z, real shift_or_sum_in, real& divisor, real& inv_divisor,
                                                    real& shift_or_sum) {
  divisor = backward_divisor(Z, shift_or_sum_in), inv_divisor = ONLINE ? (real)1 : r_div(1, divisor),
  shift_or_sum = backward_shift(Z, shift_or_sum_in);
}
