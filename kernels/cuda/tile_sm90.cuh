// The Hopper kernels' tile operations (sm_90a): the same products as tile.cuh's mma_abt and mma_ab, on
// warpgroup matrix multiplies (kernels/cuda/warp_sm90.cuh) that read the key and value tiles from shared memory
// themselves, so no ldmatrix and no B registers; a warp's accumulators and A operands keep tile.cuh's fragment
// layout, so the kernel's fold of the scores is the same code. Overloads of tile.cuh's functions on the tile's
// type: a swizzled tile is a plain `store_t*`, a padded one `store_t (*)[PITCH]`.
//
// A swizzled tile of ROWS rows of D 16-bit numbers is D / SWIZZLE_COLS pieces of ROWS x SWIZZLE bytes, one after
// the other; in a piece, row r's SWIZZLE bytes are at r SWIZZLE, its 16-byte chunk c at chunk c ^ (bits 7.. of
// r SWIZZLE): the PTX ISA's 128-, 64- or 32-byte swizzle, which wgmma undoes on the address bits, so the tile
// starts on a 1024-byte boundary. The same tile is K-major for S = Q K^T (B's columns are key rows) and MN-major
// for O += W V (B's rows are value rows).
// (A tile of rows COLS numbers long other than D's, dS^T's in the fused backward, swizzles by its own width.)
template <int COLS>
constexpr int SWIZZLE_OF = COLS % 64 == 0   ? 128
                           : COLS % 32 == 0 ? 64
                                            : 32;  // bytes of a row in one piece
constexpr int SWIZZLE = SWIZZLE_OF<D>;
constexpr int SWIZZLE_COLS = SWIZZLE / 2;  // its 16-bit numbers

// The byte offset of 16-byte chunk c (of COLS / 8) of row r in a ROWS-row swizzled tile.
template <int ROWS, int COLS = D>
__device__ __forceinline__ int swizzled_chunk(int r, int c) {
  constexpr int BYTES = SWIZZLE_OF<COLS>, CHUNKS = BYTES / 16;
  const int piece = c / CHUNKS, within = c % CHUNKS;
  return piece * ROWS * BYTES + r * BYTES + ((within ^ ((r * BYTES >> 7) & (CHUNKS - 1))) << 4);
}

// A shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): the start address, the leading- and
// stride-dimension byte offsets (each in 16-byte units, 14 bits) and the swizzle mode (1: 128 bytes, 2: 64, 3: 32)
// of a tile whose rows are COLS numbers long.
template <int COLS = D>
__device__ __forceinline__ unsigned long long tile_descriptor(const void* start, unsigned leading, unsigned stride) {
  constexpr unsigned long long mode = SWIZZLE_OF<COLS> == 128 ? 1 : SWIZZLE_OF<COLS> == 64 ? 2 : 3;
  return (unsigned long long)((shared_address(start) >> 4) & 0x3fffu) |
         (unsigned long long)((leading >> 4) & 0x3fffu) << 16 | (unsigned long long)((stride >> 4) & 0x3fffu) << 32 |
         mode << 62;
}

// Rows first..first+ROWS-1 of a [T, D] array into a swizzled tile, as load_tile_async does into a padded one: the
// eight threads of a row write its 128 bytes of one piece, whole rows per warp, so each store's 32 chunks fill
// distinct banks four times over.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tile_async(store_t* tile, const store_t* x, int first, int last) {
  constexpr int CHUNKS = D / 8;
  constexpr int ROUNDS = (ROWS * CHUNKS + THREADS - 1) / THREADS;
#pragma unroll
  for (int round = 0; round < ROUNDS; ++round) {
    const int c = threadIdx.x + round * THREADS;
    if (ROWS * CHUNKS % THREADS != 0 && c >= ROWS * CHUNKS) break;
    const int r = c / CHUNKS, chunk = c % CHUNKS;
    cp_async_16(reinterpret_cast<unsigned char*>(tile) + swizzled_chunk<ROWS>(r, chunk),
                x + (long long)imin(first + r, last) * D + chunk * 8, first + r <= last);
  }
}
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_pair_async(store_t* a_tile, store_t* b_tile, const store_t* a, const store_t* b,
                                                int first, int last) {
  load_tile_async<ROWS, THREADS>(a_tile, a, first, last);
  load_tile_async<ROWS, THREADS>(b_tile, b, first, last);
  cp_async_commit();
}

