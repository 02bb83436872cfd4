// `sinkc export RUN --hf DIR`: micro runs trained here, written as Hugging
// Face folders and loaded back by transformers itself (AutoModelForCausalLM,
// eager attention, in $SINKLAB_PYTHON): its logits and attention against the
// runtime's, and `sinkc measure DIR` against the run's own alpha table.
// The safetensors writer and the refusals need no Python.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>

#include "hf_python.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/interop/hf_export.h"
#include "runtime/interop/safetensors.h"
#include "runtime/measurement/measure.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using namespace sink::rt;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

// `sinkc export ARGS`: exit status, output in `said`.
int sinkc_export(const std::vector<std::string>& args, const TempDir& tmp, std::string& said) {
  std::vector<std::string> argv = {sinktest::sinkc_binary(), "export"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = tmp.file("export.out");
  const int rc = sinktest::wait_exit(sinktest::spawn(argv, out));
  said = sinktest::read_file(out);
  return rc;
}

}  // namespace

TEST(Safetensors, WriterRoundTripsEveryDtypeBitForBit) {
  TempDir tmp("safetensors-write");
  std::map<std::string, torch::Tensor> tensors = {
      {"f32", torch::randn({3, 5})},
      {"bf16", torch::randn({7}).to(torch::kBFloat16)},
      {"f16", torch::randn({2, 2, 2}).to(torch::kHalf)},
      {"i64", torch::arange(-4, 5, torch::kLong)},
      {"scalar", torch::tensor(2.5)},
      {"transposed", torch::randn({4, 3}).t()},  // not contiguous: written row-major
  };
  const std::string path = tmp.file("m.safetensors");
  save_safetensors(path, tensors);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const std::string bytes = sinktest::read_file(path);
  uint64_t header = 0;
  for (int b = 7; b >= 0; --b) header = (header << 8) | static_cast<unsigned char>(bytes[b]);
  EXPECT_EQ(header % 8, 0u) << "the data should start 8-byte aligned";
  EXPECT_NE(bytes.find(R"("__metadata__":{"format":"pt"})"), std::string::npos);
  auto back = load_safetensors(path);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    EXPECT_EQ(back[name].scalar_type(), t.scalar_type());
    EXPECT_EQ(back[name].sizes(), t.sizes());
    EXPECT_TRUE(torch::equal(back[name], t));
  }
  const std::string nowhere = tmp.file("missing/m.safetensors");
  EXPECT_NE(sinktest::error_of([&] { save_safetensors(nowhere, tensors); }).find(nowhere), std::string::npos);
  const std::string complex =
      sinktest::error_of([&] { save_safetensors(path, {{"c", torch::zeros({2}, torch::kComplexFloat)}}); });
  EXPECT_NE(complex.find("tensor 'c'"), std::string::npos) << complex;
}

TEST(ExportHf, ModelsNoStockClassComputesAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"attention { score = sigmoid(qk)  normalize = none }", "attention.score = sigmoid(qk)"},
      {"attention.normalize = pnorm(p = 2)", "attention.normalize"},
      {"attention.kernel = elu1", "attention.kernel"},
      {"attention.gate = headwise", "attention.gate"},
      {"attention.sink_logit = learned", "attention.sink_logit"},
      {"attention.differential = true", "attention.differential"},
      {"attention.scale = 0.5", "attention.scale"},
      {"loss.prefix = 4", "loss.prefix"},
      {"model.pe = alibi", "model.pe"},
      {"model.pe = sinusoidal", "model.norm = rmsnorm"},
      {"model.sink_token = true", "model.sink_token"},
      {"model.biases = kv", "model.biases"},
      {"model.heads_combine = add", "model.heads_combine"},
      {"model.placement = post", "model.placement"},
      {"model.norm = layernorm", "model.ffn = swiglu: RoPE + LayerNorm models are exported as GPT-NeoX"},
      {"model.ffn = gelu", "model.ffn = gelu: RoPE + RMSNorm models are exported as LLaMA"},
      {"model { norm = layernorm  ffn = gelu  kv_heads = 1 }", "model.kv_heads"},
      {"model { pe = learned }", "model.norm = rmsnorm"},
      {"model { pe = learned  norm = layernorm }", "model.ffn = swiglu"},
      {"model { pe = learned  norm = layernorm  ffn = gelu  kv_heads = 1 }", "model.kv_heads"},
      {"model { pe = nope  norm = layernorm  ffn = relu }  loss.window = 8", "loss.window"},
      {"model { pe = learned  norm = layernorm  ffn = relu  placement = post  norm_eps = 1e-6 }", "model.norm_eps"},
  };
  TempDir out("hf-refused");
  for (const auto& [body, field] : refused) {
    SCOPED_TRACE(body);
    auto cfg = sinktest::config_of("experiment refused extends micro { " + body + " }");
    cfg.model.vocab = 17;
    std::string why;
    EXPECT_EQ(hf_model_type(cfg.model, &why), "");
    EXPECT_NE(why.find(field), std::string::npos) << why;
    Transformer model(cfg.model);
    const std::string dir = out.file("refused");
    const std::string e = sinktest::error_of([&] { save_hf(model, 16, {}, dir); });
    EXPECT_NE(e.find(field), std::string::npos) << e;
    EXPECT_NE(e.find(dir), std::string::npos) << e;
    EXPECT_FALSE(fs::exists(dir));
  }
  const std::vector<std::pair<std::string, std::string>> mapped = {
      {"", "llama"},
      {"model { ffn = geglu  kv_heads = 1  tie_embeddings = true }", "llama"},
      {"model.ffn = reglu  loss.window = 8", "mistral"},
      {"model { norm = layernorm  ffn = gelu }", "gpt_neox"},
      {"model { pe = learned  norm = layernorm  ffn = gelu }", "gpt2"},
      {"model { pe = nope  norm = layernorm  ffn = swish }", "gpt2"},
      {"model { pe = learned  norm = layernorm  ffn = relu  placement = post }", "opt"},
  };
  for (const auto& [body, type] : mapped) {
    SCOPED_TRACE(body);
    std::string why;
    EXPECT_EQ(hf_model_type(sinktest::config_of("experiment ok extends micro { " + body + " }").model, &why), type)
        << why;
  }
}

