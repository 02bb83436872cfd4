// Tokenizers: UTF-8 bytes, llama2.c tok*.bin files, and SentencePiece BPE. Torch-free, so that the front end
// tokenizes corpora where it runs (tokens/corpus_tokens.h) and the runtime only reads the tokens.
//
// SentencePiece comes two ways (class SentencePiece): linked (the front end, tokens/sentencepiece_linked.cpp),
// and as the spm_train / spm_encode / spm_decode programs. The runtime uses only the programs: SentencePiece's
// protobuf crashes next to Debian LibTorch's in one process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sink::tokens {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Batch form: the process-backed tokenizer pays its start-up once.
  virtual std::vector<std::vector<int32_t>> encode_all(const std::vector<std::string>& docs) const;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab() const = 0;  // including BOS and EOS
  virtual int32_t bos() const = 0;
  virtual int32_t eos() const = 0;
  virtual std::string name() const = 0;
};

std::unique_ptr<Tokenizer> byte_tokenizer();
// Throws std::runtime_error with a clear message on a malformed file.
std::unique_ptr<Tokenizer> llama2c_tokenizer(const std::string& path, int64_t vocab);

// A SentencePiece model's tokenizer, linked or through the programs: the ids its training options give BOS and EOS
// (sentencepiece_training_options: unk 0, BOS 1, EOS 2), and what a decoder turns into text.
class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(int64_t vocab) : vocab_(vocab) {}
  int64_t vocab() const override { return vocab_; }
  int32_t bos() const override { return 1; }
  int32_t eos() const override { return 2; }
  std::string name() const override { return "sentencepiece"; }

 protected:
  // Every id but BOS and EOS, which decode to no text.
  std::vector<int32_t> text_ids(const std::vector<int32_t>& ids) const;

 private:
  int64_t vocab_;
};

// Trains SentencePiece BPE models and loads them. Both ways train with the same options, and a model encodes
// to the same ids either way (SentencePiece works on lines: a document's line breaks become spaces).
class SentencePiece {
 public:
  virtual ~SentencePiece() = default;
  virtual std::string name() const = 0;
  virtual bool available() const = 0;  // can train and encode on this machine
  // Trains on `text_file` (one document per line) into `prefix`.model; throws saying why it failed.
  virtual void train(const std::string& text_file, const std::string& prefix, int64_t vocab) const = 0;
  virtual std::unique_ptr<Tokenizer> load(const std::string& model_path, int64_t vocab) const = 0;
};

// The spm_* programs (Debian's sentencepiece package), found on PATH.
const SentencePiece& sentencepiece_programs();
// The linked library where this program links it (tokens/sentencepiece_linked.cpp: the front end), else null.
const SentencePiece* sentencepiece_linked();

// The seed of SentencePiece's sampling of training lines (only a corpus of more lines than
// input_sentence_size is sampled): one corpus trains one model, wherever and however often it is trained.
constexpr unsigned kSentencePieceSeed = 20250101;
// The training options, the same for both ways (key, value), without input and model_prefix.
std::vector<std::pair<std::string, std::string>> sentencepiece_training_options(int64_t vocab);
// One document as SentencePiece sees it: a line (the encoder's form; the trainer's also keeps '\r').
std::string sentencepiece_line(std::string doc, bool training);

// Trains on `training_docs` on first use, cached under cache_dir by content hash (the programs).
std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::vector<std::string>& training_docs, int64_t vocab,
                                                   const std::string& cache_dir);
// An existing SentencePiece model (a checkpoint's tokenizer.model), through the programs.
std::unique_ptr<Tokenizer> sentencepiece_model_tokenizer(const std::string& model_path, int64_t vocab);

}  // namespace sink::tokens
