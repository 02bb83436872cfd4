// Tile operations for the tensor-core kernels: what a warp does with 16 rows of a matrix. Built on the
// warp's instructions (kernels/cuda/warp_sm80.cuh) and written once for the GPU and the CPU emulation.
//
// Fragments are the PTX ISA's for mma.m16n8k16: a warp's 16 x N float accumulator is N / 8 blocks of four
// floats per lane; element e of block nb is at row frag_row(e), column frag_col(nb, e). A 16 x 16 A operand
// is four registers of two 16-bit numbers. Shared tiles are rows of D 16-bit numbers, PITCH apart: the eight
// more elements per row shift each row by 16 bytes, so the eight row addresses of an ldmatrix fall in
// different banks.

__device__ __forceinline__ int lane_id() { return threadIdx.x % 32; }

// The type A, or B where not USE_A.
template <bool USE_A, typename A, typename B>
struct Choose {
  using type = A;
};
template <typename A, typename B>
struct Choose<false, A, B> {
  using type = B;
};

// Positions within a (batch, head) slice as 32-bit integers (T < 2^31): half the registers and instructions
// of the scalar kernels' 64-bit ones in the per-element masks. Pointer offsets stay 64-bit.
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int distance(int i, int j) { return i > j ? i - j : j - i; }
__device__ __forceinline__ int frag_row(int e) { return lane_id() / 4 + 8 * (e / 2); }
__device__ __forceinline__ int frag_col(int nb, int e) { return nb * 8 + 2 * (lane_id() % 4) + e % 2; }
// The lane's row h of its two in a tile of 16 rows (h = 0, 1: rows lane / 4 and lane / 4 + 8).
__device__ __forceinline__ int lane_row(int h) { return frag_row(2 * h); }
// The lane's first column in a tile: its columns are lane_first_col() + Element's lane_offset().
__device__ __forceinline__ int lane_first_col() { return frag_col(0, 0); }

// The first of the four lanes that hold a row: the one that writes what the row's lanes agree on.
__device__ __forceinline__ bool row_leader() { return lane_id() % 4 == 0; }

// The lane's element e of column block nb in a 16 x N tile: the lane's row h of its two (row(h) of the tile), at
// column col(). Handed to a tile's map: a kernel names an element's row and column, never its registers.
struct Element {
  int h, nb, e;
  __device__ __forceinline__ int col() const { return frag_col(nb, e); }
  // The column's distance from the lane's first (the lane's columns of a row lie along one diagonal pointer).
  __device__ __forceinline__ int lane_offset() const { return 8 * nb + e % 2; }
  // Which of the lane's two neighbouring columns of its block: a row's two dependent chains of a sum.
  __device__ __forceinline__ int chain() const { return e % 2; }
};

// A warp's 16 x N float tile in the mma.m16n8k16 accumulator layout: N / 8 blocks of four floats per lane, the
// lane's two rows lane_row(0) and lane_row(1) (h), each two neighbouring columns a block. Owns its layout: a kernel
// works on it through these operations and tile.cuh's products.
template <int N>
struct FloatTile {
  static constexpr int BLOCKS = N / 8;
  float frag[BLOCKS][4];

