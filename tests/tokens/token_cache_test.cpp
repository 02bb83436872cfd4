// The token cache (tokens/corpus_tokens.h) without LibTorch: the ids it keeps against direct encoding (bytes,
// and SentencePiece linked against its programs), what its key follows, and what it does with the leftovers
// of a killed writer, a damaged or foreign file, and two builders at once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

#include "support/remove_tree.h"
#include "tokens/corpus_tokens.h"
#include "tokens/documents.h"

namespace fs = std::filesystem;
using namespace sink;
using namespace sink::tokens;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() /
           ("sinklab-tokens-test-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 1000000));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    sink::remove_tree(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string jsonl(const std::vector<std::string>& docs) {
  std::string s;
  for (const auto& d : docs) s += nlohmann::json{{"text", d}}.dump() + "\n";
  return s;
}

// Short sentences over a small alphabet: SentencePiece trains on them in well under a second.
std::vector<std::string> sentences(int n) {
  const char* names[] = {"Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo"};
  const char* verbs[] = {"walks to", "looks at", "talks about", "dreams of", "writes to", "waits for"};
  const char* places[] = {"the market", "a green hill", "the station", "an old library", "the blue sea"};
  std::vector<std::string> docs;
  for (int k = 0; k < n; ++k)
    docs.push_back(std::string(names[k % 8]) + " " + verbs[(k / 8) % 6] + " " + places[(k / 48) % 5] + " on day " +
                   std::to_string(k % 31 + 1) + ".\nNext line.");
  return docs;
}

DataConfig text_config(const std::string& pattern, TokenizerKind kind, int64_t vocab = 0) {
  DataConfig cfg;
  cfg.corpus = CorpusKind::file;
  cfg.corpus_arg = pattern;
  cfg.tokenizer = kind;
  cfg.tokenizer_vocab = vocab;
  return cfg;
}

class Unavailable : public SentencePiece {
 public:
  std::string name() const override { return "none"; }
  bool available() const override { return false; }
  void train(const std::string&, const std::string&, int64_t) const override { throw std::logic_error("train"); }
  std::unique_ptr<Tokenizer> load(const std::string&, int64_t) const override { throw std::logic_error("load"); }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TokenCache, BytesRoundTripMatchesDirectEncodingAndIsReadNotRebuilt) {
  TempDir dir;
  const std::vector<std::string> docs = {"first doc", "", "third, with \xc3\xa9", "fourth"};
  write_file(dir.file("c.jsonl"), jsonl(docs));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::bytes);
  const std::string cache = dir.file("cache");
  auto t = corpus_tokens(cfg, cache, sentencepiece_programs());
  EXPECT_TRUE(t.built);
  std::vector<int32_t> want;
  for (const auto& d : docs) {
    for (int32_t id : byte_tokenizer()->encode(d)) want.push_back(id);
    want.push_back(257);
  }
  EXPECT_EQ(t.file.tokens.to_vector(), want);
  EXPECT_EQ(t.file.tokens.width(), 2);  // a vocabulary of 258 fits uint16
  EXPECT_EQ(t.file.documents, docs.size());
  EXPECT_EQ(t.file.document_start(2), docs[0].size() + 1 + 1);
  EXPECT_EQ(t.file.vocab, 258);
  EXPECT_TRUE(fs::exists(fs::path(t.dir) / "info.json"));
  auto again = corpus_tokens(cfg, cache, sentencepiece_programs());
  EXPECT_FALSE(again.built);
  EXPECT_EQ(again.dir, t.dir);
  EXPECT_EQ(again.file.tokens.to_vector(), want);
  // Without a cache folder: the same tokens, kept nowhere.
  auto memory = corpus_tokens(cfg, "", sentencepiece_programs());
  EXPECT_TRUE(memory.dir.empty());
  EXPECT_EQ(memory.file.tokens.to_vector(), want);
}

