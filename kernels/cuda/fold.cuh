// What the tensor-core forward and backward_queries do with a tile of keys: a warp's rows and the keys they see,
// the stream of key and value tiles through shared memory, each tile's logits under the visibility rule, and per
// kernel its work on them: the forward folds them into each row's running state (the normaliser's online update,
// a tile at a time), backward_queries takes each pair's logit gradient. Named operations over tile.cuh's register
// tiles; a column's own functions (fold_column, column_grad) are columns.cuh's.

// The rows a warp owns: M fragments of 16 rows, the lane's two of each (h = 0, 1: lane_row(h)), rows from T on
// acting as row T - 1; their positions i + 1 and the keys [lo, hi] each sees. A kernel sets each row up (set) where
// it sets up the rest of the row's state.
template <int M>
struct WarpRows {
  int row[M][2], lo[M][2], hi[M][2];
  real pos_i[M][2];
  // Row h of fragment f, for the warp whose first row is warp_row, unclamped: from T on, no row of the slice.
  static __device__ __forceinline__ int unclamped(int f, int h, int warp_row) {
    return warp_row + 16 * f + lane_row(h);
  }
  // Row h of fragment f set up; returns its index.
  __device__ __forceinline__ int set(int f, int h, int warp_row, int n) {
    const int r = imin(unclamped(f, h, warp_row), n - 1);
    row[f][h] = r, pos_i[f][h] = (real)(r + 1);
    key_range(r, n, lo[f][h], hi[f][h]);
    return r;
  }
};

// Where a query-row kernel's block is (the forward's, backward_queries's): its slice bh and the slice's head, the
// slice's length n (positions within a slice are 32-bit: tile.cuh), its rows first_row .. last_row of ROWS, and the
// first of the M fragments of 16 rows this warp owns. The last row blocks first: under a causal mask they see the
// most keys, so the blocks that start last are the short ones and the grid's tail packs tighter.
template <int ROWS, int M>
__device__ __forceinline__ void place_row_block(long long T, long long H, long long& bh, long long& head, int& n,
                                                int& first_row, int& last_row, int& warp_row) {
  bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  n = (int)T;
  first_row = ((n + ROWS - 1) / ROWS - 1 - (int)blockIdx.x) * ROWS;
  warp_row = first_row + 16 * M * (int)(threadIdx.x / 32);
  last_row = imin(first_row + ROWS - 1, n - 1);
}

// The keys a block of rows first_row..last_row streams, [lo, hi], and the span [last_lo, first_hi] that every row
// of the block sees.
struct BlockKeys {
  int first_row, lo, hi, first_hi, last_lo;
};
__device__ __forceinline__ BlockKeys block_keys(int first_row, int last_row, int n) {
  BlockKeys b;
  b.first_row = first_row;
  key_range(first_row, n, b.lo, b.first_hi);
  key_range(last_row, n, b.last_lo, b.hi);
  return b;
}

// work(FULL, BELOW) for the tile of KEYS keys from kb, with constants (once inlined, each call is its own code):
// FULL, every row of the block sees every key of the tile, the code without masks; BELOW, the tile is also at or
// below every row's diagonal, a position table read along it (logits.cuh's logit_along). Without a table, one code
// for full tiles.
template <int KEYS, typename Work>
__device__ __forceinline__ void by_tile_kind(const BlockKeys& block, int kb, Work work) {
  if (CHECKS_PAIRS || kb < block.last_lo || kb + KEYS - 1 > block.first_hi)
    work(false, false);
  else if (POSITION_BIAS && kb + KEYS - 1 > block.first_row)
    work(true, false);
  else
    work(true, true);
}

// The pair's logit from its product q.k: without a position table the product itself, whose scaling folds into
// the exponent's multiply-add (one multiply a pair fewer); else scaled, plus the table's term, read along the
// row's diagonal pointer (BELOW) or by the distance from the row to key j.
__device__ __forceinline__ real tile_logit(float qk, const real* along, const Element& at, int row, int j,
                                           const real* g, const bool BELOW) {
  return !POSITION_BIAS ? qk : BELOW ? logit_along(qk, along, -at.lane_offset()) : logit_of(qk, row, j, g);
}
// The row's diagonal pointers for a tile of keys from kb at or below its diagonal (unused otherwise).
template <int M>
__device__ __forceinline__ void diagonals(const real* (&along)[2], const WarpRows<M>& rows, int f, int kb,
                                          const real* g, const bool BELOW) {
  along[0] = along[1] = g;
  if (POSITION_BIAS && BELOW)
    along[0] = below_keys(g, rows.row[f][0], kb), along[1] = below_keys(g, rows.row[f][1], kb);
}