  __device__ __forceinline__ float& operator[](const Element& at) { return frag[at.nb][at.e]; }
  __device__ __forceinline__ float operator[](const Element& at) const { return frag[at.nb][at.e]; }
  // What every column of the lane's row h holds, where all hold one value (a product with a block of ones).
  __device__ __forceinline__ float row_value(int h) const { return frag[0][2 * h]; }

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int nb = 0; nb < BLOCKS; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) frag[nb][e] = 0;
  }
  // Each element set to value_at(Element).
  template <typename Fn>
  __device__ __forceinline__ void set(Fn value_at) {
#pragma unroll
    for (int nb = 0; nb < BLOCKS; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) frag[nb][e] = value_at(Element{e / 2, nb, e});
  }
  // Each element replaced by fn(value, Element), in block order; after_block(nb) after each block's four.
  template <typename Fn, typename AfterBlock>
  __device__ __forceinline__ void map(Fn fn, AfterBlock after_block) {
#pragma unroll
    for (int nb = 0; nb < BLOCKS; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) frag[nb][e] = fn(frag[nb][e], Element{e / 2, nb, e});
      after_block(nb);
    }
  }
  template <typename Fn>
  __device__ __forceinline__ void map(Fn fn) {
    map(fn, [](int) {});
  }
  // The lane's row h set to value_of(column).
  template <typename Fn>
  __device__ __forceinline__ void fill_row(int h, Fn value_of) {
#pragma unroll
    for (int nb = 0; nb < BLOCKS; ++nb)
      frag[nb][2 * h] = value_of(frag_col(nb, 0)), frag[nb][2 * h + 1] = value_of(frag_col(nb, 1));
  }
  // Row h of the lane's two times factor: O's rows when the online form's shift grows.
  __device__ __forceinline__ void scale_row(int h, float factor) {
#pragma unroll
    for (int nb = 0; nb < BLOCKS; ++nb) frag[nb][2 * h] *= factor, frag[nb][2 * h + 1] *= factor;
  }
  // fn(r, c, x, y) for each pair of neighbouring elements the lane holds: row r of the tile's 16, columns c and
  // c + 1; the lane's row 0 first.
  template <typename Fn>
  __device__ __forceinline__ void pairs(Fn fn) const {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int nb = 0; nb < BLOCKS; ++nb) fn(lane_row(h), frag_col(nb, 0), frag[nb][2 * h], frag[nb][2 * h + 1]);
  }
};

// A warp's 16 x K tile of 16-bit numbers in the mma.m16n8k16 A operand layout: K / 16 blocks of four registers,
// two numbers each.
template <int K>
struct PackedTile {
  unsigned reg[K / 16][4];
};

// Rows r0..r0+15 of a [T, D] array in global memory as A operands (D / 16 of them); rows from T on read
// row T - 1.
__device__ __forceinline__ void load_a_rows(PackedTile<D>& a, const store_t* x, int r0, int T) {
  const int g = lane_id() / 4, t = lane_id() % 4;
  const store_t* upper = x + (long long)imin(r0 + g, T - 1) * D + 2 * t;
  const store_t* lower = x + (long long)imin(r0 + g + 8, T - 1) * D + 2 * t;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    a.reg[kk][0] = *reinterpret_cast<const unsigned*>(upper + 16 * kk);
    a.reg[kk][1] = *reinterpret_cast<const unsigned*>(lower + 16 * kk);
    a.reg[kk][2] = *reinterpret_cast<const unsigned*>(upper + 16 * kk + 8);
    a.reg[kk][3] = *reinterpret_cast<const unsigned*>(lower + 16 * kk + 8);
  }
}

// Rows first..first+ROWS-1 of a [T, D] array into a shared tile, by the block's THREADS threads, without
// waiting (cp_async_commit and cp_async_wait complete it); rows after `last` are zeros.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tile_async(store_t (*tile)[PITCH], const store_t* x, int first, int last) {
  constexpr int CHUNKS = D / 8;  // of 16 bytes
  // A count of rounds known at compile time: unrolled, no loop test per copy.
  constexpr int ROUNDS = (ROWS * CHUNKS + THREADS - 1) / THREADS;
#pragma unroll
  for (int round = 0; round < ROUNDS; ++round) {
    const int c = threadIdx.x + round * THREADS;
    if (ROWS * CHUNKS % THREADS != 0 && c >= ROWS * CHUNKS) break;
    const int r = c / CHUNKS, col = c % CHUNKS * 8;
    cp_async_16(&tile[r][col], x + (long long)imin(first + r, last) * D + col, first + r <= last);
  }
}

// Rows first.. of two [T, D] arrays (keys and values; queries and dO) into a stage of their tiles, as one
// group of copies.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_pair_async(store_t (*a_tile)[PITCH], store_t (*b_tile)[PITCH], const store_t* a,
                                                const store_t* b, int first, int last) {
  load_tile_async<ROWS, THREADS>(a_tile, a, first, last);
  load_tile_async<ROWS, THREADS>(b_tile, b, first, last);
  cp_async_commit();
}

// The two-stage pipeline's turn, one barrier a tile: this stage's copies (the only ones in flight) have landed,
// for every thread's, and every warp is done with the other stage, which the caller's next copies then refill
// while this stage is computed on.
__device__ __forceinline__ void await_stage() {
  cp_async_wait<0>();
  if (SINK_WGMMA) async_proxy_fence();  // the tensor cores read a wgmma's B through the async proxy
  __syncthreads();
}

