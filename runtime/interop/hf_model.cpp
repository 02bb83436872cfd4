#include "runtime/interop/hf_model.h"

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/attention/attention.h"
#include "runtime/interop/safetensors.h"
#include "runtime/measurement/sink_costs.h"
#include "runtime/training/step_operations.h"

namespace sink::rt {

namespace fs = std::filesystem;
namespace F = torch::nn::functional;

namespace {

std::string activation_of(const std::string& name, const std::string& field) {
  if (name == "silu" || name == "swish") return "silu";
  if (name == "gelu") return "gelu";
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return "gelu_tanh";
  if (name == "relu") return "relu";
  throw std::runtime_error(
      fmt::format("config.json: {} = \"{}\" is an activation sinklab does not compute", field, name));
}

// [N, T, H * dh] -> [N, H, T, dh]
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
}

}  // namespace

HfConfig read_hf_config(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(
        fmt::format("{}: cannot read (a Hugging Face model folder holds config.json)", path.string()));
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw std::runtime_error(fmt::format("{}: not a JSON object", path.string()));
  auto integer = [&](std::initializer_list<const char*> names, int64_t fallback = -1) {
    for (const char* n : names)
      if (j.contains(n) && j[n].is_number_integer()) return j[n].get<int64_t>();
    if (fallback >= 0) return fallback;
    throw std::runtime_error(fmt::format("{}: needs the integer field '{}'", path.string(), *names.begin()));
  };
  auto number = [&](std::initializer_list<const char*> names, double fallback) {
    for (const char* n : names)
      if (j.contains(n) && j[n].is_number()) return j[n].get<double>();
    return fallback;
  };
  auto text = [&](const char* name, const char* fallback) {
    return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string(fallback);
  };
  auto flag = [&](const char* name, bool fallback) {
    return j.contains(name) && j[name].is_boolean() ? j[name].get<bool>() : fallback;
  };
  // transformers 5 writes RoPE's settings in rope_parameters; earlier versions beside the other fields.
  const nlohmann::json rope = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                  ? j["rope_parameters"]
                                  : nlohmann::json::object();
  auto rope_number = [&](const char* name, std::initializer_list<const char*> legacy, double fallback) {
    if (rope.contains(name) && rope[name].is_number()) return rope[name].get<double>();
    return number(legacy, fallback);
  };
  auto plain_rope_only = [&] {
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      throw std::runtime_error(fmt::format("{}: rope_scaling is set ({}); sinklab computes plain RoPE only",
                                           path.string(), j["rope_scaling"].dump()));
    const std::string type =
        rope.contains("rope_type") && rope["rope_type"].is_string() ? rope["rope_type"].get<std::string>() : "default";
    if (type != "default")
      throw std::runtime_error(
          fmt::format("{}: rope_parameters.rope_type = \"{}\"; sinklab computes plain RoPE only "
                      "(\"default\")",
                      path.string(), type));
  };

  HfConfig c;
  c.model_type = text("model_type", "");
  c.vocab = integer({"vocab_size"});
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int64_t>();
  if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2") {
    c.family = "llama";
    c.d = integer({"hidden_size"});
    c.layers = integer({"num_hidden_layers"});
    c.heads = integer({"num_attention_heads"});
    c.kv_heads = integer({"num_key_value_heads"}, c.heads);
    c.head_dim = integer({"head_dim"}, c.heads > 0 ? c.d / c.heads : 0);
    c.norm_eps = number({"rms_norm_eps"}, 1e-6);
    c.rope_theta = rope_number("rope_theta", {"rope_theta"}, 10000);
    c.rotary_dims = c.head_dim;
    c.activation = activation_of(text("hidden_act", "silu"), "hidden_act");
    plain_rope_only();
    const bool windowed = c.model_type == "mistral" || flag("use_sliding_window", false);
    if (windowed) c.sliding_window = integer({"sliding_window"}, 0);
  } else if (c.model_type == "gpt2") {
    c.family = "gpt2";
    c.d = integer({"n_embd", "hidden_size"});
    c.layers = integer({"n_layer", "num_hidden_layers"});
    c.heads = integer({"n_head", "num_attention_heads"});
    c.norm_eps = number({"layer_norm_epsilon"}, 1e-5);
    c.activation = activation_of(text("activation_function", "gelu_new"), "activation_function");
    if (flag("scale_attn_by_inverse_layer_idx", false))
      throw std::runtime_error(fmt::format("{}: scale_attn_by_inverse_layer_idx is not supported", path.string()));
    if (!flag("scale_attn_weights", true))
      throw std::runtime_error(fmt::format("{}: scale_attn_weights = false is not supported", path.string()));
  } else if (c.model_type == "gpt_neox") {
    c.family = "gpt_neox";
    c.d = integer({"hidden_size"});
    c.layers = integer({"num_hidden_layers"});
    c.heads = integer({"num_attention_heads"});
    c.norm_eps = number({"layer_norm_eps"}, 1e-5);
    c.rope_theta = rope_number("rope_theta", {"rotary_emb_base", "rope_theta"}, 10000);
    c.parallel_residual = flag("use_parallel_residual", true);
    c.activation = activation_of(text("hidden_act", "gelu"), "hidden_act");
    plain_rope_only();
  } else if (c.model_type == "opt") {
    c.family = "opt";
    c.d = integer({"hidden_size"});
    c.layers = integer({"num_hidden_layers"});
    c.heads = integer({"num_attention_heads"});
    c.position_offset = 2;
    c.norm_before = flag("do_layer_norm_before", true);
    c.activation = activation_of(text("activation_function", "relu"), "activation_function");
  } else {
    throw std::runtime_error(
        fmt::format("{}: model_type \"{}\" is not one sinklab reads (llama, mistral, qwen2, gpt2, "
                    "gpt_neox, opt)",
                    path.string(), c.model_type));
  }
  if (c.d <= 0 || c.layers <= 0 || c.heads <= 0 || c.d % c.heads != 0)
    throw std::runtime_error(
        fmt::format("{}: hidden size {} is not a positive multiple of {} heads", path.string(), c.d, c.heads));
  if (c.kv_heads <= 0) c.kv_heads = c.heads;
  if (c.head_dim <= 0) c.head_dim = c.d / c.heads;
  if (c.heads % c.kv_heads != 0)
    throw std::runtime_error(fmt::format("{}: {} attention heads are not a multiple of {} key/value heads",
                                         path.string(), c.heads, c.kv_heads));
  if (c.family == "gpt_neox") {
    double pct = rope_number("partial_rotary_factor", {"rotary_pct", "partial_rotary_factor"}, 0.25);
    c.rotary_dims = static_cast<int64_t>(c.head_dim * pct);
  }
  if (c.rotary_dims % 2 != 0)
    throw std::runtime_error(fmt::format("{}: {} rotary dimensions per head is odd", path.string(), c.rotary_dims));
  return c;
}

