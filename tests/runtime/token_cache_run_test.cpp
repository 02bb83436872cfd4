// A run trains from the token cache: tokenized by `sinkc tokenize` (SentencePiece linked), then trained with
// the spm programs off PATH, as on a GPU node without SentencePiece, to the loss of a run that tokenized with
// the programs itself; and a run that finds neither the cache nor the programs says to run `sinkc tokenize`.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/data/corpus.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"
#include "tokens/corpus_tokens.h"

using namespace sink;
using namespace sink::rt;
using sinktest::TempDir;

namespace {

// PATH without the spm programs (an empty folder) for one scope.
struct HiddenPrograms {
  std::string saved;
  explicit HiddenPrograms(const std::string& empty_dir) {
    if (const char* p = std::getenv("PATH")) saved = p;
    std::filesystem::create_directories(empty_dir);
    setenv("PATH", empty_dir.c_str(), 1);
  }
  ~HiddenPrograms() { setenv("PATH", saved.c_str(), 1); }
};

}  // namespace

TEST(TokenCacheRun, TrainsFromTheCacheWithoutSentencePieceToTheSameLoss) {
  if (!tokens::sentencepiece_programs().available())
    GTEST_SKIP() << "spm_train/spm_encode (Debian's sentencepiece) are not on PATH: the reference run cannot train";
  TempDir dir("tokrun");
  const char* names[] = {"Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo"};
  const char* verbs[] = {"walks to", "looks at", "talks about", "dreams of", "writes to", "waits for"};
  std::vector<std::string> docs;
  std::string corpus;
  for (int k = 0; k < 240; ++k) {
    docs.push_back(fmt::format("{} {} {} on day {}.", names[k % 8], verbs[(k / 8) % 6], names[(k / 3) % 8], k % 29));
    corpus += nlohmann::json{{"text", docs.back()}}.dump() + "\n";
  }
  sinktest::write_file(dir.file("c.jsonl"), corpus);
  const std::string spec = fmt::format(
      "import \"stdlib/presets.sink\"\n"
      "experiment t extends tiny_text {{\n"
      "  model {{ d = 32  layers = 1  heads = 2  ffn_hidden = 64 }}\n"
      "  data {{ corpus = file(\"{}\")  tokenizer = sentencepiece(vocab = 320) }}\n"
      "  train {{ steps = 8  batch = 4  context = 32 }}\n"
      "  measure {{ every = 8  T = 16  sequences = 4 }}\n"
      "}}\n",
      dir.file("c.jsonl"));
  sinktest::write_file(dir.file("t.sink"), spec);
  const Plan plan = sinktest::plan_of(spec);

  // The reference: the runtime tokenizes with the programs, as it always did. Its streams are today's:
  // the model trained on the training documents, every document encoded and followed by EOS.
  const RunResult a = run_plan(plan, sinktest::run_options(dir.file("a")));
  ASSERT_EQ(a.status, sink::rt::RunOutcome::Completed) << a.summary.dump();
  {
    const TokenData data = load_data(read_config(plan).data, dir.file("a") + "/.cache");
    const size_t train_docs = docs.size() - tokens::validation_documents(docs.size(), 0.05);
    auto before =
        tokens::sentencepiece_tokenizer({docs.begin(), docs.begin() + long(train_docs)}, 320, dir.file("before"));
    std::vector<int32_t> train, valid;
    for (size_t k = 0; k < docs.size(); ++k) {
      auto& stream = k < train_docs ? train : valid;
      for (int32_t id : before->encode(docs[k])) stream.push_back(id);
      stream.push_back(2);
    }
    EXPECT_EQ(data.train.to_vector(), train);
    EXPECT_EQ(data.valid.to_vector(), valid);
  }

  // The front end tokenizes; the runtime, without the programs, maps the tokens.
  const std::string tokenize = fmt::format("'{}' tokenize '{}' --out '{}' 2> '{}'", sinktest::sinkc_binary(),
                                           dir.file("t.sink"), dir.file("b"), dir.file("tokenize.log"));
  ASSERT_EQ(std::system(tokenize.c_str()), 0) << sinktest::read_file(dir.file("tokenize.log"));
  {
    HiddenPrograms hidden(dir.file("empty-bin"));
    ASSERT_FALSE(tokens::sentencepiece_programs().available());
    const RunResult b = run_plan(plan, sinktest::run_options(dir.file("b")));
    ASSERT_EQ(b.status, sink::rt::RunOutcome::Completed) << b.summary.dump();
    EXPECT_EQ(b.summary["final"]["train_loss"], a.summary["final"]["train_loss"]);
    EXPECT_EQ(b.summary["final"]["valid_loss"], a.summary["final"]["valid_loss"]);

    // Neither tokens nor programs: the run fails saying what to do.
    const RunResult c = run_plan(plan, sinktest::run_options(dir.file("c")));
    EXPECT_EQ(c.status, sink::rt::RunOutcome::Failed);
    EXPECT_NE(c.summary.dump().find("sinkc tokenize"), std::string::npos) << c.summary.dump();
  }
}
