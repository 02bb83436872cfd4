#include "runtime/training/model.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

#include "runtime/attention/score.h"
#include "runtime/measurement/geometry.h"
#include "runtime/training/cpu_step_operations.h"
#include "runtime/training/device.h"
#include "runtime/training/positions.h"
#include "runtime/training/step_kernels.h"

namespace sink::rt {

Norm::Norm(NormKind kind, int64_t d, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({d}));
  if (kind != NormKind::rmsnorm) bias = register_parameter("bias", torch::zeros({d}));
}

torch::Tensor Norm::forward(const torch::Tensor& x) { return norm(x, weight, bias, eps); }

FeedForward::FeedForward(const ModelConfig& c) {
  gated = c.ffn == Ffn::reglu || c.ffn == Ffn::geglu || c.ffn == Ffn::swiglu;
  act = c.ffn == Ffn::reglu ? Ffn::relu : c.ffn == Ffn::geglu ? Ffn::gelu : c.ffn == Ffn::swiglu ? Ffn::swish : c.ffn;
  w1 = register_module("w1", torch::nn::Linear(torch::nn::LinearOptions(c.d, c.ffn_hidden).bias(false)));
  w2 = register_module("w2", torch::nn::Linear(torch::nn::LinearOptions(c.ffn_hidden, c.d).bias(false)));
  if (gated) w3 = register_module("w3", torch::nn::Linear(torch::nn::LinearOptions(c.d, c.ffn_hidden).bias(false)));
}

torch::Tensor FeedForward::forward(const torch::Tensor& x, const StepOperations& ops) {
  const auto hidden =
      gated ? ops.gated_hidden(x, w1->weight, w3->weight, act) : activation(ops.linear(x, w1->weight), act);
  return ops.linear(hidden, w2->weight);
}

SelfAttention::SelfAttention(const ModelConfig& c, std::shared_ptr<AttentionBackend> b)
    : cfg(c), backend(std::move(b)) {
  const int64_t H = c.heads, Hkv = c.kv_heads, dh = c.d_head;
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  wq = register_module("wq", linear(c.d, H * dh));
  wk = register_module("wk", linear(c.d, Hkv * dh));
  wv = register_module("wv", linear(c.d, Hkv * dh));
  wo = register_module("wo", linear(c.heads_combine == HeadsCombine::add ? dh : H * dh, c.d));
  if (c.attention.gate != Gate::none)
    wg = register_module("wg", linear(c.d, c.attention.gate == Gate::elementwise ? H * dh : H));
  if (c.attention.kernel == AttnKernel::mlp) {
    kernel_w1 =
        register_parameter("kernel_w1", torch::randn({H, dh, c.attention.kernel_hidden}) / std::sqrt(double(dh)));
    kernel_w2 = register_parameter(
        "kernel_w2", torch::randn({H, c.attention.kernel_hidden, dh}) / std::sqrt(double(c.attention.kernel_hidden)));
  }
  if (c.attention.sink_logit == SinkLogit::learned) sink_logit = register_parameter("sink_logit", torch::zeros({H}));
  if (c.attention.sink_logit == SinkLogit::fixed)
    sink_logit = register_buffer("sink_logit", torch::full({H}, c.attention.sink_logit_value));
  if (c.attention.differential) {
    // As the authors initialise them: N(0, 0.1) vectors of the half head, a unit gain.
    for (auto [name, slot] : {std::pair{"lambda_q1", &lambda_q1},
                              {"lambda_k1", &lambda_k1},
                              {"lambda_q2", &lambda_q2},
                              {"lambda_k2", &lambda_k2}})
      *slot = register_parameter(name, torch::randn({dh / 2}) * 0.1);
    out_norm_weight = register_parameter("out_norm_weight", torch::ones({dh}));
  }
  const int64_t bias_heads = c.bias_shared ? 1 : H;
  if (c.key_column()) k_star_learned = register_parameter("k_star", torch::randn({bias_heads, c.k_dims}) * c.init_std);
  if (c.biases != Biases::none) {
    if (c.v_star == VStar::learned)
      v_star = register_parameter("v_star", torch::zeros({bias_heads, dh}));
    else if (c.v_star == VStar::fixed)
      v_star = register_buffer(
          "v_star", eval_vector(c.v_star_expr, dh).to(torch::kFloat).unsqueeze(0).expand({bias_heads, dh}).clone());
    else
      v_star = register_buffer("v_star", torch::zeros({bias_heads, dh}));
  }
}

