// The kernels' CUDA text: the .cuh files of kernels/cuda/, embedded at build time (cmake/embed_cuda.cmake).
// kernels/cuda/emit_cuda.cpp prints a variant's constants and functions, then these.
#pragma once

namespace sink::kernels::cuda_text {

extern const char kMathSfu[];             // math_sfu.cuh: exp, division, log, tanh, sqrt on the special-function unit
extern const char kStorageReal[];         // storage_real.cuh: store_t = real
extern const char kStorageBf16[];         // storage_bf16.cuh: store_t = bf16 bits
extern const char kStorageFp16[];         // storage_fp16.cuh: store_t = IEEE half bits
extern const char kColumns[];             // columns.cuh: a column's weight and gradient, the backward's row statistics
extern const char kScalarForward[];       // scalar_forward.cuh: sink_forward's body without tensor cores
extern const char kScalarBackwardRows[];  // scalar_backward_rows.cuh
extern const char kScalarBackwardKeys[];  // scalar_backward_keys.cuh
extern const char kScalarBackwardQueries[];  // scalar_backward_queries.cuh
extern const char kProbe[];                  // probe.cuh: sink_probe's body (the measurements' weights)
extern const char kWarpSm80[];               // warp_sm80.cuh: mma.sync, ldmatrix, cp.async, shuffles (PTX)
extern const char kTile[];                   // tile.cuh: fragments, tile loads, products, row reductions
extern const char kLogits[];                 // logits.cuh: a pair's logit with the position table's term
extern const char kWarpSm90[];               // warp_sm90.cuh: wgmma (PTX, sm_90a)
extern const char kTileSm90[];               // tile_sm90.cuh: swizzled tiles and the products on wgmma
extern const char kFold[];                   // fold.cuh: a tile of keys' logits, its fold, its dS
extern const char kForward[];                // forward.cuh: sink_forward's body
extern const char kBackwardRows[];           // backward_rows.cuh: sink_backward_rows's body (D, the k* and sink terms)
extern const char kBackwardKeys[];           // backward_keys.cuh: sink_backward_keys's body (dK, dV, dg)
extern const char kBackwardQueries[];        // backward_queries.cuh: sink_backward_queries's body (dQ)
extern const char kResidualNorm[];           // residual_norm.cuh: the residual add and RMSNorm, forward and backward
extern const char kGatedActivation[];        // gated_activation.cuh: a gated FFN's activation, forward and backward
extern const char kSplitHeads[];             // split_heads.cuh: q, k, v into heads with RoPE, forward and backward

// Every text above, in the order SINKLAB_CUDA_HEADERS lists them (what a hash of the kernels' code reads).
extern const char* const kEveryText[];
extern const int kTextCount;

}  // namespace sink::kernels::cuda_text