TEST(TokenCache, LinkedSentencePieceGivesTheProgramsIds) {
  const SentencePiece* linked = sentencepiece_linked();
  if (!linked) GTEST_SKIP() << "this build does not link SentencePiece (libsentencepiece-dev was not found)";
  if (!sentencepiece_programs().available())
    GTEST_SKIP() << "the comparison did not run: spm_train/spm_encode (Debian's sentencepiece) are not on PATH";
  TempDir dir;
  const auto docs = sentences(300);
  write_file(dir.file("c.jsonl"), jsonl(docs));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::sentencepiece, 320);
  auto t = corpus_tokens(cfg, dir.file("linked"), *linked);
  ASSERT_FALSE(t.tokenizer_model.empty());
  // The model the front end trained, encoded by the programs the runtime used to run.
  std::vector<int32_t> want;
  for (const auto& ids : sentencepiece_programs().load(t.tokenizer_model, 320)->encode_all(docs)) {
    want.insert(want.end(), ids.begin(), ids.end());
    want.push_back(2);
  }
  EXPECT_EQ(t.file.tokens.to_vector(), want);
  // And the whole entry built by the programs (the runtime's way): the same model, the same ids.
  auto programs = corpus_tokens(cfg, dir.file("programs"), sentencepiece_programs());
  EXPECT_EQ(programs.file.tokens.to_vector(), want);
  EXPECT_EQ(fs::path(programs.dir).filename(), fs::path(t.dir).filename());
  EXPECT_EQ(linked->load(t.tokenizer_model, 320)->decode(linked->load(t.tokenizer_model, 320)->encode(docs[5])),
            sentencepiece_line(docs[5], false));
  // Too small a vocabulary: SentencePiece's reason, and no entry.
  auto small = cfg;
  small.tokenizer_vocab = 100;
  const std::string why = error_of([&] { corpus_tokens(small, dir.file("linked"), *linked); });
  EXPECT_NE(why.find("vocab = 100"), std::string::npos) << why;
  EXPECT_NE(why.find("required_chars"), std::string::npos) << why;
}

TEST(TokenCache, KeyFollowsContentAndTokenizerNotPath) {
  TempDir dir;
  write_file(dir.file("a.jsonl"), jsonl({"one document", "another one"}));
  fs::create_directories(dir.file("elsewhere"));
  fs::copy_file(dir.file("a.jsonl"), dir.file("elsewhere/b.jsonl"));
  auto key = [](const DataConfig& cfg) { return cache_key(cfg, text_corpus_files(cfg)).hex; };
  const auto bytes = text_config(dir.file("a.jsonl"), TokenizerKind::bytes);
  const std::string k = key(bytes);
  EXPECT_EQ(k.size(), 32u);
  EXPECT_EQ(key(text_config(dir.file("elsewhere/b.jsonl"), TokenizerKind::bytes)), k);  // copied: same tokens
  auto other_split = bytes;
  other_split.valid_fraction = 0.5;
  EXPECT_EQ(key(other_split), k);  // the split is made when reading, for a tokenizer not trained on the corpus
  const auto spm = text_config(dir.file("a.jsonl"), TokenizerKind::sentencepiece, 320);
  EXPECT_NE(key(spm), k);
  auto spm_vocab = spm;
  spm_vocab.tokenizer_vocab = 384;
  EXPECT_NE(key(spm_vocab), key(spm));
  auto spm_split = spm;
  spm_split.valid_fraction = 0.5;
  EXPECT_NE(key(spm_split), key(spm));  // trained on the training share
  // One byte changed, the size kept.
  write_file(dir.file("a.jsonl"), jsonl({"one document", "another One"}));
  EXPECT_NE(key(bytes), k);
}