HfModel::HfModel(const std::string& dir) : cfg_(read_hf_config(dir)), tensors_(load_safetensors(dir)) {
  static const std::map<std::string, std::vector<std::string>> prefixes = {{"llama", {"model.", ""}},
                                                                           {"gpt2", {"transformer.", ""}},
                                                                           {"gpt_neox", {"gpt_neox.", ""}},
                                                                           {"opt", {"model.decoder.", "decoder."}}};
  static const std::map<std::string, std::string> embedding = {{"llama", "embed_tokens.weight"},
                                                               {"gpt2", "wte.weight"},
                                                               {"gpt_neox", "embed_in.weight"},
                                                               {"opt", "embed_tokens.weight"}};
  for (const auto& p : prefixes.at(cfg_.family))
    if (tensors_.count(p + embedding.at(cfg_.family))) prefix_ = p;
  weight(embedding.at(cfg_.family));  // a clear error now rather than mid-forward
}

torch::Tensor HfModel::optional(const std::string& name) const {
  auto it = tensors_.find(prefix_ + name);
  return it == tensors_.end() ? torch::Tensor() : it->second.to(torch::kFloat);
}

torch::Tensor HfModel::weight(const std::string& name) const {
  auto t = optional(name);
  if (!t.defined())
    throw std::runtime_error(fmt::format("the checkpoint has no tensor '{}{}', which a {} ({}) model needs", prefix_,
                                         name, cfg_.model_type, cfg_.family));
  return t;
}

