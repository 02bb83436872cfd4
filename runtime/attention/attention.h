// The attention operation of DESIGN.md §5 in LibTorch: the reference path
// and test oracle. Autograd provides its backward pass.
//
//   x_ij = scale_qk <q_i, k_j> + g(i - j)     (q, k already through phi)
//   s_ij = score(x_ij)                        masked entries contribute 0
//   A_ij = alpha w(s_ij) / Z_i                w, Z: the normaliser's (plan/normalizers.h)
//   a sink logit b_h is one more column, of no value
//   o_i  = sum_j A_ij v_j  (+ A_i* v* for the k* column)
#pragma once
#include <optional>
#include <torch/torch.h>

#include "plan/run_config.h"

namespace sink::rt {

struct AttentionInputs {
  torch::Tensor q, k, v;                    // [B, H, T, dh] (k, v already repeated for grouped-query heads)
  std::optional<torch::Tensor> bias;        // g(i-j): broadcastable to [B, H, T, T]
  std::optional<torch::Tensor> k_star;      // [H, dh] or [1, dh]: an extra key column seen by every query
  std::optional<torch::Tensor> v_star;      // its value (zeros for K biases)
  std::optional<torch::Tensor> sink_logit;  // [H]: a logit per head in the softmax denominator, with no value
};

struct AttentionOutput {
  torch::Tensor out;         // [B, H, T, dh]
  torch::Tensor probe;       // when asked: [B, H, T, S] attention (or proxy) with the k* column first if present
  torch::Tensor sink_share;  // when asked and there is a sink logit: [B, H, T], its share of each row
};

// Which (query, key) pairs a mask allows: [T, T] bool. Causal, with the
// prefix block bidirectional and the window limiting how far back: written
// here apart from plan/visibility.cpp, the oracle of the kernels' ranges.
torch::Tensor allowed_pairs(int64_t T, int64_t prefix, int64_t window);
// The same for a run's attention: a rule beyond prefix and window
// (AttentionConfig::rule) from its expressions, checked against masks written
// out by hand in tests/plan/visibility_test.cpp.
torch::Tensor allowed_pairs(const AttentionConfig& cfg, int64_t T);

AttentionOutput reference_attention(const AttentionConfig& cfg, const AttentionInputs& in, bool want_probe);

// The sink logit b's share of each row, w(b) / Z ([B|1, H, T] like Z), from a kernel's row statistics Z and
// shift_or_sum (the row max m in the online form).
torch::Tensor sink_logit_share(const AttentionConfig& cfg, const torch::Tensor& b, const torch::Tensor& Z,
                               const torch::Tensor& shift_or_sum);

// The attention a sink metric reads: A itself for sum-normalized non-negative
// scores, otherwise the paper's proxy: s/(sum s + 1e-8), or |s|/sum|s| when
// scores can be negative. `allowed` has the layout of s.
torch::Tensor metric_attention(const AttentionConfig& cfg, const torch::Tensor& s, const torch::Tensor& A,
                               const torch::Tensor& allowed);

}  // namespace sink::rt
