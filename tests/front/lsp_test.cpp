// sinkc lsp: a scripted client. In process (the server is a function from a
// message to its replies) for every feature and for bad input, then once
// through the real binary over pipes with the protocol's framing.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "lsp/server.h"
#include "spec_helpers.h"
#include "tests/source_paths.h"

using json = nlohmann::json;
using sink::lsp::Server;

namespace {

const char* kUri = "file:///tmp/sinklab-lsp-test/spec.sink";

// Line 0: the import; 2: experiment a; 3: optim; 4: model block with a typo.
const std::string kSpec =
    "import \"stdlib/presets.sink\"\n"
    "\n"
    "experiment a extends micro {\n"
    "  optim.lr = 1e-3\n"
    "  model { dd = 32 }\n"
    "}\n";

// A field's default as stdlib/defaults.sink writes it, read from the file by hand: the line `name = value` inside
// the block `block { ... }`, comment dropped. The hover's own default comes through the compiler.
std::string default_in_stdlib(const std::string& block, const std::string& name) {
  std::ifstream in(sink::testing::source_dir() + "/stdlib/defaults.sink");
  std::string line;
  bool inside = false;
  const std::regex opens("^\\s*" + block + "\\s*\\{"), setting("^\\s*" + name + "\\s*=\\s*([^/]*?)\\s*(//.*)?$");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, opens)) inside = true;
    if (inside && line.find('}') != std::string::npos) inside = false;
    if (inside && std::regex_match(line, m, setting)) return m[1].str();
  }
  return "";
}

struct Client {
  Server server{sink::Options{}};
  std::vector<json> notifications;
  int next = 1;

  json send(const std::string& method, const json& params, bool request = true) {
    json m = {{"jsonrpc", "2.0"}, {"method", method}, {"params", params}};
    const int id = next++;
    if (request) m["id"] = id;
    json answer;
    for (const auto& reply : server.handle(m.dump())) {
      json r = json::parse(reply);
      if (r.contains("id") && r["id"] == id)
        answer = r;
      else
        notifications.push_back(r);
    }
    if (request) EXPECT_FALSE(answer.is_null()) << method << " got no answer";
    return answer;
  }
  json result(const std::string& method, const json& params) { return send(method, params)["result"]; }
  json at(int line, int character) {
    return {{"textDocument", {{"uri", kUri}}}, {"position", {{"line", line}, {"character", character}}}};
  }
  json last_diagnostics() {
    for (auto it = notifications.rbegin(); it != notifications.rend(); ++it)
      if ((*it)["method"] == "textDocument/publishDiagnostics") return (*it)["params"]["diagnostics"];
    return json();
  }
  void initialize() {
    json caps = result("initialize", {{"capabilities", json::object()}})["capabilities"];
    ASSERT_EQ(caps["positionEncoding"], "utf-16");
    send("initialized", json::object(), false);
  }
};

std::vector<std::string> labels(const json& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i["label"]);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

