#include "runtime/interop/hf_export.h"

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/interop/safetensors.h"
#include "runtime/training/positions.h"
#include "runtime/training/run_dir.h"

namespace sink::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kNoClass = "no stock transformers class computes it";

std::string refuse(const std::string& field, const std::string& value, const std::string& because = kNoClass) {
  return fmt::format("{} = {}: {}", field, value, because);
}

// Fields that no stock class computes, whatever the rest of the model.
std::string paper_variant(const ModelConfig& c) {
  const AttentionConfig& a = c.attention;
  if (!is_softmax(a.score, a.normalize))
    return fmt::format("attention.score = {} with attention.normalize = {}: {} (softmax attention only)",
                       to_string(a.score), a.normalize, kNoClass);
  if (a.kernel != AttnKernel::identity) return refuse("attention.kernel", name_of(a.kernel));
  if (a.gate != Gate::none) return refuse("attention.gate", name_of(a.gate));
  if (a.has_sink_logit()) return refuse("attention.sink_logit", name_of(a.sink_logit));
  if (a.differential) return refuse("attention.differential", "true");
  if (a.scale != 1) return refuse("attention.scale", fmt::format("{}", a.scale));
  if (a.rule.prefix != 0) return refuse("loss.prefix", std::to_string(a.rule.prefix));
  if (!a.rule.of_range_alone()) return fmt::format("visibility {}: {}", a.rule.describe(), kNoClass);
  if (c.sink_token) return refuse("model.sink_token", "true");
  if (c.biases != Biases::none) return refuse("model.biases", name_of(c.biases));
  if (c.heads_combine != HeadsCombine::concat) return refuse("model.heads_combine", name_of(c.heads_combine));
  return "";
}

bool gated(Ffn ffn) { return ffn == Ffn::swiglu || ffn == Ffn::geglu || ffn == Ffn::reglu; }

// Hugging Face's activation names for sinklab's (ACT2FN: "gelu" is the exact, erf form, as torch::gelu).
std::string activation(Ffn ffn) {
  if (ffn == Ffn::swiglu || ffn == Ffn::swish) return "silu";
  if (ffn == Ffn::geglu || ffn == Ffn::gelu) return "gelu";
  return "relu";
}

// sinklab rotates interleaved pairs (2i, 2i+1), Hugging Face's LLaMA the
// halves (i, i + d_head/2): the rows of wq and wk reordered per head.
torch::Tensor to_rotate_half(const torch::Tensor& w, int64_t heads, int64_t d_head) {
  return w.view({heads, d_head / 2, 2, w.size(1)}).transpose(1, 2).reshape({heads * d_head, w.size(1)});
}

// GPT-2's map of the 256 bytes onto printable characters (its byte-level BPE alphabet), as UTF-8.
std::string byte_character(int byte) {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  int code = byte;
  if (!printable(byte)) {
    code = 256;
    for (int b = 0; b < byte; ++b) code += printable(b) ? 0 : 1;
  }
  std::string out;
  if (code < 0x80)
    out += static_cast<char>(code);
  else
    out += {static_cast<char>(0xC0 | (code >> 6)), static_cast<char>(0x80 | (code & 0x3F))};
  return out;
}

// sinklab's byte tokenizer in Hugging Face's format: a byte-level BPE with no
// merges and no pre-splitting, so every byte is its own token with its value
// as id; BOS 256, EOS 257 as special tokens.
json byte_tokenizer_json(const HfTokens& tokens) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_character(b)] = b;
  auto special = [](int64_t id, const char* content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", {special(tokens.bos, "<|sinklab_bos|>"), special(tokens.eos, "<|sinklab_eos|>")}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", json::array()}}}};
}

// GPT-2's and OPT's learned position table for sinklab's absolute positions: the learned table itself, the
// fixed sinusoidal one as sinklab computes it, or zeros for none (adding nothing).
torch::Tensor position_table(Transformer& model, int64_t rows) {
  if (model.cfg.pe == PosEmbedding::learned)
    return model.positions->weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  if (model.cfg.pe == PosEmbedding::sinusoidal) return sinusoidal_positions(rows, model.cfg.d);
  return torch::zeros({rows, model.cfg.d});
}