// Every accumulator register in an array of them, fenced for the compiler (warp_sm90.cuh's fence_register).
__device__ __forceinline__ void fence_registers(float& r) { fence_register(r); }
template <int N>
__device__ __forceinline__ void fence_registers(FloatTile<N>& tile) {
#pragma unroll
  for (int nb = 0; nb < N / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) fence_register(tile.frag[nb][e]);
}
template <typename T, int N>
__device__ __forceinline__ void fence_registers(T (&registers)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_registers(registers[i]);
}

// The products issued so far, but the newest PENDING groups, have landed in their accumulators (each issue_* a
// group): the given arrays, which the kernel reads next, fenced so that no read of them moves above the wait. An
// array whose product is still pending is not named (a read of it would make ptxas wait for it).
template <int PENDING, typename... Accumulators>
__device__ __forceinline__ void await_products(Accumulators&... accumulators) {
  wgmma_wait<PENDING>();
  (fence_registers(accumulators), ...);
}

// acc (16 x N per fragment) = A B^T (not +=: the first 16 columns' wgmma ignores acc's registers, which then need
// no zeros), B^T's columns the swizzled tile's N rows: per 16 columns of A one wgmma per fragment, B K-major (its
// column n is row n's 16 numbers, SWIZZLE apart per row, 8 rows a stride), the start moved along the row within a
// piece. Issued as one group, not waited for (await_products): until then neither acc nor A may be touched, nor
// the tile rewritten.
template <int N, int M>
__device__ __forceinline__ void issue_abt(FloatTile<N> (&acc)[M], const PackedTile<D> (&a)[M], const store_t* tile) {
  wgmma_fence();
#pragma unroll
  for (int f = 0; f < M; ++f)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int byte = 16 * kk / SWIZZLE_COLS * N * SWIZZLE + 16 * kk % SWIZZLE_COLS * 2;
      const unsigned long long b =
          tile_descriptor(reinterpret_cast<const unsigned char*>(tile) + byte, 16, 8 * SWIZZLE);
      if (kk == 0)
        wgmma_rs<HALF_MMA, N, 0, 0>(acc[f].frag, a[f].reg[kk], b);
      else
        wgmma_rs<HALF_MMA, N, 0>(acc[f].frag, a[f].reg[kk], b);
    }
  wgmma_commit();
}

// acc (16 x N) = A B^T as above with A read from shared memory too: the warpgroup's 64 rows of the swizzled 64 x D
// tile a_tile (K-major, as B; warp w's rows 16 w..), where they would take registers a kernel has no room for (the
// fused Hopper backward's K and V rows).
template <int N>
__device__ __forceinline__ void issue_abt(FloatTile<N>& acc, const store_t* a_tile, const store_t* tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int along = 16 * kk % SWIZZLE_COLS * 2, piece = 16 * kk / SWIZZLE_COLS * SWIZZLE;
    const unsigned long long a =
        tile_descriptor(reinterpret_cast<const unsigned char*>(a_tile) + piece * 64 + along, 16, 8 * SWIZZLE);
    const unsigned long long b =
        tile_descriptor(reinterpret_cast<const unsigned char*>(tile) + piece * N + along, 16, 8 * SWIZZLE);
    if (kk == 0)
      wgmma_ss<HALF_MMA, N, 0, 0, 0>(acc.frag, a, b);
    else
      wgmma_ss<HALF_MMA, N, 0, 0>(acc.frag, a, b);
  }
  wgmma_commit();
}

