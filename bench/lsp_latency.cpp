// How long `sinkc lsp` takes to answer, on every spec in specs/: for each
// file, open it (diagnostics), then ask hover, completion and definition at
// every 7th line's first word, document symbols and formatting, and send one
// incremental edit (an insert and its removal, diagnostics each time). The
// server is called in process, so the times are the server's own; the
// baseline is the same file's `Compilation` (what `sinkc check` does), taken
// in the same process, since most answers compile the document once.
//
//   lsp_latency [--rounds N]
//
// A benchmark, not a test: it prints a table (median and max per method, in
// ms) and exits 0; 1 if a request got an error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "lsp/server.h"
#include "tests/source_paths.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int rounds = 3;
  for (int k = 1; k + 1 < argc; ++k)
    if (std::strcmp(argv[k], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[k + 1]));
  std::vector<fs::path> specs;
  for (const auto& e : fs::directory_iterator(fs::path(sinktest::source_dir()) / "specs"))
    if (e.path().extension() == ".sink") specs.push_back(e.path());
  std::sort(specs.begin(), specs.end());
  std::map<std::string, std::vector<double>> ms;
  bool errors = false;
  for (int round = 0; round < rounds; ++round)
    for (const auto& spec : specs) {
      std::ifstream in(spec);
      std::stringstream text;
      text << in.rdbuf();
      const std::string uri = "file://" + spec.string();
      sink::lsp::Server server{sink::Options{}};
      int id = 0;
      auto timed = [&](const std::string& method, const json& params, bool request = true) {
        json m = {{"jsonrpc", "2.0"}, {"method", method}, {"params", params}};
        if (request) m["id"] = ++id;
        const auto t0 = Clock::now();
        auto replies = server.handle(m.dump());
        ms[method].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        for (const auto& r : replies) errors |= json::parse(r).contains("error");
      };
      timed("initialize", {{"capabilities", json::object()}});
      {
        const auto t0 = Clock::now();
        sink::Compilation c(sink::Options{});
        c.add_file(spec.string());
        c.run();
        ms["(baseline) sinkc check, in process"].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      timed("textDocument/didOpen", {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", text.str()}}}}, false);
      const std::string body = text.str();
      int line = 0;
      for (size_t at = 0; at < body.size(); at = body.find('\n', at) + 1, ++line) {
        if (line % 7 != 0) continue;
        const size_t word = body.find_first_not_of(" ", at);
        const long character = static_cast<long>(word == std::string::npos ? 0 : word - at) + 1;
        const json where = {{"textDocument", {{"uri", uri}}}, {"position", {{"line", line}, {"character", character}}}};
        for (const char* m : {"textDocument/hover", "textDocument/completion", "textDocument/definition"})
          timed(m, where);
        if (body.find('\n', at) == std::string::npos) break;
      }
      timed("textDocument/documentSymbol", {{"textDocument", {{"uri", uri}}}});
      timed("textDocument/formatting", {{"textDocument", {{"uri", uri}}}});
      const json insert = {
          {"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
          {"text", "// edited\n"}};
      const json remove = {
          {"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 1}, {"character", 0}}}}},
          {"text", ""}};
      timed("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 2}}}, {"contentChanges", {insert}}},
            false);
      timed("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 3}}}, {"contentChanges", {remove}}},
            false);
    }
  std::printf("%zu specs, %d rounds\n\n%-40s %8s %10s %10s\n", specs.size(), rounds, "message", "answers", "median ms",
              "max ms");
  for (auto& [method, times] : ms) {
    std::sort(times.begin(), times.end());
    std::printf("%-40s %8zu %10.2f %10.2f\n", method.c_str(), times.size(), times[times.size() / 2], times.back());
  }
  if (errors) std::printf("\nsome requests were answered with an error\n");
  return errors ? 1 : 0;
}
