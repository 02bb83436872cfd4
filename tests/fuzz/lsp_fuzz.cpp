// libFuzzer target: `sinkc lsp` under a random session. The input is a
// script of operations on one document: open it with some text, edit a
// range (in any order, at any position), ask for hover, completion,
// definition, symbols or formatting anywhere, or send raw bytes as a
// message. Beyond "no crash, no hang" (ASan, UBSan, libFuzzer's limits):
//   - every reply is JSON, and every request gets exactly one answer (quick fixes included);
//   - formatting, whenever the text parses, reaches its fixed point in one pass.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/format.h"
#include "lsp/server.h"

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "lsp_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

struct Script {
  const uint8_t* data;
  size_t size, at = 0;
  bool done() const { return at >= size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
  // A piece of text: a length byte, then that many bytes.
  std::string text() {
    const size_t n = std::min<size_t>(byte(), size - std::min(at, size));
    std::string s(reinterpret_cast<const char*>(data + at), n);
    at += n;
    return s;
  }
  long coordinate() { return static_cast<long>(byte() % 24) - (byte() == 255 ? 1000000 : 0); }
};

const char* kUri = "file:///nonexistent-fuzz-dir/input.sink";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sink::Options options;
  options.stdlib_dir = SINKLAB_SOURCE_DIR "/stdlib";
  sink::lsp::Server server(options);
  int id = 0;
  auto send = [&](const std::string& method, const json& params, bool request) {
    json m = {{"jsonrpc", "2.0"}, {"method", method}, {"params", params}};
    if (request) m["id"] = ++id;
    size_t answers = 0;
    for (const auto& reply : server.handle(m.dump(-1, ' ', false, json::error_handler_t::replace))) {
      json r = json::parse(reply, nullptr, false);
      if (r.is_discarded()) fail("a reply that is not JSON", reply);
      answers += r.contains("id") && r["id"] == id;
    }
    if (request && answers != 1) fail("a request without exactly one answer", method);
  };
  send("initialize", {{"capabilities", {{"general", {{"positionEncodings", {data[0] % 2 ? "utf-8" : "utf-16"}}}}}}},
       size > 0);
  Script s{data, size};
  std::string text;
  while (!s.done()) {
    const uint8_t op = s.byte() % 10;
    const json position = {{"line", s.coordinate()}, {"character", s.coordinate()}};
    const json at = {{"textDocument", {{"uri", kUri}}}, {"position", position}};
    switch (op) {
      case 0:
        text = s.text();
        send("textDocument/didOpen", {{"textDocument", {{"uri", kUri}, {"version", 1}, {"text", text}}}}, false);
        break;
      case 1: {
        const json start = {{"line", s.coordinate()}, {"character", s.coordinate()}};
        const json end = {{"line", s.coordinate()}, {"character", s.coordinate()}};
        send("textDocument/didChange",
             {{"textDocument", {{"uri", kUri}, {"version", 2}}},
              {"contentChanges", {{{"range", {{"start", start}, {"end", end}}}, {"text", s.text()}}}}},
             false);
        break;
      }
      case 2: send("textDocument/hover", at, true); break;
      case 3: send("textDocument/completion", at, true); break;
      case 4: send("textDocument/definition", at, true); break;
      case 5: send("textDocument/documentSymbol", {{"textDocument", {{"uri", kUri}}}}, true); break;
      case 6: send("textDocument/formatting", {{"textDocument", {{"uri", kUri}}}}, true); break;
      case 8: {
        const json start = {{"line", s.coordinate()}, {"character", s.coordinate()}};
        const json end = {{"line", s.coordinate()}, {"character", s.coordinate()}};
        const json range = {{"start", start}, {"end", end}};
        const std::string message = "unknown field '" + s.text() + "'\ndid you mean '" + s.text() + "'?";
        const json diagnostic = {{"range", range}, {"message", message}};
        send("textDocument/codeAction",
             {{"textDocument", {{"uri", kUri}}}, {"range", range}, {"context", {{"diagnostics", {diagnostic}}}}}, true);
        break;
      }
      case 7: {
        const std::string raw = s.text();
        for (const auto& reply : server.handle(raw))
          if (json::parse(reply, nullptr, false).is_discarded()) fail("a reply that is not JSON", reply);
        break;
      }
      default: {
        std::string errors;
        const std::string piece = s.text();
        if (auto once = sink::format_spec("fuzz.sink", piece, errors)) {
          auto twice = sink::format_spec("fuzz.sink", *once, errors);
          if (!twice) fail("formatted text that does not parse", *once + "\n" + errors);
          if (*twice != *once) fail("formatting is not idempotent", piece + "\n---\n" + *once + "\n---\n" + *twice);
        }
      }
    }
  }
  send("shutdown", nullptr, true);
  send("exit", nullptr, false);
  if (size > 0 && !server.exited()) fail("exit did not end the session", "");
  return 0;
}