TEST(Lsp, DiagnosticsOnOpenAndOnEveryChange) {
  Client c;
  c.initialize();
  c.send("textDocument/didOpen",
         {{"textDocument", {{"uri", kUri}, {"languageId", "sink"}, {"version", 1}, {"text", kSpec}}}}, false);
  json d = c.last_diagnostics();
  ASSERT_EQ(d.size(), 1u) << d.dump(2);
  EXPECT_EQ(d[0]["severity"], 1);
  EXPECT_EQ(d[0]["range"]["start"]["line"], 4);
  EXPECT_EQ(d[0]["range"]["start"]["character"], 10);  // `dd`
  EXPECT_NE(d[0]["message"].get<std::string>().find("did you mean 'model.d'"), std::string::npos) << d[0]["message"];
  // The quick fix the hint offers: the written `dd` becomes `d` (its block is around it).
  json fixes =
      c.result("textDocument/codeAction",
               {{"textDocument", {{"uri", kUri}}}, {"range", d[0]["range"]}, {"context", {{"diagnostics", d}}}});
  ASSERT_EQ(fixes.size(), 1u) << fixes.dump(2);
  EXPECT_EQ(fixes[0]["kind"], "quickfix");
  const json& edit = fixes[0]["edit"]["changes"][kUri][0];
  EXPECT_EQ(edit["newText"], "d");
  EXPECT_EQ(edit["range"], d[0]["range"]);
  // A diagnostic over a call (`sigmod(qk)`): the fix replaces the name alone, not the whole range.
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 2}}},
          {"contentChanges", {{{"text", "experiment b extends tiny {\n  attention { score = sigmod(qk) }\n}\n"}}}}},
         false);
  json call = c.last_diagnostics();
  ASSERT_EQ(call.size(), 1u) << call.dump(2);
  fixes =
      c.result("textDocument/codeAction",
               {{"textDocument", {{"uri", kUri}}}, {"range", call[0]["range"]}, {"context", {{"diagnostics", call}}}});
  ASSERT_EQ(fixes.size(), 1u) << fixes.dump(2);
  const json& rename = fixes[0]["edit"]["changes"][kUri][0];
  EXPECT_EQ(rename["newText"], "sigmoid");
  EXPECT_EQ(rename["range"]["start"], call[0]["range"]["start"]);
  EXPECT_EQ(rename["range"]["end"]["character"], call[0]["range"]["start"]["character"].get<int>() + 6);  // `sigmod`
  // A client's diagnostic without the checker's data: no fix, and no error.
  json foreign = call;
  foreign[0].erase("data");
  EXPECT_TRUE(c.result("textDocument/codeAction", {{"textDocument", {{"uri", kUri}}},
                                                   {"range", call[0]["range"]},
                                                   {"context", {{"diagnostics", foreign}}}})
                  .empty());
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 3}}}, {"contentChanges", {{{"text", kSpec}}}}}, false);
  // An incremental edit: dd -> d.
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 4}}},
          {"contentChanges",
           {{{"range", {{"start", {{"line", 4}, {"character", 10}}}, {"end", {{"line", 4}, {"character", 12}}}}},
             {"text", "d"}}}}},
         false);
  EXPECT_TRUE(c.last_diagnostics().empty()) << c.last_diagnostics().dump(2);
  // A whole-text change with an error in an imported file's use: shown where it is.
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 5}}},
          {"contentChanges", {{{"text", "experiment b extends nope {}\n"}}}}},
         false);
  d = c.last_diagnostics();
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0]["range"]["start"]["line"], 0);
}

