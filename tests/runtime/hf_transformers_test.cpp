// Hugging Face's own code as the oracle for `sinkc measure DIR`: tiny random
// checkpoints written by transformers (save_pretrained, fp32 and bf16) for
// every model_type sinklab reads, their attention and residual stream taken
// from transformers' forward (tests/runtime/hf_transformers_oracle.py); and
// --text on a byte-level BPE folder tokenized by Hugging Face's tokenizers
// library. Needs $SINKLAB_PYTHON (scripts/torch-venv.sh); skips, saying so,
// without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <sys/stat.h>

#include "hf_python.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime_test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using sinktest::TempDir;

namespace {

// bf16 weights: sinklab converts them to fp32 and computes in fp32, as the
// oracle's model reloaded with dtype=float32 does, so the same 1e-5 holds.
// Against transformers computing in bf16 (what a bf16 user sees), every
// matmul rounds to 8 significant bits (relative 2^-9 = 0.002) and softmax
// probabilities are rounded to bf16 on the way out: an alpha of O(0.1-1)
// moves by about 1e-3 through two layers (1.2e-3 the largest measured);
// 1e-2 leaves a margin and stays far below what a wrong architecture moves
// (0.1 and more).
constexpr double kFp32 = 1e-5, kBf16Compute = 1e-2;

double worst_difference(const json& got, const json& want) {
  double worst = 0;
  for (size_t l = 0; l < want.size(); ++l) {
    if (want[l].is_array()) {
      for (size_t h = 0; h < want[l].size(); ++h)
        worst = std::max(worst, std::abs(got[l][h].get<double>() - want[l][h].get<double>()));
    } else {
      worst = std::max(worst, std::abs(got[l].get<double>() - want[l].get<double>()));
    }
  }
  return worst;
}

// Relative, for values whose scale varies by case (activations, norm ratios).
double worst_relative(const json& got, const json& want) {
  double worst = 0;
  for (size_t l = 0; l < want.size(); ++l)
    worst = std::max(worst, std::abs(got[l].get<double>() - want[l].get<double>()) / std::abs(want[l].get<double>()));
  return worst;
}

}  // namespace

TEST(HfTransformers, EveryModelTypeMatchesTransformersOwnForward) {
  HF_PYTHON_OR_SKIP(python);
  TempDir tmp("hf-transformers");
  ASSERT_EQ(sinktest::run_oracle(python, {"cases", tmp.str()}), 0);
  int cases = 0;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(tmp.path)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const fs::path dir = tmp.path / name;
    if (!fs::exists(dir / "expected.json")) continue;
    ++cases;
    SCOPED_TRACE(name);
    json expected = json::parse(sinktest::read_file((dir / "expected.json").string()));
    json got = sinktest::measure_json(
        {dir.string(), "--ids", (dir / "ids.txt").string(), "--T", std::to_string(expected["T"].get<int>()), "--n",
         std::to_string(expected["N"].get<int>()), "--eps", std::to_string(expected["eps"].get<double>())},
        tmp);
    ASSERT_TRUE(got.contains("alpha")) << got.dump();
    const json& want = expected["fp32"];
    ASSERT_EQ(got["alpha"].size(), want["alpha"].size());
    for (size_t l = 0; l < want["alpha"].size(); ++l) ASSERT_EQ(got["alpha"][l].size(), want["alpha"][l].size());
    const double alpha = worst_difference(got["alpha"], want["alpha"]);
    const double massive = worst_relative(got["massive"], want["massive"]);
    const double max_activation = worst_relative(got["max_activation"], want["max_activation"]);
    EXPECT_LE(alpha, kFp32);
    EXPECT_LE(massive, kFp32);
    EXPECT_LE(max_activation, kFp32);
    size_t triples = 0;
    for (const auto& layer : want["alpha"]) triples += layer.size() * expected["N"].get<size_t>();
    // A head right at eps may fall either side of it in float: at most one triple apart.
    EXPECT_NEAR(got["sink"]["1"].get<double>(), want["sink"]["1"].get<double>(), 100.0 / double(triples) + 1e-9);
    std::string line =
        fmt::format("[ oracle ] {:<36} transformers fp32: |alpha| {:.1e}, massive {:.1e}, max |h| {:.1e} (rel.)", name,
                    alpha, massive, max_activation);
    if (expected.contains("bf16_compute")) {
      const double bf16 = worst_difference(got["alpha"], expected["bf16_compute"]["alpha"]);
      EXPECT_LE(bf16, kBf16Compute);
      line += fmt::format("; transformers bf16 compute: |alpha| {:.1e}", bf16);
    }
    std::printf("%s\n", line.c_str());
  }
  EXPECT_EQ(cases, 16) << "the oracle wrote a different number of cases";
}

namespace {

// An executable shell script `name` in `dir` that runs `python` with `flags`.
std::string python_wrapper(const fs::path& dir, const std::string& name, const std::string& python,
                           const std::string& flags) {
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  sinktest::write_file(path, "#!/bin/sh\nexec '" + python + "' " + flags + " \"$@\"\n");
  chmod(path.c_str(), 0755);
  return path;
}

// Environment variables changed for the child processes of one scope.
class EnvOverride {
 public:
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name.c_str(), value, 1);
    else
      unsetenv(name.c_str());
  }
  ~EnvOverride() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