// acc (16 x D per fragment) += A B, B the swizzled tile's K rows: per 16 rows one wgmma per fragment, B MN-major
// (row k's D numbers along a piece's row, pieces ROWS x SWIZZLE apart, 8 rows a stride); issued as issue_abt.
template <int K, int M>
__device__ __forceinline__ void issue_ab(FloatTile<D> (&acc)[M], const PackedTile<K> (&a)[M], const store_t* tile) {
  fence_registers(acc);
  wgmma_fence();
#pragma unroll
  for (int f = 0; f < M; ++f)
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      const unsigned long long b =
          tile_descriptor(reinterpret_cast<const unsigned char*>(tile) + 16 * kk * SWIZZLE, K * SWIZZLE, 8 * SWIZZLE);
      wgmma_rs<HALF_MMA, D, 1>(acc[f].frag, a[f].reg[kk], b);
    }
  wgmma_commit();
}

// acc += A B, waited for before it returns.
template <int K, int M>
__device__ __forceinline__ void mma_ab(FloatTile<D> (&acc)[M], const PackedTile<K> (&a)[M], const store_t* tile) {
  issue_ab<K, M>(acc, a, tile);
  await_products<0>(acc);
}

// One fragment a warp (the backward kernels'), as tile.cuh's.
template <int N>
__device__ __forceinline__ void issue_abt(FloatTile<N>& acc, const PackedTile<D>& a, const store_t* tile) {
  issue_abt<N, 1>(reinterpret_cast<FloatTile<N>(&)[1]>(acc), reinterpret_cast<const PackedTile<D>(&)[1]>(a), tile);
}
template <int K>
__device__ __forceinline__ void issue_ab(FloatTile<D>& acc, const PackedTile<K>& a, const store_t* tile) {
  issue_ab<K, 1>(reinterpret_cast<FloatTile<D>(&)[1]>(acc), reinterpret_cast<const PackedTile<K>(&)[1]>(a), tile);
}
template <int K>
__device__ __forceinline__ void mma_ab(FloatTile<D>& acc, const PackedTile<K>& a, const store_t* tile) {
  issue_ab<K>(acc, a, tile);
  await_products<0>(acc);
}

// A warp's 16 x COLS A operand (as_a's layout) into rows r0..r0+15 of a ROWS x COLS swizzled tile, which the
// warpgroup's products then read (after async_proxy_fence and a barrier).
template <int ROWS, int COLS>
__device__ __forceinline__ void store_swizzled(store_t* tile, int r0, const PackedTile<COLS>& a) {
  unsigned char* bytes = reinterpret_cast<unsigned char*>(tile);
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int kk = 0; kk < COLS / 16; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e)  // register e: row g (+ 8 for e odd), columns 16 kk + 2 t (+ 8 from e = 2)
      *reinterpret_cast<unsigned*>(bytes + swizzled_chunk<ROWS, COLS>(r0 + g + 8 * (e % 2), 2 * kk + e / 2) + 4 * t) =
          a.reg[kk][e];
}

// acc (the warp's 16 of the 64 x D product) = X^T B: X the swizzled K x 64 tile x (a row per summed index, its 64
// columns the product's rows), B the swizzled K x D tile b; both read by the warpgroup's products from shared
// memory (A MN-major, B MN-major as issue_ab's), the first 16 rows' product setting acc. Issued as one group.
template <int K>
__device__ __forceinline__ void issue_atb(FloatTile<D>& acc, const store_t* x, const store_t* b) {
  constexpr int X_BYTES = SWIZZLE_OF<64>;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const unsigned long long a_descriptor =
        tile_descriptor<64>(reinterpret_cast<const unsigned char*>(x) + 16 * kk * X_BYTES, K * X_BYTES, 8 * X_BYTES);
    const unsigned long long b_descriptor =
        tile_descriptor(reinterpret_cast<const unsigned char*>(b) + 16 * kk * SWIZZLE, K * SWIZZLE, 8 * SWIZZLE);
    if (kk == 0)
      wgmma_ss<HALF_MMA, D, 1, 1, 0>(acc.frag, a_descriptor, b_descriptor);
    else
      wgmma_ss<HALF_MMA, D, 1, 1>(acc.frag, a_descriptor, b_descriptor);
  }
  wgmma_commit();
}