// A block's shared memory for the key and value tiles it streams: STAGES stages of KEYS rows, padded (two stages) or,
// on Hopper, swizzled from a 1024-byte boundary (kernels/cuda/tile_sm90.cuh).
template <int KEYS, int STAGES>
struct alignas(SINK_WGMMA ? 1024 : 16) KeyValueTiles {
  typename Choose<SINK_WGMMA, store_t[STAGES][KEYS * D], store_t[2][KEYS][PITCH]>::type k_tile, v_tile;
};

// The key and value tiles a block streams through shared memory: STAGES stages of KEYS rows, the copies of the tiles
// ahead in flight while one is computed on (cp.async; on Hopper into the swizzled tiles of tile_sm90.cuh).
template <int KEYS, int THREADS, int STAGES, typename Tiles>
struct KeyStream {
  Tiles &k_tiles, &v_tiles;
  const store_t *k, *v;
  int last, stage;
  // The first tile's copies, from key `first` on.
  __device__ __forceinline__ void start(int first) {
    stage = 0;
    load_pair_async<KEYS, THREADS>(k_tiles[0], v_tiles[0], k, v, first, last);
  }
  // This stage's tile landed (await_stage), then the tile `ahead` tiles after the one from kb on its way.
  __device__ __forceinline__ void fetch(int kb, int ahead) {
    await_and_fetch<KEYS, THREADS>(k_tiles, v_tiles, next_stage<STAGES>(stage, ahead), k, v, kb + ahead * KEYS, last);
  }
  // The keys and values of this stage or of the one `ahead` on.
  __device__ __forceinline__ decltype(k_tiles[0]) keys(int ahead = 0) {
    return k_tiles[ahead == 0 ? stage : next_stage<STAGES>(stage, ahead)];
  }
  __device__ __forceinline__ decltype(v_tiles[0]) values(int ahead = 0) {
    return v_tiles[ahead == 0 ? stage : next_stage<STAGES>(stage, ahead)];
  }
  __device__ __forceinline__ void advance() { stage = next_stage<STAGES>(stage); }
};
template <int KEYS, int THREADS, int STAGES, typename Tiles>
__device__ __forceinline__ KeyStream<KEYS, THREADS, STAGES, Tiles> key_stream(Tiles& k_tiles, Tiles& v_tiles,
                                                                              const store_t* k, const store_t* v,
                                                                              int last) {
  return {k_tiles, v_tiles, k, v, last, 0};
}

// The forward's running state of a warp's rows: the shift m (online: the row's maximum so far), the lane's share P
// of the row's sum of terms, and, SUM_OF_WEIGHTS, the rows' sums taken on the tensor cores as W times a block of
// ones (add_row_sums).
template <int M>
struct RowState {
  real m[M][2], P[M][2];
  FloatTile<8> row_sum[M];
};

// One tile of products s (q.k) folded into the rows' state, s becoming the weights W: the logits under the
// visibility rule (a hidden pair computed as x = shift, any finite logit would do, and dropped by selects), each
// row's maximum over the tile (online: the shift grows once a tile, and O's rows rescale at once, or OVERLAP by
// o_rescale once the product in flight has landed), then each pair's weight and term. Without a position table s
// keeps the products: the maximum is taken on them (the scale is positive and rounding monotone, so the scaled
// maximum is the maximum of the scaled) and the scaling goes into the exponent's multiply-add.
template <int KEYS, int M>
__device__ __forceinline__ void fold_tile(FloatTile<KEYS> (&s)[M], RowState<M>& state, FloatTile<D> (&acc)[M],
                                          real (&o_rescale)[M][2], const WarpRows<M>& rows, int kb, int n,
                                          const real* g, const bool FULL, const bool BELOW) {
  constexpr bool OF_PRODUCT = !POSITION_BIAS;
#pragma unroll
  for (int f = 0; f < M; ++f) {
    const real* along[2];
    diagonals(along, rows, f, kb, g, BELOW);
    RowMax<KEYS> tile_max;
    s[f].map([&](float qk, const Element& at) {
      const int h = at.h, j = kb + at.col();
      const bool seen = FULL || SEES(rows.row[f][h], j, rows.lo[f][h], rows.hi[f][h], n);
      const real x = tile_logit(qk, along[h], at, rows.row[f][h], j, g, BELOW);
      if (ONLINE) tile_max.add(seen ? x : -SINK_INF, at);
      return seen ? x : -SINK_INF;
    });
    real shift[2] = {0, 0}, unit[2] = {1, 1};
    if (ONLINE) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const real new_max = tile_max.of_row(h) * (OF_PRODUCT ? SCALE_QK : (real)1);
        real& m = state.m[f][h];
        real rescale;
        if (OVERLAP) o_rescale[f][h] = 1;
        if (grow_shift(new_max, m, state.P[f][h], rescale)) {  // for the whole tile at once
          state.row_sum[f].scale_row(h, rescale);
          if (OVERLAP)
            o_rescale[f][h] = rescale;
          else
            acc[f].scale_row(h, rescale);
        }
        shift[h] = shift_of(m), unit[h] = r_exp(-shift[h]);
      }
    }
    real tile_sum[2][2] = {{0, 0}, {0, 0}};  // two chains a row
    s[f].map([&](float v, const Element& at) {
      const int h = at.h;
      const bool hidden = !FULL && v == -SINK_INF;
      const real pos_j = (real)(kb + at.col() + 1);
      real x, sc;  // the logit, its score
      if (OF_PRODUCT) {
        const real product = hidden ? shift[h] * (1 / SCALE_QK) : v;
        sc = score_of_product(product, shift[h], rows.pos_i[f][h], pos_j, (real)n), x = product * SCALE_QK;
      } else {
        x = hidden ? shift[h] : v, sc = score(x, shift[h], rows.pos_i[f][h], pos_j, (real)n);
      }
      if (!SUM_OF_WEIGHTS) tile_sum[h][at.chain()] += hidden ? (real)0 : norm_term(sc, x, unit[h]);
      return hidden ? (real)0 : norm_weight(sc, x, unit[h]);
    });
    if (!SUM_OF_WEIGHTS)
      state.P[f][0] += tile_sum[0][0] + tile_sum[0][1], state.P[f][1] += tile_sum[1][0] + tile_sum[1][1];
  }
}

