// The fixed parts of the generated CUDA source (kernels/cuda/emit_cuda.cpp puts
// the variant's constants and score functions in front of them). The kernel
// bodies read the variant only through those constexpr flags, so the device
// compiler drops every branch a variant does not take: one text per kernel,
// no hand-written variant.
#pragma once
#include <string>

namespace sink::kernels {

std::string cuda_math_prelude(bool f64, bool fast);  // r_exp..., r_div, SINK_INF; fast: the SFU's exp, division
std::string cuda_real_storage();                     // store_t = real
std::string cuda_bf16_storage();                     // store_t = bf16 bits, round to nearest even
std::string cuda_fp16_storage();                     // store_t = IEEE half bits, round to nearest even
std::string cuda_shared_functions();                 // ranges, normalizers, softpick's term, the column gradient
std::string cuda_forward_body();
std::string cuda_backward_rows_body();
std::string cuda_backward_keys_body();
std::string cuda_backward_queries_body();
std::string cuda_probe_body();

}  // namespace sink::kernels
