// The geometry of the first token that the paper's Section 3.1 reads a sink
// from (its Figure 2: a small angle between the queries and k_1, not a large
// norm of k_1), per head, from the q, k, v one attention call saw.
#pragma once
#include <torch/torch.h>

namespace sink::rt {

// q, k, v [B, H, T, dh] (after RoPE and phi; T >= 2) -> [3, H] in double:
//   row 0: ||k_1|| / mean_{t>1} ||k_t||      (mean over sequences)
//   row 1: ||v_1|| / mean_{t>1} ||v_t||
//   row 2: mean over sequences and queries t > 1 of cos(q_t, k_1)
torch::Tensor first_token_geometry(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

}  // namespace sink::rt
