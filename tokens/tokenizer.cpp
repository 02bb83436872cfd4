#include "tokens/tokenizer.h"

#include "support/fnv1a.h"
#include "support/remove_tree.h"
#include "support/shell.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace sink::tokens {
namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> Tokenizer::encode_all(const std::vector<std::string>& docs) const {
  std::vector<std::vector<int32_t>> out;
  out.reserve(docs.size());
  for (const auto& d : docs) out.push_back(encode(d));
  return out;
}

std::vector<int32_t> SentencePieceTokenizer::text_ids(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> kept;
  for (int32_t id : ids)
    if (id != bos() && id != eos()) kept.push_back(id);
  return kept;
}

namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t k = 0; k < text.size(); ++k) ids[k] = static_cast<unsigned char>(text[k]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids)
      if (id >= 0 && id < 256) s += static_cast<char>(id);
    return s;
  }
  int64_t vocab() const override { return 258; }
  int32_t bos() const override { return 256; }
  int32_t eos() const override { return 257; }
  std::string name() const override { return "bytes"; }
};

// llama2.c's format: int32 max_token_length, then per token: float score,
// int32 length, bytes. Ids 1 and 2 are BOS and EOS.
class Llama2cTokenizer : public Tokenizer {
 public:
  Llama2cTokenizer(const std::string& path, int64_t vocab) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("cannot read tokenizer '{}'", path));
    int32_t max_len = 0;
    if (!in.read(reinterpret_cast<char*>(&max_len), 4) || max_len <= 0 || max_len > 4096)
      throw std::runtime_error(fmt::format("'{}' is not a llama2.c tokenizer (bad header)", path));
    while (vocab <= 0 || static_cast<int64_t>(pieces_.size()) < vocab) {
      float score;
      int32_t len;
      if (!in.read(reinterpret_cast<char*>(&score), 4)) break;
      if (!in.read(reinterpret_cast<char*>(&len), 4) || len < 0 || len > max_len)
        throw std::runtime_error(fmt::format("'{}': token {} is truncated or has a bad length", path, pieces_.size()));
      std::string piece(static_cast<size_t>(len), '\0');
      if (!in.read(piece.data(), len))
        throw std::runtime_error(fmt::format("'{}': token {} is truncated", path, pieces_.size()));
      index_.emplace(piece, static_cast<int32_t>(pieces_.size()));
      pieces_.push_back(std::move(piece));
      scores_.push_back(score);
    }
    if (vocab > 0 && static_cast<int64_t>(pieces_.size()) != vocab)
      throw std::runtime_error(fmt::format("'{}' holds {} tokens, the model expects {}", path, pieces_.size(), vocab));
    if (pieces_.size() < 3) throw std::runtime_error(fmt::format("'{}' holds too few tokens", path));
  }

  // Sentencepiece-style BPE as llama2.c does it: start from characters
  // (with a leading space), merge the best-scoring adjacent pair until none is a token.
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    if (text.empty()) return ids;
    std::string s = " " + text;
    for (size_t k = 0; k < s.size();) {
      size_t len = 1;
      unsigned char c = s[k];
      if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      std::string ch = s.substr(k, len);
      auto it = index_.find(ch);
      if (it != index_.end()) {
        ids.push_back(it->second);
      } else {
        for (unsigned char b : ch) ids.push_back(static_cast<int32_t>(b) + 3);  // byte fallback <0xXX>
      }
      k += len;
    }
    while (true) {
      float best = -1e30f;
      int best_id = -1;
      size_t best_at = 0;
      for (size_t k = 0; k + 1 < ids.size(); ++k) {
        auto it = index_.find(pieces_[ids[k]] + pieces_[ids[k + 1]]);
        if (it != index_.end() && scores_[it->second] > best)
          best = scores_[it->second], best_id = it->second, best_at = k;
      }
      if (best_id < 0) break;
      ids[best_at] = best_id;
      ids.erase(ids.begin() + static_cast<long>(best_at) + 1);
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    int32_t prev = bos();
    for (int32_t id : ids) {
      if (id < 0 || id >= static_cast<int32_t>(pieces_.size()) || id == bos() || id == eos()) {
        prev = id;
        continue;
      }
      std::string piece = pieces_[id];
      if (prev == bos() && !piece.empty() && piece[0] == ' ') piece = piece.substr(1);
      unsigned byte;
      if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%02X>", &byte) == 1)
        piece = std::string(1, static_cast<char>(byte));
      out += piece;
      prev = id;
    }
    return out;
  }
  int64_t vocab() const override { return static_cast<int64_t>(pieces_.size()); }
  int32_t bos() const override { return 1; }
  int32_t eos() const override { return 2; }
  std::string name() const override { return "llama2c"; }

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::map<std::string, int32_t> index_;
};

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