// OVERLAP: O's rows rescaled as the tile's maxima asked, once the product that was in flight has landed.
template <int M>
__device__ __forceinline__ void rescale_rows(FloatTile<D> (&acc)[M], const real (&o_rescale)[M][2]) {
#pragma unroll
  for (int f = 0; f < M; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (ONLINE && o_rescale[f][h] != 1) acc[f].scale_row(h, o_rescale[f][h]);
}

// The weights as O += W V's A operand, rounded to 16 bits; SUM_OF_WEIGHTS: their rows' sums added on the tensor
// cores, the rounded weights that O sums (add_row_sums; `ones`: two 16-bit ones, packed once).
template <int KEYS, int M>
__device__ __forceinline__ void weights_operand(PackedTile<KEYS> (&wa)[M], const FloatTile<KEYS> (&s)[M],
                                                RowState<M>& state, unsigned ones) {
#pragma unroll
  for (int f = 0; f < M; ++f) {
    as_a(wa[f], s[f]);
    if (SUM_OF_WEIGHTS) add_row_sums(state.row_sum[f], wa[f], ones);
  }
}

// backward_queries's tile: from the products s (q.k) and dA = dO V^T, each pair's dS, the gradient of q.k, in s,
// from the forward's row statistics (column_grad); hidden pairs 0. A key after the block's last is hidden, and its
// distance from the row is taken as the last's (the position table is T long).
template <int KEYS, int M>
__device__ __forceinline__ void gradient_tile(FloatTile<KEYS> (&s)[M], const FloatTile<KEYS> (&dA)[M],
                                              const WarpRows<M>& rows, const real (&row_delta)[M][2],
                                              const real (&divisor)[M][2], const real (&inv_divisor)[M][2],
                                              const real (&shift_or_sum)[M][2], int kb, int last_key, int n,
                                              const real* g, const bool FULL, const bool BELOW) {
#pragma unroll
  for (int f = 0; f < M; ++f) {
    const real* along[2];
    diagonals(along, rows, f, kb, g, BELOW);
    s[f].map([&](float qk, const Element& at) {
      const int h = at.h, j = FULL ? kb + at.col() : imin(kb + at.col(), last_key);
      const real x = tile_logit(qk, along[h], at, rows.row[f][h], j, g, BELOW);
      real A, dx;
      column_grad<!POSITION_BIAS>(x, rows.pos_i[f][h], (real)(j + 1), (real)n, dA[f][at], row_delta[f][h],
                                  divisor[f][h], inv_divisor[f][h], shift_or_sum[f][h], A, dx, DX_SCALE);
      // The column unclamped: a row's hi is at most the block's (last_key), so where it is seen it is j.
      const bool seen = FULL || SEES(rows.row[f][h], kb + at.col(), rows.lo[f][h], rows.hi[f][h], n);
      return seen ? dx * (SCALE_QK / DX_SCALE) : (real)0;
    });
  }
}