torch::Tensor HfModel::activate(const torch::Tensor& x) const {
  if (cfg_.activation == "silu") return F::silu(x);
  if (cfg_.activation == "gelu") return F::gelu(x);
  if (cfg_.activation == "gelu_tanh") return F::gelu(x, F::GELUFuncOptions().approximate("tanh"));
  return F::relu(x);
}

torch::Tensor HfModel::rotate(const torch::Tensor& x, int64_t T) const {
  const int64_t r = cfg_.rotary_dims;
  if (r == 0) return x;
  auto inv_freq = 1.0 / torch::pow(cfg_.rope_theta, torch::arange(0, r, 2, torch::kLong).to(torch::kFloat) / double(r));
  auto freqs = torch::outer(torch::arange(T, torch::kFloat), inv_freq);
  auto angles = torch::cat({freqs, freqs}, -1);  // [T, r]: Hugging Face pairs dim i with i + r/2
  auto cos = angles.cos(), sin = angles.sin();
  auto rot = x.narrow(-1, 0, r);
  auto half_turn = torch::cat({-rot.narrow(-1, r / 2, r / 2), rot.narrow(-1, 0, r / 2)}, -1);
  auto turned = rot * cos + half_turn * sin;
  return r == x.size(-1) ? turned : torch::cat({turned, x.narrow(-1, r, x.size(-1) - r)}, -1);
}

torch::Tensor HfModel::attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              torch::Tensor& probs) const {
  const int64_t T = q.size(2), group = q.size(1) / k.size(1);
  auto keys = group > 1 ? k.repeat_interleave(group, 1) : k;
  auto values = group > 1 ? v.repeat_interleave(group, 1) : v;
  auto scores = torch::matmul(q, keys.transpose(-1, -2)) / std::sqrt(double(q.size(-1)));
  auto allowed = allowed_pairs(T, 0, cfg_.sliding_window);
  if (allowed_.defined()) allowed = allowed & allowed_;
  probs = torch::softmax(scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity()), -1);
  auto out = torch::matmul(probs, values);  // [N, H, T, dh]
  return out.transpose(1, 2).reshape({q.size(0), T, -1});
}

torch::Tensor HfModel::llama_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const {
  const std::string p = fmt::format("layers.{}.", l);
  const int64_t T = h.size(1);
  auto x = rms_norm(h, weight(p + "input_layernorm.weight"), cfg_.norm_eps);
  auto projection = [&](const char* name, int64_t heads) {
    return split_heads(
        dense(x, weight(p + "self_attn." + name + ".weight"), optional(p + "self_attn." + name + ".bias")), heads);
  };
  auto q = rotate(projection("q_proj", cfg_.heads), T);
  auto k = rotate(projection("k_proj", cfg_.kv_heads), T);
  auto v = projection("v_proj", cfg_.kv_heads);
  h = h + dense(attend(q, k, v, probs), weight(p + "self_attn.o_proj.weight"), optional(p + "self_attn.o_proj.bias"));
  x = rms_norm(h, weight(p + "post_attention_layernorm.weight"), cfg_.norm_eps);
  auto mlp = [&](const torch::Tensor& in, const std::string& name) {  // mlp_bias = true checkpoints have biases
    return dense(in, weight(p + name + ".weight"), optional(p + name + ".bias"));
  };
  auto gated = activate(mlp(x, "mlp.gate_proj")) * mlp(x, "mlp.up_proj");
  return h + mlp(gated, "mlp.down_proj");
}

torch::Tensor HfModel::gpt2_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const {
  const std::string p = fmt::format("h.{}.", l);
  // Conv1D stores weights [in, out]: x W + b.
  auto conv1d = [&](const torch::Tensor& x, const std::string& name) {
    return dense(x, weight(p + name + ".weight"), weight(p + name + ".bias"), /*stored_transposed=*/true);
  };
  auto x = norm(h, weight(p + "ln_1.weight"), weight(p + "ln_1.bias"), cfg_.norm_eps);
  auto qkv = conv1d(x, "attn.c_attn").split(cfg_.d, -1);
  auto out =
      attend(split_heads(qkv[0], cfg_.heads), split_heads(qkv[1], cfg_.heads), split_heads(qkv[2], cfg_.heads), probs);
  h = h + conv1d(out, "attn.c_proj");
  x = norm(h, weight(p + "ln_2.weight"), weight(p + "ln_2.bias"), cfg_.norm_eps);
  return h + conv1d(activate(conv1d(x, "mlp.c_fc")), "mlp.c_proj");
}