// A stream of STAGES stages of tiles: the stage `ahead` tiles after `stage`.
template <int STAGES>
__device__ __forceinline__ int next_stage(int stage, int ahead = 1) {
  return (stage + ahead) % STAGES;
}
#if SINK_WGMMA  // (tile_sm90.cuh's swizzled tiles' load, named here for await_and_fetch to find)
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_pair_async(store_t* a_tile, store_t* b_tile, const store_t* a, const store_t* b,
                                                int first, int last);
#endif
// The stream's turn (await_stage), then rows first.. of a and b into stage `to` of their tiles, where any is left
// (first <= last).
template <int ROWS, int THREADS, typename Tiles>
__device__ __forceinline__ void await_and_fetch(Tiles& a_tiles, Tiles& b_tiles, int to, const store_t* a,
                                                const store_t* b, int first, int last) {
  await_stage();
  if (first <= last) load_pair_async<ROWS, THREADS>(a_tiles[to], b_tiles[to], a, b, first, last);
}

// acc (16 x N) += A B^T: A the warp's 16 x D operand, B^T's columns the tile's N rows. A warp with M
// fragments of 16 rows (16 M rows) reads each block of B once for all of them: with M = 2, half the
// shared-memory reads per product.
template <int N, int M>
__device__ __forceinline__ void mma_abt(FloatTile<N> (&acc)[M], const PackedTile<D> (&a)[M],
                                        const store_t (*tile)[PITCH]) {
  const int l = lane_id();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int pair = 0; pair < N / 16; ++pair) {
      unsigned b[4];
      ldmatrix_x4(b, &tile[16 * pair + l % 8 + 8 * (l / 16)][16 * kk + 8 * (l / 8 % 2)]);
#pragma unroll
      for (int f = 0; f < M; ++f) {
        mma_16816<HALF_MMA>(acc[f].frag[2 * pair], a[f].reg[kk], b[0], b[1]);
        mma_16816<HALF_MMA>(acc[f].frag[2 * pair + 1], a[f].reg[kk], b[2], b[3]);
      }
    }
}
template <int N>
__device__ __forceinline__ void mma_abt(FloatTile<N>& acc, const PackedTile<D>& a, const store_t (*tile)[PITCH]) {
  mma_abt<N, 1>(reinterpret_cast<FloatTile<N>(&)[1]>(acc), reinterpret_cast<const PackedTile<D>(&)[1]>(a), tile);
}

// acc (16 x D) += A B: A the warp's 16 x K operand, B the tile's first K rows; M fragments as above.
template <int K, int M>
__device__ __forceinline__ void mma_ab(FloatTile<D> (&acc)[M], const PackedTile<K> (&a)[M],
                                       const store_t (*tile)[PITCH]) {
  const int l = lane_id();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int pair = 0; pair < D / 16; ++pair) {
      unsigned b[4];
      ldmatrix_x4_trans(b, &tile[16 * kk + l % 8 + 8 * (l / 8 % 2)][16 * pair + 8 * (l / 16)]);
#pragma unroll
      for (int f = 0; f < M; ++f) {
        mma_16816<HALF_MMA>(acc[f].frag[2 * pair], a[f].reg[kk], b[0], b[1]);
        mma_16816<HALF_MMA>(acc[f].frag[2 * pair + 1], a[f].reg[kk], b[2], b[3]);
      }
    }
}
template <int K>
__device__ __forceinline__ void mma_ab(FloatTile<D>& acc, const PackedTile<K>& a, const store_t (*tile)[PITCH]) {
  mma_ab<K, 1>(reinterpret_cast<FloatTile<D>(&)[1]>(acc), reinterpret_cast<const PackedTile<K>(&)[1]>(a), tile);
}

