#include "tokens/corpus_tokens.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

#include "support/installation.h"
#include "support/remove_tree.h"
#include "tokens/documents.h"

namespace sink::tokens {
namespace fs = std::filesystem;

namespace {

// Bumped when what a key covers, or how documents are read and joined, changes.
constexpr const char* kKeyVersion = "sinklab tokens 1";

void sync_path(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) fsync(fd), close(fd);
}

// An exclusive advisory lock on a file beside the entry, held while it is built: a second builder waits,
// then finds the entry. Where locks are not supported, building twice is still safe (write-once rename).
class Lock {
 public:
  explicit Lock(const fs::path& p) : fd_(::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0)
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~Lock() {
    if (fd_ >= 0) close(fd_);
  }

 private:
  int fd_;
};

std::unique_ptr<Tokenizer> trained_sentencepiece(const DataConfig& cfg, const std::vector<std::string>& files,
                                                 const fs::path& dir, const SentencePiece& spm) {
  // A model already in the folder was trained for this key (corpus_tokens keeps it): training is deterministic
  // and the longest part, so a machine that cannot afford it (a GPU job of a few minutes) encodes with a model
  // trained elsewhere, and an entry whose encoding was cut short does not train again.
  if (fs::exists(dir / "tokenizer.model")) return spm.load((dir / "tokenizer.model").string(), cfg.tokenizer_vocab);
  // The training share only, as the runtime always trained it: the validation documents stay unseen. One
  // line per document; the file is cut after the last training document once the count is known.
  const fs::path text = dir / "train.txt";
  std::vector<uint64_t> line_starts;
  {
    std::ofstream out(text, std::ios::binary);
    uint64_t at = 0;
    for (const auto& f : files)
      for_each_document(f, [&](std::string&& d) {
        line_starts.push_back(at);
        const std::string line = sentencepiece_line(std::move(d), true) + "\n";
        out << line;
        at += line.size();
      });
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", text.string()));
  }
  const uint64_t n = line_starts.size();
  const uint64_t train = n - std::min(n, validation_documents(n, cfg.valid_fraction));
  fs::resize_file(text, train < n ? line_starts[train] : fs::file_size(text));
  spm.train(text.string(), (dir / "tokenizer").string(), cfg.tokenizer_vocab);
  fs::remove(text);
  fs::remove(dir / "tokenizer.vocab");
  fs::remove(dir / "tokenizer.log");
  return spm.load((dir / "tokenizer.model").string(), cfg.tokenizer_vocab);
}

// A batch's ids: the programs take the batch at once (one process); the other tokenizers encode on every
// core, each thread a contiguous share of the documents.
std::vector<std::vector<int32_t>> encode_batch(const Tokenizer& tokenizer, const std::vector<std::string>& docs,
                                               bool programs) {
  if (programs || docs.size() < 64) return tokenizer.encode_all(docs);
  std::vector<std::vector<int32_t>> out(docs.size());
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 64);
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (size_t k = t * docs.size() / threads; k < (t + 1) * docs.size() / threads; ++k)
          out[k] = tokenizer.encode(docs[k]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        failure = std::current_exception();
      }
    });
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