TEST(Lsp, HoverCompletionDefinitionSymbolsFormatting) {
  Client c;
  c.initialize();
  std::string fixed = kSpec;
  fixed.replace(fixed.find("dd"), 2, "d");
  c.send("textDocument/didOpen", {{"textDocument", {{"uri", kUri}, {"version", 1}, {"text", fixed}}}}, false);

  // Hover: a field's type, range, description and value here; an experiment's plan hash.
  const std::string field = c.result("textDocument/hover", c.at(3, 4))["contents"]["value"];
  EXPECT_NE(field.find("**optim.lr**"), std::string::npos) << field;
  EXPECT_NE(field.find("here: `0.001`"), std::string::npos) << field;
  // Beside it, the default the line overrides.
  const std::string lr_default = default_in_stdlib("optim", "lr");
  ASSERT_FALSE(lr_default.empty());
  const size_t shown = field.find(", default: `");
  ASSERT_NE(shown, std::string::npos) << field;
  EXPECT_DOUBLE_EQ(std::stod(field.substr(shown + 12)), std::stod(lr_default)) << field;
  const std::string d = c.result("textDocument/hover", c.at(4, 10))["contents"]["value"];
  EXPECT_NE(d.find("here: `32`, default: `" + default_in_stdlib("model", "d") + "`"), std::string::npos) << d;
  const std::string experiment = c.result("textDocument/hover", c.at(2, 11))["contents"]["value"];
  auto plans = spectest::compile_text(fixed, {}, sink::lsp::path_of_uri(kUri))->plans();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_NE(experiment.find(plans[0].hash()), std::string::npos) << experiment;
  EXPECT_NE(experiment.find("`optim.lr = 0.001`"), std::string::npos) << experiment;
  EXPECT_TRUE(c.result("textDocument/hover", c.at(1, 0)).is_null());

  // Completion: fields of the block at the cursor, values after `=`, experiments after `extends`.
  auto in_model = labels(c.result("textDocument/completion", c.at(4, 10)));
  EXPECT_TRUE(has(in_model, "heads"));
  EXPECT_FALSE(has(in_model, "lr"));
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 2}}},
          {"contentChanges",
           {{{"text",
              "experiment a extends \n"
              "experiment b extends micro {\n  model.ffn = \n  attention.score = \n  optim {  }\n}\n"}}}}},
         false);
  EXPECT_TRUE(has(labels(c.result("textDocument/completion", c.at(0, 21))), "micro"));
  EXPECT_TRUE(has(labels(c.result("textDocument/completion", c.at(2, 14))), "swiglu"));
  auto score = labels(c.result("textDocument/completion", c.at(3, 20)));
  EXPECT_TRUE(has(score, "sigmoid") && has(score, "qk")) << json(score).dump();
  auto in_optim = labels(c.result("textDocument/completion", c.at(4, 10)));
  EXPECT_TRUE(has(in_optim, "lr") && has(in_optim, "weight_decay"));
  EXPECT_FALSE(has(in_optim, "heads"));
  EXPECT_TRUE(has(labels(c.result("textDocument/completion", c.at(6, 0))), "experiment"));

  // Hover in a document that does not compile: the field from the text, with its default.
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 3}}},
          {"contentChanges", {{{"text", "experiment b extends micro {\n  model.ffn = \n}\n"}}}}},
         false);
  const json ffn = c.result("textDocument/hover", c.at(1, 4));
  ASSERT_TRUE(ffn.is_object()) << ffn;
  const std::string ffn_text = ffn["contents"]["value"];
  EXPECT_NE(ffn_text.find("**model.ffn**"), std::string::npos) << ffn_text;
  EXPECT_NE(ffn_text.find("\n\ndefault: `" + default_in_stdlib("model", "ffn") + "`"), std::string::npos) << ffn_text;

  // Definition: `extends micro` goes to the preset in the stdlib.
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 3}}}, {"contentChanges", {{{"text", fixed}}}}}, false);
  json where = c.result("textDocument/definition", c.at(2, 23));
  ASSERT_TRUE(where.is_object()) << where;
  EXPECT_NE(where["uri"].get<std::string>().find("stdlib/presets.sink"), std::string::npos) << where;
  json to_import = c.result("textDocument/definition", c.at(0, 10));
  ASSERT_TRUE(to_import.is_object());
  EXPECT_NE(to_import["uri"].get<std::string>().find("presets.sink"), std::string::npos);

  // Symbols and formatting.
  json symbols = c.result("textDocument/documentSymbol", {{"textDocument", {{"uri", kUri}}}});
  ASSERT_EQ(symbols.size(), 1u);
  EXPECT_EQ(symbols[0]["name"], "a");
  EXPECT_EQ(symbols[0]["detail"], "extends micro");
  const json format = {{"textDocument", {{"uri", kUri}}}, {"options", json::object()}};
  EXPECT_EQ(c.result("textDocument/formatting", format), json::array()) << "formatted already: no edit";
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}, {"version", 4}}},
          {"contentChanges", {{{"text", "experiment a extends micro {optim.lr=1e-3;model{d=32}}"}}}}},
         false);
  json edits = c.result("textDocument/formatting", format);
  ASSERT_EQ(edits.size(), 1u);
  EXPECT_EQ(edits[0]["newText"], "experiment a extends micro { optim.lr = 1e-3  model { d = 32 } }\n");
  EXPECT_EQ(edits[0]["range"]["end"]["character"], 54);

  EXPECT_TRUE(c.send("shutdown", nullptr)["result"].is_null());
  c.send("exit", nullptr, false);
  EXPECT_TRUE(c.server.exited());
  EXPECT_EQ(c.server.exit_code(), 0);
}

