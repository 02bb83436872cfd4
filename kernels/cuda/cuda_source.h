// The parts of the generated CUDA source that depend on the precision: the math functions and the storage type.
// Everything else the kernels run is in kernels/cuda/*.cuh (cuda_text.h), after the variant's constants and
// functions that kernels/cuda/emit_cuda.cpp prints; the kernel bodies read the variant only through those
// constexpr flags, so the device compiler drops every branch a variant does not take.
#pragma once
#include <string>

#include "kernels/cuda/tile_choice.h"

namespace sink::kernels {

std::string cuda_math_prelude(bool f64, bool fast);  // r_exp..., r_div, SINK_INF; fast: the SFU's exp, division
// store_t, load and store: real itself; bf16 bits or IEEE half bits, rounded to nearest even.
std::string cuda_storage(CudaStorage storage);

}  // namespace sink::kernels