// Tokenizes the corpus into `dir` (tokens.bin, tokenizer.model, info.json).
void build(const DataConfig& cfg, const std::vector<std::string>& files, const CacheKey& key, const fs::path& dir,
           const SentencePiece& spm) {
  const auto start = std::chrono::steady_clock::now();
  const bool given_model = fs::exists(dir / "tokenizer.model");
  std::unique_ptr<Tokenizer> tokenizer;
  if (cfg.tokenizer == TokenizerKind::bytes)
    tokenizer = byte_tokenizer();
  else if (cfg.tokenizer == TokenizerKind::llama2c)
    tokenizer = llama2c_tokenizer(cfg.tokenizer_path, 0);
  else
    tokenizer = trained_sentencepiece(cfg, files, dir, spm);
  TokenFileWriter writer((dir / "tokens.bin").string(), tokenizer->vocab(), tokenizer->bos(), tokenizer->eos(),
                         key.hash());
  uint64_t documents = 0;
  // In batches of about 64 MB of text: the programs' start-up is paid once a batch, and a shard's documents
  // and ids are never all in memory.
  std::vector<std::string> batch;
  size_t batch_bytes = 0;
  auto flush = [&] {
    for (const auto& ids : encode_batch(
             *tokenizer, batch, cfg.tokenizer == TokenizerKind::sentencepiece && &spm == &sentencepiece_programs()))
      writer.add(ids);
    documents += batch.size();
    batch.clear();
    batch_bytes = 0;
  };
  for (const auto& f : files)
    for_each_document(f, [&](std::string&& d) {
      batch_bytes += d.size();
      batch.push_back(std::move(d));
      if (batch_bytes >= (64u << 20)) flush();
    });
  flush();
  writer.finish();
  nlohmann::json info = {
      {"corpus", cfg.corpus == CorpusKind::builtin ? "builtin(" + cfg.corpus_arg + ")" : cfg.corpus_arg},
      {"files", files},
      {"tokenizer", tokenizer->name()},
      {"vocab", tokenizer->vocab()},
      {"documents", documents},
      {"tokens", writer.tokens()},
      {"key", key.description},
      {"tokenized_by", cfg.tokenizer == TokenizerKind::sentencepiece ? spm.name() : "sinklab"},
      {"model", cfg.tokenizer != TokenizerKind::sentencepiece ? "none"
                : given_model                                 ? "given"
                                                              : "trained"},
      {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
  std::ofstream(dir / "info.json") << info.dump(2) << "\n";
  sync_path(dir / "info.json");
  sync_path(dir / "tokenizer.model");
  sync_path(dir);
}

CorpusTokens open_entry(const fs::path& dir, const CacheKey& key) {
  CorpusTokens t;
  t.file = TokenFile::open((dir / "tokens.bin").string(), key.hash());
  t.dir = dir.string();
  if (fs::exists(dir / "tokenizer.model")) t.tokenizer_model = (dir / "tokenizer.model").string();
  return t;
}

std::string tokenizer_text(const DataConfig& cfg) {
  if (cfg.tokenizer == TokenizerKind::sentencepiece)
    return fmt::format("sentencepiece(vocab = {})", cfg.tokenizer_vocab);
  if (cfg.tokenizer == TokenizerKind::llama2c) return fmt::format("llama2c(\"{}\")", cfg.tokenizer_path);
  return "bytes";
}

}  // namespace

std::string token_cache_dir(const std::string& data_cache) {
  if (const char* env = std::getenv("SINKLAB_TOKEN_CACHE"); env && *env) return env;
  return (fs::path(data_cache) / "tokens").string();
}

std::vector<std::string> text_corpus_files(const DataConfig& cfg) {
  if (cfg.corpus == CorpusKind::synthetic) return {};
  if (cfg.corpus == CorpusKind::builtin) return {builtin_corpus(cfg.corpus_arg).string()};
  auto files = corpus_files(cfg.corpus_arg);
  for (const auto& f : files)
    if (is_token_file(f)) return {};
  return files;
}

uint64_t CacheKey::hash() const {
  Hasher h;
  h.add(hex);
  return h.low();
}

uint64_t validation_documents(uint64_t documents, double valid_fraction) {
  return std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(documents) * valid_fraction));
}

CacheKey cache_key(const DataConfig& cfg, const std::vector<std::string>& files) {
  std::string d = std::string(kKeyVersion) + "\n";
  if (cfg.tokenizer == TokenizerKind::sentencepiece)
    // Trained on the training share, so the split is part of the tokenizer; so are its training options.
    d += fmt::format("tokenizer sentencepiece vocab {} seed {} valid_fraction {:.17g} options {}\n",
                     cfg.tokenizer_vocab, kSentencePieceSeed, cfg.valid_fraction, [&] {
                       Hasher h;
                       for (const auto& [k, v] : sentencepiece_training_options(cfg.tokenizer_vocab)) h.add(k + v);
                       return h.hex();
                     }());
  else if (cfg.tokenizer == TokenizerKind::llama2c)
    d += fmt::format("tokenizer llama2c {}\n", file_fingerprint(cfg.tokenizer_path));
  else
    d += "tokenizer bytes\n";
  for (const auto& f : files) d += fmt::format("file {}\n", file_fingerprint(f));
  Hasher h;
  h.add(d);
  return {h.hex(), d};
}

