// Hugging Face checkpoints in `sinkc measure`: the safetensors reader on
// hand-made files, and the five architectures against an independent forward
// pass in Python (tests/runtime/hf_oracle.py, Debian's python3-torch), and
// stories260K converted to Hugging Face's LLaMA layout against the llama2.c path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/interop/hf_model.h"
#include "runtime/interop/safetensors.h"
#include "runtime_test_util.h"
#include "tests/runtime/hf_python.h"
#include "tests/source_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;
using sinktest::TempDir;

namespace {

const char* kPython = "/usr/bin/python3";

std::string oracle_script() { return std::string(sinktest::source_dir()) + "/tests/runtime/hf_oracle.py"; }

bool python_has_torch() {
  return access(kPython, X_OK) == 0 &&
         std::system((std::string(kPython) + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

// `sinkc measure ARGS --format json`, parsed; fails the test on a non-zero exit.
json measure(std::vector<std::string> args, const TempDir& tmp) {
  args.insert(args.begin(), {sinktest::sinkc_binary(), "measure"});
  args.insert(args.end(), {"--format", "json"});
  const std::string out = tmp.file("measure.out");
  int rc = sinktest::wait_exit(sinktest::spawn(args, out));
  std::string text = sinktest::read_file(out);
  EXPECT_EQ(rc, 0) << text;
  auto j = json::parse(text.substr(std::min(text.find('{'), text.size())), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

// stories260K (llama2.c) written in Hugging Face's LLaMA layout by the oracle script: its exit status.
int to_hugging_face_layout(const std::string& llama2c_model, const std::string& folder) {
  return std::system((std::string(kPython) + " " + oracle_script() + " --from-llama2c " + llama2c_model + " " + folder +
                      " > /dev/null")
                         .c_str());
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((n >> (8 * b)) & 0xff);
  return out + header + data;
}

std::string load_error(const std::string& path) {
  try {
    sink::rt::load_safetensors(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Safetensors, ReadsFloatHalfAndBfloat16Exactly) {
  TempDir tmp("safetensors");
  // 1.5f, -2.0f as F32; 1.0 as F16 (0x3C00); -0.5 as BF16 (0xBF00); little-endian.
  std::string data("\x00\x00\xc0\x3f\x00\x00\x00\xc0\x00\x3c\x00\xbf", 12);
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[1,1],"data_offsets":[8,10]},)"
      R"("c":{"dtype":"BF16","shape":[],"data_offsets":[10,12]},"__metadata__":{"format":"pt"}})";
  sinktest::write_file(tmp.file("m.safetensors"), safetensors_bytes(header, data));
  auto t = sink::rt::load_safetensors(tmp.file("m.safetensors"));
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t["a"].scalar_type(), torch::kFloat);
  EXPECT_EQ(t["a"][0].item<float>(), 1.5f);
  EXPECT_EQ(t["a"][1].item<float>(), -2.0f);
  EXPECT_EQ(t["b"].sizes(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(t["b"].to(torch::kFloat).item<float>(), 1.0f);
  EXPECT_EQ(t["c"].scalar_type(), torch::kBFloat16);
  EXPECT_EQ(t["c"].to(torch::kFloat).item<float>(), -0.5f);
}

TEST(Safetensors, MalformedFilesAreClearErrors) {
  TempDir tmp("safetensors-bad");
  const std::string ok_entry = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    std::string name, bytes, expected;
  } cases[] = {
      {"short", "abc", "too short"},
      {"header_too_long", safetensors_bytes(ok_entry, std::string(8, '\0')).substr(0, 20), "exceeds the file"},
      {"not_json", safetensors_bytes("{nope", ""), "not a JSON object"},
      {"outside", safetensors_bytes(ok_entry, std::string(4, '\0')), "outside the 4 bytes"},
      {"shape_mismatch",
       safetensors_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
       "shape holds 12 bytes"},
      {"dtype",
       safetensors_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", std::string(8, '\0')),
       "dtype 'F8_E4M3'"},
      {"fields", safetensors_bytes(R"({"w":{"dtype":"F32"}})", ""), "needs dtype, shape and data_offsets"},
  };
  for (const auto& c : cases) {
    const std::string path = tmp.file(c.name + ".safetensors");
    sinktest::write_file(path, c.bytes);
    const std::string error = load_error(path);
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(path), std::string::npos) << c.name << " does not name the file: " << error;
  }
}

TEST(HfConfig, UnsupportedArchitecturesAndFeaturesAreNamed) {
  TempDir tmp("hf-config");
  auto error_for = [&](const std::string& config) {
    sinktest::write_file(tmp.file("config.json"), config);
    try {
      sink::rt::read_hf_config(tmp.str());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_for(R"({"model_type":"bert","vocab_size":10})").find("model_type \"bert\""), std::string::npos);
  EXPECT_NE(error_for(R"({"model_type":"llama","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,)"
                      R"("num_attention_heads":2,"rope_scaling":{"type":"llama3"}})")
                .find("rope_scaling"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"model_type":"gpt2","vocab_size":10,"n_embd":8,"n_layer":1})").find("'n_head'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"model_type":"opt","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,)"
                      R"("num_attention_heads":3})")
                .find("multiple of 3 heads"),
            std::string::npos);
}

// Each architecture and storage variant (fp32 / fp16 / bf16, sharded, GQA,
// biases, sliding window, partial rotary, serial and parallel residuals, pre-
// and post-norm OPT with a projected embedding) against the Python forward.
TEST(HfCheckpoint, FiveArchitecturesMatchAnIndependentPythonForward) {
  if (!python_has_torch()) GTEST_SKIP() << kPython << " with torch (Debian's python3-torch) is needed for the oracle";
  TempDir tmp("hf-oracle");
  ASSERT_EQ(std::system((std::string(kPython) + " " + oracle_script() + " " + tmp.str() + " > /dev/null").c_str()), 0);
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(tmp.path)) {
    if (!fs::exists(entry.path() / "expected.json")) continue;
    ++cases;
    const std::string name = entry.path().filename().string();
    json expected = json::parse(sinktest::read_file((entry.path() / "expected.json").string()));
    json got = measure({entry.path().string(), "--ids", (entry.path() / "ids.txt").string(), "--T",
                        std::to_string(expected["T"].get<int>()), "--n", std::to_string(expected["N"].get<int>()),
                        "--eps", std::to_string(expected["eps"].get<double>())},
                       tmp);
    ASSERT_TRUE(got.contains("alpha")) << name << ": " << got.dump();
    EXPECT_EQ(got["kind"], "huggingface") << name;
    const auto& a = expected["alpha"];
    ASSERT_EQ(got["alpha"].size(), a.size()) << name;
    size_t triples = 0;
    for (size_t l = 0; l < a.size(); ++l) {
      ASSERT_EQ(got["alpha"][l].size(), a[l].size()) << name;
      triples += a[l].size() * expected["N"].get<size_t>();
      for (size_t h = 0; h < a[l].size(); ++h)
        EXPECT_NEAR(got["alpha"][l][h].get<double>(), a[l][h].get<double>(), 1e-5)
            << name << " layer " << l << " head " << h;
    }
    for (size_t l = 0; l < expected["massive"].size(); ++l)
      EXPECT_NEAR(got["massive"][l].get<double>(), expected["massive"][l].get<double>(), 1e-4)
          << name << " layer " << l;
    // A head right at eps may fall either side of it in float: at most one triple apart.
    EXPECT_NEAR(got["sink"]["1"].get<double>(), expected["sink"]["1"].get<double>(), 100.0 / double(triples) + 1e-9)
        << name;
  }
  EXPECT_EQ(cases, 9) << "the oracle wrote a different number of cases";
}

TEST(HfCheckpoint, Stories260kInHuggingFaceLayoutMeasuresAsTheLlama2cCheckpoint) {
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  if (!python_has_torch())
    GTEST_SKIP() << kPython << " with torch (Debian's python3-torch) is needed for the conversion";
  TempDir tmp("hf-stories");
  const std::string hf = tmp.file("stories260K-hf");
  ASSERT_EQ(to_hugging_face_layout(model, hf), 0);
  for (const char* input : {"random", "repeat"}) {
    const std::vector<std::string> common = {"--input", input, "--T", "48", "--n", "6", "--bos", "with"};
    auto with = [&](std::string target) {
      std::vector<std::string> args = {std::move(target)};
      args.insert(args.end(), common.begin(), common.end());
      return args;
    };
    json ours = measure(with(model), tmp), theirs = measure(with(hf), tmp);
    ASSERT_EQ(ours["kind"], "llama2c");
    ASSERT_EQ(theirs["kind"], "huggingface");
    ASSERT_EQ(ours["alpha"].size(), 5u);
    ASSERT_EQ(theirs["alpha"].size(), ours["alpha"].size());
    for (size_t l = 0; l < ours["alpha"].size(); ++l)
      for (size_t h = 0; h < ours["alpha"][l].size(); ++h)
        EXPECT_NEAR(theirs["alpha"][l][h].get<double>(), ours["alpha"][l][h].get<double>(), 1e-5)
            << input << " layer " << l << " head " << h;
    EXPECT_NEAR(theirs["sink"]["1"].get<double>(), ours["sink"]["1"].get<double>(), 1e-9) << input;
    // What a sink costs, through two implementations of the model (the llama2.c loader's Transformer and the
    // Hugging Face reader's own forward, its window an explicit mask): the same losses.
    EXPECT_NEAR(theirs["valid_loss"].get<double>(), ours["valid_loss"].get<double>(), 1e-4) << input;
    for (const char* keep : {"0", "1", "4"})
      EXPECT_NEAR(theirs["windowed_loss"]["loss"][keep].get<double>(),
                  ours["windowed_loss"]["loss"][keep].get<double>(), 1e-4)
          << input << " keeping " << keep;
    for (const char* bits : {"w8a8", "w6a6"})
      EXPECT_NEAR(theirs["quantized_loss"][bits].get<double>(), ours["quantized_loss"][bits].get<double>(), 1e-3)
          << input << " " << bits;
    for (const char* factor : {"2", "4"})
      EXPECT_NEAR(theirs["longer_context_loss"][factor].get<double>(),
                  ours["longer_context_loss"][factor].get<double>(), 1e-4)
          << input << " " << factor << "x as long";
  }
}

// Natural text on a Hugging Face folder is tokenized with the folder's
// SentencePiece tokenizer.model. stories260K in Hugging Face's layout with
// tok512.model beside it gives the alpha tables that the llama2.c path gives
// on the same text with its own tokenizer (tok512.bin through llama2.c's
// BPE, a second implementation); --text-file gives what --text gives. What
// cannot be done is said.
TEST(HfCheckpoint, NaturalTextIsTokenizedWithTheFoldersTokenizerModel) {
  SINKLAB_TEST_MODEL(model, "stories260K.bin");
  SINKLAB_TEST_MODEL(spm, "tok512.model");
  if (!python_has_torch())
    GTEST_SKIP() << kPython << " with torch (Debian's python3-torch) is needed for the conversion";
  TempDir tmp("hf-natural");
  const std::string hf = tmp.file("stories260K-hf");
  ASSERT_EQ(to_hugging_face_layout(model, hf), 0);
  fs::copy_file(spm, fs::path(hf) / "tokenizer.model");
  const std::string text =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her big dog.";
  const std::string text_file = tmp.file("story.txt");
  sinktest::write_file(text_file, text + "\n");
  auto shaped = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--T", "16", "--n", "2", "--bos", "with"});
    return args;
  };
  json by_text = measure(shaped({hf, "--text", text}), tmp);
  json by_file = measure(shaped({hf, "--text-file", text_file}), tmp);
  json by_llama2c = measure(shaped({model, "--text", text}), tmp);
  ASSERT_EQ(by_text["kind"], "huggingface");
  ASSERT_EQ(by_text["alpha"].size(), 5u);
  EXPECT_EQ(by_file["alpha"], by_text["alpha"]);
  ASSERT_EQ(by_llama2c["alpha"].size(), by_text["alpha"].size());
  for (size_t l = 0; l < by_text["alpha"].size(); ++l)
    for (size_t h = 0; h < by_text["alpha"][l].size(); ++h)
      EXPECT_NEAR(by_text["alpha"][l][h].get<double>(), by_llama2c["alpha"][l][h].get<double>(), 1e-5)
          << "layer " << l << " head " << h;

  fs::remove(fs::path(hf) / "tokenizer.model");
  const std::string no_tokenizer = measure_error({hf, "--text", text}, tmp);
  EXPECT_NE(no_tokenizer.find("has no SentencePiece tokenizer.model"), std::string::npos) << no_tokenizer;
  EXPECT_NE(no_tokenizer.find("--ids FILE"), std::string::npos) << no_tokenizer;
  json config = json::parse(sinktest::read_file(hf + "/config.json"));
  config.erase("bos_token_id");
  sinktest::write_file(hf + "/config.json", config.dump());
  const std::string no_bos = measure_error({hf, "--input", "random", "--bos", "with"}, tmp);
  EXPECT_NE(no_bos.find("names no BOS token"), std::string::npos) << no_bos;
}
