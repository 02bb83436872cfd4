#include "runtime/data/corpus.h"

#include "plan/installation.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <glob.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#if SINKLAB_HAVE_ZSTD
#include <zstd.h>
#endif

#include "plan/installation.h"

namespace sink::rt {
namespace fs = std::filesystem;

BigramBackcopy::BigramBackcopy(int64_t vocab, int64_t triggers, std::vector<int64_t> offsets, double sparsity,
                               uint64_t seed)
    : vocab_(vocab), triggers_(triggers), offsets_(std::move(offsets)) {
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gamma(sparsity, 1.0);
  for (int64_t a = 0; a < vocab; ++a) {
    std::vector<double> w(vocab);
    double total = 0;
    for (auto& x : w) total += (x = gamma(rng));
    if (total <= 0) w[rng() % vocab] = 1;  // every row needs some mass
    rows_.emplace_back(w.begin(), w.end());
  }
}

std::vector<int32_t> BigramBackcopy::sample(int64_t length, std::mt19937_64& rng) const {
  std::vector<int32_t> seq;
  seq.reserve(length);
  std::uniform_int_distribution<int32_t> ordinary(static_cast<int32_t>(triggers_), static_cast<int32_t>(vocab_ - 1));
  seq.push_back(ordinary(rng));
  while (static_cast<int64_t>(seq.size()) < length) {
    const int32_t prev = seq.back();
    const int64_t at = static_cast<int64_t>(seq.size()) - 1;
    if (prev < triggers_) {
      int64_t o = offsets_.size() == 1 ? offsets_[0] : offsets_[prev];
      if (at - o >= 0) {
        seq.push_back(seq[at - o]);
        continue;
      }
    }
    seq.push_back(rows_[prev](rng));
  }
  return seq;
}

namespace {

std::string zstd_decompress_file(const std::string& path) {
#if !SINKLAB_HAVE_ZSTD
  throw std::runtime_error(
      fmt::format("'{}': this build has no zstd (libzstd-dev was not found): decompress it first", path));
#else
  std::ifstream in(path, std::ios::binary);
  std::string out;
  ZSTD_DStream* stream = ZSTD_createDStream();
  ZSTD_initDStream(stream);
  std::vector<char> ibuf(ZSTD_DStreamInSize()), obuf(ZSTD_DStreamOutSize());
  size_t last = 0;
  while (in) {
    in.read(ibuf.data(), static_cast<std::streamsize>(ibuf.size()));
    ZSTD_inBuffer input{ibuf.data(), static_cast<size_t>(in.gcount()), 0};
    while (input.pos < input.size) {
      ZSTD_outBuffer output{obuf.data(), obuf.size(), 0};
      last = ZSTD_decompressStream(stream, &output, &input);
      if (ZSTD_isError(last)) {
        ZSTD_freeDStream(stream);
        throw std::runtime_error(fmt::format("'{}': not valid zstd data ({})", path, ZSTD_getErrorName(last)));
      }
      out.append(obuf.data(), output.pos);
    }
  }
  ZSTD_freeDStream(stream);
  if (last != 0) throw std::runtime_error(fmt::format("'{}': truncated zstd data", path));
  return out;
#endif
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void jsonl_documents(const std::string& text, const std::string& path, std::vector<std::string>& docs) {
  std::istringstream lines(text);
  std::string line;
  int64_t n = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw std::runtime_error(fmt::format("{}:{}: expected a JSON object with a string field \"text\"", path, n));
    docs.push_back(j["text"].get<std::string>());
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> read_documents(const std::string& pattern, std::vector<int32_t>* tokens_out) {
  glob_t g{};
  std::vector<std::string> paths;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t k = 0; k < g.gl_pathc; ++k) paths.push_back(g.gl_pathv[k]);
  globfree(&g);
  if (paths.empty()) throw std::runtime_error(fmt::format("no data file matches '{}'", pattern));
  std::vector<std::string> docs;
  for (const auto& p : paths) {
    if (ends_with(p, ".jsonl.zst")) {
      jsonl_documents(zstd_decompress_file(p), p, docs);
    } else if (ends_with(p, ".jsonl")) {
      jsonl_documents(read_all(p), p, docs);
    } else if (ends_with(p, ".bin")) {
      if (!tokens_out) throw std::runtime_error(fmt::format("'{}': token files cannot be mixed with text", p));
      std::string raw = read_all(p);
      if (raw.size() % 2) throw std::runtime_error(fmt::format("'{}': odd size, not a uint16 token file", p));
      for (size_t k = 0; k < raw.size(); k += 2) {
        uint16_t t;
        std::memcpy(&t, raw.data() + k, 2);
        tokens_out->push_back(t);
      }
    } else {
      docs.push_back(read_all(p));
    }
  }
  return docs;
}

TokenData load_data(const DataConfig& cfg, const std::string& cache_dir) {
  TokenData out;
  if (cfg.corpus == CorpusKind::synthetic) {
    out.synthetic = cfg.synthetic_kind;
    out.ordinary = cfg.synthetic_vocab;
    out.bos = static_cast<int32_t>(cfg.synthetic_vocab);
    out.vocab = cfg.synthetic_vocab + 1;
    if (cfg.synthetic_kind == SyntheticKind::bigram_backcopy)
      out.bigram = std::make_shared<BigramBackcopy>(cfg.synthetic_vocab, cfg.triggers, cfg.offsets, cfg.sparsity,
                                                    static_cast<uint64_t>(cfg.synthetic_seed));
    out.description = fmt::format("synthetic({}, vocab {})", name_of(cfg.synthetic_kind), cfg.synthetic_vocab);
    return out;
  }
  std::vector<int32_t> pretokenized;
  std::vector<std::string> docs;
  if (cfg.corpus == CorpusKind::builtin) {
    docs = read_documents(builtin_corpus(cfg.corpus_arg).string(), nullptr);
  } else {
    docs = read_documents(cfg.corpus_arg, &pretokenized);
  }
  if (!pretokenized.empty() && !docs.empty())
    throw std::runtime_error("a corpus mixes token files (.bin) with text; use one kind");

  if (pretokenized.empty() && docs.size() < 2)
    throw std::runtime_error("the corpus needs at least two documents (one for validation)");
  // Whole documents go to validation: the split is disjoint by document.
  const size_t n_valid_docs = std::max<size_t>(1, static_cast<size_t>(docs.size() * cfg.valid_fraction));

  if (cfg.tokenizer == TokenizerKind::bytes)
    out.tokenizer = byte_tokenizer();
  else if (cfg.tokenizer == TokenizerKind::llama2c)
    out.tokenizer = llama2c_tokenizer(cfg.tokenizer_path, 0);
  else {
    // Train on the training share only (the same split as below), so validation stays unseen.
    size_t n_train = docs.size() - std::min(docs.size(), n_valid_docs);
    out.tokenizer = sentencepiece_tokenizer({docs.begin(), docs.begin() + static_cast<long>(n_train)},
                                            cfg.tokenizer_vocab, cache_dir);
  }
  out.vocab = out.tokenizer->vocab();
  out.bos = out.tokenizer->bos();
  out.eos = out.tokenizer->eos();
  out.ordinary = cfg.tokenizer == TokenizerKind::bytes ? 256 : out.vocab;

  if (!pretokenized.empty()) {
    size_t n_valid = static_cast<size_t>(pretokenized.size() * cfg.valid_fraction);
    out.train.assign(pretokenized.begin(), pretokenized.end() - static_cast<long>(n_valid));
    out.valid.assign(pretokenized.end() - static_cast<long>(n_valid), pretokenized.end());
    int32_t max_id = *std::max_element(pretokenized.begin(), pretokenized.end());
    if (max_id >= out.vocab)
      throw std::runtime_error(
          fmt::format("token id {} in the .bin data is outside the tokenizer's vocabulary ({})", max_id, out.vocab));
  } else {
    const size_t n_valid = n_valid_docs;
    auto ids = out.tokenizer->encode_all(docs);
    for (size_t k = 0; k < ids.size(); ++k) {
      auto& stream = k < ids.size() - n_valid ? out.train : out.valid;
      stream.insert(stream.end(), ids[k].begin(), ids[k].end());
      stream.push_back(out.eos);
    }
  }
  if (cfg.amount > 0 && static_cast<int64_t>(out.train.size()) > cfg.amount) out.train.resize(cfg.amount);
  out.description = fmt::format("{} ({} train / {} valid tokens, {} tokenizer, vocab {})",
                                cfg.corpus == CorpusKind::builtin ? "builtin(" + cfg.corpus_arg + ")" : cfg.corpus_arg,
                                out.train.size(), out.valid.size(), out.tokenizer->name(), out.vocab);
  return out;
}

}  // namespace sink::rt