// The products as the Hopper kernels issue them (tile_sm90.cuh's issue_abt, issue_ab, await_products): here each
// is done when it returns, and there is nothing to await. issue_abt sets acc = A B^T, issue_ab adds A B.
template <int N, int M>
__device__ __forceinline__ void issue_abt(FloatTile<N> (&acc)[M], const PackedTile<D> (&a)[M],
                                          const store_t (*tile)[PITCH]) {
#pragma unroll
  for (int f = 0; f < M; ++f) acc[f].zero();
  mma_abt<N, M>(acc, a, tile);
}
template <int N>
__device__ __forceinline__ void issue_abt(FloatTile<N>& acc, const PackedTile<D>& a, const store_t (*tile)[PITCH]) {
  acc.zero();
  mma_abt<N>(acc, a, tile);
}
template <int K, int M>
__device__ __forceinline__ void issue_ab(FloatTile<D> (&acc)[M], const PackedTile<K> (&a)[M],
                                         const store_t (*tile)[PITCH]) {
  mma_ab<K, M>(acc, a, tile);
}
template <int K>
__device__ __forceinline__ void issue_ab(FloatTile<D>& acc, const PackedTile<K>& a, const store_t (*tile)[PITCH]) {
  mma_ab<K>(acc, a, tile);
}
#if !SINK_WGMMA
template <int PENDING, typename... Accumulators>
__device__ __forceinline__ void await_products(Accumulators&...) {}
#endif

// A warp's 16 x N A operand (as_a's layout) into rows r0..r0+15 of a shared tile of pitch P, for the block's
// other warps to read back with ldmatrix (the eight rows of one store fall in different banks for the pitches
// used: D + 8 and N + 8 with N a multiple of 16).
template <int N, int P>
__device__ __forceinline__ void store_a(store_t (*tile)[P], int r0, const PackedTile<N>& a) {
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    *reinterpret_cast<unsigned*>(&tile[r0 + g][16 * kk + 2 * t]) = a.reg[kk][0];
    *reinterpret_cast<unsigned*>(&tile[r0 + g + 8][16 * kk + 2 * t]) = a.reg[kk][1];
    *reinterpret_cast<unsigned*>(&tile[r0 + g][16 * kk + 8 + 2 * t]) = a.reg[kk][2];
    *reinterpret_cast<unsigned*>(&tile[r0 + g + 8][16 * kk + 8 + 2 * t]) = a.reg[kk][3];
  }
}

// acc (16 x 16 CB) += X B, summed over the first K rows of two
// shared tiles: x holds X transposed (a row per summed index; X's rows are its columns 16 r..16 r + 15), b holds B
// (B's columns are its columns 16 c..16 c + 16 CB - 1). Both operands come through ldmatrix's transposing load;
// each piece of X is read once for the CB blocks.
template <int K, int PX, int CB>
__device__ __forceinline__ void mma_atb_blocks(FloatTile<16 * CB>& acc, const store_t (*x)[PX], int r,
                                               const store_t (*b)[PITCH], int c) {
  const int l = lane_id();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    unsigned a[4];
    ldmatrix_x4_trans(a, &x[16 * kk + l % 8 + 8 * (l / 16)][16 * r + 8 * (l / 8 % 2)]);
#pragma unroll
    for (int cb = 0; cb < CB; ++cb) {
      unsigned bb[4];
      ldmatrix_x4_trans(bb, &b[16 * kk + l % 8 + 8 * (l / 8 % 2)][16 * (c + cb) + 8 * (l / 16)]);
      mma_16816<HALF_MMA>(acc.frag[2 * cb], a, bb[0], bb[1]);
      mma_16816<HALF_MMA>(acc.frag[2 * cb + 1], a, bb[2], bb[3]);
    }
  }
}

// A 16 x N accumulator as the A operand of the next product, rounded to 16 bits: two neighbouring 8-column
// blocks of the accumulator layout are the A layout of one 16-column block.
template <int N>
__device__ __forceinline__ void as_a(PackedTile<N>& a, const FloatTile<N>& c) {
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    a.reg[kk][0] = pack_rn<HALF_MMA>(c.frag[2 * kk][0], c.frag[2 * kk][1]);
    a.reg[kk][1] = pack_rn<HALF_MMA>(c.frag[2 * kk][2], c.frag[2 * kk][3]);
    a.reg[kk][2] = pack_rn<HALF_MMA>(c.frag[2 * kk + 1][0], c.frag[2 * kk + 1][1]);
    a.reg[kk][3] = pack_rn<HALF_MMA>(c.frag[2 * kk + 1][2], c.frag[2 * kk + 1][3]);
  }
}
// The row sums of a warp's 16 x K 16-bit tile added on the tensor cores, as the tile times a block of ones
// (`ones`: two 16-bit ones, packed): each of sums's columns the row's sum, in every lane of the row.
template <int K>
__device__ __forceinline__ void add_row_sums(FloatTile<8>& sums, const PackedTile<K>& a, unsigned ones) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) mma_16816<HALF_MMA>(sums.frag[0], a.reg[kk], ones, ones);
}