// Two maps from the halves of q and k, A1 - lambda A2, each head's output
// RMS-normalized and scaled by 1 - lambda_init (Ye et al. 2025). Each map is
// an ordinary attention call: the halves padded back to d_head with zeros,
// q's times sqrt 2 so that the logits are <q_a, k_a> / sqrt(d_head / 2).
torch::Tensor SelfAttention::differential(const AttentionCall& call, LayerProbe* probe) {
  const int64_t half = cfg.d_head / 2;
  auto zeros = torch::zeros_like(call.q.narrow(-1, 0, half));
  auto padded = [&](const torch::Tensor& t, int64_t part, double factor) {
    return torch::cat({t.narrow(-1, part * half, half) * factor, zeros}, -1);
  };
  AttentionProbe p1, p2;
  auto o1 = backend->attend({padded(call.q, 0, std::sqrt(2.0)), padded(call.k, 0, 1), call.v, call.g, {}, {}, {}},
                            probe ? &p1 : nullptr);
  auto o2 = backend->attend({padded(call.q, 1, std::sqrt(2.0)), padded(call.k, 1, 1), call.v, call.g, {}, {}, {}},
                            probe ? &p2 : nullptr);
  const double lambda_init = cfg.attention.lambda_init;
  auto lambda = torch::exp((lambda_q1 * lambda_k1).sum()) - torch::exp((lambda_q2 * lambda_k2).sum()) + lambda_init;
  auto out = o1 - lambda * o2;
  out = rms_norm(out, out_norm_weight, 1e-5) * (1 - lambda_init);
  if (probe) {
    // A1 - lambda A2 can be negative: the metric reads |A| / sum |A|, the proxy of signed scores.
    auto signed_map = (p1.attention - lambda.detach() * p2.attention).abs();
    probe->attention = signed_map / signed_map.sum(-1, true).clamp_min(1e-30);
  }
  return out;
}

torch::Tensor SelfAttention::forward(const torch::Tensor& x, const Positions& positions, const StepOperations& ops,
                                     LayerProbe* probe) {
  const int64_t B = x.size(0), T = x.size(1), H = cfg.heads, Hkv = cfg.kv_heads, dh = cfg.d_head;
  const auto qkv = ops.heads(x, wq->weight, wk->weight, wv->weight, positions.rope_cos, positions.rope_sin, H, Hkv);
  torch::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
  const torch::Tensor& g = positions.g;
  if (Hkv != H) {
    k = k.repeat_interleave(H / Hkv, 1);
    v = v.repeat_interleave(H / Hkv, 1);
  }
  if (cfg.attention.kernel == AttnKernel::elu1) {
    q = torch::elu(q) + 1;
    k = torch::elu(k) + 1;
  } else if (cfg.attention.kernel == AttnKernel::mlp) {
    auto phi = [&](const torch::Tensor& t) {
      return torch::matmul(torch::relu(torch::matmul(t, kernel_w1.unsqueeze(0))), kernel_w2.unsqueeze(0));
    };
    q = phi(q);
    k = phi(k);
  }
  torch::Tensor k_star;
  if (k_star_learned.defined()) {
    k_star = k_star_learned;
    if (cfg.k_dims < dh)
      k_star = torch::cat({k_star, torch::zeros({k_star.size(0), dh - cfg.k_dims}, k_star.options())}, -1);
  }
  AttentionCall call{q, k, v, g, k_star, k_star.defined() ? v_star : torch::Tensor(), sink_logit};
  torch::Tensor out;
  if (cfg.attention.differential) {
    out = differential(call, probe);
  } else {
    AttentionProbe p;
    out = backend->attend(call, probe ? &p : nullptr);
    if (probe) probe->attention = p.attention, probe->sink_share = p.sink_share;
  }
  if (probe) {
    const int64_t first = cfg.sink_token ? 1 : 0;  // token 1 is the first real token
    if (T - first >= 2)
      probe->geometry = first_token_geometry(q.narrow(2, first, T - first), k.narrow(2, first, T - first),
                                             v.narrow(2, first, T - first));
  }
  if (cfg.biases == Biases::v) out = out + v_star.unsqueeze(0).unsqueeze(2);
  if (wg) {
    // Gated attention: each head's output (channel) scaled by sigmoid of a projection of the same input.
    auto gate = torch::sigmoid(ops.linear(x, wg->weight))
                    .view({B, T, H, cfg.attention.gate == Gate::elementwise ? dh : 1})
                    .transpose(1, 2);
    out = out * gate;
    if (probe) probe->gate = gate.detach();
  }
  auto output = ops.linear(
      cfg.heads_combine == HeadsCombine::add ? out.sum(1) : out.transpose(1, 2).reshape({B, T, H * dh}), wo->weight);
  if (probe) probe->output = output.detach();
  return output;
}

