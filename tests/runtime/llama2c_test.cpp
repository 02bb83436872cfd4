// llama2.c checkpoints: stories260K generates its documented sample, bad
// files fail clearly, and the repeated-token input has no sink (Appendix B).
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/data/tokenizer.h"
#include "runtime/interop/llama2c.h"
#include "runtime/measurement/measure.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using sinktest::TempDir;

namespace {

Llama2cModel& stories(const std::string& path) {
  static Llama2cModel m = load_llama2c(path);
  return m;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

torch::Tensor measure_input(const std::string& kind, int64_t n, int64_t T, int64_t vocab) {
  std::mt19937_64 rng(0);
  std::uniform_int_distribution<int64_t> tok(3, vocab - 1);
  auto x = torch::empty({n, T}, torch::kLong);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t repeated = tok(rng);
    for (int64_t t = 0; t < T; ++t) x[b][t] = kind == "random" ? tok(rng) : repeated;
  }
  return x;
}

void print_report(const std::string& input, const SinkReport& r) {
  std::printf("[ stories260K ] input %-8s Sink_1 = %6.2f %%  alpha_1 per layer/head:", input.c_str(), r.sink.at(1));
  for (const auto& layer : r.alpha) {
    std::printf(" |");
    for (double a : layer) std::printf(" %.3f", a);
  }
  std::printf("  massive:");
  for (double m : r.massive) std::printf(" %.2f", m);
  std::printf("\n");
}

}  // namespace

TEST(Llama2c, LoadsStories260K) {
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  auto& m = stories(model);
  // The header of stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512, seq_len 512.
  EXPECT_EQ(m.config.d, 64);
  EXPECT_EQ(m.config.ffn_hidden, 172);
  EXPECT_EQ(m.config.layers, 5);
  EXPECT_EQ(m.config.heads, 8);
  EXPECT_EQ(m.config.kv_heads, 4);
  EXPECT_EQ(m.config.vocab, 512);
  EXPECT_EQ(m.seq_len, 512);
  EXPECT_TRUE(m.config.tie_embeddings);
}

TEST(Llama2c, GreedyDecodeGivesTheDocumentedStory) {
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  SINKLAB_TEST_MODEL(tok512, "tok512.bin");
  auto& m = stories(model);
  auto ids = greedy_decode(*m.model, 60);
  ASSERT_FALSE(ids.empty());
  auto tok = llama2c_tokenizer(tok512, 512);
  const std::string text = tok->decode(ids);
  std::printf("[ stories260K ] %s\n", text.c_str());
  const std::string want =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
  EXPECT_EQ(text.substr(0, want.size()), want) << text;
  // Decoding is deterministic.
  EXPECT_EQ(greedy_decode(*m.model, 20),
            std::vector<int32_t>(ids.begin(), ids.begin() + std::min<size_t>(20, ids.size())));
}

TEST(Llama2c, MalformedFilesFailClearly) {
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  TempDir dir("l2c");
  const std::string full = sinktest::read_file(model);
  ASSERT_GT(full.size(), 1000u);

  const std::string truncated = dir.file("truncated.bin");
  sinktest::write_file(truncated, full.substr(0, full.size() / 2));
  auto e1 = error_of([&] { load_llama2c(truncated); });
  EXPECT_NE(e1.find(truncated), std::string::npos) << e1;

  const std::string garbage = dir.file("garbage.bin");
  std::string g(4096, '\0');
  for (size_t k = 0; k < g.size(); ++k) g[k] = char((k * 131 + 7) % 251);
  sinktest::write_file(garbage, g);
  auto e2 = error_of([&] { load_llama2c(garbage); });
  EXPECT_NE(e2.find(garbage), std::string::npos) << e2;
  EXPECT_NE(e2.find("not a llama2.c checkpoint"), std::string::npos) << e2;

  const std::string tiny = dir.file("tiny.bin");
  sinktest::write_file(tiny, full.substr(0, 10));
  auto e3 = error_of([&] { load_llama2c(tiny); });
  EXPECT_NE(e3.find(tiny), std::string::npos) << e3;

  auto e4 = error_of([&] { load_llama2c(dir.file("missing.bin")); });
  EXPECT_NE(e4.find("missing.bin"), std::string::npos) << e4;

  // A header that passes the plausibility checks but promises more weights than the file holds.
  std::string header = full.substr(0, 28);
  int32_t h[7];
  std::memcpy(h, header.data(), 28);
  h[2] = 50;  // 50 layers
  std::string lying(reinterpret_cast<char*>(h), 28);
  sinktest::write_file(dir.file("lying.bin"), lying + full.substr(28));
  auto e5 = error_of([&] { load_llama2c(dir.file("lying.bin")); });
  EXPECT_NE(e5.find("lying.bin"), std::string::npos) << e5;
}

