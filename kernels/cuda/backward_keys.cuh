{
  // dK and dV on tensor cores: a block owns KEY_ROWS keys, 16 per warp, and streams the tiles of queries
  // that can see them (with dO and the rows' statistics). Per tile, transposed so the warp's keys are the
  // rows: S^T = K Q^T and dA^T = V dO^T, each pair's A and logit gradient (column_grad), then dV += A^T dO and
  // dK += dS^T Q; with FUSED_DQ also dQ += dS K, in float sums (then backward_queries does not run). The
  // position bias's gradient goes to dg by distance, atomically, where g wants one (a learned table; ALiBi's
  // is a constant), summed along each diagonal in registers and across lanes first. (Summed per tile in shared
  // memory instead, it compiled to a compare-and-swap loop per pair on sm_90: no native shared float add.)
  // Its tiles are bound by registers (the warp's K and V rows, dK and dV sums), not by shared memory: without
  // FUSED_DQ its arrays stay static, within 48 KiB. (As a struct, or in dynamic shared memory as the other two
  // kernels have theirs, p-norm's spilled 8 bytes at d_head 64, at 255 registers either way.) With FUSED_DQ they
  // also hold the block's K rows and a tile's dS^T, the operands of dQ's share, and on sm_90 that share in float
  // for the copy engine's bulk reduction, all in dynamic shared memory (KEY_SHARED_BYTES: past 48 KiB for 64-query
  // tiles). The float rows are D + 8 apart: the eight rows of one store then fall in different banks. On Hopper the
  // block is one warpgroup of 64 keys whose K and V rows wait in shared memory, all dynamic; fused
  // (FlashAttention-3's backward), a tile is 64 queries and dQ's share one warpgroup product read from shared
  // memory, of dS^T's tile and the K rows (tile_sm90.cuh's issue_atb).
#if SINK_WGMMA  // (the Hopper kernels' swizzled tiles, kernels/cuda/tile_sm90.cuh, from a 1024-byte boundary)
  struct alignas(1024) Shared {
    store_t q_tile[2][KEY_QUERIES * D], do_tile[2][KEY_QUERIES * D], k_swizzled[KEY_ROWS * D], v_swizzled[KEY_ROWS * D];
#if SINK_FUSED_DQ
    store_t ds_swizzled[KEY_ROWS * KEY_QUERIES];
#endif
    real divisor_tile[2][KEY_QUERIES], inv_divisor_tile[2][KEY_QUERIES], shift_or_sum_tile[2][KEY_QUERIES],
        delta_tile[2][KEY_QUERIES];
#if SINK_FUSED_DQ
    float dq_tile[KEY_QUERIES][D + 8];
#endif
  };
  Shared& shared = shared_block<Shared, KEY_SHARED_BYTES>();
  auto &q_tile = shared.q_tile, &do_tile = shared.do_tile;
  auto &divisor_tile = shared.divisor_tile, &inv_divisor_tile = shared.inv_divisor_tile,
       &shift_or_sum_tile = shared.shift_or_sum_tile, &delta_tile = shared.delta_tile;
  store_t(*k_rows)[PITCH] = nullptr, (*ds_tile)[KEY_QUERIES + 8] = nullptr;  // (the mma.sync form's: none here)
#if SINK_FUSED_DQ
  auto& dq_tile = shared.dq_tile;
#else
  float(*dq_tile)[D + 8] = nullptr;
#endif
#elif SINK_FUSED_DQ
  struct alignas(16) Shared {
    store_t q_tile[2][KEY_QUERIES][PITCH], do_tile[2][KEY_QUERIES][PITCH];
    real divisor_tile[2][KEY_QUERIES], inv_divisor_tile[2][KEY_QUERIES], shift_or_sum_tile[2][KEY_QUERIES],
        delta_tile[2][KEY_QUERIES];
    store_t k_rows[KEY_ROWS][PITCH], ds_tile[KEY_ROWS][KEY_QUERIES + 8];
    float dq_tile[KEY_QUERIES][D + 8];
  };
  Shared& shared = shared_block<Shared, KEY_SHARED_BYTES>();
  auto &q_tile = shared.q_tile, &do_tile = shared.do_tile;
  auto &divisor_tile = shared.divisor_tile, &inv_divisor_tile = shared.inv_divisor_tile,
       &shift_or_sum_tile = shared.shift_or_sum_tile, &delta_tile = shared.delta_tile;
  auto& k_rows = shared.k_rows;
  auto& ds_tile = shared.ds_tile;
  auto& dq_tile = shared.dq_tile;
#else
  __shared__ __align__(16) store_t q_tile[2][KEY_QUERIES][PITCH], do_tile[2][KEY_QUERIES][PITCH];
  __shared__ real divisor_tile[2][KEY_QUERIES], inv_divisor_tile[2][KEY_QUERIES], shift_or_sum_tile[2][KEY_QUERIES],
      delta_tile[2][KEY_QUERIES];
  store_t(*k_rows)[PITCH] = nullptr, (*ds_tile)[KEY_QUERIES + 8] = nullptr;  // (dQ's operands: none here)
  float(*dq_tile)[D + 8] = nullptr;
#endif
  static_assert(!FUSED_DQ || KEY_QUERIES <= KEY_THREADS, "a thread issues each row's bulk reduction");
  static_assert(!(FUSED_DQ && SINK_WGMMA) || (KEY_ROWS == 64 && KEY_QUERIES == 64),
                "the Hopper fused backward: a warpgroup of 64 keys, dQ's share of 64 queries one warpgroup product");
  const int warp = threadIdx.x / 32;
  const long long bh = blockIdx.y, head = (unsigned)blockIdx.y % (unsigned)H;  // (a 64-bit % is a call)
  const int n = (int)T;  // positions within the slice are 32-bit (tile.cuh)
  const int first_key = (int)blockIdx.x * KEY_ROWS, warp_key = first_key + 16 * warp;
  const int last_key = imin(first_key + KEY_ROWS - 1, n - 1);
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dk += bh * T * D, dv += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_GRAD) dg += bh * T;
  if (FUSED_DQ) dq_sum += bh * T * D;
  if (POSITION_BIAS) g += head * g_step;
