#include "tokens/documents.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <glob.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string_view>
#if SINKLAB_HAVE_ZSTD
#include <zstd.h>
#endif

namespace sink::tokens {

namespace {

// Calls `chunk` with the decompressed bytes of `path`, a piece at a time.
void zstd_stream(const std::string& path, const std::function<void(const char*, size_t)>& chunk) {
#if !SINKLAB_HAVE_ZSTD
  (void)chunk;
  throw std::runtime_error(
      fmt::format("'{}': this build has no zstd (libzstd-dev was not found): decompress it first", path));
#else
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(), ZSTD_freeDStream);
  ZSTD_initDStream(stream.get());
  std::vector<char> ibuf(ZSTD_DStreamInSize()), obuf(ZSTD_DStreamOutSize());
  size_t last = 0;
  while (in) {
    in.read(ibuf.data(), static_cast<std::streamsize>(ibuf.size()));
    ZSTD_inBuffer input{ibuf.data(), static_cast<size_t>(in.gcount()), 0};
    while (input.pos < input.size) {
      ZSTD_outBuffer output{obuf.data(), obuf.size(), 0};
      last = ZSTD_decompressStream(stream.get(), &output, &input);
      if (ZSTD_isError(last))
        throw std::runtime_error(fmt::format("'{}': not valid zstd data ({})", path, ZSTD_getErrorName(last)));
      chunk(obuf.data(), output.pos);
    }
  }
  if (last != 0) throw std::runtime_error(fmt::format("'{}': truncated zstd data", path));
#endif
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// JSON Lines, fed in pieces: each whole line's "text" goes to `each`.
class JsonlReader {
 public:
  JsonlReader(std::string path, const std::function<void(std::string&&)>& each) : path_(std::move(path)), each_(each) {}
  void feed(const char* data, size_t n) {
    pending_.append(data, n);
    size_t start = 0;
    for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1)
      line(std::string_view(pending_).substr(start, end - start));
    pending_.erase(0, start);
  }
  void finish() {
    if (!pending_.empty()) line(pending_);
    pending_.clear();
  }

 private:
  void line(std::string_view text) {
    ++n_;
    if (text.find_first_not_of(" \t\r") == std::string::npos) return;
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw std::runtime_error(fmt::format("{}:{}: expected a JSON object with a string field \"text\"", path_, n_));
    each_(std::move(j["text"].get_ref<std::string&>()));
  }
  std::string path_, pending_;
  const std::function<void(std::string&&)>& each_;
  int64_t n_ = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_token_file(const std::string& path) { return ends_with(path, ".bin"); }

std::vector<std::string> corpus_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> paths;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t k = 0; k < g.gl_pathc; ++k) paths.push_back(g.gl_pathv[k]);
  globfree(&g);
  if (paths.empty()) {
    std::error_code ec;
    const std::string from =
        pattern.starts_with('/') ? "" : " (from " + std::filesystem::current_path(ec).string() + ")";
    throw std::runtime_error(
        fmt::format("no data file matches '{}'{}; docs/RUNNING.md says where a corpus comes from", pattern, from));
  }
  return paths;
}

void for_each_document(const std::string& p, const std::function<void(std::string&&)>& each) {
  if (ends_with(p, ".jsonl.zst") || ends_with(p, ".jsonl")) {
    JsonlReader reader(p, each);
    if (ends_with(p, ".jsonl.zst")) {
      zstd_stream(p, [&](const char* data, size_t n) { reader.feed(data, n); });
    } else {
      std::ifstream in(p, std::ios::binary);
      if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", p));
      std::vector<char> buf(1 << 20);
      while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        reader.feed(buf.data(), static_cast<size_t>(in.gcount()));
      }
    }
    reader.finish();
  } else {
    each(read_all(p));
  }
}

std::vector<std::string> file_documents(const std::string& p) {
  std::vector<std::string> docs;
  for_each_document(p, [&](std::string&& d) { docs.push_back(std::move(d)); });
  return docs;
}

std::vector<std::string> read_documents(const std::string& pattern, std::vector<int32_t>* tokens_out) {
  std::vector<std::string> docs;
  for (const auto& p : corpus_files(pattern)) {
    if (is_token_file(p)) {
      if (!tokens_out) throw std::runtime_error(fmt::format("'{}': token files cannot be mixed with text", p));
      std::string raw = read_all(p);
      if (raw.size() % 2) throw std::runtime_error(fmt::format("'{}': odd size, not a uint16 token file", p));
      for (size_t k = 0; k < raw.size(); k += 2) {
        uint16_t t;
        std::memcpy(&t, raw.data() + k, 2);
        tokens_out->push_back(t);
      }
    } else {
      auto more = file_documents(p);
      docs.insert(docs.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  }
  return docs;
}

}  // namespace sink::tokens
