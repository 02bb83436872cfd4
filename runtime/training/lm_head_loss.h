// The LM head and its cross-entropy in one operation, a chunk of rows at a
// time, so that no step holds a whole batch's logits. With the paper's
// vocabulary (50,432) a batch of 8 x 1,024 tokens has 1.65 GB of fp32 logits,
// and eager autograd keeps three tensors of that size (the logits, their
// log-softmax, their gradient); here one chunk's worth exists at a time.
//
// The gradient is computed in the forward pass, chunk by chunk, while each
// chunk's logits are at hand (as Liger's fused linear cross-entropy does):
// the backward then only scales the two saved gradients by the loss's
// gradient. That is three matrix products per chunk, as eager autograd makes,
// and none recomputed. Under autocast the products run in the autocast's
// precision and the log-sum-exp in fp32, as eager PyTorch's `linear` then
// `cross_entropy` do.
#pragma once
#include <torch/torch.h>

namespace sink::rt {

struct Transformer;

// sum_i row_weight_i * (logsumexp_j <f_i, w_j> - <f_i, w_{y_i}>): features [..., d], weight [vocab, d],
// targets [...] (token ids < vocab, on any device), row_weights [...] float. Differentiable in features and
// weight. Gradients are formed only when grad mode is on and one of the two requires them. chunk_rows: the rows
// a chunk takes, 0 for cross_entropy_chunk_rows(vocab).
torch::Tensor linear_cross_entropy(const torch::Tensor& features, const torch::Tensor& weight,
                                   const torch::Tensor& targets, const torch::Tensor& row_weights,
                                   int64_t chunk_rows = 0);

// The rows one chunk takes for a vocabulary: as many as keep its fp32 logits near 64 MB, at least one.
int64_t cross_entropy_chunk_rows(int64_t vocab);

// Each target's weight in a language model's mean loss: 1 / (positions that carry loss), and 0 inside a
// prefix-LM's prefix (target t, 0-based, is token t + 2, 1-based: inside the prefix when t + 2 <= prefix).
// targets [B, T]; the weights are float on the targets' device.
torch::Tensor mean_loss_weights(const torch::Tensor& targets, int64_t prefix);

// A language model's loss, the one every step and measurement computes: the model's mean cross-entropy on
// `tokens` over the positions that carry loss (a prefix LM's targets inside the prefix carry none), the LM head
// applied a chunk of rows at a time. `targets` move to the model's device.
torch::Tensor lm_loss(Transformer& model, const torch::Tensor& tokens, const torch::Tensor& targets, int64_t prefix);

}  // namespace sink::rt
