// `sinkc export --llama2c`: a micro run trained here (no external model)
// written in llama2.c's version-0 layout, checked three ways: the loader
// reads it back to the same logits; the bytes sit where llama2.c's run.c
// looks for them; and a forward pass written from run.c over the raw file
// agrees with our model. Plans the format cannot hold are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sys/wait.h>

#include "runtime/interop/llama2c.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/model.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "support/remove_tree.h"
#include "tests/source_paths.h"

using namespace sink::rt;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> out((bytes.size() - 28) / 4);
  std::memcpy(out.data(), bytes.data() + 28, out.size() * 4);
  return out;
}

// llama2.c's run.c forward (one position at a time, a KV cache), written
// from its source over the file's floats alone, in double: the oracle knows
// nothing of our Transformer or our loader.
struct RunC {
  int dim, hidden, layers, heads, kv_heads, vocab, seq_len;
  bool shared;
  std::vector<float> w;
  size_t token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;

  explicit RunC(const std::string& bytes) {
    int32_t h[7];
    std::memcpy(h, bytes.data(), 28);
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], vocab = std::abs(h[5]), seq_len = h[6];
    shared = h[5] > 0;
    w = floats_of(bytes);
    const size_t hs = dim / heads, L = layers, kv_dim = kv_heads * hs;
    size_t at = 0;
    auto take = [&](size_t n) {
      size_t start = at;
      at += n;
      return start;
    };
    token_embedding = take(size_t(vocab) * dim);
    rms_att = take(L * dim);
    wq = take(L * dim * dim);
    wk = take(L * dim * kv_dim);
    wv = take(L * dim * kv_dim);
    wo = take(L * dim * dim);
    rms_ffn = take(L * dim);
    w1 = take(L * dim * hidden);
    w2 = take(L * hidden * dim);
    w3 = take(L * dim * hidden);
    rms_final = take(dim);
    take(size_t(seq_len) * hs / 2);  // freq_cis_real
    take(size_t(seq_len) * hs / 2);  // freq_cis_imag
    wcls = shared ? token_embedding : take(size_t(vocab) * dim);
    EXPECT_EQ(at, w.size()) << "the header implies another file size";
  }

  std::vector<double> rmsnorm(const std::vector<double>& x, size_t weight) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    ss = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    std::vector<double> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = w[weight + i] * (ss * x[i]);
    return o;
  }
  // W (d, n) @ x (n,), row-major as run.c's matmul.
  std::vector<double> matmul(const std::vector<double>& x, size_t weight, size_t n, size_t d) const {
    std::vector<double> o(d, 0.0);
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < n; ++j) o[i] += w[weight + i * n + j] * x[j];
    return o;
  }

  // Logits at every position of `tokens`.
  std::vector<std::vector<double>> forward(const std::vector<int64_t>& tokens) const {
    const size_t hs = dim / heads, kv_dim = kv_heads * hs, kv_mul = heads / kv_heads;
    std::vector<std::vector<std::vector<double>>> key(layers), value(layers);
    std::vector<std::vector<double>> out;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      std::vector<double> x(w.begin() + token_embedding + tokens[pos] * dim,
                            w.begin() + token_embedding + (tokens[pos] + 1) * dim);
      for (int l = 0; l < layers; ++l) {
        auto xb = rmsnorm(x, rms_att + l * dim);
        auto q = matmul(xb, wq + l * dim * dim, dim, dim);
        auto k = matmul(xb, wk + l * dim * kv_dim, dim, kv_dim);
        auto v = matmul(xb, wv + l * dim * kv_dim, dim, kv_dim);
        for (size_t i = 0; i < size_t(dim); i += 2) {
          const double freq = 1.0 / std::pow(10000.0, double(i % hs) / double(hs));
          const double fcr = std::cos(pos * freq), fci = std::sin(pos * freq);
          for (auto* vec : {&q, &k}) {
            if (vec == &k && i >= kv_dim) continue;
            const double v0 = (*vec)[i], v1 = (*vec)[i + 1];
            (*vec)[i] = v0 * fcr - v1 * fci;
            (*vec)[i + 1] = v0 * fci + v1 * fcr;
          }
        }
        key[l].push_back(k);
        value[l].push_back(v);
        std::vector<double> att_out(dim, 0.0);
        for (size_t h = 0; h < size_t(heads); ++h) {
          const size_t kvh = h / kv_mul;
          std::vector<double> att(pos + 1);
          double mx = -1e300;
          for (size_t t = 0; t <= pos; ++t) {
            double s = 0;
            for (size_t i = 0; i < hs; ++i) s += q[h * hs + i] * key[l][t][kvh * hs + i];
            att[t] = s / std::sqrt(double(hs));
            mx = std::max(mx, att[t]);
          }
          double sum = 0;
          for (auto& a : att) sum += (a = std::exp(a - mx));
          for (size_t t = 0; t <= pos; ++t)
            for (size_t i = 0; i < hs; ++i) att_out[h * hs + i] += att[t] / sum * value[l][t][kvh * hs + i];
        }
        auto o = matmul(att_out, wo + l * dim * dim, dim, dim);
        for (int i = 0; i < dim; ++i) x[i] += o[i];
        xb = rmsnorm(x, rms_ffn + l * dim);
        auto hb = matmul(xb, w1 + l * dim * hidden, dim, hidden);
        auto hb2 = matmul(xb, w3 + l * dim * hidden, dim, hidden);
        for (int i = 0; i < hidden; ++i) hb[i] = hb[i] / (1.0 + std::exp(-hb[i])) * hb2[i];
        auto f = matmul(hb, w2 + l * hidden * dim, hidden, dim);
        for (int i = 0; i < dim; ++i) x[i] += f[i];
      }
      out.push_back(matmul(rmsnorm(x, rms_final), wcls, dim, vocab));
    }
    return out;
  }
};

