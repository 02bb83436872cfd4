#include "tokens/documents.h"

#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <glob.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#if SINKLAB_HAVE_ZSTD
#include <zstd.h>
#endif

namespace sink::tokens {

namespace {

std::string zstd_decompress_file(const std::string& path) {
#if !SINKLAB_HAVE_ZSTD
  throw std::runtime_error(
      fmt::format("'{}': this build has no zstd (libzstd-dev was not found): decompress it first", path));
#else
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
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

bool is_token_file(const std::string& path) { return ends_with(path, ".bin"); }

std::vector<std::string> corpus_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> paths;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t k = 0; k < g.gl_pathc; ++k) paths.push_back(g.gl_pathv[k]);
  globfree(&g);
  if (paths.empty()) throw std::runtime_error(fmt::format("no data file matches '{}'", pattern));
  return paths;
}

std::vector<std::string> file_documents(const std::string& p) {
  std::vector<std::string> docs;
  if (ends_with(p, ".jsonl.zst"))
    jsonl_documents(zstd_decompress_file(p), p, docs);
  else if (ends_with(p, ".jsonl"))
    jsonl_documents(read_all(p), p, docs);
  else
    docs.push_back(read_all(p));
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
