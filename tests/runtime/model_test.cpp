// Every architecture knob: a micro Transformer builds, its forward pass has
// the right shapes, its gradients match central finite differences in double,
// and its attention probes are proper distributions under softmax.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/measurement/measure.h"
#include "runtime/training/model.h"
#include "runtime/training/precision.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;

namespace {

struct Arch {
  const char* name;
  const char* body;  // spec text inside `experiment a extends micro { ... }`
};

// model.vocab is set explicitly (20); micro: d = 16, 2 layers, 2 heads.
const Arch kArchs[] = {
    {"pe_nope", "model.pe = nope"},
    {"pe_sinusoidal", "model.pe = sinusoidal"},
    {"pe_learned", "model.pe = learned"},
    {"pe_relative", "model.pe = relative(buckets = 6, max_distance = 12)"},
    {"pe_alibi", "model.pe = alibi"},
    {"pe_rope", "model.pe = rope(theta = 10000)"},
    {"placement_pre", "model.placement = pre"},
    {"placement_post", "model.placement = post"},
    {"norm_rmsnorm", "model.norm = rmsnorm"},
    {"norm_layernorm", "model.norm = layernorm"},
    {"post_layernorm", "model { placement = post  norm = layernorm }"},
    {"ffn_relu", "model.ffn = relu"},
    {"ffn_gelu", "model.ffn = gelu"},
    {"ffn_swish", "model.ffn = swish"},
    {"ffn_reglu", "model.ffn = reglu"},
    {"ffn_geglu", "model.ffn = geglu"},
    {"ffn_swiglu", "model.ffn = swiglu"},
    {"gqa", "model { heads = 4  kv_heads = 2 }"},
    {"mqa", "model { heads = 4  kv_heads = 1 }"},
    {"heads_add", "model.heads_combine = add"},
    {"sink_token", "model.sink_token = true"},
    {"biases_kv", "model.biases = kv"},
    {"biases_k", "model.biases = k"},
    {"biases_v", "model.biases = v"},
    {"biases_kv_shared", "model { biases = kv  bias_shared = true }"},
    {"biases_k_dims", "model { biases = k  k_dims = 3 }"},
    {"biases_k_vstar_fixed", "model { biases = k  v_star = 5 * onehot(0) }"},
    {"biases_k_vstar_ones", "model { biases = k  v_star = 20 * ones / sqrt(d_head) }"},
    {"sink_token_and_kv", "model { sink_token = true  biases = kv }"},
    {"kernel_elu1", "attention { kernel = elu1  score = qk  normalize = sum }"},
    {"kernel_mlp", "attention { kernel = mlp(hidden = 8)  score = qk  normalize = abs_clamped }"},
    {"normalize_none", "attention { score = sigmoid(qk)  normalize = none }"},
    {"normalize_abs_clamped", "attention { score = qk  normalize = abs_clamped }"},
    {"normalize_pnorm", "attention { score = qk  normalize = pnorm(p = 2) }"},
    {"sigmoid_sum", "attention { score = sigmoid(qk)  normalize = sum }"},
    {"elu_plus_one", "attention { score = elu(qk) + 1  normalize = sum }"},
    {"scale_alpha", "attention.scale = 2.0"},
    {"prefix", "loss.prefix = 4"},
    {"window", "loss.window = 3"},
    {"prefix_window", "loss { prefix = 3  window = 2 }"},
    {"tie_embeddings", "model.tie_embeddings = true"},
    {"gate_elementwise", "attention.gate = elementwise"},
    {"gate_headwise", "attention.gate = headwise"},
    {"gate_gqa_sink_kv",
     "model { heads = 4  kv_heads = 2  sink_token = true  biases = kv }  attention.gate = elementwise"},
    {"gate_sigmoid_window", "attention { gate = headwise  score = sigmoid(qk)  normalize = none }  loss.window = 3"},
};

constexpr int64_t kVocab = 20, kB = 2, kT = 8;

// The reference attention (the LibTorch oracle, any dtype); the JIT kernels
// are float32 and have their own tests against it.
ModelConfig model_config(const Arch& a) {
  auto cfg = sinktest::config_of(
      std::string("experiment a extends micro { model.vocab = 20  attention.backend = reference ") + a.body + " }");
  EXPECT_EQ(cfg.model.attention.backend, sink::Backend::reference);
  return cfg.model;
}

torch::Tensor loss_of(Transformer& m, const torch::Tensor& x, const torch::Tensor& y) {
  auto logits = m.forward(x).logits;
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

class ModelArch : public ::testing::TestWithParam<Arch> {};

}  // namespace

TEST_P(ModelArch, ForwardShapesAndProbes) {
  const Arch& a = GetParam();
  ModelConfig c = model_config(a);
  ASSERT_EQ(c.vocab, kVocab);
  torch::manual_seed(1);
  Transformer m(c);
  auto x = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
  auto r = m.forward(x, /*probe=*/true, /*hidden=*/true);
  EXPECT_EQ(r.logits.sizes(), (std::vector<int64_t>{kB, kT, kVocab}));
  EXPECT_TRUE(torch::isfinite(r.logits).all().item<bool>());
  const int64_t Tp = kT + (c.sink_token ? 1 : 0);
  const int64_t S = Tp + (c.key_column() ? 1 : 0);
  ASSERT_EQ(static_cast<int64_t>(r.attention.size()), c.layers);
  ASSERT_EQ(static_cast<int64_t>(r.hidden.size()), c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    EXPECT_EQ(r.attention[l].sizes(), (std::vector<int64_t>{kB, c.heads, Tp, S})) << "layer " << l;
    EXPECT_EQ(r.hidden[l].sizes(), (std::vector<int64_t>{kB, Tp, c.d})) << "layer " << l;
    // Every probe is a distribution per query: the attention itself under
    // softmax (rows sum to alpha), or the paper's proxy |s| / sum |s| otherwise
    // (a row whose scores are all zero, e.g. an MLP kernel whose ReLU kills a
    // query, has nothing to normalize and stays 0).
    auto rows = r.attention[l].to(torch::kDouble).sum(-1);
    if (sink::is_softmax(c.attention.score, c.attention.normalize)) {
      EXPECT_TRUE(torch::allclose(rows, torch::full_like(rows, c.attention.scale), 1e-5, 1e-5))
          << "layer " << l << " row sums " << rows.min().item<double>() << " .. " << rows.max().item<double>();
    } else {
      auto ok = ((rows - 1).abs() < 1e-5) | (rows.abs() < 1e-12);
      EXPECT_TRUE(ok.all().item<bool>()) << "layer " << l << " row sums " << rows.min().item<double>() << " .. "
                                         << rows.max().item<double>();
      EXPECT_GT(((rows - 1).abs() < 1e-5).sum().item<int64_t>(), rows.numel() / 2);
    }
    EXPECT_TRUE((r.attention[l] >= 0).all().item<bool>());
  }
  // The probe does not change the logits.
  auto plain = m.forward(x).logits;
  EXPECT_TRUE(torch::allclose(plain, r.logits, 0, 1e-6));
  // Causality (outside the prefix): changing the last token leaves earlier logits alone.
  auto x2 = x.clone();
  x2.index_put_({torch::indexing::Slice(), kT - 1}, (x.index({torch::indexing::Slice(), kT - 1}) + 1) % kVocab);
  auto l2 = m.forward(x2).logits;
  EXPECT_TRUE(torch::allclose(l2.narrow(1, 0, kT - 1), plain.narrow(1, 0, kT - 1), 0, 1e-6));
  EXPECT_FALSE(torch::allclose(l2.narrow(1, kT - 1, 1), plain.narrow(1, kT - 1, 1), 0, 1e-7));
}

TEST_P(ModelArch, FiniteDifferenceGradients) {
  const Arch& a = GetParam();
  ModelConfig c = model_config(a);
  torch::manual_seed(2);
  Transformer m(c);
  m.to(torch::kDouble);
  {
    // Larger weights than the 0.02 init so every path carries a gradient
    // well above round-off (k*, v*, relative buckets start at zero or tiny).
    torch::NoGradGuard ng;
    for (auto& p : m.parameters()) p.add_(torch::randn_like(p) * 0.3);
  }
  auto x = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
  auto y = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
  auto loss = loss_of(m, x, y);
  ASSERT_EQ(loss.scalar_type(), torch::kDouble);
  m.zero_grad();
  loss.backward();

  int checked = 0;
  for (auto& item : m.named_parameters()) {
    auto p = item.value();
    ASSERT_TRUE(p.grad().defined()) << item.key() << " gets no gradient";
    auto g = p.grad().reshape({-1});
    // The entry with the largest gradient, and one fixed other entry.
    std::vector<int64_t> entries = {g.abs().argmax().item<int64_t>(), (p.numel() * 7 / 13) % p.numel()};
    for (int64_t e : entries) {
      const double analytic = g[e].item<double>();
      const double h = 1e-6;
      double plus, minus;
      {
        torch::NoGradGuard ng;
        auto flat = p.view({-1});
        const double orig = flat[e].item<double>();
        flat[e] = orig + h;
        plus = loss_of(m, x, y).item<double>();
        flat[e] = orig - h;
        minus = loss_of(m, x, y).item<double>();
        flat[e] = orig;
      }
      const double numeric = (plus - minus) / (2 * h);
      const double scale = std::max(std::fabs(numeric), std::fabs(analytic));
      if (scale < 1e-7) {
        EXPECT_NEAR(analytic, numeric, 1e-8) << item.key() << "[" << e << "]";
        continue;
      }
      EXPECT_LT(std::fabs(analytic - numeric) / scale, 1e-4)
          << item.key() << "[" << e << "]: analytic " << analytic << ", numeric " << numeric;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST_P(ModelArch, JitBackendMatchesReference) {
  // The default backend (generated kernels, float32) against the reference
  // path with the same weights: logits, probes and every gradient.
  const Arch& a = GetParam();
  ModelConfig ref_cfg = model_config(a);
  ModelConfig jit_cfg = ref_cfg;
  jit_cfg.attention.backend = sink::Backend::jit;
  torch::manual_seed(4);
  Transformer ref(ref_cfg);
  Transformer jit(jit_cfg);
  {
    torch::NoGradGuard ng;
    for (auto& p : ref.parameters()) p.add_(torch::randn_like(p) * 0.1);
    auto dst = jit.named_parameters();
    for (auto& item : ref.named_parameters()) dst[item.key()].copy_(item.value());
    auto dst_buffers = jit.named_buffers();
    for (auto& item : ref.named_buffers()) dst_buffers[item.key()].copy_(item.value());
  }
  torch::manual_seed(5);
  auto x = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
  auto y = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
  auto fr = ref.forward(x, true), fj = jit.forward(x, true);
  EXPECT_TRUE(torch::allclose(fj.logits, fr.logits, 1e-4, 1e-5)) << (fj.logits - fr.logits).abs().max().item<double>();
  for (size_t l = 0; l < fr.attention.size(); ++l)
    EXPECT_TRUE(torch::allclose(fj.attention[l], fr.attention[l], 1e-4, 1e-5))
        << "probe of layer " << l << ": " << (fj.attention[l] - fr.attention[l]).abs().max().item<double>();
  auto ce = [&](const torch::Tensor& logits) {
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  };
  ce(ref.forward(x).logits).backward();
  ce(jit.forward(x).logits).backward();
  auto jit_params = jit.named_parameters();
  for (auto& item : ref.named_parameters()) {
    auto gr = item.value().grad(), gj = jit_params[item.key()].grad();
    ASSERT_TRUE(gj.defined()) << item.key();
    const double scale = gr.abs().max().item<double>();
    EXPECT_LT((gj - gr).abs().max().item<double>(), 1e-3 * scale + 1e-7)
        << item.key() << " (max |grad| " << scale << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(AllKnobs, ModelArch, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<Arch>& info) { return std::string(info.param.name); });

// Parameters that exist only for some knobs, and shapes they must have.
TEST(Model, KnobsCreateTheirParameters) {
  auto names = [](const Arch& a) {
    ModelConfig c = model_config(a);
    Transformer m(c);
    std::map<std::string, std::vector<int64_t>> out;
    for (auto& item : m.named_parameters()) out[item.key()] = item.value().sizes().vec();
    for (auto& item : m.named_buffers()) out["buffer:" + item.key()] = item.value().sizes().vec();
    return out;
  };
  auto has = [](const std::map<std::string, std::vector<int64_t>>& m, const std::string& key) {
    return m.count(key) > 0;
  };

  auto base = names({"", ""});
  EXPECT_TRUE(has(base, "head.weight"));
  EXPECT_FALSE(has(base, "sink_token"));
  auto tied = names({"", "model.tie_embeddings = true"});
  EXPECT_FALSE(has(tied, "head.weight"));
  auto gqa = names({"", "model { heads = 4  kv_heads = 2 }"});
  EXPECT_EQ(gqa.at("block0.attn.wk.weight"), (std::vector<int64_t>{2 * 4, 16}));
  EXPECT_EQ(gqa.at("block0.attn.wq.weight"), (std::vector<int64_t>{4 * 4, 16}));
  auto add = names({"", "model.heads_combine = add"});
  EXPECT_EQ(add.at("block0.attn.wo.weight"), (std::vector<int64_t>{16, 8}));
  auto sink = names({"", "model.sink_token = true"});
  EXPECT_EQ(sink.at("sink_token"), (std::vector<int64_t>{16}));
  auto kv = names({"", "model.biases = kv"});
  EXPECT_EQ(kv.at("block0.attn.k_star"), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(kv.at("block0.attn.v_star"), (std::vector<int64_t>{2, 8}));
  auto shared = names({"", "model { biases = kv  bias_shared = true }"});
  EXPECT_EQ(shared.at("block0.attn.k_star"), (std::vector<int64_t>{1, 8}));
  auto kd = names({"", "model { biases = k  k_dims = 3 }"});
  EXPECT_EQ(kd.at("block0.attn.k_star"), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(has(kd, "buffer:block0.attn.v_star"));  // v* = 0, fixed
  EXPECT_FALSE(has(kd, "block0.attn.v_star"));
  auto ln = names({"", "model.norm = layernorm"});
  EXPECT_TRUE(has(ln, "block0.norm1.bias"));
  auto rel = names({"", "model.pe = relative(buckets = 6, max_distance = 12)"});
  EXPECT_EQ(rel.at("relative.weight"), (std::vector<int64_t>{6, 2}));
  auto learned = names({"", "model.pe = learned"});
  EXPECT_TRUE(has(learned, "positions.weight"));
  auto mlp = names({"", "attention { kernel = mlp(hidden = 8)  score = qk  normalize = abs_clamped }"});
  EXPECT_EQ(mlp.at("block0.attn.kernel_w1"), (std::vector<int64_t>{2, 8, 8}));
  EXPECT_FALSE(has(base, "block0.attn.wg.weight"));
  EXPECT_EQ(names({"", "attention.gate = elementwise"}).at("block0.attn.wg.weight"), (std::vector<int64_t>{2 * 8, 16}));
  EXPECT_EQ(names({"", "attention.gate = headwise"}).at("block1.attn.wg.weight"), (std::vector<int64_t>{2, 16}));
}

// A gate whose projection is zero is sigmoid(0) = 1/2 everywhere: the gated
// model is the ungated one with its output projection halved, and the
// measured mean gate is exactly 1/2.
TEST(Model, AZeroGateHalvesTheAttentionOutput) {
  for (const char* gate : {"elementwise", "headwise"}) {
    ModelConfig plain_cfg = model_config({"", ""});
    const std::string body = std::string("attention.gate = ") + gate;
    ModelConfig gated_cfg = model_config({"", body.c_str()});
    torch::manual_seed(5);
    Transformer plain(plain_cfg), gated(gated_cfg);
    {
      torch::NoGradGuard ng;
      auto target = gated.named_parameters();
      for (auto& item : plain.named_parameters()) target[item.key()].copy_(item.value());
      for (auto& blk : gated.blocks) {
        blk->attn->wg->weight.zero_();
        blk->attn->wo->weight.mul_(2.0);
      }
    }
    auto x = torch::randint(0, kVocab, {kB, kT}, torch::kLong);
    auto r = gated.forward(x, /*probe=*/true);
    EXPECT_TRUE(torch::allclose(r.logits, plain.forward(x).logits, 1e-5, 1e-6)) << gate;
    auto report = sink::rt::measure_model(gated, x, {1}, 0.3, false);
    ASSERT_EQ(report.gate.size(), 2u) << gate;
    for (double g : report.gate) EXPECT_DOUBLE_EQ(g, 0.5) << gate;
    EXPECT_TRUE(sink::rt::measure_model(plain, x, {1}, 0.3, false).gate.empty());
  }
}

TEST(Model, FixedVStarIsTheSpecVector) {
  ModelConfig c = model_config({"", "model { biases = k  v_star = 5 * onehot(0) }"});
  Transformer m(c);
  auto v = m.blocks[0]->attn->v_star;
  ASSERT_EQ(v.sizes(), (std::vector<int64_t>{2, 8}));
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 8; ++k) EXPECT_EQ(v[h][k].item<float>(), k == 0 ? 5.0f : 0.0f);
  ModelConfig c2 = model_config({"", "model { biases = k  v_star = 20 * ones / sqrt(d_head) }"});
  Transformer m2(c2);
  EXPECT_NEAR(m2.blocks[1]->attn->v_star[1][3].item<float>(), 20.0 / std::sqrt(8.0), 1e-5);
}

TEST(Model, GroupedQueryHeadsShareKeysInBlocks) {
  // H = 4, Hkv = 2: query heads 0,1 use kv head 0; 2,3 use kv head 1 (llama2.c's h / (H / Hkv)).
  ModelConfig c = model_config({"", "model { heads = 4  kv_heads = 2  pe = nope }"});
  c.layers = 1;
  torch::manual_seed(3);
  Transformer m(c);
  auto& attn = *m.blocks[0]->attn;
  {
    torch::NoGradGuard ng;
    // Identical query weights for every head: heads sharing a kv head then attend identically.
    auto wq = attn.wq->weight;  // [H*dh, d]
    for (int h = 1; h < 4; ++h) wq.narrow(0, h * 4, 4).copy_(wq.narrow(0, 0, 4));
    attn.wk->weight.mul_(30);  // sharpen, so different kv heads give visibly different attention
  }
  auto x = torch::randint(0, kVocab, {1, 6}, torch::kLong);
  auto A = m.forward(x, true).attention[0][0];  // [H, T, T]
  EXPECT_TRUE(torch::allclose(A[0], A[1], 0, 1e-6));
  EXPECT_TRUE(torch::allclose(A[2], A[3], 0, 1e-6));
  EXPECT_FALSE(torch::allclose(A[0], A[2], 0, 1e-4));
}

namespace {

// Passes every call to the reference path and remembers the dtypes it saw.
struct DtypeSpy : AttentionBackend {
  std::shared_ptr<AttentionBackend> inner;
  std::vector<torch::ScalarType> seen;
  std::string name() const override { return "dtype-spy"; }
  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    for (const auto* t : {&call.q, &call.k, &call.v}) seen.push_back(t->scalar_type());
    return inner->attend(call, probe);
  }
};

}  // namespace

// Under bf16 autocast the backend must get bf16 q, k and v, with every
// position encoding and phi: that is what selects the GPU's bf16 kernels.
// RoPE's fp32 tables once promoted q and k back to fp32.
TEST(Model, AutocastHandsTheBackendBf16Heads) {
  for (const char* body :
       {"model.pe = rope(theta = 10000)", "model.pe = alibi", "model.pe = learned",
        "attention { kernel = elu1  score = qk  normalize = sum }", "model { heads = 4  kv_heads = 2 }"}) {
    ModelConfig c = model_config({"", body});
    Transformer m(c);
    auto spy = std::make_shared<DtypeSpy>();
    spy->inner = m.backend;
    for (auto& block : m.blocks) block->attn->backend = spy;
    {
      AutocastScope bf16(sink::Precision::bf16, torch::kCPU);
      m.forward(torch::randint(0, kVocab, {kB, kT}, torch::kLong));
    }
    ASSERT_EQ(spy->seen.size(), 3u * c.layers) << body;
    for (auto t : spy->seen) EXPECT_EQ(t, torch::kBFloat16) << body;
  }
}

// RoPE's tables are built once for the longest sequence seen and narrowed for shorter ones: a
// model's logits do not depend on what it ran before, and the tables are RoPE's, computed here
// from the formula (cos and sin of p * theta^(-2i / d_head)).
TEST(Model, RopeTablesAreCachedWithoutChangingAnything) {
  auto cfg = sinktest::config_of("experiment rope extends micro { model.vocab = 32 }").model;
  ASSERT_EQ(cfg.pe, PosEmbedding::rope);
  torch::manual_seed(3);
  Transformer warm(cfg);
  torch::manual_seed(3);
  Transformer fresh(cfg);
  auto long_tokens = torch::randint(0, 32, {2, 16}, torch::kLong);
  auto short_tokens = long_tokens.narrow(1, 0, 8).contiguous();
  torch::NoGradGuard no_grad;
  warm.forward(long_tokens);  // the tables now span 16 positions
  EXPECT_TRUE(torch::equal(warm.forward(short_tokens).logits, fresh.forward(short_tokens).logits));

  auto [cos, sin] = warm.rope_tables(5);
  ASSERT_EQ(cos.sizes(), (std::vector<int64_t>{5, cfg.d_head}));
  for (int64_t p = 0; p < 5; ++p)
    for (int64_t i = 0; i < cfg.d_head / 2; ++i) {
      const double angle = p * std::pow(cfg.rope_theta, -2.0 * i / cfg.d_head);
      for (int64_t c : {2 * i, 2 * i + 1}) {
        EXPECT_NEAR(cos[p][c].item<double>(), std::cos(angle), 1e-7) << p << "," << c;
        EXPECT_NEAR(sin[p][c].item<double>(), (c % 2 ? 1 : -1) * std::sin(angle), 1e-7) << p << "," << c;
      }
    }
  Transformer cold(cfg);
  EXPECT_TRUE(torch::equal(cold.rope_tables(5).first, cos));
  EXPECT_TRUE(torch::equal(cold.rope_tables(5).second, sin));
  // Longer than any seen: built again, and still the formula's.
  auto [cos40, sin40] = warm.rope_tables(40);
  EXPECT_EQ(cos40.size(0), 40);
  EXPECT_NEAR(sin40[39][1].item<double>(), std::sin(39.0), 1e-6);
}

// apply_rope against the rotation of each pair written out, (a cos - b sin, a sin + b cos): the same bits, output
// and input gradient, in float and in bf16 (where each product and sum rounds to 16 bits), on a transposed view as
// attention passes q and k.
TEST(Model, RopeIsEachPairsRotationBitForBit) {
  torch::manual_seed(6);
  const int64_t T = 7, dh = 8;
  auto inv = torch::pow(10000.0, -torch::arange(0, dh, 2, torch::kDouble) / double(dh));
  auto angles = torch::arange(T, torch::kDouble).unsqueeze(1) * inv.unsqueeze(0);
  const auto cos = torch::cos(angles).to(torch::kFloat), sin = torch::sin(angles).to(torch::kFloat);
  const auto cos_table = torch::stack({cos, cos}, -1).flatten(-2),
             sin_table = torch::stack({-sin, sin}, -1).flatten(-2);
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const auto drawn = torch::randn({2, T, 3, dh}).to(dtype);
    const auto upstream = torch::randn({2, 3, T, dh}).to(dtype);
    auto run = [&](bool written_out) {
      auto x = drawn.clone().requires_grad_();
      const auto q = x.transpose(1, 2);
      torch::Tensor y;
      if (written_out) {
        const auto c = cos.to(dtype), s = sin.to(dtype);
        auto pairs = q.unflatten(-1, {dh / 2, 2});
        auto a = pairs.select(-1, 0), b = pairs.select(-1, 1);
        y = torch::stack({a * c - b * s, a * s + b * c}, -1).flatten(-2);
      } else {
        y = rt::apply_rope(q, cos_table, sin_table);
      }
      (y * upstream).sum().backward();
      return std::pair{y.detach(), x.grad()};
    };
    const auto [y0, dx0] = run(true);
    const auto [y1, dx1] = run(false);
    EXPECT_TRUE(torch::equal(y1, y0)) << (y1 - y0).abs().max();
    EXPECT_TRUE(torch::equal(dx1, dx0)) << (dx1 - dx0).abs().max();
  }
}

// The sinusoidal table and T5's buckets are kept on the model's device for the longest sequence seen (a step
// copies nothing from the host): a shorter sequence after a longer one computes what it computes alone.
TEST(Model, PositionTablesAreCachedWithoutChangingAnything) {
  for (const char* pe : {"sinusoidal", "relative"}) {
    SCOPED_TRACE(pe);
    auto cfg =
        sinktest::config_of(std::string("experiment p extends micro { model.vocab = 32  model.pe = ") + pe + " }")
            .model;
    torch::manual_seed(3);
    Transformer warm(cfg);
    torch::manual_seed(3);
    Transformer fresh(cfg);
    auto long_tokens = torch::randint(0, 32, {2, 16}, torch::kLong);
    auto short_tokens = long_tokens.narrow(1, 0, 8).contiguous();
    torch::NoGradGuard no_grad;
    warm.forward(long_tokens);
    EXPECT_TRUE(torch::equal(warm.forward(short_tokens).logits, fresh.forward(short_tokens).logits));
    EXPECT_TRUE(torch::equal(warm.forward(long_tokens).logits, fresh.forward(long_tokens).logits));
  }
}

// RMSNorm by hand on one row: x = (3, 4), mean(x^2) = 12.5, so x / sqrt(12.5 + eps) times the gains.
TEST(Model, RmsNormIsTheRowOverItsRootMeanSquare) {
  auto x = torch::tensor({{3.0, 4.0}}, torch::kDouble), w = torch::tensor({2.0, 0.5}, torch::kDouble);
  const double eps = 1e-5, root = std::sqrt(12.5 + eps);
  auto want = torch::tensor({{3.0 / root * 2, 4.0 / root * 0.5}}, torch::kDouble);
  EXPECT_TRUE(torch::allclose(rt::rms_norm(x, w, eps), want, 1e-14, 0));
}

// LibTorch's own RMSNorm, the one a GPU runs (one fused kernel each way), against the four operations it replaces:
// the output and the gradients of the input and the gains, on an input whose rows differ in scale.
TEST(Model, LibraryRmsNormGivesTheCompositesOutputAndGradients) {
#if !SINKLAB_LIBRARY_RMS_NORM
  GTEST_SKIP() << "this LibTorch (" << TORCH_VERSION << ") has no rms_norm; the torch 2.11 build tests it";
#endif
  torch::manual_seed(3);
  auto x =
      (torch::randn({4, 5, 24}, torch::kDouble) * torch::arange(1, 6, torch::kDouble).view({1, 5, 1})).requires_grad_();
  auto w = torch::randn({24}, torch::kDouble).requires_grad_();
  auto upstream = torch::randn({4, 5, 24}, torch::kDouble);
  auto run = [&](bool library) {
    x.mutable_grad() = torch::Tensor(), w.mutable_grad() = torch::Tensor();
    auto y = rt::rms_norm(x, w, 1e-6, library ? rt::RmsNormForm::library : rt::RmsNormForm::composite);
    (y * upstream).sum().backward();
    return std::tuple{y.detach(), x.grad().clone(), w.grad().clone()};
  };
  const auto [y0, dx0, dw0] = run(false);
  const auto [y1, dx1, dw1] = run(true);
  EXPECT_TRUE(torch::allclose(y1, y0, 1e-12, 1e-12)) << (y1 - y0).abs().max();
  EXPECT_TRUE(torch::allclose(dx1, dx0, 1e-12, 1e-12)) << (dx1 - dx0).abs().max();
  EXPECT_TRUE(torch::allclose(dw1, dw0, 1e-12, 1e-12)) << (dw1 - dw0).abs().max();
}

// The projections a GPU stacks into one product (q, k and v; a gated FFN's gate and up) against each its own
// product: every output, and the gradients of the input and of each weight, with projections of different widths
// (grouped-query attention's k and v are narrower than q).
TEST(Model, StackedProjectionsGiveEachProjectionsOutputAndGradients) {
  torch::manual_seed(4);
  auto x = torch::randn({3, 7, 16}, torch::kDouble).requires_grad_();
  std::vector<torch::Tensor> weights;
  for (int64_t rows : {16, 8, 8}) weights.push_back(torch::randn({rows, 16}, torch::kDouble).requires_grad_());
  std::vector<torch::Tensor> upstream;
  for (const auto& w : weights) upstream.push_back(torch::randn({3, 7, w.size(0)}, torch::kDouble));
  auto run = [&](bool stacked) {
    x.mutable_grad() = torch::Tensor();
    for (auto& w : weights) w.mutable_grad() = torch::Tensor();
    const auto out = rt::project(x, weights, stacked);
    EXPECT_EQ(out.size(), weights.size());
    auto loss = torch::zeros({}, torch::kDouble);
    for (size_t k = 0; k < out.size(); ++k) loss = loss + (out[k] * upstream[k]).sum();
    loss.backward();
    std::vector<torch::Tensor> results;
    for (const auto& o : out) results.push_back(o.detach());
    results.push_back(x.grad().clone());
    for (const auto& w : weights) results.push_back(w.grad().clone());
    return results;
  };
  const auto separate = run(false), stacked = run(true);
  ASSERT_EQ(separate.size(), stacked.size());
  for (size_t k = 0; k < separate.size(); ++k) {
    ASSERT_EQ(stacked[k].sizes(), separate[k].sizes()) << "result " << k;
    EXPECT_TRUE(torch::allclose(stacked[k], separate[k], 1e-12, 1e-12))
        << "result " << k << ": " << (stacked[k] - separate[k]).abs().max();
  }
}
