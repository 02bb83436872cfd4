// The attention's q, k and v from the stacked projection, one pass each way: qkv [rows, (H + 2 Hkv) d_head] (each
// row's q heads, then its k heads, then its v heads, as runtime/training/model.h's project writes them) into q
// [B, H, T, d_head] and k, v [B, Hkv, T, d_head], the head-major layout the attention kernels read, with RoPE on q and
// k on the way. Eager LibTorch makes RoPE four passes over q and four over k, and the copies into the head-major
// layout three more; the backward as many again. RoPE here rotates each interleaved pair (x_2m, x_2m+1) of a head by
// its position's angle (runtime/training/model.h's apply_rope), in float, from Transformer::rope_tables: cos on
// both channels of a pair, sin negated on the first.
//
// Printed before this text (kernels/cuda/step_source.cpp): real (float), store_t with load and store, and
//   constexpr int kHeads, kKvHeads, kHeadDim;  // H, Hkv, d_head (even)
//   constexpr bool kRope;                      // rotate q and k; else cos and sin are not read
// A thread a pair of columns: blockIdx.x picks the pairs of a row, blockIdx.y the first row (b T + t), and the blocks
// stride over the rows, `row_blocks` of them. Sizes after the pointers: rows (B T), T, row_blocks, one unused.

constexpr int kSplitThreads = 256;
constexpr int kSplitPairs = (kHeads + 2 * kKvHeads) * kHeadDim / 2;  // a row's pairs

// Where pair `pair` of row `row` sits in its head-major tensor (0 q, 1 k, 2 v), and whether RoPE turns it.
struct HeadSlot {
  int part;
  long long at;  // its first element's index in that tensor
  int angle;     // the pair's first channel in row t of the tables
  bool turns;
};

__device__ __forceinline__ HeadSlot head_slot(long long row, int pair, long long T) {
  const int column = 2 * pair, head_of_row = column / kHeadDim, within = column % kHeadDim;
  const int part = head_of_row < kHeads ? 0 : head_of_row < kHeads + kKvHeads ? 1 : 2;
  const int head = head_of_row - (part == 0 ? 0 : part == 1 ? kHeads : kHeads + kKvHeads);
  const int heads = part == 0 ? kHeads : kKvHeads;
  // 32-bit division: B T fits, and the 64-bit one calls a slow path.
  const unsigned b = (unsigned)row / (unsigned)T, t = (unsigned)row - b * (unsigned)T;
  return {part, (((long long)b * heads + head) * T + t) * kHeadDim + within, (int)t * kHeadDim + within,
          kRope && part < 2};
}

extern "C" __global__ void __launch_bounds__(kSplitThreads)
    sink_split_heads_forward(SINK_PARAMS_sink_split_heads_forward) {
  const int pair = blockIdx.x * kSplitThreads + threadIdx.x;
  if (pair >= kSplitPairs) return;
  for (long long row = blockIdx.y; row < rows; row += row_blocks) {
    const HeadSlot slot = head_slot(row, pair, T);
    store_t* out = slot.part == 0 ? q : slot.part == 1 ? k : v;
    const long long from = row * 2 * kSplitPairs + 2 * pair;
    const float a = load(qkv, from), b = load(qkv, from + 1);
    if (!slot.turns) {
      store(out, slot.at, a);
      store(out, slot.at + 1, b);
      continue;
    }
    // The tables' sin is negated on a pair's first channel: its second holds +sin. (a cos - b sin, b cos + a sin).
    const float c = cos[slot.angle], s = sin[slot.angle + 1];
    store(out, slot.at, a * c - b * s);
    store(out, slot.at + 1, b * c + a * s);
  }
}

// d qkv laid out as qkv, each pair of dq and dk turned back: the rotation's transpose, (da c + db s, db c - da s).
extern "C" __global__ void __launch_bounds__(kSplitThreads)
    sink_split_heads_backward(SINK_PARAMS_sink_split_heads_backward) {
  const int pair = blockIdx.x * kSplitThreads + threadIdx.x;
  if (pair >= kSplitPairs) return;
  for (long long row = blockIdx.y; row < rows; row += row_blocks) {
    const HeadSlot slot = head_slot(row, pair, T);
    const store_t* grad = slot.part == 0 ? dq : slot.part == 1 ? dk : dv;
    const long long to = row * 2 * kSplitPairs + 2 * pair;
    const float da = load(grad, slot.at), db = load(grad, slot.at + 1);
    if (!slot.turns) {
      store(d_qkv, to, da);
      store(d_qkv, to + 1, db);
      continue;
    }
    const float c = cos[slot.angle], s = sin[slot.angle + 1];
    store(d_qkv, to, da * c + db * s);
    store(d_qkv, to + 1, db * c - da * s);
  }
}
