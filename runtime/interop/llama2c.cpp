#include "runtime/interop/llama2c.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "runtime/training/run_dir.h"

namespace sink::rt {
namespace {

// The sizes the loader believes (vocab as its magnitude); the writer refuses
// others, as they would not load back.
bool plausible_header(int64_t dim, int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                      int64_t seq_len) {
  return dim > 0 && dim <= 65536 && hidden > 0 && hidden <= INT32_MAX && layers > 0 && layers <= 1024 && heads > 0 &&
         dim % heads == 0 && kv_heads > 0 && heads % kv_heads == 0 && vocab > 0 && vocab <= 1e7 && seq_len > 0 &&
         seq_len <= 1e7;
}

// RoPE's angles as Transformer::forward computes them: [seq_len, d_head / 2].
torch::Tensor rope_angles(int64_t seq_len, int64_t d_head, double theta) {
  auto inv = torch::pow(theta, -torch::arange(0, d_head, 2, torch::kDouble) / double(d_head));
  return torch::arange(seq_len, torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
}

}  // namespace

Llama2cModel load_llama2c(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read checkpoint '{}'", path));
  int32_t h[7];
  if (!in.read(reinterpret_cast<char*>(h), sizeof h))
    throw std::runtime_error(fmt::format("'{}' is too short for a llama2.c header", path));
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], seq_len = h[6];
  const bool shared = h[5] > 0;
  const int64_t vocab = std::abs(int64_t{h[5]});
  auto bad = [&](const char* what) {
    return std::runtime_error(fmt::format("'{}' is not a llama2.c checkpoint: {}", path, what));
  };
  if (!plausible_header(dim, hidden, layers, heads, kv_heads, vocab, seq_len)) throw bad("implausible header");
  const int64_t dh = dim / heads, kv_dim = kv_heads * dh;

  ModelConfig c;
  c.vocab = vocab;
  c.d = dim;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.d_head = dh;
  c.ffn = Ffn::swiglu;
  c.ffn_hidden = hidden;
  c.pe = PosEmbedding::rope;
  c.rope_theta = 10000;
  c.norm = NormKind::rmsnorm;
  c.norm_eps = 1e-5;
  c.placement = NormPlacement::pre;
  c.heads_combine = HeadsCombine::concat;
  c.biases = Biases::none;
  c.v_star = VStar::zero;
  c.tie_embeddings = shared;
  c.max_positions = seq_len;
  c.attention.score = ExprNode{ExprNode::Op::Call, 0, "exp", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
  c.attention.shifted_exp = true;

  const int64_t expected = vocab * dim + layers * (2 * dim + dim * dim * 2 + 2 * dim * kv_dim + 3 * dim * hidden) +
                           dim + seq_len * dh + (shared ? 0 : vocab * dim);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec || bytes < 28 + 4 * static_cast<uint64_t>(expected))
    throw bad(fmt::format("{} bytes, the header implies at least {}", bytes, 28 + 4 * expected).c_str());

