// The tensor-core kernels' logits: a pair's product q.k scaled, plus the position table's term (ALiBi, T5's, a
// learned table) read by distance, or along a tile's diagonals where every pair is at or below it.

// The logit of the pair (i, j) whose product q.k is qk.
__device__ __forceinline__ real logit_of(float qk, int i, int j, const real* g) {
  real x = qk * SCALE_QK;
  if (POSITION_BIAS) x += g[distance(i, j)];
  return x;
}
// The logit along a tile of keys from j0 whose every pair has i >= j (at or below the diagonal), the position
// table read from one pointer per row of the lane, below = g + i - j0 - lane_first_col() (below_keys): g at i - j
// for an element is below[-lane_offset()] (tile.cuh's Element), no distance and no address arithmetic per element.
__device__ __forceinline__ const real* below_keys(const real* g, int i, int j0) {
  return g + (i - j0 - lane_first_col());
}
__device__ __forceinline__ real logit_along(float qk, const real* below, int offset) {
  real x = qk * SCALE_QK;
  if (POSITION_BIAS) x += below[offset];
  return x;
}