torch::Tensor HfModel::neox_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const {
  const std::string p = fmt::format("layers.{}.", l);
  const int64_t N = h.size(0), T = h.size(1), dh = cfg_.head_dim;
  auto norm = [&](const torch::Tensor& x, const std::string& name) {
    return rt::norm(x, weight(p + name + ".weight"), weight(p + name + ".bias"), cfg_.norm_eps);
  };
  auto linear = [&](const torch::Tensor& x, const std::string& name) {  // attention_bias = false: none on attention
    return dense(x, weight(p + name + ".weight"), optional(p + name + ".bias"));
  };
  // The fused projection is laid out per head: [q_h, k_h, v_h] for each head h.
  auto qkv =
      linear(norm(h, "input_layernorm"), "attention.query_key_value").view({N, T, cfg_.heads, 3 * dh}).transpose(1, 2);
  auto q = rotate(qkv.narrow(-1, 0, dh), T), k = rotate(qkv.narrow(-1, dh, dh), T), v = qkv.narrow(-1, 2 * dh, dh);
  auto attn = linear(attend(q, k, v, probs), "attention.dense");
  auto mlp = [&](const torch::Tensor& x) {
    return linear(activate(linear(x, "mlp.dense_h_to_4h")), "mlp.dense_4h_to_h");
  };
  if (cfg_.parallel_residual) return h + attn + mlp(norm(h, "post_attention_layernorm"));
  h = h + attn;
  return h + mlp(norm(h, "post_attention_layernorm"));
}

torch::Tensor HfModel::opt_layer(torch::Tensor h, int64_t l, torch::Tensor& probs) const {
  const std::string p = fmt::format("layers.{}.", l);
  auto norm = [&](const torch::Tensor& x, const std::string& name) {
    return rt::norm(x, weight(p + name + ".weight"), weight(p + name + ".bias"), 1e-5);
  };
  auto linear = [&](const torch::Tensor& x, const std::string& name) {
    return dense(x, weight(p + name + ".weight"), weight(p + name + ".bias"));
  };
  auto x = cfg_.norm_before ? norm(h, "self_attn_layer_norm") : h;
  auto q = split_heads(linear(x, "self_attn.q_proj"), cfg_.heads);
  auto k = split_heads(linear(x, "self_attn.k_proj"), cfg_.heads);
  auto v = split_heads(linear(x, "self_attn.v_proj"), cfg_.heads);
  h = h + linear(attend(q, k, v, probs), "self_attn.out_proj");
  if (!cfg_.norm_before) h = norm(h, "self_attn_layer_norm");
  x = cfg_.norm_before ? norm(h, "final_layer_norm") : h;
  h = h + linear(activate(linear(x, "fc1")), "fc2");
  return cfg_.norm_before ? h : norm(h, "final_layer_norm");
}

torch::Tensor HfModel::embed(const torch::Tensor& ids) const {
  const int64_t T = ids.size(1);
  if (ids.numel() && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= cfg_.vocab))
    throw std::runtime_error(fmt::format("token ids must lie in [0, {}) for this checkpoint", cfg_.vocab));
  if (cfg_.family == "llama") return F::embedding(ids, weight("embed_tokens.weight"));
  if (cfg_.family == "gpt_neox") return F::embedding(ids, weight("embed_in.weight"));
  auto positions = torch::arange(T, torch::kLong) + cfg_.position_offset;
  if (cfg_.family == "gpt2") {
    auto wpe = weight("wpe.weight");
    if (T > wpe.size(0))
      throw std::runtime_error(fmt::format("T = {} exceeds the model's {} positions", T, wpe.size(0)));
    return F::embedding(ids, weight("wte.weight")) + F::embedding(positions, wpe).unsqueeze(0);
  }
  auto wpe = weight("embed_positions.weight");
  if (T + cfg_.position_offset > wpe.size(0))
    throw std::runtime_error(
        fmt::format("T = {} exceeds the model's {} positions", T, wpe.size(0) - cfg_.position_offset));
  auto x = F::embedding(ids, weight("embed_tokens.weight"));
  if (auto project_in = optional("project_in.weight"); project_in.defined()) x = torch::linear(x, project_in);
  return x + F::embedding(positions, wpe).unsqueeze(0);
}