int shell(const std::string& cmd, std::string& output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST(Export, Llama2cReadsBackToTheSameLogits) {
  // Untied with multi-head K/V (micro's own), and tied with grouped-query
  // attention: both header signs and the K/V widths the layout depends on.
  for (const std::string body : {std::string(""), std::string("model { tie_embeddings = true  kv_heads = 1 }")}) {
    SCOPED_TRACE(body.empty() ? "micro" : body);
    TempDir out("export");
    const std::string run = trained_run(out, body);
    TrainedModel trained = load_trained_model(run);
    EXPECT_EQ(trained.step, 6);
    EXPECT_TRUE(trained.status == sink::run_record::RunStatus::Completed);
    EXPECT_TRUE(trained.warning.empty()) << trained.warning;
    Transformer& ours = *trained.model;
    // The trained weights, not a fresh initialization: RMSNorm gains start at 1.
    EXPECT_GT((ours.final_norm->weight - 1).abs().max().item<float>(), 1e-3);

    const std::string file = out.file("model.bin");
    save_llama2c(ours, trained.context, file);
    EXPECT_FALSE(fs::exists(file + ".tmp"));
    auto back = load_llama2c(file);
    EXPECT_EQ(back.seq_len, 16);
    EXPECT_EQ(back.config.tie_embeddings, ours.cfg.tie_embeddings);
    EXPECT_EQ(back.config.kv_heads, ours.cfg.kv_heads);
    EXPECT_EQ(back.config.vocab, 17);

    torch::manual_seed(3);
    auto x = torch::randint(0, 17, {3, 16}, torch::kLong);
    torch::NoGradGuard no_grad;
    // micro trains with the JIT attention kernels, the loader builds the
    // reference path: the same function up to float rounding.
    auto a = ours.forward(x).logits, b = back.model->forward(x).logits;
    const float diff = (a - b).abs().max().item<float>();
    std::printf("[ export ] %s: max |logit difference| after the round trip %g\n", body.empty() ? "micro" : "tied, GQA",
                diff);
    EXPECT_LE(diff, 1e-6);

    // The file as run.c reads it.
    const std::string bytes = sinktest::read_file(file);
    RunC c(bytes);
    EXPECT_EQ(c.dim, 16);
    EXPECT_EQ(c.hidden, 32);
    EXPECT_EQ(c.layers, 2);
    EXPECT_EQ(c.heads, 2);
    EXPECT_EQ(c.seq_len, 16);
    EXPECT_EQ(c.shared, ours.cfg.tie_embeddings);
    // Every weight, bit for bit, where run.c's offsets put it.
    auto expect_at = [&](size_t offset, const torch::Tensor& t, const std::string& what) {
      auto flat = t.contiguous().view({-1});
      ASSERT_LE(offset + flat.numel(), c.w.size()) << what;
      EXPECT_TRUE(torch::equal(flat, torch::from_blob(c.w.data() + offset, {flat.numel()}, torch::kFloat))) << what;
    };
    const size_t kv_dim = 8 * ours.cfg.kv_heads;
    expect_at(c.token_embedding, ours.embed->weight, "token_embedding_table");
    for (size_t l = 0; l < 2; ++l) {
      const auto& b = *ours.blocks[l];
      const std::string at = " of layer " + std::to_string(l);
      expect_at(c.rms_att + l * 16, b.norm1->weight, "rms_att_weight" + at);
      expect_at(c.wq + l * 16 * 16, b.attn->wq->weight, "wq" + at);
      expect_at(c.wk + l * 16 * kv_dim, b.attn->wk->weight, "wk" + at);
      expect_at(c.wv + l * 16 * kv_dim, b.attn->wv->weight, "wv" + at);
      expect_at(c.wo + l * 16 * 16, b.attn->wo->weight, "wo" + at);
      expect_at(c.rms_ffn + l * 16, b.norm2->weight, "rms_ffn_weight" + at);
      expect_at(c.w1 + l * 16 * 32, b.ffn->w1->weight, "w1" + at);
      expect_at(c.w2 + l * 32 * 16, b.ffn->w2->weight, "w2" + at);
      expect_at(c.w3 + l * 16 * 32, b.ffn->w3->weight, "w3" + at);
    }
    expect_at(c.rms_final, ours.final_norm->weight, "rms_final_weight");
    expect_at(c.wcls, ours.cfg.tie_embeddings ? ours.embed->weight : ours.head->weight, "wcls");
    const size_t freq_cis_imag = c.rms_final + 16 + 16 * 4;
    EXPECT_NEAR(c.w[c.rms_final + 16 + 5 * 4 + 1], std::cos(5 * std::pow(10000.0, -2.0 / 8)), 1e-6);  // pos 5, pair 1
    EXPECT_NEAR(c.w[freq_cis_imag + 5 * 4 + 1], std::sin(5 * std::pow(10000.0, -2.0 / 8)), 1e-6);
    // run.c's forward in double; our float model differs by float rounding
    // (about 1e-7 on these O(1) logits): 1e-5 leaves a hundredfold margin
    // and is far below what one misplaced weight would do.
    const std::vector<int64_t> tokens = {16, 3, 7, 7, 0, 12, 1, 5};
    auto want = c.forward(tokens);
    auto got = ours.forward(torch::tensor(tokens).unsqueeze(0)).logits[0];
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int v = 0; v < 17; ++v) worst = std::max(worst, std::abs(want[t][v] - got[t][v].item<double>()));
    std::printf("[ export ] run.c forward against ours: max |difference| %g\n", worst);
    EXPECT_LT(worst, 1e-5);
  }
}

TEST(Export, PlansTheFormatCannotHoldAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.pe = alibi", "model.pe"},
      {"model.pe = rope(theta = 500000)", "model.pe"},
      {"model.norm = layernorm", "model.norm"},
      {"model.norm_eps = 1e-6", "model.norm_eps"},
      {"model.placement = post", "model.placement"},
      {"model.ffn = gelu", "model.ffn"},
      {"model.heads_combine = add", "model.heads_combine"},
      {"model.sink_token = true", "model.sink_token"},
      {"model.biases = kv", "model.biases"},
      {"attention { score = sigmoid(qk)  normalize = none }", "attention.score"},
      {"attention.normalize = pnorm(p = 2)", "attention.normalize"},
      {"attention.kernel = elu1", "attention.kernel"},
      {"attention.scale = 0.5", "attention.scale"},
      {"loss.prefix = 4", "loss.prefix"},
      {"loss.window = 8", "loss.window"},
  };
  TempDir out("refused");
  for (const auto& [body, field] : cases) {
    SCOPED_TRACE(body);
    auto cfg = sinktest::config_of("experiment refused extends micro { " + body + " }");
    cfg.model.vocab = 17;
    EXPECT_NE(llama2c_unsupported(cfg.model).find(field), std::string::npos) << llama2c_unsupported(cfg.model);
    Transformer model(cfg.model);
    const std::string file = out.file("refused.bin");
    const std::string e = sinktest::error_of([&] { save_llama2c(model, 16, file); });
    EXPECT_NE(e.find(field), std::string::npos) << e;
    EXPECT_NE(e.find(file), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(file));
    EXPECT_FALSE(fs::exists(file + ".tmp"));
  }
  // What the format holds is not refused: micro, with its width, heads and classifier changed.
  auto ok = sinktest::config_of(
      "experiment ok extends micro { model { d = 24  heads = 3  kv_heads = 1  tie_embeddings = true } }");
  EXPECT_EQ(llama2c_unsupported(ok.model), "");
  // A folder that is not there is an error naming the file, not a crash.
  ok.model.vocab = 17;
  Transformer model(ok.model);
  const std::string nowhere = out.file("missing/dir/model.bin");
  EXPECT_NE(sinktest::error_of([&] { save_llama2c(model, 16, nowhere); }).find(nowhere), std::string::npos);
}