Block::Block(const ModelConfig& c, std::shared_ptr<AttentionBackend> backend) : cfg(c) {
  norm1 = register_module("norm1", std::make_shared<Norm>(c.norm, c.d, c.norm_eps));
  norm2 = register_module("norm2", std::make_shared<Norm>(c.norm, c.d, c.norm_eps));
  attn = register_module("attn", std::make_shared<SelfAttention>(c, std::move(backend)));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c));
}

Block::Output Block::forward(const torch::Tensor& x, const torch::Tensor& normed, const Norm* next,
                             const Positions& positions, const StepOperations& ops, LayerProbe* probe) {
  if (cfg.placement == NormPlacement::post) {
    auto attended = norm1->forward(x + attn->forward(x, positions, ops, probe));
    auto before_ln = attended + ffn->forward(attended, ops);
    return {norm2->forward(before_ln), {}, before_ln};
  }
  const auto input = normed.defined() ? normed : norm1->forward(x);
  auto [mid, mid_normed] =
      ops.residual_norm(x, attn->forward(input, positions, ops, probe), norm2->weight, norm2->bias, norm2->eps);
  const auto out = ffn->forward(mid_normed, ops);
  if (!next) {
    auto stream = mid + out;
    return {stream, {}, stream};
  }
  auto [stream, stream_normed] = ops.residual_norm(mid, out, next->weight, next->bias, next->eps);
  return {stream, stream_normed, stream};
}

torch::Tensor sinusoidal_positions(int64_t T, int64_t d) {
  auto pos = torch::arange(T, torch::kFloat).unsqueeze(1);
  auto freq = torch::exp(torch::arange(0, d, 2, torch::kFloat) * (-std::log(10000.0) / d));
  auto table = torch::zeros({T, d});
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                   torch::sin(pos * freq));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   torch::cos(pos * freq).narrow(1, 0, d / 2));
  return table;
}

int64_t relative_bucket(int64_t n, int64_t buckets, int64_t max_distance) {
  const int64_t exact = std::max<int64_t>(1, buckets / 2);
  if (n < exact) return n;
  double scaled = std::log(double(n) / exact) / std::log(std::max(double(max_distance) / exact, 1.0 + 1e-9));
  return std::min(buckets - 1, exact + static_cast<int64_t>(scaled * (buckets - exact)));
}

Transformer::Transformer(const ModelConfig& c, torch::Device dev)
    : cfg(c), device(dev), backend(make_attention_backend(c, dev)) {
  embed = register_module("embed", torch::nn::Embedding(c.vocab, c.d));
  if (c.pe == PosEmbedding::learned)
    positions = register_module("positions", torch::nn::Embedding(c.max_positions, c.d));
  if (c.pe == PosEmbedding::relative)
    relative = register_module("relative", torch::nn::Embedding(c.rel_buckets, c.heads));
  if (c.sink_token) sink_token = register_parameter("sink_token", torch::randn({c.d}) * c.init_std);
  for (int64_t l = 0; l < c.layers; ++l)
    blocks.push_back(register_module("block" + std::to_string(l), std::make_shared<Block>(c, backend)));
  if (c.placement == NormPlacement::pre)
    final_norm = register_module("final_norm", std::make_shared<Norm>(c.norm, c.d, c.norm_eps));
  if (!c.tie_embeddings)
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(c.d, c.vocab).bias(false)));

  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    if (item.value().dim() >= 2 && item.key().find("kernel_") == std::string::npos) item.value().normal_(0, c.init_std);
  }
  if (relative) relative->weight.zero_();
  to(device);
  if (auto kernels = step_kernels_for(device))
    operations = kernels;
  else if (auto cpu = cpu_step_operations_for(device))
    operations = cpu;
  else
    operations = library_operations();
}

torch::Tensor Transformer::distance_bias(int64_t T) {
  const auto on_device = torch::TensorOptions().device(device);
  auto n = torch::arange(T, on_device.dtype(torch::kFloat));
  if (cfg.pe == PosEmbedding::alibi) {
    auto slopes = torch::pow(2.0, -8.0 * torch::arange(1, cfg.heads + 1, on_device.dtype(torch::kFloat)) / cfg.heads)
                      .view({cfg.heads, 1});
    return -slopes * n.view({1, T});
  }
  if (cfg.pe == PosEmbedding::relative) {
    if (!relative_buckets_.defined() || relative_buckets_.size(0) < T) {
      std::vector<int64_t> buckets(T);
      for (int64_t d = 0; d < T; ++d) buckets[d] = relative_bucket(d, cfg.rel_buckets, cfg.rel_max_distance);
      relative_buckets_ = torch::tensor(buckets).to(device);
    }
    return relative(relative_buckets_.narrow(0, 0, T)).t();  // [H, T]
  }
  return {};
}