void write_json(const fs::path& path, const json& j) {
  const std::string text = j.dump(2) + "\n";
  FileWriter out(path.string());
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace

std::string hf_model_type(const ModelConfig& c, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return std::string();
  };
  if (auto reason = paper_variant(c); !reason.empty()) return no(reason);
  if (c.pe == PosEmbedding::rope) {
    if (c.placement != NormPlacement::pre)
      return no(refuse("model.placement", name_of(c.placement),
                       "RoPE models are exported as LLaMA or GPT-NeoX, both pre-norm"));
    if (c.norm == NormKind::rmsnorm) {
      if (!gated(c.ffn))
        return no(refuse("model.ffn", name_of(c.ffn),
                         "RoPE + RMSNorm models are exported as LLaMA, whose FFN is gated (swiglu, geglu, reglu)"));
      return c.attention.rule.window > 0 ? "mistral" : "llama";
    }
    // RoPE + LayerNorm: GPT-NeoX with every dimension rotating and the serial residual.
    if (gated(c.ffn))
      return no(refuse("model.ffn", name_of(c.ffn),
                       "RoPE + LayerNorm models are exported as GPT-NeoX, whose FFN is not gated"));
    if (c.kv_heads != c.heads)
      return no(refuse("model.kv_heads", std::to_string(c.kv_heads), "GPT-NeoX has no grouped-query attention"));
    if (c.attention.rule.window > 0)
      return no(refuse("loss.window", std::to_string(c.attention.rule.window), "GPT-NeoX has no sliding window"));
    return "gpt_neox";
  }
  if (c.pe == PosEmbedding::learned || c.pe == PosEmbedding::nope || c.pe == PosEmbedding::sinusoidal) {
    if (c.norm != NormKind::layernorm)
      return no(refuse("model.norm", name_of(c.norm),
                       "models with absolute or no positions are exported as GPT-2 or OPT, which have LayerNorm"));
    if (gated(c.ffn))
      return no(refuse("model.ffn", name_of(c.ffn), "GPT-2's and OPT's FFN is not gated (gelu, relu, swish)"));
    if (c.kv_heads != c.heads)
      return no(refuse("model.kv_heads", std::to_string(c.kv_heads), "GPT-2 and OPT have no grouped-query attention"));
    if (c.attention.rule.window > 0)
      return no(refuse("loss.window", std::to_string(c.attention.rule.window), "GPT-2 and OPT have no sliding window"));
    if (c.placement == NormPlacement::pre) return "gpt2";
    // OPT-350m's layout: each sublayer's LayerNorm after its residual sum, no final norm.
    if (c.norm_eps != 1e-5)
      return no(refuse("model.norm_eps", fmt::format("{}", c.norm_eps),
                       "post-norm models are exported as OPT, whose "
                       "LayerNorm has eps 1e-5"));
    return "opt";
  }
  return no(refuse("model.pe", name_of(c.pe)));
}

HfTokens hf_tokens_of(const DataConfig& data) {
  HfTokens t;
  if (data.corpus == CorpusKind::synthetic) {
    t.bos = data.synthetic_vocab;  // corpus.cpp: the one extra token
  } else if (data.tokenizer == TokenizerKind::bytes) {
    t.bos = 256, t.eos = 257, t.bytes = true;
  } else {
    t.bos = 1, t.eos = 2;  // SentencePiece and llama2.c tokenizers
  }
  return t;
}