torch::Tensor HfModel::layer(const torch::Tensor& h, int64_t l, torch::Tensor& probs) const {
  if (cfg_.family == "llama") return llama_layer(h, l, probs);
  if (cfg_.family == "gpt2") return gpt2_layer(h, l, probs);
  if (cfg_.family == "gpt_neox") return neox_layer(h, l, probs);
  return opt_layer(h, l, probs);
}

void HfModel::forward(const torch::Tensor& ids, const LayerVisitor& visit) const {
  torch::NoGradGuard no_grad;
  auto h = embed(ids);
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    torch::Tensor probs;
    h = layer(h, l, probs);
    visit(l, probs, h);
  }
}

torch::Tensor HfModel::dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                             bool stored_transposed) const {
  const auto input = bits_ > 0 ? fake_quantize(x, bits_) : x;
  const auto matrix = bits_ > 0 ? fake_quantize(w, bits_) : w;
  if (stored_transposed) return torch::matmul(input, matrix) + b;
  return torch::linear(input, matrix, b);
}

torch::Tensor HfModel::final_features(const torch::Tensor& h) const {
  if (cfg_.family == "llama") return rms_norm(h, weight("norm.weight"), cfg_.norm_eps);
  if (cfg_.family == "gpt2") return norm(h, weight("ln_f.weight"), weight("ln_f.bias"), cfg_.norm_eps);
  if (cfg_.family == "gpt_neox")
    return norm(h, weight("final_layer_norm.weight"), weight("final_layer_norm.bias"), cfg_.norm_eps);
  // OPT: a final LayerNorm where the layers norm before their sublayers, then project_out where d differs.
  auto x = h;
  if (auto w = optional("final_layer_norm.weight"); w.defined() && cfg_.norm_before)
    x = norm(x, w, weight("final_layer_norm.bias"), 1e-5);
  if (auto out = optional("project_out.weight"); out.defined()) x = torch::linear(x, out);
  return x;
}

torch::Tensor HfModel::head() const {
  for (const char* name : {"lm_head.weight", "embed_out.weight"})
    if (auto it = tensors_.find(name); it != tensors_.end()) return it->second.to(torch::kFloat);
  // Tied to the input embedding (tie_word_embeddings: GPT-2, OPT, some LLaMA).
  static const std::map<std::string, std::string> embedding = {{"llama", "embed_tokens.weight"},
                                                               {"gpt2", "wte.weight"},
                                                               {"gpt_neox", "embed_in.weight"},
                                                               {"opt", "embed_tokens.weight"}};
  return weight(embedding.at(cfg_.family));
}

double HfModel::loss(const torch::Tensor& ids, const torch::Tensor& targets, const torch::Tensor& allowed,
                     int64_t bits) const {
  torch::NoGradGuard no_grad;
  struct Restore {
    const HfModel& m;
    ~Restore() { m.allowed_ = torch::Tensor(), m.bits_ = 0; }
  } restore{*this};
  allowed_ = allowed, bits_ = bits;
  const auto w = head();
  double sum = 0;
  // A few sequences at a time: a real vocabulary's logits for all of them would not fit.
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, ids.size(1) * w.size(0)));
  for (int64_t b = 0; b < ids.size(0); b += chunk) {
    const int64_t n = std::min(chunk, ids.size(0) - b);
    auto h = embed(ids.narrow(0, b, n));
    torch::Tensor probs;
    for (int64_t l = 0; l < cfg_.layers; ++l) h = layer(h, l, probs);
    auto logits = torch::linear(final_features(h), w);
    sum += F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.narrow(0, b, n).reshape(-1),
                            F::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
  }
  return sum / static_cast<double>(targets.numel());
}

}  // namespace sink::rt
