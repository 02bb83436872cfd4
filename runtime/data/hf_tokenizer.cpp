#include "runtime/data/hf_tokenizer.h"

#include "support/remove_tree.h"
#include "support/shell.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace sink::rt {
namespace fs = std::filesystem;

namespace {

// Exit status 3: the Python runs but has no tokenizers library.
constexpr int kNoLibrary = 3;
constexpr const char* kScript = R"(import json, sys
try:
    from tokenizers import Tokenizer
except ImportError:
    sys.exit(3)
tok = Tokenizer.from_file(sys.argv[1])
request = json.load(sys.stdin)
if sys.argv[2] == "encode":
    result = [e.ids for e in tok.encode_batch(request, add_special_tokens=False)]
else:
    result = tok.decode(request, skip_special_tokens=True)
json.dump(result, sys.stdout)
)";

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(std::string json_path, int64_t vocab) : path_(std::move(json_path)), vocab_(vocab) {}

  std::vector<int32_t> encode(const std::string& text) const override { return encode_all({text}).at(0); }

  std::vector<std::vector<int32_t>> encode_all(const std::vector<std::string>& docs) const override {
    auto reply = call("encode", nlohmann::json(docs));
    std::vector<std::vector<int32_t>> out;
    if (!reply.is_array() || reply.size() != docs.size())
      throw std::runtime_error(
          fmt::format("{}: the tokenizers library answered something other than {} id lists", path_, docs.size()));
    for (const auto& ids : reply) {
      std::vector<int32_t> row;
      for (const auto& id : ids) {
        const int64_t v = id.get<int64_t>();
        if (v < 0 || v >= vocab_)
          throw std::runtime_error(
              fmt::format("{} gives token id {}, outside the checkpoint's vocabulary of {}", path_, v, vocab_));
        row.push_back(static_cast<int32_t>(v));
      }
      out.push_back(std::move(row));
    }
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override { return call("decode", ids).get<std::string>(); }
  int64_t vocab() const override { return vocab_; }
  // Special tokens are the checkpoint's (config.json), not this library's.
  int32_t bos() const override { return -1; }
  int32_t eos() const override { return -1; }
  std::string name() const override { return "huggingface-tokenizers"; }

 private:
  nlohmann::json call(const std::string& mode, const nlohmann::json& request) const {
    const PythonFound python = find_python();
    auto cannot = [&](const std::string& why) {
      return std::runtime_error(fmt::format(
          "{} is tokenized with Hugging Face's tokenizers library, run by a Python: {}. Set SINKLAB_PYTHON to a Python "
          "that has it (pip install tokenizers), or tokenize the text yourself and pass the ids with --ids FILE",
          path_, why));
    };
    if (python.path.empty()) throw cannot(python.how);
    static std::atomic<int> calls{0};
    const fs::path dir = fs::temp_directory_path() / fmt::format("sinklab-hftok-{}-{}", getpid(), calls++);
    fs::create_directories(dir);
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        sink::remove_tree(dir, ec);
      }
    } cleanup{dir};
    // Text that is not valid UTF-8 reaches the library with U+FFFD in place of the bad bytes.
    std::ofstream(dir / "request.json") << request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string command =
        fmt::format("{} -c {} {} {} < {} > {} 2> {}", shell_quote(python.path), shell_quote(kScript),
                    shell_quote(path_), mode, shell_quote((dir / "request.json").string()),
                    shell_quote((dir / "reply.json").string()), shell_quote((dir / "errors.txt").string()));
    const int status = std::system(command.c_str());
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (rc == kNoLibrary) throw cannot(fmt::format("{} ({}) cannot import tokenizers", python.path, python.how));
    if (rc != 0) {
      std::ifstream in(dir / "errors.txt");
      std::string line, last;
      while (std::getline(in, line))
        if (!line.empty()) last = line;
      throw std::runtime_error(fmt::format("{}: the tokenizers library ({} {}) failed: {}", path_, python.how,
                                           python.path, last.empty() ? fmt::format("exit status {}", rc) : last));
    }
    std::ifstream in(dir / "reply.json");
    auto reply = nlohmann::json::parse(in, nullptr, false);
    if (reply.is_discarded())
      throw std::runtime_error(fmt::format("{}: the tokenizers library's answer is not JSON", path_));
    return reply;
  }

  std::string path_;
  int64_t vocab_;
};

}  // namespace

PythonFound find_python() {
  if (const char* env = std::getenv("SINKLAB_PYTHON"); env && *env) {
    if (access(env, X_OK) != 0) return {"", fmt::format("SINKLAB_PYTHON={} is not an executable", env)};
    return {env, "SINKLAB_PYTHON"};
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / "python3";
    if (access(candidate.c_str(), X_OK) == 0) return {candidate.string(), "python3 on PATH"};
  }
  return {"", "SINKLAB_PYTHON is not set and there is no python3 on PATH"};
}

std::unique_ptr<Tokenizer> hf_tokenizer(const std::string& tokenizer_json, int64_t vocab) {
  return std::make_unique<HfTokenizer>(tokenizer_json, vocab);
}

}  // namespace sink::rt
