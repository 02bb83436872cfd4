#include "lsp/server.h"

#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "compiler/format.h"
#include "support/installation.h"

namespace sink::lsp {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// JSON-RPC error codes (LSP 3.17).
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
              kInternalError = -32603, kServerNotInitialized = -32002;

struct RpcError {
  int code;
  std::string message;
};

std::string response(const json& id, const json& result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_response(const json& id, int code, const std::string& message) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

const json& field(const json& j, const char* key) {
  static const json none;
  if (!j.is_object()) return none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

std::string string_field(const json& j, const char* key) {
  const json& v = field(j, key);
  if (!v.is_string()) throw RpcError{kInvalidParams, fmt::format("'{}' must be a string", key)};
  return v.get<std::string>();
}

long number_field(const json& j, const char* key) {
  const json& v = field(j, key);
  if (!v.is_number()) throw RpcError{kInvalidParams, fmt::format("'{}' must be a number", key)};
  const double d = v.get<double>();
  return d != d ? 0 : d > 1e9 ? 1000000000L : d < -1e9 ? -1000000000L : static_cast<long>(d);
}

}  // namespace

Server::Server(Options options) : options_(std::move(options)) {
  if (options_.stdlib_dir.empty()) options_.stdlib_dir = stdlib_dir().string();
}

std::vector<std::string> Server::handle(const std::string& body) {
  std::vector<std::string> out;
  json message = json::parse(body, nullptr, false);
  if (message.is_discarded() || !message.is_object()) {
    out.push_back(error_response(nullptr, kParseError, "not a JSON-RPC message"));
    return out;
  }
  const json id = field(message, "id");
  const bool request = message.contains("id");
  const json& method = field(message, "method");
  if (!method.is_string()) {
    if (request && !message.contains("result") && !message.contains("error"))
      out.push_back(error_response(id, kInvalidRequest, "no method"));
    return out;  // a response to something we never asked: ignored
  }
  try {
    json result = dispatch(method.get<std::string>(), field(message, "params"), out);
    if (request) out.push_back(response(id, result));
  } catch (const RpcError& e) {
    if (request) out.push_back(error_response(id, e.code, e.message));
  } catch (const std::exception& e) {
    if (request) out.push_back(error_response(id, kInternalError, e.what()));
  }
  return out;
}

json Server::dispatch(const std::string& method, const json& params, std::vector<std::string>& out) {
  if (method == "exit") {
    exited_ = true;
    return nullptr;
  }
  if (method == "initialize") return initialize(params);
  if (!initialized_) throw RpcError{kServerNotInitialized, "initialize first"};
  if (shutdown_) throw RpcError{kInvalidRequest, "the server is shutting down"};
  if (method == "shutdown") {
    shutdown_ = true;
    return nullptr;
  }
  if (method == "initialized" || method == "$/cancelRequest" || method == "$/setTrace" ||
      method == "workspace/didChangeConfiguration" || method == "textDocument/didSave")
    return nullptr;
  if (method == "textDocument/didOpen") return open(params, out), nullptr;
  if (method == "textDocument/didChange") return change(params, out), nullptr;
  if (method == "textDocument/didClose") {
    const std::string uri = string_field(field(params, "textDocument"), "uri");
    documents_.erase(uri);
    out.push_back(json{{"jsonrpc", "2.0"},
                       {"method", "textDocument/publishDiagnostics"},
                       {"params", {{"uri", uri}, {"diagnostics", json::array()}}}}
                      .dump());
    return nullptr;
  }
  static const std::set<std::string> about_a_document = {"textDocument/documentSymbol", "textDocument/formatting",
                                                         "textDocument/codeAction",     "textDocument/hover",
                                                         "textDocument/completion",     "textDocument/definition"};
  if (!about_a_document.count(method)) throw RpcError{kMethodNotFound, "sinkc lsp does not answer " + method};
  const Document* doc = document(params);
  if (method == "textDocument/documentSymbol") return symbols(*doc);
  if (method == "textDocument/formatting") return formatting(*doc);
  if (method == "textDocument/codeAction") return code_actions(*doc, params);
  const json& at = field(params, "position");
  const size_t offset = offset_of(doc->text, number_field(at, "line"), number_field(at, "character"), encoding_);
  if (method == "textDocument/hover") return hover(*doc, offset);
  if (method == "textDocument/completion") return completion(*doc, offset);
  return definition(*doc, offset);
}

json Server::initialize(const json& params) {
  initialized_ = true;
  const json& encodings = field(field(field(params, "capabilities"), "general"), "positionEncodings");
  if (encodings.is_array())
    for (const auto& e : encodings)
      if (e == "utf-8") encoding_ = Encoding::Utf8;
  return {{"capabilities",
           {{"positionEncoding", encoding_ == Encoding::Utf8 ? "utf-8" : "utf-16"},
            {"textDocumentSync", {{"openClose", true}, {"change", 2}}},
            {"hoverProvider", true},
            {"completionProvider", {{"triggerCharacters", {".", "=", "\""}}}},
            {"definitionProvider", true},
            {"documentSymbolProvider", true},
            {"documentFormattingProvider", true},
            {"codeActionProvider", true}}},
          {"serverInfo", {{"name", "sinkc lsp"}}}};
}

const Document* Server::document(const json& params) const {
  const std::string uri = string_field(field(params, "textDocument"), "uri");
  auto it = documents_.find(uri);
  if (it == documents_.end()) throw RpcError{kInvalidParams, uri + " is not open"};
  return &it->second;
}

void Server::open(const json& params, std::vector<std::string>& out) {
  const json& item = field(params, "textDocument");
  const std::string uri = string_field(item, "uri");
  const long version = field(item, "version").is_number() ? number_field(item, "version") : 0;
  Document doc{path_of_uri(uri), string_field(item, "text"), version};
  documents_[uri] = std::move(doc);
  out.push_back(publish_diagnostics(uri).dump(-1, ' ', false, json::error_handler_t::replace));
}

void Server::change(const json& params, std::vector<std::string>& out) {
  const std::string uri = string_field(field(params, "textDocument"), "uri");
  auto it = documents_.find(uri);
  if (it == documents_.end()) throw RpcError{kInvalidParams, uri + " is not open"};
  Document& doc = it->second;
  const json& changes = field(params, "contentChanges");
  if (!changes.is_array()) throw RpcError{kInvalidParams, "'contentChanges' must be an array"};
  for (const auto& c : changes) {
    const std::string text = string_field(c, "text");
    const json& r = field(c, "range");
    if (!r.is_object()) {
      doc.text = text;
      continue;
    }
    const json &start = field(r, "start"), &end = field(r, "end");
    size_t a = offset_of(doc.text, number_field(start, "line"), number_field(start, "character"), encoding_);
    size_t b = offset_of(doc.text, number_field(end, "line"), number_field(end, "character"), encoding_);
    if (b < a) std::swap(a, b);
    doc.text.replace(a, b - a, text);
  }
  if (field(field(params, "textDocument"), "version").is_number())
    doc.version = number_field(field(params, "textDocument"), "version");
  out.push_back(publish_diagnostics(uri).dump(-1, ' ', false, json::error_handler_t::replace));
}

std::unique_ptr<Compilation> Server::compile(const Document& doc) const {
  auto c = std::make_unique<Compilation>(options_);
  c->add_text(doc.path, doc.text);
  c->run();
  return c;
}

json Server::range(const std::string& text, size_t begin, size_t end) const {
  const Position a = position_of(text, begin, encoding_), b = position_of(text, std::max(begin, end), encoding_);
  return {{"start", {{"line", a.line}, {"character", a.character}}},
          {"end", {{"line", b.line}, {"character", b.character}}}};
}

json Server::location_of(const Compilation& c, const Span& span) const {
  const SourceFile& f = c.program().sources.file(span.file);
  const size_t begin = line_start(f.text, span.line) + static_cast<size_t>(std::max(0, span.col - 1));
  const size_t end = line_start(f.text, span.end_line) + static_cast<size_t>(std::max(0, span.end_col - 1));
  std::error_code ec;
  const fs::path absolute = fs::absolute(f.path, ec);
  const std::string path = ec ? f.path : absolute.lexically_normal().string();
  return {{"uri", uri_of_path(path)}, {"range", range(f.text, begin, end)}};
}

json Server::publish_diagnostics(const std::string& uri) {
  const Document& doc = documents_.at(uri);
  auto c = compile(doc);
  const Program& program = c->program();
  const int own = program.sources.find(doc.path);
  // An error in an imported file is shown on the import that brings it in.
  Span import_line;
  for (const auto& m : program.modules)
    if (m.file == own && !m.imports.empty()) import_line = m.imports.front().span;
  json list = json::array();
  for (const auto& d : c->diagnostics().all()) {
    Span at = d.span;
    std::string message = d.message;
    if (at.file != own) {
      if (at.file >= 0 && at.line > 0)
        message = fmt::format("in {}:{}:{}: {}", program.sources.file(at.file).path, at.line, at.col, message);
      at = import_line;
    }
    auto range_of = [&](const Span& span) {
      size_t begin = 0, end = 0;
      if (span.file == own && span.line > 0) {
        begin = line_start(doc.text, span.line) + static_cast<size_t>(std::max(0, span.col - 1));
        const int end_line = span.end_line > 0 ? span.end_line : span.line;
        end = line_start(doc.text, end_line) + static_cast<size_t>(std::max(0, span.end_col - 1));
        begin = std::min(begin, doc.text.size()), end = std::min(std::max(end, begin), doc.text.size());
      }
      return range(doc.text, begin, end);
    };
    json item = {{"range", range_of(at)},
                 {"severity", d.severity == Severity::Error ? 1 : 2},
                 {"source", "sinkc"},
                 {"message", d.hint.empty() ? message : message + "\n" + d.hint}};
    // The checker's fix (the text under the range becomes this), which the client hands back with a code action
    // request: LSP keeps a diagnostic's data between the two.
    if (d.fix && d.fix->span.file == own)
      item["data"] = {{"fix", {{"range", range_of(d.fix->span)}, {"newText", d.fix->replacement}}}};
    list.push_back(std::move(item));
  }
  return {{"jsonrpc", "2.0"},
          {"method", "textDocument/publishDiagnostics"},
          {"params", {{"uri", uri}, {"version", doc.version}, {"diagnostics", list}}}};
}

json Server::symbols(const Document& doc) {
  auto c = compile(doc);
  const int own = c->program().sources.find(doc.path);
  json list = json::array();
  for (const auto& m : c->program().modules) {
    if (m.file != own) continue;
    for (const auto& x : m.experiments) {
      if (x.name.empty()) continue;
      const json where = location_of(*c, x.name_span)["range"];
      list.push_back({{"name", x.name},
                      {"detail", x.is_sweep       ? "sweep over " + x.base
                                 : x.base.empty() ? "experiment"
                                                  : "extends " + x.base},
                      {"kind", x.is_sweep ? 3 : 5},
                      {"range", where},
                      {"selectionRange", where}});
    }
  }
  return list;
}

json Server::formatting(const Document& doc) {
  std::string errors;
  auto formatted = format_spec(doc.path, doc.text, errors);
  if (!formatted || *formatted == doc.text) return json::array();
  return json::array({{{"range", range(doc.text, 0, doc.text.size())}, {"newText", *formatted}}});
}

// A quick fix for each diagnostic that carries the checker's fix (publish_diagnostics's data: the range and its new
// text): "unknown field 'model.dd'" over the text `dd` becomes `d`.
json Server::code_actions(const Document&, const json& params) {
  json actions = json::array();
  const json& diagnostics = field(field(params, "context"), "diagnostics");
  if (!diagnostics.is_array()) return actions;
  const std::string uri = string_field(field(params, "textDocument"), "uri");
  for (const auto& d : diagnostics) {
    const json& fix = field(field(d, "data"), "fix");
    const json &r = field(fix, "range"), &text = field(fix, "newText");
    if (!r.is_object() || !text.is_string() || text.get<std::string>().empty())
      continue;  // (no fix, or a client's own)
    const std::string replacement = text.get<std::string>();
    json edit = {{"range", r}, {"newText", replacement}};
    actions.push_back({{"title", fmt::format("Change to '{}'", replacement)},
                       {"kind", "quickfix"},
                       {"diagnostics", json::array({d})},
                       {"isPreferred", true},
                       {"edit", {{"changes", {{uri, json::array({edit})}}}}}});
  }
  return actions;
}

}  // namespace sink::lsp