TEST(TokenCache, AKilledWritersFolderIsIgnoredAndCleared) {
  TempDir dir;
  write_file(dir.file("c.jsonl"), jsonl({"alpha", "beta", "gamma"}));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::bytes);
  const std::string cache = dir.file("cache");
  const std::string key = cache_key(cfg, text_corpus_files(cfg)).hex;
  const fs::path torn = fs::path(cache) / (key + ".tmp-999999");
  fs::create_directories(torn);
  write_file((torn / "tokens.bin").string(), "SINKTOKS and then nothing");
  auto t = corpus_tokens(cfg, cache, sentencepiece_programs());
  EXPECT_TRUE(t.built);
  EXPECT_EQ(t.file.documents, 3u);
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_EQ(fs::path(t.dir).filename(), key);
}

TEST(TokenCache, DamagedOrForeignFilesAreNamedAndRebuilt) {
  TempDir dir;
  write_file(dir.file("c.jsonl"), jsonl({"alpha", "beta", "gamma"}));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::bytes);
  const std::string cache = dir.file("cache");
  const auto want = corpus_tokens(cfg, cache, sentencepiece_programs()).file.tokens.to_vector();
  const CacheKey key = cache_key(cfg, text_corpus_files(cfg));
  const std::string file = (fs::path(cache) / key.hex / "tokens.bin").string();
  EXPECT_NE(error_of([&] { TokenFile::open(file, key.hash() + 1); }).find("another corpus"), std::string::npos);
  fs::resize_file(file, fs::file_size(file) - 3);
  EXPECT_NE(error_of([&] { TokenFile::open(file, key.hash()); }).find("truncated"), std::string::npos);
  std::vector<std::string> said;
  auto t = corpus_tokens(cfg, cache, sentencepiece_programs(), [&](const std::string& m) { said.push_back(m); });
  EXPECT_TRUE(t.built);
  EXPECT_EQ(t.file.tokens.to_vector(), want);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("truncated"), std::string::npos) << said[0];
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  EXPECT_NE(error_of([&] { TokenFile::open(file, key.hash()); }).find("damaged header"), std::string::npos);
  write_file(file, std::string(200, 'x'));
  EXPECT_NE(error_of([&] { TokenFile::open(file, key.hash()); }).find("not a token file"), std::string::npos);
  write_file(file, "");
  EXPECT_NE(error_of([&] { TokenFile::open(file, key.hash()); }).find("not a token file"), std::string::npos);
  EXPECT_EQ(corpus_tokens(cfg, cache, sentencepiece_programs()).file.tokens.to_vector(), want);
}

TEST(TokenCache, WithoutSentencePieceAnAbsentEntrySaysToRunSinkcTokenize) {
  TempDir dir;
  write_file(dir.file("c.jsonl"), jsonl({"alpha", "beta", "gamma"}));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::sentencepiece, 320);
  const std::string why = error_of([&] { corpus_tokens(cfg, dir.file("cache"), Unavailable()); });
  EXPECT_NE(why.find("sinkc tokenize"), std::string::npos) << why;
  EXPECT_NE(why.find("sentencepiece(vocab = 320)"), std::string::npos) << why;
  EXPECT_NE(why.find(cache_key(cfg, text_corpus_files(cfg)).hex), std::string::npos) << why;
}