TEST(Lsp, BadInputIsAnsweredNeverCrashes) {
  Client c;
  // Before initialize: every request is refused, with the protocol's code.
  EXPECT_EQ(c.send("textDocument/hover", c.at(0, 0))["error"]["code"], -32002);
  c.initialize();
  for (const std::string garbage : {"", "{", "[]", "42", "{\"id\": 1}", "{\"method\": 7, \"id\": 2}", "\xff\xfe"}) {
    auto replies = c.server.handle(garbage);
    ASSERT_LE(replies.size(), 1u) << garbage;
    for (const auto& r : replies) EXPECT_TRUE(json::parse(r).contains("error")) << r;
  }
  EXPECT_EQ(c.send("no/such/method", json::object())["error"]["code"], -32601);
  EXPECT_EQ(c.send("textDocument/hover", {{"textDocument", {{"uri", "file:///not/open.sink"}}}})["error"]["code"],
            -32602);
  EXPECT_EQ(c.send("textDocument/didOpen", {{"textDocument", {{"uri", 5}}}})["error"]["code"], -32602);
  // Any text, any position.
  // Invalid UTF-8 inside a message is a parse error; a document with any valid text is fine.
  auto raw =
      c.server.handle("{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": \"textDocument/hover\", \"text\": \"\xff\"}");
  ASSERT_EQ(raw.size(), 1u);
  EXPECT_EQ(json::parse(raw[0])["error"]["code"], -32700);
  c.send("textDocument/didOpen",
         {{"textDocument", {{"uri", kUri}, {"version", 1}, {"text", "experiment \u00ff { x = \"open"}}}}, false);
  for (auto [line, character] :
       std::vector<std::pair<double, double>>{{0, 0}, {0, 1e12}, {1e12, 0}, {-5, -5}, {0, 3}}) {
    json at = {{"textDocument", {{"uri", kUri}}}, {"position", {{"line", line}, {"character", character}}}};
    for (const char* m : {"textDocument/hover", "textDocument/completion", "textDocument/definition"})
      EXPECT_FALSE(c.send(m, at).contains("error")) << m << " at " << line << ", " << character;
  }
  c.send("textDocument/didChange",
         {{"textDocument", {{"uri", kUri}}},
          {"contentChanges",
           {{{"range", {{"start", {{"line", 9}, {"character", 9}}}, {"end", {{"line", 0}, {"character", 0}}}}},
             {"text", "}}}}"}}}}},
         false);
  EXPECT_TRUE(c.send("textDocument/formatting", {{"textDocument", {{"uri", kUri}}}})["result"].is_array());
}

TEST(Lsp, TheBinarySpeaksTheProtocolOverPipes) {
  int to_server[2], from_server[2];
  ASSERT_EQ(pipe(to_server), 0);
  ASSERT_EQ(pipe(from_server), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(to_server[0], 0);
    dup2(from_server[1], 1);
    close(to_server[1]);
    close(from_server[0]);
    execl(sinktest::sinkc_binary(), sinktest::sinkc_binary(), "lsp", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_server[0]);
  close(from_server[1]);
  std::string input;
  auto frame = [&](const json& m) {
    const std::string body = m.dump();
    input += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  frame({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", {{"capabilities", json::object()}}}});
  frame({{"jsonrpc", "2.0"}, {"method", "initialized"}, {"params", json::object()}});
  frame({{"jsonrpc", "2.0"},
         {"method", "textDocument/didOpen"},
         {"params", {{"textDocument", {{"uri", kUri}, {"version", 1}, {"text", kSpec}}}}}});
  frame({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "shutdown"}});
  frame({{"jsonrpc", "2.0"}, {"method", "exit"}});
  ASSERT_EQ(write(to_server[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  close(to_server[1]);
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(from_server[0], buf, sizeof buf)) > 0;) output.append(buf, static_cast<size_t>(n));
  close(from_server[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::istringstream in(output);
  std::vector<json> messages;
  while (auto body = sink::lsp::read_message(in)) messages.push_back(json::parse(*body));
  ASSERT_EQ(messages.size(), 3u) << output;
  EXPECT_TRUE(messages[0]["result"]["capabilities"]["hoverProvider"]);
  EXPECT_EQ(messages[1]["method"], "textDocument/publishDiagnostics");
  EXPECT_EQ(messages[1]["params"]["diagnostics"].size(), 1u);
  EXPECT_EQ(messages[2]["id"], 2);
}