// A model through the command-line tools, one document per line.
class ProgramTokenizer : public SentencePieceTokenizer {
 public:
  ProgramTokenizer(std::string model, int64_t vocab) : SentencePieceTokenizer(vocab), model_(std::move(model)) {}
  std::vector<int32_t> encode(const std::string& text) const override { return encode_all({text}).at(0); }
  std::vector<std::vector<int32_t>> encode_all(const std::vector<std::string>& docs) const override {
    fs::path dir = fs::temp_directory_path() / fmt::format("sinklab-spm-{}", getpid());
    fs::create_directories(dir);
    {
      std::ofstream f(dir / "in.txt");
      for (const auto& d : docs) f << sentencepiece_line(d, false) << "\n";
    }
    if (run(fmt::format("spm_encode --model={} --output_format=id < {} > {}", shell_quote(model_),
                        shell_quote((dir / "in.txt").string()), shell_quote((dir / "out.txt").string()))) != 0)
      throw std::runtime_error("spm_encode failed (is the sentencepiece package installed?)");
    std::vector<std::vector<int32_t>> out;
    std::ifstream in(dir / "out.txt");
    std::string line;
    while (std::getline(in, line)) {
      std::vector<int32_t> ids;
      std::istringstream ss(line);
      int32_t id;
      while (ss >> id) ids.push_back(id);
      out.push_back(std::move(ids));
    }
    sink::remove_tree(dir);
    if (out.size() != docs.size()) throw std::runtime_error("spm_encode returned a different number of lines");
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string line;
    for (int32_t id : text_ids(ids)) line += std::to_string(id) + " ";
    fs::path tmp = fs::temp_directory_path() / fmt::format("sinklab-spm-{}.ids", getpid());
    {
      std::ofstream(tmp) << line << "\n";
    }
    std::string cmd =
        fmt::format("spm_decode --model={} --input_format=id < {}", shell_quote(model_), shell_quote(tmp.string()));
    std::string out = command_output(cmd);
    fs::remove(tmp);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

 private:
  std::string model_;
};

class Programs : public SentencePiece {
 public:
  std::string name() const override { return "the spm_train/spm_encode programs"; }
  bool available() const override {
    return run("command -v spm_train > /dev/null 2>&1 && command -v spm_encode > /dev/null 2>&1") == 0;
  }
  void train(const std::string& text_file, const std::string& prefix, int64_t vocab) const override {
    std::string cmd =
        fmt::format("spm_train --input={} --model_prefix={}", shell_quote(text_file), shell_quote(prefix));
    for (const auto& [key, value] : sentencepiece_training_options(vocab)) cmd += fmt::format(" --{}={}", key, value);
    cmd += fmt::format(" --random_seed={}", kSentencePieceSeed);
    cmd += fmt::format(" > {}.log 2>&1", shell_quote(prefix));
    if (run(cmd) == 0) return;
    // Say why: the usual cause is a vocabulary too small for the 256
    // byte-fallback pieces plus the corpus's characters.
    std::string reason;
    std::ifstream log(prefix + ".log");
    for (std::string line; std::getline(log, line);) {
      const bool internal = line.find("Internal") != std::string::npos;
      if (internal || (reason.empty() && line.find("rror") != std::string::npos)) reason = line;
      if (internal) break;  // the first internal error says why
    }
    throw std::runtime_error(fmt::format("spm_train failed for sentencepiece(vocab = {}){}{}; see {}.log", vocab,
                                         reason.empty() ? "" : ": ", reason.substr(0, 400), prefix));
  }
  std::unique_ptr<Tokenizer> load(const std::string& model_path, int64_t vocab) const override {
    return std::make_unique<ProgramTokenizer>(model_path, vocab);
  }
};

}  // namespace

std::vector<std::pair<std::string, std::string>> sentencepiece_training_options(int64_t vocab) {
  return {{"vocab_size", std::to_string(vocab)},
          {"model_type", "bpe"},
          {"character_coverage", "1.0"},
          {"byte_fallback", "true"},
          {"pad_id", "-1"},
          {"unk_id", "0"},
          {"bos_id", "1"},
          {"eos_id", "2"},
          {"max_sentence_length", "1000000"},
          {"input_sentence_size", "200000"},
          {"shuffle_input_sentence", "true"},
          {"minloglevel", "2"}};
}

std::string sentencepiece_line(std::string doc, bool training) {
  std::replace(doc.begin(), doc.end(), '\n', ' ');
  if (!training) std::replace(doc.begin(), doc.end(), '\r', ' ');
  return doc;
}

const SentencePiece& sentencepiece_programs() {
  static const Programs programs;
  return programs;
}

std::unique_ptr<Tokenizer> byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> llama2c_tokenizer(const std::string& path, int64_t vocab) {
  return std::make_unique<Llama2cTokenizer>(path, vocab);
}

std::unique_ptr<Tokenizer> sentencepiece_model_tokenizer(const std::string& model_path, int64_t vocab) {
  return sentencepiece_programs().load(model_path, vocab);
}

std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::vector<std::string>& docs, int64_t vocab,
                                                   const std::string& cache_dir) {
  Fnv1a h;
  for (const auto& d : docs) h.add(d);
  fs::path prefix = fs::path(cache_dir) / fmt::format("spm-{}-{}", h.hex(), vocab);
  if (!fs::exists(prefix.string() + ".model")) {
    fs::create_directories(cache_dir);
    fs::path text = prefix.string() + ".train.txt";
    {
      std::ofstream f(text);
      for (const auto& d : docs) f << sentencepiece_line(d, true) << "\n";
    }
    sentencepiece_programs().train(text.string(), prefix.string(), vocab);
    fs::remove(text);
  }
  return sentencepiece_programs().load(prefix.string() + ".model", vocab);
}

}  // namespace sink::tokens