// Counts the trainings it is asked for, and passes everything to the linked library.
class CountingSentencePiece : public SentencePiece {
 public:
  explicit CountingSentencePiece(const SentencePiece& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  bool available() const override { return true; }
  void train(const std::string& text, const std::string& prefix, int64_t vocab) const override {
    ++trainings;
    inner_.train(text, prefix, vocab);
  }
  std::unique_ptr<Tokenizer> load(const std::string& model, int64_t vocab) const override {
    return inner_.load(model, vocab);
  }
  mutable int trainings = 0;

 private:
  const SentencePiece& inner_;
};

TEST(TokenCache, AModelBroughtIntoAnEmptyEntryIsEncodedWithNotTrainedAgain) {
  const SentencePiece* linked = sentencepiece_linked();
  if (!linked) GTEST_SKIP() << "this build does not link SentencePiece (libsentencepiece-dev was not found)";
  TempDir dir;
  write_file(dir.file("c.jsonl"), jsonl(sentences(300)));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::sentencepiece, 320);
  CountingSentencePiece counting(*linked);
  const auto trained = corpus_tokens(cfg, dir.file("here"), counting);
  EXPECT_EQ(counting.trainings, 1);
  // Where a job cannot afford the training: only the model is brought, into the folder named by the key.
  const std::string key = cache_key(cfg, text_corpus_files(cfg)).hex;
  const fs::path there = fs::path(dir.file("there")) / key;
  fs::create_directories(there);
  fs::copy_file(trained.tokenizer_model, there / "tokenizer.model");
  std::vector<std::string> said;
  const auto encoded =
      corpus_tokens(cfg, dir.file("there"), counting, [&](const std::string& m) { said.push_back(m); });
  EXPECT_EQ(counting.trainings, 1) << "trained again although the model was there";
  EXPECT_TRUE(encoded.built);
  EXPECT_EQ(encoded.file.tokens.to_vector(), trained.file.tokens.to_vector());
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("no training"), std::string::npos) << said[0];
  const auto info = nlohmann::json::parse(std::ifstream(there / "info.json"));
  EXPECT_EQ(info["model"], "given");
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(fs::path(trained.dir) / "info.json"))["model"], "trained");
  // A model that is not one: SentencePiece's error, and the file stays for the next try.
  const fs::path broken = fs::path(dir.file("broken")) / key;
  fs::create_directories(broken);
  write_file((broken / "tokenizer.model").string(), "not a model");
  const std::string why = error_of([&] { corpus_tokens(cfg, dir.file("broken"), counting); });
  EXPECT_NE(why.find("cannot load the SentencePiece model"), std::string::npos) << why;
  EXPECT_TRUE(fs::exists(broken / "tokenizer.model"));
  EXPECT_FALSE(fs::exists(broken / "tokens.bin"));
  EXPECT_EQ(counting.trainings, 1);
}

TEST(TokenCache, WideVocabulariesAreKeptAsInt32) {
  TempDir dir;
  {
    TokenFileWriter w(dir.file("t.bin"), 70000, 1, 2, 42);
    w.add({69999, 65536, 3});
    w.add({});
    w.finish();
  }
  auto f = TokenFile::open(dir.file("t.bin"), 42);
  EXPECT_EQ(f.tokens.width(), 4);
  EXPECT_EQ(f.tokens.to_vector(), (std::vector<int32_t>{69999, 65536, 3, 2, 2}));
  EXPECT_EQ(f.documents, 2u);
  EXPECT_EQ(f.document_start(1), 4u);
  TokenFileWriter bad(dir.file("u.bin"), 300, 1, 2, 42);
  EXPECT_NE(error_of([&] { bad.add({300}); }).find("outside"), std::string::npos);
}

TEST(TokenCache, TwoProcessesAtOnceTokenizeOnce) {
  TempDir dir;
  std::vector<std::string> docs(2000, std::string(500, 'a'));
  write_file(dir.file("c.jsonl"), jsonl(docs));
  const auto cfg = text_config(dir.file("c.jsonl"), TokenizerKind::bytes);
  const std::string cache = dir.file("cache");
  std::vector<pid_t> children;
  for (int k = 0; k < 2; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      try {
        auto t = corpus_tokens(cfg, cache, sentencepiece_programs());
        _exit(t.file.tokens.size() == docs.size() * 501 ? (t.built ? 1 : 0) : 3);
      } catch (...) {
        _exit(4);
      }
    }
    children.push_back(pid);
  }
  int built = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_LE(WEXITSTATUS(status), 1) << "a process failed or read other tokens";
    built += WEXITSTATUS(status);
  }
  EXPECT_EQ(built, 1);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache)) entries += e.is_directory();
  EXPECT_EQ(entries, 1);  // no temporary folder left
}
