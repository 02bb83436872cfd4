// Tokenizers: UTF-8 bytes, llama2.c tok*.bin files, and SentencePiece BPE.
// SentencePiece embeds a protobuf that crashes next to libtorch's, so it runs
// as its own processes (spm_train / spm_encode / spm_decode).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sink::rt {

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
// Trains on `training_text` on first use, cached under cache_dir by content hash.
std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::vector<std::string>& training_docs, int64_t vocab,
                                                   const std::string& cache_dir);

// An existing SentencePiece model (a checkpoint's tokenizer.model).
std::unique_ptr<Tokenizer> sentencepiece_model_tokenizer(const std::string& model_path, int64_t vocab);

}  // namespace sink::rt