// A row's maximum and sum over the four lanes that hold it.
__device__ __forceinline__ float quad_max(float v) {
  v = r_fmax(v, shfl_xor(v, 1));
  return r_fmax(v, shfl_xor(v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += shfl_xor(v, 1);
  return v + shfl_xor(v, 2);
}

// The maxima of the two rows of a 16 x N accumulator (N >= 16), taken element by element as a pass over the tile
// computes them (add, in the order of FloatTile's map), then each row's in the four lanes that hold it (of_row). The
// lane's elements of a row go into four dependent chains a quarter as long as one running maximum's, combined at the
// end (max is exact in any order).
template <int N>
struct RowMax {
  float chain[2][4];
  __device__ __forceinline__ void add(float v, const Element& at) {
    float& link = chain[at.h][at.nb % 2 * 2 + at.chain()];
    link = at.nb < 2 ? v : r_fmax(link, v);  // (unrolled: no select)
  }
  __device__ __forceinline__ float of_row(int h) const {
    return quad_max(r_fmax(r_fmax(chain[h][0], chain[h][1]), r_fmax(chain[h][2], chain[h][3])));
  }
};

// Along the diagonals of a 16 x N accumulator: element (nb, e) of lane (g, t) = (lane / 4, lane % 4) lies on
// diagonal c - r = 8 (nb - h) + 2 t - g + e % 2 (h = e / 2), so the lane's (nb, h = 0) and (nb + 1, h = 1) share
// one, and so do lanes (g, t), (g + 2, t + 1), ..., nine apart. diagonal_sum(v) is the sum of v over such a
// chain of lanes, in its first lane (diagonal_head: g < 2 or t = 0); the other lanes' results are partial.
__device__ __forceinline__ bool diagonal_head() { return lane_id() / 4 < 2 || lane_id() % 4 == 0; }
// The lane's diagonal k (its row 0 of block k, row 1 of block k + 1) in chain e % 2, c - r = 8 k + 2 t - g + e % 2,
// plus `base`, the tile's first column less its first row.
__device__ __forceinline__ int lane_diagonal(int base, int k, int chain) {
  return base + 8 * k + 2 * (lane_id() % 4) + chain - lane_id() / 4;
}
__device__ __forceinline__ float diagonal_sum(float v) {
  const int g = lane_id() / 4, t = lane_id() % 4;
  const float next = shfl_down(v, 9);  // lane (g + 2, t + 1)
  v += t < 3 && g < 6 ? next : 0.f;
  const float after = shfl_down(v, 18);  // lane (g + 4, t + 2), its sum with (g + 6, t + 3)
  return v + (t < 2 && g < 4 ? after : 0.f);
}

// The lane's two rows (h) of a 16 x D A operand dotted with x (D numbers), each summed over the four lanes
// that hold the row: the operand's registers, not the rows again from global memory.
__device__ __forceinline__ void rows_dot(const PackedTile<D>& a, const real* x, real (&dot)[2]) {
  const int t = lane_id() % 4;
  dot[0] = dot[1] = 0;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // register r: row h = r % 2, columns 16 kk + 8 (r / 2) + 2 t and the next
      const int c = 16 * kk + 8 * (r / 2) + 2 * t;
      dot[r % 2] +=
          to_real((store_t)(a.reg[kk][r] & 0xffffu)) * x[c] + to_real((store_t)(a.reg[kk][r] >> 16)) * x[c + 1];
    }
  dot[0] = quad_sum(dot[0]), dot[1] = quad_sum(dot[1]);
}

// A 16 x D accumulator, row h of the lane's two scaled by scale[h], into rows r0.. of a [T, D] array
// (rows from T on are not written).
__device__ __forceinline__ void store_rows(store_t* x, const FloatTile<D>& c, int r0, int T, const float (&scale)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long row = r0 + frag_row(2 * h);
    if (row >= T) continue;
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
      *reinterpret_cast<unsigned*>(x + row * D + frag_col(nb, 0)) =
          pack_rn<HALF_MMA>(c.frag[nb][2 * h] * scale[h], c.frag[nb][2 * h + 1] * scale[h]);
  }
}