// The GPT-2 folder gets a byte-level BPE tokenizer.json built by the
// tokenizers library; --text gives the ids that library gives (compared
// directly, and through measure against --ids of the library's own ids), with
// the library found through $SINKLAB_PYTHON and through python3 on PATH.
// Without it the error names --ids.
TEST(HfTransformers, ByteLevelBpeTextIsTokenizedByHuggingFacesTokenizers) {
  HF_PYTHON_OR_SKIP(python);
  TempDir tmp("hf-tokenizers");
  ASSERT_EQ(sinktest::run_oracle(python, {"cases", tmp.str(), "gpt2"}), 0);
  const std::string folder = tmp.file("gpt2_fp32");
  const std::string text = "The first token takes most of the attention. Once upon a time, a robot loved sinks!";
  sinktest::write_file(tmp.file("text.txt"), text);
  std::string said;
  ASSERT_EQ(sinktest::run_oracle(python, {"tokenizer", folder, tmp.file("text.txt")}, &said), 0) << said;
  std::vector<int32_t> theirs;
  std::istringstream words(said);
  for (int32_t id; words >> id;) theirs.push_back(id);
  ASSERT_GT(theirs.size(), 10u) << said;
  // Fewer ids than bytes: merges happened, so this is BPE and not a byte fallback.
  EXPECT_LT(theirs.size(), text.size());

  auto ours = sink::rt::hf_tokenizer(folder + "/tokenizer.json", 320);
  EXPECT_EQ(ours->encode(text), theirs);
  EXPECT_EQ(ours->decode(theirs), text);
  auto both = ours->encode_all({text, "attention"});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], theirs);

  std::string ids_line;
  for (int32_t id : theirs) ids_line += std::to_string(id) + " ";
  sinktest::write_file(tmp.file("ids.txt"), ids_line + "\n");
  const std::vector<std::string> shape = {"--T", "12", "--n", "2"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), folder);
    args.insert(args.end(), shape.begin(), shape.end());
    return args;
  };
  json by_ids = sinktest::measure_json(with({"--ids", tmp.file("ids.txt")}), tmp);
  json by_text = sinktest::measure_json(with({"--text", text}), tmp);
  ASSERT_TRUE(by_ids.contains("alpha"));
  EXPECT_EQ(by_text["alpha"], by_ids["alpha"]);

  // python3 on PATH, when SINKLAB_PYTHON is not set.
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  {
    EnvOverride env;
    python_wrapper(tmp.path / "bin", "python3", python, "");
    env.set("SINKLAB_PYTHON", nullptr);
    env.set("PATH", (tmp.file("bin") + ":" + path).c_str());
    EXPECT_EQ(sinktest::measure_json(with({"--text", text}), tmp)["alpha"], by_ids["alpha"]);
  }
  // A Python without the library (-S: no site-packages), by either route; no Python at all.
  const std::string bare = python_wrapper(tmp.path / "bare-bin", "python3", python, "-S");
  {
    EnvOverride env;
    env.set("SINKLAB_PYTHON", bare.c_str());
    const std::string e = sinktest::measure_error(with({"--text", text}), tmp);
    EXPECT_NE(e.find("SINKLAB_PYTHON"), std::string::npos) << e;
    EXPECT_NE(e.find("cannot import tokenizers"), std::string::npos) << e;
    EXPECT_NE(e.find("--ids FILE"), std::string::npos) << e;
  }
  {
    EnvOverride env;
    env.set("SINKLAB_PYTHON", nullptr);
    env.set("PATH", (tmp.file("bare-bin") + ":" + path).c_str());
    const std::string e = sinktest::measure_error(with({"--text", text}), tmp);
    EXPECT_NE(e.find("python3 on PATH"), std::string::npos) << e;
    EXPECT_NE(e.find("--ids FILE"), std::string::npos) << e;
  }
  {
    EnvOverride env;
    env.set("SINKLAB_PYTHON", nullptr);
    env.set("PATH", tmp.file("no-python").c_str());
    const std::string e = sinktest::measure_error(with({"--text", text}), tmp);
    EXPECT_NE(e.find("no python3 on PATH"), std::string::npos) << e;
    EXPECT_NE(e.find("--ids FILE"), std::string::npos) << e;
  }
  {
    EnvOverride env;
    env.set("SINKLAB_PYTHON", tmp.file("missing-python").c_str());
    const std::string e = sinktest::measure_error(with({"--text", text}), tmp);
    EXPECT_NE(e.find("is not an executable"), std::string::npos) << e;
  }
  // A tokenizer.json the library cannot read: its error, naming the file.
  sinktest::write_file(folder + "/tokenizer.json", "{\"not\": \"a tokenizer\"}");
  const std::string broken = sinktest::measure_error(with({"--text", text}), tmp);
  EXPECT_NE(broken.find(folder + "/tokenizer.json"), std::string::npos) << broken;
  fs::remove(folder + "/tokenizer.json");
  const std::string none = sinktest::measure_error(with({"--text", text}), tmp);
  EXPECT_NE(none.find("no Hugging Face tokenizer.json"), std::string::npos) << none;
  EXPECT_NE(none.find("--ids FILE"), std::string::npos) << none;
}