TEST(Llama2c, RepeatedTokenHasNoSink) {
  // Appendix B.1: with RoPE a sequence of one repeated token gives identical
  // hidden states at every position (so the massive-activation ratio is 1), and
  // with bounded |q||k| the attention to token 1 is at most ~e^{2 xi}/t: no sink.
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  SINKLAB_TEST_MODEL(tok512, "tok512.bin");
  auto& m = stories(model);
  const int64_t n = 8, T = 64;
  auto repeat = measure_input("repeat", n, T, 512);
  {
    torch::NoGradGuard ng;
    auto f = m.model->forward(repeat, false, true);
    for (size_t l = 0; l < f.hidden.size(); ++l) {
      auto h = f.hidden[l];  // [n, T, d]
      auto first = h.narrow(1, 0, 1).expand_as(h);
      EXPECT_TRUE(torch::allclose(h, first, 1e-4, 1e-4)) << "layer " << l;
    }
  }
  auto r = measure_model(*m.model, repeat, {1, 2}, 0.3, true);
  print_report("repeat", r);
  EXPECT_EQ(r.sink.at(1), 0.0);
  EXPECT_EQ(r.sink.at(2), 0.0);
  for (double ratio : r.massive) EXPECT_NEAR(ratio, 1.0, 1e-4);
  // Every head's alpha_1 is small: well under eps, near the uniform H_T / T for most heads.
  const double uniform = [&] {
    double s = 0;
    for (int64_t i = 1; i <= T; ++i) s += 1.0 / i;
    return s / T;
  }();
  for (const auto& layer : r.alpha)
    for (double a : layer) {
      EXPECT_LT(a, 0.3);
      EXPECT_GT(a, 1.0 / T);  // query 1 always gives token 1 all of its attention
    }
  std::printf("[ stories260K ] uniform alpha_1 would be H_T/T = %.3f\n", uniform);

  // For contrast (reported, the theory makes no claim): random and natural input.
  auto random = measure_input("random", 16, T, 512);
  auto rr = measure_model(*m.model, random, {1}, 0.3, true);
  print_report("random", rr);
  auto tok = llama2c_tokenizer(tok512, 512);
  const std::string story =
      "Once upon a time, there was a little boy named Tim. Tim had a big red ball. He liked to play with his ball in "
      "the "
      "garden every day. One day, the ball rolled away into the woods. Tim was sad and he looked for it everywhere. "
      "Then "
      "a friendly bird came and said, \"I saw your ball near the big tree!\" Tim ran to the tree and found his ball. "
      "He "
      "said thank you to the bird and they played together until the sun went down. Tim was very happy.";
  auto ids = tok->encode(story);
  ASSERT_GE(static_cast<int64_t>(ids.size()), T + 16);
  auto natural = torch::empty({8, T}, torch::kLong);
  for (int64_t b = 0; b < 8; ++b)
    for (int64_t t = 0; t < T; ++t) natural[b][t] = ids[b * 2 + t];  // windows at different offsets
  auto rn = measure_model(*m.model, natural, {1}, 0.3, true);
  print_report("natural", rn);
  EXPECT_GE(rn.sink.at(1), 0.0);
}
