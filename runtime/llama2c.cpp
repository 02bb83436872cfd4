#include "runtime/llama2c.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

namespace sink::rt {

Llama2cModel load_llama2c(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read checkpoint '{}'", path));
  int32_t h[7];
  if (!in.read(reinterpret_cast<char*>(h), sizeof h))
    throw std::runtime_error(fmt::format("'{}' is too short for a llama2.c header", path));
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], seq_len = h[6];
  const bool shared = h[5] > 0;
  const int64_t vocab = std::abs(h[5]);
  auto bad = [&](const char* what) { return std::runtime_error(fmt::format("'{}' is not a llama2.c checkpoint: {}", path, what)); };
  if (dim <= 0 || dim > 65536 || hidden <= 0 || layers <= 0 || layers > 1024 || heads <= 0 || dim % heads ||
      kv_heads <= 0 || heads % kv_heads || vocab <= 0 || vocab > 1e7 || seq_len <= 0 || seq_len > 1e7)
    throw bad("implausible header");
  const int64_t dh = dim / heads, kv_dim = kv_heads * dh;

  ModelConfig c;
  c.vocab = vocab;
  c.d = dim;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.d_head = dh;
  c.ffn = "swiglu";
  c.ffn_hidden = hidden;
  c.pe = "rope";
  c.rope_theta = 10000;
  c.norm = "rmsnorm";
  c.norm_eps = 1e-5;
  c.placement = "pre";
  c.heads_combine = "concat";
  c.biases = "none";
  c.v_star = "zero";
  c.tie_embeddings = shared;
  c.max_positions = seq_len;
  c.attention.score = ExprNode{ExprNode::Op::Call, 0, "exp", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
  c.attention.softmax = true;

  const int64_t expected = vocab * dim + layers * (2 * dim + dim * dim * 2 + 2 * dim * kv_dim + 3 * dim * hidden) + dim +
                           seq_len * dh + (shared ? 0 : vocab * dim);
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
