// The tensor-core kernels' CUDA text: the files of kernels/cuda/, embedded at build time
// (cmake/embed_cuda.cmake). kernels/cuda/emit_cuda.cpp prints a variant's constants and functions, then these.
#pragma once

namespace sink::kernels::cuda_text {

extern const char kWarpSm80[];         // warp_sm80.cuh: mma.sync, ldmatrix, cp.async, shuffles (PTX)
extern const char kTile[];             // tile.cuh: fragments, tile loads, products, row reductions
extern const char kWarpSm90[];         // warp_sm90.cuh: wgmma (PTX, sm_90a)
extern const char kTileSm90[];         // tile_sm90.cuh: swizzled tiles and the products on wgmma
extern const char kForward[];          // forward.cuh: sink_forward's body
extern const char kBackwardRows[];     // backward_rows.cuh: sink_backward_rows's body (D, the k* and sink terms)
extern const char kBackwardKeys[];     // backward_keys.cuh: sink_backward_keys's body (dK, dV, dg)
extern const char kBackwardQueries[];  // backward_queries.cuh: sink_backward_queries's body (dQ)

}  // namespace sink::kernels::cuda_text