namespace {

// The runs of the round trip, one per class and feature the mapping handles.
const std::vector<std::pair<std::string, std::string>> kRoundTrips = {
    {"llama", ""},
    {"llama_gqa_tied_geglu", "model { kv_heads = 1  ffn = geglu  tie_embeddings = true  pe = rope(theta = 500) }"},
    {"llama_four_heads_two_kv", "model { heads = 4  kv_heads = 2  ffn = reglu }"},
    {"mistral_window", "loss.window = 5"},
    {"neox_layernorm_gelu", "model { norm = layernorm  ffn = gelu  pe = rope(theta = 300) }"},
    {"neox_four_heads_tied_relu", "model { norm = layernorm  ffn = relu  heads = 4  tie_embeddings = true }"},
    {"gpt2_learned", "model { pe = learned  norm = layernorm  ffn = gelu }"},
    {"gpt2_nope_tied", "model { pe = nope  norm = layernorm  ffn = relu  tie_embeddings = true }"},
    {"gpt2_sinusoidal_swish", "model { pe = sinusoidal  norm = layernorm  ffn = swish }"},
    {"opt_post_norm", "model { pe = learned  norm = layernorm  ffn = relu  placement = post }"},
    {"opt_post_norm_nope_tied",
     "model { pe = nope  norm = layernorm  ffn = gelu  placement = post  tie_embeddings = true }"},
    {"opt_post_norm_sinusoidal", "model { pe = sinusoidal  norm = layernorm  ffn = relu  placement = post }"},
};

}  // namespace

TEST(ExportHf, TransformersComputesTheRunsLogitsAttentionAndAlphaTable) {
  HF_PYTHON_OR_SKIP(python);
  TempDir tmp("hf-export");
  struct Case {
    std::string name, run, dir, ids, theirs;
    torch::Tensor x;
  };
  std::vector<Case> cases;
  // Every run trained and exported first: one Python start loads all the folders.
  std::vector<std::string> oracle_args = {"logits"};
  for (const auto& [name, body] : kRoundTrips) {
    Case c{name,
           trained_run(tmp, body),
           tmp.file(name + "-hf"),
           tmp.file(name + "-ids.txt"),
           tmp.file(name + "-transformers.safetensors"),
           {}};
    std::string said;
    ASSERT_EQ(sinkc_export({c.run, "--hf", c.dir}, tmp, said), 0) << name << ": " << said;
    EXPECT_NE(said.find("wrote " + c.dir), std::string::npos) << said;
    const TrainedModel trained = load_trained_model(c.run);
    torch::manual_seed(7);
    c.x = torch::randint(0, trained.model->cfg.vocab, {3, trained.context}, torch::kLong);
    std::string ids;
    for (int64_t n = 0; n < c.x.size(0); ++n) {
      for (int64_t t = 0; t < c.x.size(1); ++t) ids += std::to_string(c.x[n][t].item<int64_t>()) + " ";
      ids += "\n";
    }
    sinktest::write_file(c.ids, ids);
    oracle_args.insert(oracle_args.end(), {c.dir, c.ids, c.theirs});
    cases.push_back(std::move(c));
  }
  ASSERT_EQ(sinktest::run_oracle(python, oracle_args), 0);

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto theirs = load_safetensors(c.theirs);
    TrainedModel trained = load_trained_model(c.run);
    Transformer& ours = *trained.model;
    torch::NoGradGuard no_grad;
    ours.eval();
    ForwardResult f = ours.forward(c.x, /*probe=*/true);
    ASSERT_EQ(theirs["logits"].sizes(), f.logits.sizes());
    const double logits = (theirs["logits"] - f.logits).abs().max().item<double>();
    double attention = 0;
    for (int64_t l = 0; l < ours.cfg.layers; ++l) {
      auto a = theirs["attention." + std::to_string(l)];
      ASSERT_EQ(a.sizes(), f.attention[l].sizes());
      attention = std::max(attention, (a - f.attention[l]).abs().max().item<double>());
    }
    EXPECT_LE(logits, 1e-5);
    EXPECT_LE(attention, 1e-5);

    // `sinkc measure DIR` on the same ids: the alpha table `sinkc measure RUN` computes (measure_model).
    SinkReport run_report = measure_model(ours, c.x, {1}, 0.3, true);
    auto measured = sinktest::measure_json(
        {c.dir, "--ids", c.ids, "--T", std::to_string(c.x.size(1)), "--n", std::to_string(c.x.size(0)), "--eps", "0.3"},
        tmp);
    ASSERT_EQ(measured["alpha"].size(), run_report.alpha.size());
    double alpha = 0;
    for (size_t l = 0; l < run_report.alpha.size(); ++l)
      for (size_t h = 0; h < run_report.alpha[l].size(); ++h)
        alpha = std::max(alpha, std::abs(measured["alpha"][l][h].get<double>() - run_report.alpha[l][h]));
    EXPECT_LE(alpha, 1e-5);
    // A post-norm run measures its residual stream before each block's last LayerNorm; a Hugging Face folder
    // after it (the layer's output): the massive ratios compare for pre-norm runs only.
    for (size_t l = 0; l < run_report.massive.size() && ours.cfg.placement == sink::NormPlacement::pre; ++l)
      EXPECT_NEAR(measured["massive"][l].get<double>(), run_report.massive[l], 1e-5 * run_report.massive[l]);
    std::printf(
        "[ export ] %-25s transformers against the run: |logits| %.1e, |attention| %.1e; measure DIR against "
        "the run's alpha table %.1e\n",
        c.name.c_str(), logits, attention, alpha);
  }
}

