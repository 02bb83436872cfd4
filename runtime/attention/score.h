// Evaluates the plan's expression trees on tensors: the attention score
// s(qk, i, j, n), the normalisers' expressions and fixed value vectors
// (v* = 5 * onehot(0)).
#pragma once
#include <torch/torch.h>

#include "plan/value.h"

namespace sink::rt {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// An expression of the named tensors (broadcast together); numbers take the first one's dtype and device.
torch::Tensor eval_expr(const ExprNode& e, const NamedTensors& vars);

// qk: [..., T, S] scaled inner products (+ position bias); i, j: 1-based query and key positions, n: the
// number of keys each query sees, all broadcastable to qk.
torch::Tensor eval_score(const ExprNode& e, const torch::Tensor& qk, const torch::Tensor& i, const torch::Tensor& j,
                         const torch::Tensor& n);

// A vector of d_head values.
torch::Tensor eval_vector(const ExprNode& e, int64_t d_head);

}  // namespace sink::rt
