// The transformer, configured only from the Plan: LLaMA-style by default
// (RoPE, pre-RMSNorm, SwiGLU) with every knob the paper ablates.
#pragma once
#include <torch/torch.h>
#include <torch/version.h>

#include "plan/run_config.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/training/step_operations.h"

namespace sink::rt {

struct Norm : torch::nn::Module {
  Norm(NormKind kind, int64_t d, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  double eps;
  torch::Tensor weight, bias;  // bias: LayerNorm's; undefined for RMSNorm
};

struct FeedForward : torch::nn::Module {
  FeedForward(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const StepOperations& ops);
  Ffn act;  // the activation alone: relu, gelu or swish
  bool gated;
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};

// What a probed forward of one layer's attention gives a measurement.
struct LayerProbe {
  torch::Tensor attention;   // [B, H, T', S] metric attention
  torch::Tensor sink_share;  // [B, H, T'] the sink logit's share, when there is one
  torch::Tensor gate;        // [B, H, T', dh|1] gate values of a gated model
  torch::Tensor geometry;    // [3, H] first_token_geometry (runtime/measurement/geometry.h)
  torch::Tensor output;      // [B, T', d] what the attention adds to the residual stream (after wo)
};

// What every layer reads of the positions: RoPE's tables ([T, d_head], or undefined) and the position term by
// distance (ALiBi's or T5's [H, T], or undefined).
struct Positions {
  torch::Tensor rope_cos, rope_sin, g;
};

struct SelfAttention : torch::nn::Module {
  SelfAttention(const ModelConfig& c, std::shared_ptr<AttentionBackend> backend);
  torch::Tensor forward(const torch::Tensor& x, const Positions& positions, const StepOperations& ops,
                        LayerProbe* probe);
  ModelConfig cfg;
  std::shared_ptr<AttentionBackend> backend;
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  torch::Tensor kernel_w1, kernel_w2;  // mlp kernel, per head
  torch::Tensor k_star_learned;        // [H|1, k_dims]
  torch::Tensor v_star;                // learned parameter or fixed buffer, [H|1, dh]
  torch::nn::Linear wg{nullptr};       // gated attention: x -> H * dh (elementwise) or H (headwise) gate logits
  torch::Tensor sink_logit;            // [H]: learned parameter or fixed buffer
  // Differential attention: lambda = exp(<lq1, lk1>) - exp(<lq2, lk2>) + lambda_init; the output's RMS-norm gain.
  torch::Tensor lambda_q1, lambda_k1, lambda_q2, lambda_k2, out_norm_weight;

 private:
  torch::Tensor differential(const AttentionCall& call, LayerProbe* probe);
};

struct Block : torch::nn::Module {
  Block(const ModelConfig& c, std::shared_ptr<AttentionBackend> backend);
  struct Output {
    torch::Tensor stream;  // the residual stream after the block
    torch::Tensor normed;  // pre-norm: the stream normed by `next`, made by the same operation as the last add
    torch::Tensor hidden;  // what a measurement of massive activations reads: the stream (post-norm: before its LN)
  };
  // One block on the residual stream x. Pre-norm: `normed` is x normed by this block's first norm where the add
  // before made it (else undefined), `next` the norm after the block (the next block's first, or the final one), so
  // that each residual add and the norm after it are one operation. Post-norm: `normed` and `next` unused.
  Output forward(const torch::Tensor& x, const torch::Tensor& normed, const Norm* next, const Positions& positions,
                 const StepOperations& ops, LayerProbe* probe);
  ModelConfig cfg;
  std::shared_ptr<Norm> norm1, norm2;
  std::shared_ptr<SelfAttention> attn;
  std::shared_ptr<FeedForward> ffn;
};

struct ForwardResult {
  torch::Tensor features;                  // [B, T, d] the LM head's input (after the final norm, sink token removed)
  torch::Tensor logits;                    // [B, T, vocab], unless forward was asked for the features alone
  std::vector<torch::Tensor> attention;    // per layer [B, H, T', S] metric attention, when probing
  std::vector<torch::Tensor> hidden;       // per layer [B, T', d] (before the LN for post-norm), when asked
  std::vector<torch::Tensor> gates;        // per layer gate values [B, H, T', dh|1] when probing a gated model
  std::vector<torch::Tensor> sink_shares;  // per layer [B, H, T'] when probing a model with a sink logit
  std::vector<torch::Tensor> geometry;     // per layer [3, H] when probing (runtime/measurement/geometry.h)
  std::vector<torch::Tensor> attention_outputs;  // per layer [B, T', d] when probing: the attention's output
};

// Built on `device`, with the attention backend the plan and the device select.
struct Transformer : torch::nn::Module {
  explicit Transformer(const ModelConfig& c, torch::Device device = torch::kCPU);
  ForwardResult forward(const torch::Tensor& tokens, bool probe = false, bool hidden = false);
  // The LM head's input alone, no logits: for the loss, which applies the head a chunk at a time
  // (runtime/training/lm_head_loss.h).
  torch::Tensor features(const torch::Tensor& tokens);
  // A probed forward without the logits, which a measurement does not read (a [B, T, vocab] tensor).
  ForwardResult probe(const torch::Tensor& tokens, bool hidden = false);
  // The LM head's matrix [vocab, d]: the embedding's when they are tied.
  torch::Tensor head_weight();
  // The attention every layer runs from now on (a measurement's windowed rule, the tests' emulated kernels).
  void use_attention(std::shared_ptr<AttentionBackend> attention);
  torch::Tensor distance_bias(int64_t T);  // ALiBi or T5 bucket bias by distance |i - j|: [H, T], or undefined
  // RoPE's tables for positions 0..T-1 as apply_rope reads them, [T, d_head] float on the model's device: each
  // pair's cos on both its channels, and its sin, negated on the pair's first channel.
  std::pair<torch::Tensor, torch::Tensor> rope_tables(int64_t T);
  // Parameters AdamW decays: weight matrices and embeddings, not gains, k*, v*, x*.
  std::vector<torch::Tensor> decayed_parameters();
  std::vector<torch::Tensor> other_parameters();

  ModelConfig cfg;
  torch::Device device;
  std::shared_ptr<AttentionBackend> backend;  // shared by the layers
  torch::nn::Embedding embed{nullptr}, positions{nullptr}, relative{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor sink_token;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<Norm> final_norm;
  // The operations around the attention (runtime/training/step_operations.h): the step kernels where a GPU runs
  // them (runtime/training/step_kernels.h), the CPU's fused ones on the CPU (cpu_step_operations.h), else LibTorch's.
  std::shared_ptr<const StepOperations> operations;
  // What this model fuses ("residual add + RMSNorm, swiglu's activation"), or "" for nothing.
  std::string fused_operations() const { return operations->fused(cfg); }

 private:
  ForwardResult trunk(const torch::Tensor& tokens, bool probe, bool hidden);  // everything but the logits
  // Built once for the longest sequence seen and narrowed: each entry depends on its position alone, so a
  // longer table's first T rows are the T-row table bit for bit. Not parameters or buffers: never saved.
  // The same for the sinusoidal table and T5's bucket of each distance: on the device, so a step copies
  // nothing from pageable host memory (a copy that would wait for the GPU).
  torch::Tensor rope_cos_, rope_sin_, sinusoid_, relative_buckets_;
};

// T5's bucket of a distance n >= 0.
int64_t relative_bucket(int64_t n, int64_t buckets, int64_t max_distance);

}  // namespace sink::rt