#if SINK_WGMMA
  // The block's K and V rows, the A operands of S^T and dA^T, read by the products from shared memory: in
  // registers, beside 64-query tiles' scores and gradients (and dQ's share where it is fused), they spilled from
  // d_head 96 on. (Landed by the first stage's wait.)
  static_assert(KEY_ROWS == 64, "the Hopper backward_keys: one warpgroup, its K and V rows a 64-row tile each");
  const store_t *ka = shared.k_swizzled, *va = shared.v_swizzled;
  load_pair_async<KEY_ROWS, KEY_THREADS>(shared.k_swizzled, shared.v_swizzled, k, v, first_key, last_key);
#else
  PackedTile<D> ka, va;
  load_a_rows(ka, k, warp_key, n);
  load_a_rows(va, v, warp_key, n);
  if (FUSED_DQ) store_a<D>(k_rows, 16 * warp, ka);  // (read after the first stage's barrier)
#endif
  int key[2];
  bool is_key[2];
  real pos_j[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    is_key[h] = warp_key + lane_row(h) < n;
    key[h] = imin(warp_key + lane_row(h), n - 1), pos_j[h] = (real)(key[h] + 1);
  }
  FloatTile<D> dk_acc, dv_acc;
  dk_acc.zero(), dv_acc.zero();
  int first, last, unused;
  query_range(first_key, n, first, unused);
  query_range(last_key, n, unused, last);
  // The query tile's rows (dO's too) by asynchronous copies, their statistics by loads into registers: issued
  // before this tile's products and stored to shared memory after them, so no warp waits out a load's
  // latency per tile. Rows after `last` are zeros with Z = 1.
  constexpr int STAT_ROUNDS = (KEY_QUERIES + KEY_THREADS - 1) / KEY_THREADS;
  real next_z[STAT_ROUNDS], next_second[STAT_ROUNDS], next_delta[STAT_ROUNDS];
  auto fetch_queries = [&](int to, int qb) {
    load_pair_async<KEY_QUERIES, KEY_THREADS>(q_tile[to], do_tile[to], q, dout, qb, last);
#pragma unroll
    for (int round = 0; round < STAT_ROUNDS; ++round) {
      const int r = (int)threadIdx.x + round * KEY_THREADS, i = qb + r;
      if (KEY_QUERIES % KEY_THREADS != 0 && r >= KEY_QUERIES) break;
      next_z[round] = i <= last ? stats[i] : (real)1;
      next_second[round] = i <= last ? stats[T + i] : (real)0;
      next_delta[round] = i <= last ? delta[i] : (real)0;
    }
  };
  auto store_statistics = [&](int to) {
#pragma unroll
    for (int round = 0; round < STAT_ROUNDS; ++round) {
      const int r = (int)threadIdx.x + round * KEY_THREADS;
      if (KEY_QUERIES % KEY_THREADS != 0 && r >= KEY_QUERIES) break;
      real divisor, inv_divisor, shift_or_sum;
      backward_statistics(next_z[round], next_second[round], divisor, inv_divisor, shift_or_sum);
      if (!ONLINE) divisor_tile[to][r] = divisor, inv_divisor_tile[to][r] = inv_divisor;
      shift_or_sum_tile[to][r] = shift_or_sum;
      delta_tile[to][r] = next_delta[round] * DX_SCALE;  // (column_grad's dx_scale)
    }
  };
  // On sm_90 the fused dQ share of a tile leaves through dq_tile: the share of the tile before (its queries from
  // `reduced`), each row added into dQ by the copy engine, issued after a barrier that follows its writes.
  auto reduce_rows = [&](int reduced) {
    const int r = (int)threadIdx.x;
    if (r < KEY_QUERIES && reduced + r <= last)
      bulk_reduce_add(&dq_sum[(long long)(reduced + r) * D], dq_tile[r], D * (unsigned)sizeof(float));
  };
  int stage = 0;
  fetch_queries(0, first);
  store_statistics(0);
  for (int qb = first; qb <= last; qb += KEY_QUERIES, stage ^= 1) {
    const bool more = qb + KEY_QUERIES <= last;
    await_stage();
    if (FUSED_DQ && SINK_BULK_REDUCE && qb > first) reduce_rows(qb - KEY_QUERIES);
    if (more) fetch_queries(stage ^ 1, qb + KEY_QUERIES);
    FloatTile<KEY_QUERIES> sT, dAT;
    issue_abt<KEY_QUERIES>(sT, ka, q_tile[stage]);  // (on Hopper, both in flight at once)
    issue_abt<KEY_QUERIES>(dAT, va, do_tile[stage]);
    await_products<0>(sT, dAT);
    // Every query of the tile sees every key of the block, each a key (the block is not the last of a ragged
    // T), or the mask is decided per element.
    int tile_lo, tile_hi, unused_lo, unused_hi;
    key_range(qb, n, unused_lo, tile_hi);
    key_range(imin(qb + KEY_QUERIES - 1, n - 1), n, tile_lo, unused_hi);
    const bool full = !CHECKS_PAIRS && qb + KEY_QUERIES - 1 <= last && tile_lo <= first_key &&
                      tile_hi >= first_key + KEY_ROWS - 1 && first_key + KEY_ROWS <= n;
    // dg by diagonal (i - j): the lane's pairs on one summed, then along the lanes that share it (tile.cuh's
    // diagonal_sum), one atomic addition per diagonal and chain of lanes, a quarter of one per pair. Diagonal
    // k of the lane (its c - r is 8 k + 2 t - g + e % 2) takes row h = 0 of column block k and row h = 1 of
    // block k + 1: `closing` is diagonal nb - 1's, complete after block nb; `opening` diagonal nb's.
    float closing[2] = {0, 0}, opening[2] = {0, 0};
    auto add_diagonal = [&](int k, const float(&sum)[2]) {
#pragma unroll
      for (int e1 = 0; e1 < 2; ++e1) {
        const float total = diagonal_sum(sum[e1]);
        const int along = lane_diagonal(qb - warp_key, k, e1);  // i - j
        const int d = along < 0 ? -along : along;
        if (diagonal_head() && d < n && total != 0) atomicAdd(&dg[d], total);
      }
    };
#pragma unroll
    for (int nb = 0; nb < KEY_QUERIES / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const Element at{e / 2, nb, e};
        const int h = at.h, c = at.col();
        const int i = imin(qb + c, last);  // (a row after `last` is hidden)
        bool seen = full;
        if (!full) {
          int lo, hi;
          key_range(i, n, lo, hi);
          seen = is_key[h] && qb + c <= last && SEES(i, key[h], lo, hi, n);
        }
        real A, dx;
        // (Without a position table, of the product q.k: the scaling folds into the exponent.)
        column_grad<!POSITION_BIAS>(POSITION_BIAS ? logit_of(sT[at], i, key[h], g) : sT[at], (real)(i + 1), pos_j[h],
                                    (real)n, dAT[at], delta_tile[stage][c], ONLINE ? (real)1 : divisor_tile[stage][c],
                                    ONLINE ? (real)1 : inv_divisor_tile[stage][c], shift_or_sum_tile[stage][c], A, dx,
                                    DX_SCALE);
        sT[at] = seen ? A : (real)0;
        dAT[at] = seen ? dx * (SCALE_QK / DX_SCALE) : (real)0;  // dS, the gradient of q.k
        if (POSITION_GRAD) {
          const float dg_term = seen ? dx * (1 / DX_SCALE) : 0.f;
          if (h == 0)
            opening[at.chain()] += dg_term;
          else
            closing[at.chain()] += dg_term;
        }
      }
      if (POSITION_GRAD) {
        add_diagonal(nb - 1, closing);
        closing[0] = opening[0], closing[1] = opening[1], opening[0] = opening[1] = 0;
      }
    }
    if (POSITION_GRAD) add_diagonal(KEY_QUERIES / 8 - 1, closing);
    PackedTile<KEY_QUERIES> aa, sa;
    as_a(aa, sT);
    as_a(sa, dAT);
