// Hugging Face decoder checkpoints (config.json + *.safetensors), for
// measurement: the architectures of the paper's Table 1 and Figure 4.
//   llama   LLaMA, Mistral, Qwen2: RoPE (Hugging Face's rotate-half layout),
//           RMSNorm, SwiGLU, grouped-query attention, optional q/k/v biases
//   gpt2    learned positions, LayerNorm, GELU, Conv1D weights ([in, out])
//   gpt_neox GPT-NeoX / Pythia: fused per-head qkv, partial rotary, parallel residual
//   opt     learned positions offset by 2, ReLU, pre- or post-LayerNorm
// Weights stay in their stored dtype (fp32, fp16, bf16) and are converted to
// fp32 one layer at a time, so a bf16 checkpoint needs about its own size in
// memory.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

struct HfConfig {
  std::string model_type;  // as config.json says: llama, mistral, qwen2, gpt2, gpt_neox, opt
  std::string family;      // llama, gpt2, gpt_neox, opt
  int64_t d = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  double norm_eps = 1e-5;
  int64_t rotary_dims = 0;  // leading dims of each head that rotate; 0: learned positions
  double rope_theta = 10000;
  int64_t position_offset = 0;     // OPT's learned positions start at 2
  int64_t sliding_window = 0;      // 0: full causal attention
  bool parallel_residual = false;  // GPT-NeoX: x + attn(ln1 x) + mlp(ln2 x)
  bool norm_before = true;         // OPT-350m normalises after each sublayer
  std::string activation;          // silu, gelu, gelu_tanh, relu
  int64_t bos_id = -1;             // -1: config.json names none
};

// Throws std::runtime_error naming the field, for a config.json that is not
// one of the architectures above or uses a feature this reader would compute
// differently from the checkpoint's own code (rope_scaling, ...).
HfConfig read_hf_config(const std::string& dir);

class HfModel {
 public:
  // `dir` holds config.json and the safetensors file(s).
  explicit HfModel(const std::string& dir);
  const HfConfig& config() const { return cfg_; }

  // One pass over ids [N, T]; for each layer, its attention probabilities
  // [N, H, T, T] and the residual stream after it [N, T, d], both fp32.
  using LayerVisitor = std::function<void(int64_t layer, const torch::Tensor& attention, const torch::Tensor& hidden)>;
  void forward(const torch::Tensor& ids, const LayerVisitor& visit) const;

  // The mean next-token cross-entropy of ids [N, T] against targets [N, T] (the LM head after the final norm, a few
  // sequences at a time): with `allowed` [T, T] defined, each query sees only the keys it allows (and the model's own
  // sliding window); with bits > 0, every decoder layer's linear weights and inputs fake-quantized to that many bits
  // (runtime/measurement/sink_costs.h's fake_quantize; biases, embeddings and the head as stored).
  double loss(const torch::Tensor& ids, const torch::Tensor& targets, const torch::Tensor& allowed = {},
              int64_t bits = 0) const;

 private:
  torch::Tensor weight(const std::string& name) const;    // fp32; throws naming a missing tensor
  torch::Tensor optional(const std::string& name) const;  // undefined when absent
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       torch::Tensor& probs) const;               // [N, H, T, dh] each (k, v: kv heads)
  torch::Tensor rotate(const torch::Tensor& x, int64_t T) const;  // RoPE on the leading rotary_dims
  torch::Tensor activate(const torch::Tensor& x) const;
  torch::Tensor llama_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const;
  torch::Tensor gpt2_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const;
  torch::Tensor neox_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const;
  torch::Tensor opt_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const;
  torch::Tensor embed(const torch::Tensor& ids) const;
  torch::Tensor layer(const torch::Tensor& h, int64_t l, torch::Tensor& probs) const;
  torch::Tensor final_features(const torch::Tensor& h) const;  // the final norm (and OPT's project_out)
  torch::Tensor head() const;                                  // [vocab, d]: the LM head, or the tied embedding
  // x W^T + b (W^T: Conv1D's stored [in, out] with `stored_transposed`), fake-quantized while loss() asks.
  torch::Tensor dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                      bool stored_transposed = false) const;

  HfConfig cfg_;
  std::string prefix_;  // "model.", "transformer.", ... or "" for bare base-model checkpoints
  std::map<std::string, torch::Tensor> tensors_;
  // What loss() changes for the length of one call: the keys each query may see, the bits of the linear layers.
  mutable torch::Tensor allowed_;
  mutable int64_t bits_ = 0;
};

}  // namespace sink::rt
