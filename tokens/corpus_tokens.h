// A corpus tokenized once and kept: the token cache. One entry per (corpus content, tokenizer) under
// token_cache_dir(), a folder named by the key holding tokens.bin (tokens/token_cache.h), the trained
// tokenizer.model for SentencePiece, and info.json saying what it is. Whoever needs an entry first builds it
// (the front end: `sinkc tokenize`, `run`, `submit`; else the runtime, when it can tokenize); everyone else
// maps it. Written under a lock into a temporary folder renamed into place, so a reader sees a whole entry or
// none; a damaged entry is rebuilt where the tokenizer is at hand, and is an error that says so elsewhere. An entry
// folder holding only a tokenizer.model (copied from a machine that trained it for the same key) is encoded with
// that model, not trained again: a short GPU job tokenizes in seconds what took minutes to train.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "plan/run_config.h"
#include "tokens/token_cache.h"
#include "tokens/tokenizer.h"

namespace sink::tokens {

// $SINKLAB_TOKEN_CACHE when set, else <data_cache>/tokens (a run's data cache is <out>/.cache).
std::string token_cache_dir(const std::string& data_cache);

// The files of a text corpus (builtin or file(...)); empty for synthetic and for .bin token files.
std::vector<std::string> text_corpus_files(const DataConfig& cfg);

struct CacheKey {
  std::string hex;          // the entry's folder name
  std::string description;  // what it covers, one item a line (info.json)
  uint64_t hash() const;
};
// The tokenizer's identity (kind; vocab and validation split for a trained one; the file for llama2c) and the
// corpus's: every file's size and content hash (tokens/token_cache.h's file_fingerprint), in glob order.
// Paths are not part of it: a corpus copied or moved keeps its tokens.
CacheKey cache_key(const DataConfig& cfg, const std::vector<std::string>& files);

struct CorpusTokens {
  TokenFile file;
  std::string dir;              // the entry ("" when built in memory)
  std::string tokenizer_model;  // sentencepiece: the trained model
  bool built = false;           // this call tokenized the corpus
};

using Say = std::function<void(const std::string&)>;
// The corpus's tokens from the cache at `cache_dir`, built there first when absent or damaged. `cache_dir`
// empty: built in a temporary file, kept nowhere. SentencePiece trains and encodes through `spm`; when it is
// not available here an absent entry is an error naming `sinkc tokenize`.
CorpusTokens corpus_tokens(const DataConfig& cfg, const std::string& cache_dir, const SentencePiece& spm,
                           const Say& say = nullptr);

// Documents in validation: the last max(1, documents * valid_fraction), whole.
uint64_t validation_documents(uint64_t documents, double valid_fraction);

}  // namespace sink::tokens
