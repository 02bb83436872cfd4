// llama2.c checkpoints (version 0 .bin: 7 int32 header, then fp32 weights)
// loaded into our Transformer: RoPE, RMSNorm, SwiGLU, grouped-query
// attention, embedding shared with the output.
#pragma once
#include <memory>
#include <string>

#include "runtime/model.h"

namespace sink::rt {

struct Llama2cModel {
  ModelConfig config;
  std::shared_ptr<Transformer> model;
  int64_t seq_len = 0;
};

// Throws std::runtime_error with a clear message on a malformed file.
Llama2cModel load_llama2c(const std::string& path);

// Greedy decoding from BOS (id 1) for `steps` tokens.
std::vector<int32_t> greedy_decode(Transformer& model, int64_t steps, int32_t bos = 1);

}  // namespace sink::rt
