// llama2.c checkpoints (version 0 .bin: 7 int32 header, then fp32 weights)
// loaded into our Transformer: RoPE, RMSNorm, SwiGLU, grouped-query
// attention, embedding shared with the output.
#pragma once
#include <memory>
#include <string>

#include "runtime/training/model.h"

namespace sink::rt {

struct Llama2cModel {
  ModelConfig config;
  std::shared_ptr<Transformer> model;
  int64_t seq_len = 0;
};

// Throws std::runtime_error with a clear message on a malformed file.
Llama2cModel load_llama2c(const std::string& path);

// Why a model of `config` has no llama2.c checkpoint, naming the plan field
// the format cannot hold; empty when it has one. The format is exactly what
// load_llama2c builds, so anything else would load as another function.
std::string llama2c_unsupported(const ModelConfig& config);

// Writes `model` in the layout load_llama2c reads, with `seq_len` in the
// header (llama2.c sizes its KV cache by it). `path` ends up whole or
// untouched. Throws std::runtime_error: an unsupported model
// (llama2c_unsupported), or a write that failed.
void save_llama2c(Transformer& model, int64_t seq_len, const std::string& path);

// Greedy decoding from BOS (id 1) for `steps` tokens.
std::vector<int32_t> greedy_decode(Transformer& model, int64_t steps, int32_t bos = 1);

}  // namespace sink::rt