  auto model = std::make_shared<Transformer>(c);
  torch::NoGradGuard no_grad;
  auto read = [&](torch::Tensor dst) {
    auto t = torch::empty(dst.sizes(), torch::kFloat);
    in.read(reinterpret_cast<char*>(t.data_ptr<float>()), static_cast<std::streamsize>(t.numel() * 4));
    if (!in) throw bad("truncated weights");
    dst.copy_(t);
  };
  read(model->embed->weight);
  for (auto& b : model->blocks) read(b->norm1->weight);
  for (auto& b : model->blocks) read(b->attn->wq->weight);
  for (auto& b : model->blocks) read(b->attn->wk->weight);
  for (auto& b : model->blocks) read(b->attn->wv->weight);
  for (auto& b : model->blocks) read(b->attn->wo->weight);
  for (auto& b : model->blocks) read(b->norm2->weight);
  for (auto& b : model->blocks) read(b->ffn->w1->weight);
  for (auto& b : model->blocks) read(b->ffn->w2->weight);
  for (auto& b : model->blocks) read(b->ffn->w3->weight);
  read(model->final_norm->weight);
  in.seekg(static_cast<std::streamoff>(seq_len * dh * 4), std::ios::cur);  // RoPE tables: we compute them
  if (!shared) read(model->head->weight);
  model->eval();
  return {c, model, seq_len};
}

std::string llama2c_unsupported(const ModelConfig& c) {
  auto only = [](const char* field, const std::string& value, const char* format_has) {
    return fmt::format("{} = {}: llama2.c has {}", field, value, format_has);
  };
  if (c.pe != PosEmbedding::rope) return only("model.pe", name_of(c.pe), "RoPE only");
  if (c.rope_theta != 10000)
    return only("model.pe", fmt::format("rope(theta = {})", c.rope_theta), "theta = 10000 only");
  if (c.norm != NormKind::rmsnorm) return only("model.norm", name_of(c.norm), "RMSNorm only");
  if (c.norm_eps != 1e-5) return only("model.norm_eps", fmt::format("{}", c.norm_eps), "1e-5 only");
  if (c.placement != NormPlacement::pre) return only("model.placement", name_of(c.placement), "pre-norm only");
  if (c.ffn != Ffn::swiglu) return only("model.ffn", name_of(c.ffn), "SwiGLU only");
  if (c.heads_combine != HeadsCombine::concat)
    return only("model.heads_combine", name_of(c.heads_combine), "concatenated heads only");
  if (c.sink_token) return only("model.sink_token", "true", "no sink token");
  if (c.biases != Biases::none) return only("model.biases", name_of(c.biases), "no k* / v* attention biases");
  const AttentionConfig& a = c.attention;
  if (!is_softmax(a.score, a.normalize))
    return fmt::format(
        "attention.score = {} with attention.normalize = {}: llama2.c has softmax attention only "
        "(score = exp(qk), normalize = sum)",
        to_string(a.score), a.normalize);
  if (a.kernel != AttnKernel::identity) return only("attention.kernel", name_of(a.kernel), "no feature map on q and k");
  if (a.gate != Gate::none) return only("attention.gate", name_of(a.gate), "no gate on the attention output");
  if (a.has_sink_logit())
    return only("attention.sink_logit", name_of(a.sink_logit), "nothing but the keys in the softmax denominator");
  if (a.differential) return only("attention.differential", "true", "one softmax map per head");
  if (a.scale != 1) return only("attention.scale", fmt::format("{}", a.scale), "attention weights summing to 1");
  if (a.rule.prefix != 0)
    return only("loss.prefix", std::to_string(a.rule.prefix), "causal attention at every position");
  if (a.rule.window != 0) return only("loss.window", std::to_string(a.rule.window), "attention over the whole context");
  if (!a.rule.of_range_alone())
    return "visibility " + a.rule.describe() + ": llama2.c has attention over the whole context only";
  if (c.d_head * c.heads != c.d) return only("model.heads", std::to_string(c.heads), "d_head = d / heads");
  return "";
}

void save_llama2c(Transformer& model, int64_t seq_len, const std::string& path) {
  const ModelConfig& c = model.cfg;
  if (auto why = llama2c_unsupported(c); !why.empty())
    throw std::runtime_error(fmt::format("cannot write '{}' as a llama2.c checkpoint: {}", path, why));
  if (!plausible_header(c.d, c.ffn_hidden, c.layers, c.heads, c.kv_heads, c.vocab, seq_len))
    throw std::runtime_error(
        fmt::format("cannot write '{}' as a llama2.c checkpoint: sizes outside its header's limits (d {}, ffn_hidden "
                    "{}, layers {}, "
                    "heads {}, kv_heads {}, vocab {}, seq_len {})",
                    path, c.d, c.ffn_hidden, c.layers, c.heads, c.kv_heads, c.vocab, seq_len));
  const bool shared = c.tie_embeddings;
  const int32_t header[7] = {int32_t(c.d),     int32_t(c.ffn_hidden), int32_t(c.layers),
                             int32_t(c.heads), int32_t(c.kv_heads),   int32_t(shared ? c.vocab : -c.vocab),
                             int32_t(seq_len)};

  // The order load_llama2c reads (llama2.c's memory_map_weights):
  // each kind of weight for every layer before the next kind.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts = {model.embed->weight};
  auto per_layer = [&](auto weight_of) {
    for (auto& b : model.blocks) parts.push_back(weight_of(*b));
  };
  per_layer([](Block& b) { return b.norm1->weight; });
  per_layer([](Block& b) { return b.attn->wq->weight; });
  per_layer([](Block& b) { return b.attn->wk->weight; });
  per_layer([](Block& b) { return b.attn->wv->weight; });
  per_layer([](Block& b) { return b.attn->wo->weight; });
  per_layer([](Block& b) { return b.norm2->weight; });
  per_layer([](Block& b) { return b.ffn->w1->weight; });
  per_layer([](Block& b) { return b.ffn->w2->weight; });
  per_layer([](Block& b) { return b.ffn->w3->weight; });
  parts.push_back(model.final_norm->weight);
  // Version 0 stores the RoPE tables, cos then sin; readers since 2023 skip them.
  auto angles = rope_angles(seq_len, c.d_head, c.rope_theta);
  parts.push_back(torch::cos(angles));
  parts.push_back(torch::sin(angles));
  if (!shared) parts.push_back(model.head->weight);

  FileWriter out(path);
  out.write(header, sizeof header);
  for (const auto& t : parts) {
    auto f = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
    out.write(f.data_ptr<float>(), static_cast<size_t>(f.numel()) * sizeof(float));
  }
  out.commit();
}

std::vector<int32_t> greedy_decode(Transformer& model, int64_t steps, int32_t bos) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids = {bos};
  std::vector<int32_t> out;
  for (int64_t s = 0; s < steps; ++s) {
    auto x = torch::tensor(ids).unsqueeze(0);
    auto logits = model.forward(x).logits.select(1, x.size(1) - 1);
    auto next = logits.argmax(-1).item<int64_t>();
    ids.push_back(next);
    out.push_back(static_cast<int32_t>(next));
    if (next == bos) break;
  }
  return out;
}

}  // namespace sink::rt