std::string save_hf(Transformer& model, int64_t context, const HfTokens& tokens, const std::string& dir) {
  const ModelConfig& c = model.cfg;
  std::string why;
  const std::string type = hf_model_type(c, &why);
  if (type.empty()) throw std::runtime_error(fmt::format("cannot write '{}' as a Hugging Face model: {}", dir, why));
  torch::NoGradGuard no_grad;
  auto w = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat).contiguous(); };
  std::map<std::string, torch::Tensor> tensors;
  // GPT-2's and OPT's table size: the plan's (the longer of train.context and measure.T), as sinklab's own.
  const int64_t positions = c.max_positions > 0 ? c.max_positions : context;
  json config = {{"vocab_size", c.vocab},
                 {"tie_word_embeddings", c.tie_embeddings},
                 {"dtype", "float32"},
                 {"torch_dtype", "float32"}};
  if (tokens.bos >= 0) config["bos_token_id"] = tokens.bos;
  if (tokens.eos >= 0) config["eos_token_id"] = tokens.eos;
  if (type == "gpt2") {
    config.update({{"model_type", "gpt2"},
                   {"architectures", {"GPT2LMHeadModel"}},
                   {"n_embd", c.d},
                   {"n_layer", c.layers},
                   {"n_head", c.heads},
                   {"n_inner", c.ffn_hidden},
                   {"n_positions", positions},
                   {"activation_function", activation(c.ffn)},
                   {"layer_norm_epsilon", c.norm_eps},
                   {"resid_pdrop", 0.0},
                   {"embd_pdrop", 0.0},
                   {"attn_pdrop", 0.0}});
    tensors["transformer.wte.weight"] = w(model.embed->weight);
    tensors["transformer.wpe.weight"] = position_table(model, positions);
    for (int64_t l = 0; l < c.layers; ++l) {
      const Block& b = *model.blocks[l];
      const std::string p = fmt::format("transformer.h.{}.", l);
      // Conv1D stores [in, out]; sinklab's layers have no biases: GPT-2's are zero.
      auto conv = [&](const std::string& name, const torch::Tensor& weight) {
        tensors[p + name + ".weight"] = w(weight).t().contiguous();
        tensors[p + name + ".bias"] = torch::zeros({weight.size(0)});
      };
      conv("attn.c_attn", torch::cat({b.attn->wq->weight, b.attn->wk->weight, b.attn->wv->weight}, 0));
      conv("attn.c_proj", b.attn->wo->weight);
      conv("mlp.c_fc", b.ffn->w1->weight);
      conv("mlp.c_proj", b.ffn->w2->weight);
      tensors[p + "ln_1.weight"] = w(b.norm1->weight), tensors[p + "ln_1.bias"] = w(b.norm1->bias);
      tensors[p + "ln_2.weight"] = w(b.norm2->weight), tensors[p + "ln_2.bias"] = w(b.norm2->bias);
    }
    tensors["transformer.ln_f.weight"] = w(model.final_norm->weight);
    tensors["transformer.ln_f.bias"] = w(model.final_norm->bias);
  } else if (type == "opt") {
    config.update({{"model_type", "opt"},
                   {"architectures", {"OPTForCausalLM"}},
                   {"hidden_size", c.d},
                   {"word_embed_proj_dim", c.d},
                   {"num_hidden_layers", c.layers},
                   {"num_attention_heads", c.heads},
                   {"ffn_dim", c.ffn_hidden},
                   {"max_position_embeddings", positions},
                   {"do_layer_norm_before", false},
                   {"activation_function", activation(c.ffn)},
                   {"enable_bias", true},
                   {"layer_norm_elementwise_affine", true},
                   {"dropout", 0.0},
                   {"attention_dropout", 0.0},
                   {"layerdrop", 0.0}});
    const std::string d = "model.decoder.";
    tensors[d + "embed_tokens.weight"] = w(model.embed->weight);
    // OPT's position table starts 2 rows in (its padding offset).
    auto table = torch::zeros({positions + 2, c.d});
    table.narrow(0, 2, positions).copy_(position_table(model, positions));
    tensors[d + "embed_positions.weight"] = table;
    for (int64_t l = 0; l < c.layers; ++l) {
      const Block& b = *model.blocks[l];
      const std::string p = fmt::format("{}layers.{}.", d, l);
      auto linear = [&](const std::string& name, const torch::Tensor& weight) {  // zero biases: sinklab's have none
        tensors[p + name + ".weight"] = w(weight);
        tensors[p + name + ".bias"] = torch::zeros({weight.size(0)});
      };
      linear("self_attn.q_proj", b.attn->wq->weight);
      linear("self_attn.k_proj", b.attn->wk->weight);
      linear("self_attn.v_proj", b.attn->wv->weight);
      linear("self_attn.out_proj", b.attn->wo->weight);
      linear("fc1", b.ffn->w1->weight);
      linear("fc2", b.ffn->w2->weight);
      tensors[p + "self_attn_layer_norm.weight"] = w(b.norm1->weight);
      tensors[p + "self_attn_layer_norm.bias"] = w(b.norm1->bias);
      tensors[p + "final_layer_norm.weight"] = w(b.norm2->weight);
      tensors[p + "final_layer_norm.bias"] = w(b.norm2->bias);
    }
  } else if (type == "gpt_neox") {
    config.update(
        {{"model_type", "gpt_neox"},
         {"architectures", {"GPTNeoXForCausalLM"}},
         {"hidden_size", c.d},
         {"num_hidden_layers", c.layers},
         {"num_attention_heads", c.heads},
         {"intermediate_size", c.ffn_hidden},
         {"hidden_act", activation(c.ffn)},
         {"max_position_embeddings", context},
         {"layer_norm_eps", c.norm_eps},
         {"use_parallel_residual", false},
         {"attention_bias", true},
         {"hidden_dropout", 0.0},
         {"attention_dropout", 0.0},
         // rope_parameters for transformers 5, rotary_pct and rotary_emb_base for the 4.x readers
         {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}, {"partial_rotary_factor", 1.0}}},
         {"rotary_pct", 1.0},
         {"rotary_emb_base", c.rope_theta}});
    tensors["gpt_neox.embed_in.weight"] = w(model.embed->weight);
    for (int64_t l = 0; l < c.layers; ++l) {
      const Block& b = *model.blocks[l];
      const std::string p = fmt::format("gpt_neox.layers.{}.", l);
      auto per_head = [&](const torch::Tensor& t) { return t.view({c.heads, c.d_head, c.d}); };
      // The fused projection is laid out per head: [q_h, k_h, v_h] for each head h.
      auto qkv = torch::stack(
          {per_head(to_rotate_half(w(b.attn->wq->weight), c.heads, c.d_head)),
           per_head(to_rotate_half(w(b.attn->wk->weight), c.heads, c.d_head)), per_head(w(b.attn->wv->weight))},
          1);
      auto linear = [&](const std::string& name, const torch::Tensor& weight) {  // zero biases: sinklab's have none
        tensors[p + name + ".weight"] = weight.contiguous();
        tensors[p + name + ".bias"] = torch::zeros({weight.size(0)});
      };
      linear("attention.query_key_value", qkv.reshape({3 * c.heads * c.d_head, c.d}));
      linear("attention.dense", w(b.attn->wo->weight));
      linear("mlp.dense_h_to_4h", w(b.ffn->w1->weight));
      linear("mlp.dense_4h_to_h", w(b.ffn->w2->weight));
      tensors[p + "input_layernorm.weight"] = w(b.norm1->weight),
                  tensors[p + "input_layernorm.bias"] = w(b.norm1->bias);
      tensors[p + "post_attention_layernorm.weight"] = w(b.norm2->weight);
      tensors[p + "post_attention_layernorm.bias"] = w(b.norm2->bias);
    }
    tensors["gpt_neox.final_layer_norm.weight"] = w(model.final_norm->weight);
    tensors["gpt_neox.final_layer_norm.bias"] = w(model.final_norm->bias);
  } else {
    const json rope = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
    config.update({{"model_type", type},
                   {"architectures", {type == "llama" ? "LlamaForCausalLM" : "MistralForCausalLM"}},
                   {"hidden_size", c.d},
                   {"intermediate_size", c.ffn_hidden},
                   {"num_hidden_layers", c.layers},
                   {"num_attention_heads", c.heads},
                   {"num_key_value_heads", c.kv_heads},
                   {"head_dim", c.d_head},
                   {"hidden_act", activation(c.ffn)},
                   {"max_position_embeddings", context},
                   {"rms_norm_eps", c.norm_eps},
                   // rope_parameters for transformers 5, rope_theta for the 4.x readers
                   {"rope_parameters", rope},
                   {"rope_theta", c.rope_theta},
                   {"attention_bias", false},
                   {"mlp_bias", false},
                   {"attention_dropout", 0.0}});
    if (type == "mistral") config["sliding_window"] = c.attention.rule.window;
    tensors["model.embed_tokens.weight"] = w(model.embed->weight);
    for (int64_t l = 0; l < c.layers; ++l) {
      const Block& b = *model.blocks[l];
      const std::string p = fmt::format("model.layers.{}.", l);
      tensors[p + "input_layernorm.weight"] = w(b.norm1->weight);
      tensors[p + "self_attn.q_proj.weight"] = to_rotate_half(w(b.attn->wq->weight), c.heads, c.d_head);
      tensors[p + "self_attn.k_proj.weight"] = to_rotate_half(w(b.attn->wk->weight), c.kv_heads, c.d_head);
      tensors[p + "self_attn.v_proj.weight"] = w(b.attn->wv->weight);
      tensors[p + "self_attn.o_proj.weight"] = w(b.attn->wo->weight);
      tensors[p + "post_attention_layernorm.weight"] = w(b.norm2->weight);
      tensors[p + "mlp.gate_proj.weight"] = w(b.ffn->w1->weight);
      tensors[p + "mlp.up_proj.weight"] = w(b.ffn->w3->weight);
      tensors[p + "mlp.down_proj.weight"] = w(b.ffn->w2->weight);
    }
    tensors["model.norm.weight"] = w(model.final_norm->weight);
  }
  if (!c.tie_embeddings) tensors[type == "gpt_neox" ? "embed_out.weight" : "lm_head.weight"] = w(model.head->weight);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors);
  write_json(fs::path(dir) / "config.json", config);
  if (tokens.bytes) {
    write_json(fs::path(dir) / "tokenizer.json", byte_tokenizer_json(tokens));
    write_json(fs::path(dir) / "tokenizer_config.json", {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                                         {"bos_token", "<|sinklab_bos|>"},
                                                         {"eos_token", "<|sinklab_eos|>"},
                                                         {"model_max_length", context},
                                                         {"add_bos_token", false}});
  }
  return type;
}

}  // namespace sink::rt