CorpusTokens corpus_tokens(const DataConfig& cfg, const std::string& cache_dir, const SentencePiece& spm,
                           const Say& say) {
  const auto files = text_corpus_files(cfg);
  if (files.empty()) throw std::runtime_error("the token cache holds text corpora only");
  const CacheKey key = cache_key(cfg, files);
  const std::string corpus =
      cfg.corpus == CorpusKind::builtin ? "builtin(\"" + cfg.corpus_arg + "\")" : "file(\"" + cfg.corpus_arg + "\")";
  auto require_tokenizer = [&](const std::string& why) {
    if (cfg.tokenizer == TokenizerKind::sentencepiece && !spm.available())
      throw std::runtime_error(fmt::format(
          "{} with {}: {}, and SentencePiece cannot run here (spm_train/spm_encode are not on PATH): tokenize it "
          "where sinkc is, `sinkc tokenize SPEC|PLAN --out OUT`, and bring OUT/.cache/tokens/{} here (or point "
          "SINKLAB_TOKEN_CACHE at a copy)",
          corpus, tokenizer_text(cfg), why, key.hex));
  };
  if (cache_dir.empty()) {
    require_tokenizer("no token cache is used");
    std::random_device rd;
    const fs::path dir = fs::temp_directory_path() / fmt::format("sinklab-tokens-{}-{:08x}", getpid(), rd());
    fs::create_directories(dir);
    build(cfg, files, key, dir, spm);
    CorpusTokens t = open_entry(dir, key);
    t.dir.clear();
    t.built = true;
    // The mapping outlives the name; a trained model stays for the tokenizer that reads it.
    fs::remove(dir / "tokens.bin");
    if (t.tokenizer_model.empty()) sink::remove_tree(dir);
    return t;
  }
  const fs::path root(cache_dir), dir = root / key.hex;
  std::string damage;
  try {
    if (fs::exists(dir / "tokens.bin")) return open_entry(dir, key);
  } catch (const TokenFileError& e) {
    damage = e.what();
  }
  fs::create_directories(root);
  Lock lock(root / (key.hex + ".lock"));
  try {  // built by another process while this one waited
    if (fs::exists(dir / "tokens.bin")) return open_entry(dir, key);
  } catch (const TokenFileError& e) {
    damage = e.what();
  }
  require_tokenizer(damage.empty() ? fmt::format("no token cache in {}", root.string())
                                   : fmt::format("the token cache is damaged ({})", damage));
  if (!damage.empty() && say) say(fmt::format("token cache: {}; tokenizing again", damage));
  // A SentencePiece model without tokens (brought from where it was trained, or left by an encoding cut short) is
  // kept for the build: only the encoding is left to do.
  const fs::path tmp = root / fmt::format("{}.tmp-{}", key.hex, getpid());
  const bool given_model = cfg.tokenizer == TokenizerKind::sentencepiece && fs::exists(dir / "tokenizer.model");
  if (given_model) {
    fs::create_directories(tmp);
    fs::copy_file(dir / "tokenizer.model", tmp / "tokenizer.model", fs::copy_options::overwrite_existing);
  }
  sink::remove_tree(dir);
  // Folders a killed builder left: under the lock, none is being written.
  for (const auto& e : fs::directory_iterator(root))
    if (e.path() != tmp && e.path().filename().string().rfind(key.hex + ".tmp-", 0) == 0) sink::remove_tree(e.path());
  if (say)
    say(fmt::format("tokenizing {} with {} into {}{}", corpus, tokenizer_text(cfg), dir.string(),
                    given_model ? " (encoding with the SentencePiece model already there; no training)" : ""));
  const auto start = std::chrono::steady_clock::now();
  fs::create_directories(tmp);
  try {
    build(cfg, files, key, tmp, spm);
  } catch (...) {
    std::error_code ec;
    if (given_model) {  // the model stays where it was given, for the next try
      fs::create_directories(dir, ec);
      fs::copy_file(tmp / "tokenizer.model", dir / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
    }
    sink::remove_tree(tmp, ec);
    throw;
  }
  fs::rename(tmp, dir);
  sync_path(root);
  CorpusTokens t = open_entry(dir, key);
  t.built = true;
  if (say)
    say(fmt::format("tokenized: {} documents, {} tokens in {:.1f} s", t.file.documents, t.file.tokens.size(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  return t;
}

}  // namespace sink::tokens