TEST(Export, SinkcExportCommand) {
  const std::string sinkc = sinktest::sinkc_binary();
  if (!fs::exists(sinkc)) GTEST_SKIP() << sinkc << " is not built";
  TempDir out("cli-export");
  const std::string run = trained_run(out, "");
  std::string said;
  const std::string file = out.file("micro.bin");
  ASSERT_EQ(shell(sinkc + " export " + run + " --llama2c " + file, said), 0) << said;
  EXPECT_NE(said.find("wrote " + file), std::string::npos) << said;
  {
    auto back = load_llama2c(file);
    auto ours = load_trained_model(run);
    auto x = torch::randint(0, 17, {2, 16}, torch::kLong);
    torch::NoGradGuard no_grad;
    EXPECT_LE((ours.model->forward(x).logits - back.model->forward(x).logits).abs().max().item<float>(), 1e-6);
  }

  // Refused: a sigmoid-attention run; nothing written, exit 1, the field named.
  const std::string sigmoid = trained_run(out, "attention { score = sigmoid(qk)  normalize = none }");
  std::string refused;
  EXPECT_EQ(shell(sinkc + " export " + sigmoid + " --llama2c " + out.file("sigmoid.bin"), refused), 1) << refused;
  EXPECT_NE(refused.find("attention.score = sigmoid(qk)"), std::string::npos) << refused;
  EXPECT_FALSE(fs::exists(out.file("sigmoid.bin")));
  // Bad input: no format, not a run, a run without a checkpoint.
  std::string no_format, not_run, untrained;
  EXPECT_EQ(shell(sinkc + " export " + run, no_format), 2) << no_format;  // a usage error
  EXPECT_NE(no_format.find("--llama2c"), std::string::npos) << no_format;
  EXPECT_EQ(shell(sinkc + " export " + out.str() + " --llama2c " + out.file("x.bin"), not_run), 1) << not_run;
  EXPECT_NE(not_run.find("plan.toml"), std::string::npos) << not_run;
  sink::remove_tree(run + "/checkpoint");
  EXPECT_EQ(shell(sinkc + " export " + run + " --llama2c " + out.file("x.bin"), untrained), 1) << untrained;
  EXPECT_NE(untrained.find("no checkpoint"), std::string::npos) << untrained;
}