std::pair<torch::Tensor, torch::Tensor> Transformer::rope_tables(int64_t T) {
  if (!rope_cos_.defined() || rope_cos_.size(0) < T) {
    // In double on the CPU, then cast: the angles of long sequences keep their precision. Each pair's cos on both
    // its channels, its sin negated on the first (apply_rope).
    auto inv = torch::pow(cfg.rope_theta, -torch::arange(0, cfg.d_head, 2, torch::kDouble) / double(cfg.d_head));
    auto angles = torch::arange(T, torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
    rope_cos_ = torch::stack({torch::cos(angles), torch::cos(angles)}, -1).flatten(-2).to(device, torch::kFloat);
    rope_sin_ = torch::stack({-torch::sin(angles), torch::sin(angles)}, -1).flatten(-2).to(device, torch::kFloat);
  }
  return {rope_cos_.narrow(0, 0, T), rope_sin_.narrow(0, 0, T)};
}

ForwardResult Transformer::forward(const torch::Tensor& tokens, bool probe, bool hidden) {
  ForwardResult r = trunk(tokens, probe, hidden);
  r.logits = torch::linear(r.features, head_weight());
  return r;
}

torch::Tensor Transformer::features(const torch::Tensor& tokens) { return trunk(tokens, false, false).features; }

ForwardResult Transformer::probe(const torch::Tensor& tokens, bool hidden) { return trunk(tokens, true, hidden); }

torch::Tensor Transformer::head_weight() { return cfg.tie_embeddings ? embed->weight : head->weight; }

void Transformer::use_attention(std::shared_ptr<AttentionBackend> attention) {
  for (auto& block : blocks) block->attn->backend = attention;
  backend = std::move(attention);
}

ForwardResult Transformer::trunk(const torch::Tensor& tokens, bool probe, bool want_hidden) {
  ForwardResult r;
  auto x = embed(to_device(tokens, device));  // batches are built on the CPU
  const int64_t B = x.size(0);
  if (cfg.sink_token) x = torch::cat({sink_token.view({1, 1, cfg.d}).expand({B, 1, cfg.d}), x}, 1);
  const int64_t T = x.size(1);
  if (cfg.pe == PosEmbedding::learned)
    x = x + positions(torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(device)));
  if (cfg.pe == PosEmbedding::sinusoidal) {
    if (!sinusoid_.defined() || sinusoid_.size(0) < T) sinusoid_ = sinusoidal_positions(T, cfg.d).to(device);
    x = x + sinusoid_.narrow(0, 0, T);
  }
  Positions positions;
  if (cfg.pe == PosEmbedding::rope) std::tie(positions.rope_cos, positions.rope_sin) = rope_tables(T);
  positions.g = distance_bias(T);
  torch::Tensor normed;  // pre-norm: the next block's input, x normed
  for (size_t l = 0; l < blocks.size(); ++l) {
    LayerProbe p;
    const Norm* next = l + 1 < blocks.size() ? blocks[l + 1]->norm1.get() : final_norm.get();
    Block::Output out = blocks[l]->forward(x, normed, next, positions, *operations, probe ? &p : nullptr);
    x = out.stream, normed = out.normed;
    if (want_hidden) r.hidden.push_back(out.hidden.detach());
    if (probe) {
      r.attention.push_back(p.attention);
      if (p.gate.defined()) r.gates.push_back(p.gate);
      if (p.sink_share.defined()) r.sink_shares.push_back(p.sink_share);
      if (p.geometry.defined()) r.geometry.push_back(p.geometry);
      r.attention_outputs.push_back(p.output);
    }
  }
  if (final_norm) x = normed.defined() ? normed : final_norm->forward(x);
  if (cfg.sink_token) x = x.narrow(1, 1, T - 1);
  r.features = x;
  return r;
}

// Weight matrices and embeddings decay; gains, k*, v*, the sink token and
// the T5 bucket table do not.
static bool decays(const std::string& name, const torch::Tensor& p) {
  return p.dim() >= 2 && name.find("k_star") == std::string::npos && name.find("v_star") == std::string::npos &&
         name.find("relative") == std::string::npos;
}

std::vector<torch::Tensor> Transformer::decayed_parameters() {
  std::vector<torch::Tensor> out;
  for (auto& item : named_parameters())
    if (decays(item.key(), item.value())) out.push_back(item.value());
  return out;
}

std::vector<torch::Tensor> Transformer::other_parameters() {
  std::vector<torch::Tensor> out;
  for (auto& item : named_parameters())
    if (!decays(item.key(), item.value())) out.push_back(item.value());
  return out;
}

}  // namespace sink::rt