#if SINK_FUSED_DQ && SINK_WGMMA
    // dQ's share of the tile, dS K over the block's 64 keys: the warpgroup's product of dS^T's tile and K's rows,
    // issued while dV's and dK's are on the tensor cores where the registers hold all three (to d_head 64).
    store_swizzled<KEY_ROWS, KEY_QUERIES>(shared.ds_swizzled, 16 * warp, sa);
    constexpr bool DQ_BESIDE = D <= 64;
#endif
    issue_ab<KEY_QUERIES>(dv_acc, aa, do_tile[stage]);
    issue_ab<KEY_QUERIES>(dk_acc, sa, q_tile[stage]);
#if SINK_FUSED_DQ && SINK_WGMMA
    {
      if (!DQ_BESIDE) await_products<0>(dv_acc, dk_acc);
      async_proxy_fence();  // (wgmma reads shared memory through the async proxy)
      bulk_wait_read();
      __syncthreads();
      FloatTile<D> dq_acc;
      issue_atb<KEY_ROWS>(dq_acc, shared.ds_swizzled, shared.k_swizzled);
      if (DQ_BESIDE)
        await_products<0>(dv_acc, dk_acc, dq_acc);
      else
        await_products<0>(dq_acc);
      dq_acc.pairs([&](int row, int col, float x, float y) { store_pair(&dq_tile[16 * warp + row][col], x, y); });
      async_proxy_fence();
    }
