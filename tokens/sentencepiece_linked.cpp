// SentencePiece linked into the front end (sinkc), which has no LibTorch whose protobuf it could meet. Built
// against Debian's libsentencepiece-dev when CMake finds it; otherwise sentencepiece_linked() is null and the
// front end falls back to the spm_* programs.
#include "tokens/tokenizer.h"

#include <fmt/format.h>
#include <stdexcept>
#include <unordered_map>

#if SINKLAB_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace sink::tokens {

#if SINKLAB_HAVE_SENTENCEPIECE
namespace {

class LinkedTokenizer : public SentencePieceTokenizer {
 public:
  LinkedTokenizer(const std::string& model, int64_t vocab) : SentencePieceTokenizer(vocab) {
    if (auto status = processor_.Load(model); !status.ok())
      throw std::runtime_error(fmt::format("cannot load the SentencePiece model '{}': {}", model, status.ToString()));
  }
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int> ids;
    if (auto status = processor_.Encode(sentencepiece_line(text, false), &ids); !status.ok())
      throw std::runtime_error("SentencePiece could not encode a document: " + status.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    const std::vector<int32_t> text = text_ids(ids);
    const std::vector<int> kept(text.begin(), text.end());
    std::string out;
    if (auto status = processor_.Decode(kept, &out); !status.ok())
      throw std::runtime_error("SentencePiece could not decode: " + status.ToString());
    return out;
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

class Linked : public SentencePiece {
 public:
  std::string name() const override { return "the linked SentencePiece library"; }
  bool available() const override { return true; }
  void train(const std::string& text_file, const std::string& prefix, int64_t vocab) const override {
    std::unordered_map<std::string, std::string> options = {{"input", text_file}, {"model_prefix", prefix}};
    for (const auto& [key, value] : sentencepiece_training_options(vocab)) options[key] = value;
    sentencepiece::SetRandomGeneratorSeed(kSentencePieceSeed);
    if (auto status = sentencepiece::SentencePieceTrainer::Train(options); !status.ok())
      throw std::runtime_error(
          fmt::format("SentencePiece training failed for sentencepiece(vocab = {}): {}", vocab, status.ToString()));
  }
  std::unique_ptr<Tokenizer> load(const std::string& model_path, int64_t vocab) const override {
    return std::make_unique<LinkedTokenizer>(model_path, vocab);
  }
};

}  // namespace

const SentencePiece* sentencepiece_linked() {
  static const Linked linked;
  return &linked;
}
#else
const SentencePiece* sentencepiece_linked() { return nullptr; }
#endif

}  // namespace sink::tokens
