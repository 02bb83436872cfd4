// `sinkc lsp`: a language server for .sink files (LSP 3.17) over the front
// end. Diagnostics on open and change, hover (a field's type, default,
// range and description; an experiment's resolved values and plan hash),
// completion (fields in the block at the cursor, values after `=`,
// experiments after `extends`, import paths, score functions), go to
// definition (`extends`, imports), document symbols, formatting, and a quick
// fix for every diagnostic the checker gives a fix (a "did you mean").
//
// The server is a function from a message to the messages it sends back,
// so tests and the fuzz target drive it without pipes; sinkc's main loop
// does the reading and writing (lsp/protocol.h).
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/pipeline.h"
#include "lsp/protocol.h"

namespace sink::lsp {

struct Document {
  std::string path;
  std::string text;
  long version = 0;
};

class Server {
 public:
  explicit Server(Options options);

  // The messages to send for one received message body (responses, published diagnostics). Never throws.
  std::vector<std::string> handle(const std::string& body);
  bool exited() const { return exited_; }
  int exit_code() const { return shutdown_ ? 0 : 1; }

 private:
  using json = nlohmann::json;
  json dispatch(const std::string& method, const json& params, std::vector<std::string>& out);
  json initialize(const json& params);
  void open(const json& params, std::vector<std::string>& out);
  void change(const json& params, std::vector<std::string>& out);
  json publish_diagnostics(const std::string& uri);

  json hover(const Document& doc, size_t offset);
  json completion(const Document& doc, size_t offset);
  json definition(const Document& doc, size_t offset);
  json symbols(const Document& doc);
  json formatting(const Document& doc);
  json code_actions(const Document& doc, const json& params);

  // The document compiled as it is now, with the stdlib and its imports from disk.
  std::unique_ptr<Compilation> compile(const Document& doc) const;
  json range(const std::string& text, size_t begin, size_t end) const;
  json location_of(const Compilation& c, const Span& span) const;
  const Document* document(const json& params) const;

  Options options_;
  Encoding encoding_ = Encoding::Utf16;
  std::map<std::string, Document> documents_;  // by uri
  bool initialized_ = false, shutdown_ = false, exited_ = false;
};

}  // namespace sink::lsp
