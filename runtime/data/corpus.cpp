#include "runtime/data/corpus.h"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

#include "support/installation.h"
#include "tokens/corpus_tokens.h"

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
  std::string cached;  // the token cache entry, for the log
  if (const auto files = tokens::text_corpus_files(cfg); !files.empty()) {
    auto t = tokens::corpus_tokens(cfg, cache_dir.empty() ? "" : tokens::token_cache_dir(cache_dir),
                                   tokens::sentencepiece_programs(),
                                   [](const std::string& message) { fmt::print(stderr, "{}\n", message); });
    const uint64_t docs = t.file.documents;
    if (docs < 2) throw std::runtime_error("the corpus needs at least two documents (one for validation)");
    // Whole documents go to validation: the split is disjoint by document.
    const uint64_t train_docs = docs - std::min(docs, tokens::validation_documents(docs, cfg.valid_fraction));
    const uint64_t split = t.file.document_start(train_docs);
    out.train = t.file.tokens.slice(0, split);
    out.valid = t.file.tokens.slice(split, t.file.tokens.size());
    out.vocab = t.file.vocab;
    if (!t.dir.empty()) cached = ", tokens from " + t.dir;
    out.bos = t.file.bos;
    out.eos = t.file.eos;
    if (cfg.tokenizer == TokenizerKind::bytes)
      out.tokenizer = byte_tokenizer();
    else if (cfg.tokenizer == TokenizerKind::llama2c)
      out.tokenizer = llama2c_tokenizer(cfg.tokenizer_path, 0);
    else
      out.tokenizer = sentencepiece_model_tokenizer(t.tokenizer_model, t.file.vocab);
  } else {
    // uint16 token files (.bin): read as they are, no tokenizer runs.
    std::vector<int32_t> pretokenized;
    if (!read_documents(cfg.corpus_arg, &pretokenized).empty() || pretokenized.empty())
      throw std::runtime_error("a corpus mixes token files (.bin) with text; use one kind");
    if (cfg.tokenizer == TokenizerKind::bytes)
      out.tokenizer = byte_tokenizer();
    else if (cfg.tokenizer == TokenizerKind::llama2c)
      out.tokenizer = llama2c_tokenizer(cfg.tokenizer_path, 0);
    else
      throw std::runtime_error(
          "sentencepiece(vocab) is trained on text: a corpus of token files (.bin) names "
          "its tokenizer with bytes or llama2c(path)");
    out.vocab = out.tokenizer->vocab();
    out.bos = out.tokenizer->bos();
    out.eos = out.tokenizer->eos();
    size_t n_valid = static_cast<size_t>(pretokenized.size() * cfg.valid_fraction);
    int32_t max_id = *std::max_element(pretokenized.begin(), pretokenized.end());
    if (max_id >= out.vocab)
      throw std::runtime_error(
          fmt::format("token id {} in the .bin data is outside the tokenizer's vocabulary ({})", max_id, out.vocab));
    auto all = tokens::TokenSpan::of(std::move(pretokenized));
    out.train = all.slice(0, all.size() - n_valid);
    out.valid = all.slice(all.size() - n_valid, all.size());
  }
  out.ordinary = cfg.tokenizer == TokenizerKind::bytes ? 256 : out.vocab;
  if (cfg.amount > 0 && static_cast<int64_t>(out.train.size()) > cfg.amount)
    out.train = out.train.slice(0, static_cast<size_t>(cfg.amount));
  out.description = fmt::format("{} ({} train / {} valid tokens, {} tokenizer, vocab {}{})",
                                cfg.corpus == CorpusKind::builtin ? "builtin(" + cfg.corpus_arg + ")" : cfg.corpus_arg,
                                out.train.size(), out.valid.size(), out.tokenizer->name(), out.vocab, cached);
  return out;
}

}  // namespace sink::rt