#else
    await_products<0>(dv_acc, dk_acc);
    if (FUSED_DQ) {
      // dQ's share of the tile, dS K over the block's keys, added into float sums (every key block adds to
      // the same query rows): dS^T through shared memory, a warp per CB blocks of 16 x 16 of the tile's dQ in one
      // row of blocks (the piece of dS read once for them). (The previous tile's readers of ds_tile are past this
      // tile's first barrier; the copy engine has read dq_tile before its issuing thread reaches the next.)
      store_a<KEY_QUERIES>(ds_tile, 16 * warp, sa);
      if (SINK_BULK_REDUCE) bulk_wait_read();
      __syncthreads();
      constexpr int COLS = D / 16, ROW_BLOCKS = KEY_QUERIES / 16, WARPS = KEY_THREADS / 32;
      constexpr int PER_ROW = WARPS > ROW_BLOCKS ? WARPS / ROW_BLOCKS : 1;  // warps sharing a row of blocks
      // Blocks a warp sums at once: its share of the row, at most 4 (2 from d_head 128, where four blocks' sums
      // beside the rest made a 2-warp block spill).
      constexpr int WANTED = COLS % PER_ROW == 0 ? COLS / PER_ROW : 1, CAP = D >= 128 ? 2 : 4;
      constexpr int CB = WANTED <= CAP ? WANTED : COLS % CAP == 0 ? CAP : 1, UNITS = ROW_BLOCKS * (COLS / CB);
#pragma unroll
      for (int round = 0; round < (UNITS + WARPS - 1) / WARPS; ++round) {
        const int u = warp + round * WARPS;
        if (UNITS % WARPS != 0 && u >= UNITS) break;
        const int rb = u / (COLS / CB), c0 = u % (COLS / CB) * CB;
        FloatTile<16 * CB> acc;
        acc.zero();
        mma_atb_blocks<KEY_ROWS, KEY_QUERIES + 8, CB>(acc, ds_tile, rb, k_rows, c0);
        acc.pairs([&](int row, int col, float x, float y) {
          const int r = 16 * rb + row, i = qb + r, c = 16 * c0 + col;
          if (SINK_BULK_REDUCE)
            store_pair(&dq_tile[r][c], x, y);
          else if (i <= last)
            red_add_pair(&dq_sum[(long long)i * D + c], x, y);
        });
      }
      if (SINK_BULK_REDUCE) async_proxy_fence();
    }
#endif
    // The next stage's statistics (its last reader was the previous tile, before this one's barrier), seen by
    // every warp after the next tile's.
    if (more) store_statistics(stage ^ 1);
  }
  if (FUSED_DQ && SINK_BULK_REDUCE && first <= last) {  // the last tile's share, and nothing left reading shared memory
    __syncthreads();
    reduce_rows(first + (last - first) / KEY_QUERIES * KEY_QUERIES);
    bulk_wait_read();
  }
  const float one[2] = {1, 1};
  store_rows(dk, dk_acc, warp_key, n, one);
  store_rows(dv, dv_acc, warp_key, n, one);
}