// A run that reads UTF-8 bytes gets a tokenizer.json that Hugging Face's
// tokenizers library reads as sinklab's byte tokenizer: ids = the bytes.
TEST(ExportHf, ByteRunsGetATokenizerJsonGivingTheBytes) {
  HF_PYTHON_OR_SKIP(python);
  TempDir tmp("hf-export-bytes");
  std::string corpus;
  for (int d = 0; d < 6; ++d)
    corpus += "{\"text\": \"Document " + std::to_string(d) + ": the first token takes the attention.\"}\n";
  sinktest::write_file(tmp.file("corpus.jsonl"), corpus);
  const std::string run = trained_run(tmp, "data { corpus = file(\"" + tmp.file("corpus.jsonl") +
                                               "\")  tokenizer = bytes  bos = false  valid_fraction = 0.2 }");
  const std::string dir = tmp.file("bytes-hf");
  std::string said;
  ASSERT_EQ(sinkc_export({run, "--hf", dir}, tmp, said), 0) << said;
  EXPECT_NE(said.find("tokenizer.json"), std::string::npos) << said;
  const std::string text =
      "Sinks \xc3\xbc"
      "ber alles <|x|>\n\t~\x01"
      " end";
  auto tokenizer = hf_tokenizer(dir + "/tokenizer.json", 258);
  std::vector<int32_t> bytes;
  for (unsigned char c : text) bytes.push_back(c);
  EXPECT_EQ(tokenizer->encode(text), bytes);
  EXPECT_EQ(tokenizer->decode(bytes), text);
  auto config = nlohmann::json::parse(sinktest::read_file(dir + "/config.json"));
  EXPECT_EQ(config["bos_token_id"], 256);
  EXPECT_EQ(config["eos_token_id"], 257);
}

TEST(ExportHf, SinkcExportHfCommand) {
  TempDir tmp("hf-export-cli");
  const std::string sigmoid = trained_run(tmp, "attention { score = sigmoid(qk)  normalize = none }");
  std::string said;
  EXPECT_EQ(sinkc_export({sigmoid, "--hf", tmp.file("sigmoid-hf")}, tmp, said), 1) << said;
  EXPECT_NE(said.find("attention.score = sigmoid(qk)"), std::string::npos) << said;
  EXPECT_NE(said.find("no stock transformers class computes it"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(tmp.file("sigmoid-hf")));
  EXPECT_EQ(sinkc_export({sigmoid, "--hf", tmp.file("a"), "--llama2c", tmp.file("b.bin")}, tmp, said), 2) << said;
  EXPECT_NE(said.find("one of them per command"), std::string::npos) << said;
  EXPECT_EQ(sinkc_export({sigmoid}, tmp, said), 2) << said;
  EXPECT_NE(said.find("--hf DIR"), std::string::npos) << said;
  EXPECT_EQ(sinkc_export({tmp.str(), "--hf", tmp.file("x")}, tmp, said), 1) << said;
  EXPECT_NE(said.find("plan.toml"), std::string::npos) << said;
}
