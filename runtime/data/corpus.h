// Corpora: documents from the builtin corpus or the user's files, tokenized
// and joined with EOS into train and validation token streams, read from the
// token cache (tokens/corpus_tokens.h); or a synthetic generator of whole sequences.
#pragma once
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "plan/run_config.h"
#include "runtime/data/tokenizer.h"
#include "tokens/documents.h"
#include "tokens/token_cache.h"

namespace sink::rt {

// Bigram-Backcopy (after Guo et al. 2024): a fixed sparse bigram table
// generates the next token, except after a trigger token t, where the next
// token copies the one offsets[t] positions before the trigger.
class BigramBackcopy {
 public:
  BigramBackcopy(int64_t vocab, int64_t triggers, std::vector<int64_t> offsets, double sparsity, uint64_t seed);
  // `length` tokens; starts after a BOS (not included) with a non-trigger.
  std::vector<int32_t> sample(int64_t length, std::mt19937_64& rng) const;
  // Per position: is the token a copy (predictable exactly)?
  int64_t vocab() const { return vocab_; }

 private:
  int64_t vocab_, triggers_;
  std::vector<int64_t> offsets_;
  mutable std::vector<std::discrete_distribution<int32_t>> rows_;  // sampling mutates no state we rely on
};

struct TokenData {
  int64_t vocab = 0;     // model vocabulary (with BOS/EOS where they exist)
  int64_t ordinary = 0;  // tokens [0, ordinary) are drawn for random positions
  int32_t bos = -1, eos = -1;
  tokens::TokenSpan train, valid;          // text: documents joined with EOS (a mapped token file)
  std::shared_ptr<BigramBackcopy> bigram;  // synthetic bigram_backcopy
  std::optional<SyntheticKind> synthetic;  // none: text
  std::shared_ptr<Tokenizer> tokenizer;    // text corpora
  std::string description;                 // for the log
};

// Throws std::runtime_error with a clear message for missing or malformed data. `cache_dir`: the run's data
// cache (<out>/.cache), whose tokens/ holds the token cache; "" tokenizes in memory. A text corpus whose
// tokens are not cached is tokenized here when this machine can (bytes, llama2c, the spm_* programs).
TokenData load_data(const DataConfig& cfg, const std::string& cache_dir);

using tokens::read_documents;

}  // namespace sink::rt
