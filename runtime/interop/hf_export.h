// `sinkc export RUN --hf DIR`: a trained run as a Hugging Face model folder
// (config.json, model.safetensors; tokenizer.json for a byte-tokenized run)
// that a stock transformers class loads and computes exactly:
//   llama    RoPE, RMSNorm, a gated FFN (SwiGLU, GeGLU, ReGLU), pre-norm,
//            grouped-query attention        -> LlamaForCausalLM
//   mistral  the same with loss.window      -> MistralForCausalLM (sliding_window)
//   gpt_neox RoPE, LayerNorm, an ungated FFN (GELU, ReLU, swish), pre-norm,
//            multi-head attention           -> GPTNeoXForCausalLM (rotary_pct 1, serial residual)
//   gpt2     learned, sinusoidal or no positions, LayerNorm, an ungated FFN
//            (GELU, ReLU, swish), pre-norm, multi-head attention -> GPT2LMHeadModel
//   opt      the same post-norm (LayerNorm eps 1e-5) -> OPTForCausalLM
//            (do_layer_norm_before = false, OPT-350m's layout)
// with softmax attention and nothing else of the paper's variants. Every
// other plan is refused, naming the field.
#pragma once
#include <string>

#include "runtime/training/model.h"

namespace sink::rt {

// The model_type a model of `config` is written as ("llama", "mistral",
// "gpt_neox", "gpt2", "opt"), or "" with `why` naming the plan field no stock class computes.
std::string hf_model_type(const ModelConfig& config, std::string* why = nullptr);

// What the run's data says about its tokens, for config.json and the tokenizer.
struct HfTokens {
  int64_t bos = -1, eos = -1;  // -1: none
  bool bytes = false;          // the run reads UTF-8 bytes: tokenizer.json is written
};
HfTokens hf_tokens_of(const DataConfig& data);

// Writes DIR/config.json, DIR/model.safetensors (fp32) and, for a byte run,
// DIR/tokenizer.json and tokenizer_config.json. `context` is the run's
// train.context (max_position_embeddings). Returns the model_type. Throws
// std::runtime_error naming the field (hf_model_type) before writing anything,
// or naming the file that could not be written.
std::string save_hf(Transformer& model, int64_t context, const HfTokens& tokens, const std::string& dir);

}  // namespace sink::rt
