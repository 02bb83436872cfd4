// Hover, completion and go to definition: what the server knows of a
// position, from the document's compilation (its AST and plans) and, for a
// document being typed, from the text before the cursor.
#include <filesystem>
#include <fmt/format.h>
#include <regex>
#include <set>

#include "lsp/server.h"
#include "plan/schema.h"
#include "plan/score_functions.h"

namespace sink::lsp {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// Where the cursor is in a file being typed: the blocks open around it (inside an experiment or sweep), found by
// the braces before it, outside strings and comments.
struct Context {
  bool in_experiment = false;
  std::vector<std::string> blocks;
  std::string line;  // the line up to the cursor
};

Context context_at(const std::string& text, size_t offset) {
  Context c;
  std::vector<std::string> stack;  // "" for an experiment's or sweep's own braces
  std::string last_word;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '"') {
      while (++i < offset && text[i] != '"' && text[i] != '\n')
        if (text[i] == '\\') ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      while (i < offset && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? offset : end + 1;
    } else if (ch == '{') {
      stack.push_back(stack.empty() ? "" : last_word);
    } else if (ch == '}') {
      if (!stack.empty()) stack.pop_back();
    } else if (word_char(ch)) {
      if (i == 0 || !word_char(text[i - 1])) last_word.clear();
      last_word += ch;
    }
  }
  c.in_experiment = !stack.empty();
  for (size_t k = 1; k < stack.size(); ++k) c.blocks.push_back(stack[k]);
  const size_t start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
  c.line = text.substr(start == std::string::npos || offset == 0 ? 0 : start + 1,
                       offset - (start == std::string::npos || offset == 0 ? 0 : start + 1));
  return c;
}

std::string joined(const std::vector<std::string>& blocks, const std::string& rest = "") {
  std::string out;
  for (const auto& b : blocks) out += (out.empty() ? "" : ".") + b;
  if (!rest.empty()) out += (out.empty() ? "" : ".") + rest;
  return out;
}

json item(const std::string& label, int kind, const std::string& detail = "", const std::string& doc = "") {
  json i = {{"label", label}, {"kind", kind}};
  if (!detail.empty()) i["detail"] = detail;
  if (!doc.empty()) i["documentation"] = doc;
  return i;
}

// LSP CompletionItemKind.
constexpr int kFunction = 3, kField = 5, kVariable = 6, kClass = 7, kModule = 9, kValue = 12, kKeyword = 14, kFile = 17,
              kEnumMember = 20;

json values_of(const Field& f) {
  json out = json::array();
  const TypeSpec& t = f.spec;
  for (const auto& c : t.choices) out.push_back(item(c, kEnumMember, f.path));
  for (const auto& form : t.forms) out.push_back(item(form.name, kEnumMember, f.path, form.doc));
  if (t.type == Type::Bool) out.push_back(item("true", kValue)), out.push_back(item("false", kValue));
  if (t.type == Type::ScoreExpr) {
    for (const auto& fn : score_functions()) out.push_back(item(fn.name, kFunction, "score function"));
    for (const auto& v : score_rules().vars) out.push_back(item(v, kVariable, "score variable"));
  }
  return out;
}

bool contains(const Span& s, int file, const std::string& text, size_t offset) {
  if (s.file != file || s.line <= 0) return false;
  const size_t begin = line_start(text, s.line) + static_cast<size_t>(s.col - 1);
  const size_t end = line_start(text, s.end_line) + static_cast<size_t>(s.end_col - 1);
  return offset >= begin && offset <= end;
}

// The value set here beside the one the field would have without it, so that a reader sees what the line changes.
std::string field_markdown(const Field& f, const Value* value, const Value* default_value) {
  std::string out = fmt::format("**{}**: {}\n\n{}", f.path, f.spec.describe(), f.doc);
  if (value) out += fmt::format("\n\nhere: `{}`", value->str());
  if (default_value) out += fmt::format("{}default: `{}`", value ? ", " : "\n\n", default_value->str());
  return out;
}

}  // namespace

json Server::hover(const Document& doc, size_t offset) {
  auto c = compile(doc);
  const Program& p = c->program();
  const int own = p.sources.find(doc.path);
  auto markdown = [](const std::string& text) { return json{{"contents", {{"kind", "markdown"}, {"value", text}}}}; };
  for (const auto& m : p.modules) {
    if (m.file != own) continue;
    for (const auto& x : m.experiments) {
      if (contains(x.name_span, own, doc.text, offset) || contains(x.base_span, own, doc.text, offset)) {
        const std::string name = contains(x.name_span, own, doc.text, offset) ? x.name : x.base;
        std::string text = fmt::format("**{}** {}", name, x.is_sweep && name == x.name ? "(sweep)" : "");
        size_t runs = 0;
        const Plan* first = nullptr;
        for (const auto& plan : c->plans())
          if (plan.name == name || seed_base(plan.name) == name || plan.name.rfind(name + ".", 0) == 0) {
            if (!first) first = &plan;
            if (runs++ < 8) text += fmt::format("\n\n- run `{}`, plan hash `{}`", plan.name, plan.hash());
          }
        if (runs > 8) text += fmt::format("\n\n... {} runs in all", runs);
        if (first) {
          // What it resolves to, where that differs from the language's defaults.
          auto defaults = compile_defaults(options_);
          std::string differs;
          if (!defaults->plans().empty())
            for (const auto& [path, value] : first->fields) {
              const auto& default_fields = defaults->plans().front().fields;
              auto d = default_fields.find(path);
              if (path != "train.seed" && (d == default_fields.end() || !(d->second == value)))
                differs += fmt::format("\n- `{} = {}`", path, value.str());
            }
          if (!differs.empty()) text += "\n\nresolves to, beside the defaults:" + differs;
        } else if (auto ref = p.experiments.find(name); ref != p.experiments.end()) {
          const auto& def = p.experiment(ref->second);
          if (!def.base.empty()) text += fmt::format("\n\nextends `{}`", def.base);
          for (const auto& s : def.statements) {
            auto typed = p.typed_statements.find(&s);
            text += fmt::format("\n- `{} = {}`", s.path, typed != p.typed_statements.end() ? typed->second.str() : "?");
          }
        }
        return markdown(text);
      }
      for (const auto& s : x.statements)
        if (contains(s.span, own, doc.text, offset)) {
          const Field* f = find_field(s.path);
          if (!f) return nullptr;
          const Value* value = nullptr;
          auto typed = p.typed_statements.find(&s);
          if (typed != p.typed_statements.end()) value = &typed->second;
          auto defaults = compile_defaults(options_);
          return markdown(field_markdown(*f, value, default_of(*defaults, f->path)));
        }
      for (const auto& [path, span] : x.blocks)
        if (contains(span, own, doc.text, offset)) {
          std::string text = fmt::format("**{}** block:\n", path);
          for (const auto& f : schema())
            if (f.path.rfind(path + ".", 0) == 0)
              text += fmt::format("\n- `{}`: {}", f.path.substr(path.size() + 1), f.spec.describe());
          return markdown(text);
        }
    }
  }
  // A document that does not compile yet: the field named at the cursor, from the text.
  const Context ctx = context_at(doc.text, offset);
  size_t end = offset;
  while (end < doc.text.size() && word_char(doc.text[end])) ++end;
  std::smatch m;
  const std::string line = ctx.line + doc.text.substr(offset, end - offset);
  if (ctx.in_experiment && std::regex_search(line, m, std::regex(R"(([A-Za-z_][\w.]*)\s*(=.*)?$)")))
    if (const Field* f = find_field(joined(ctx.blocks, m[1].str()))) {
      auto defaults = compile_defaults(options_);
      return markdown(field_markdown(*f, nullptr, default_of(*defaults, f->path)));
    }
  return nullptr;
}

json Server::completion(const Document& doc, size_t offset) {
  const Context ctx = context_at(doc.text, offset);
  std::smatch m;
  json items = json::array();
  if (std::regex_search(ctx.line, m, std::regex(R"(import\s+"([^"]*)$)"))) {
    std::set<std::string> seen;
    std::vector<fs::path> folders = {fs::path(doc.path).parent_path()};
    if (!options_.stdlib_dir.empty()) folders.push_back(options_.stdlib_dir);
    for (size_t k = 0; k < folders.size(); ++k) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(folders[k], ec)) {
        if (e.path().extension() != ".sink") continue;
        std::string label = (k == 0 ? "" : "stdlib/") + e.path().filename().string();
        if (seen.insert(label).second) items.push_back(item(label, kFile));
      }
    }
    return items;
  }
  if (std::regex_search(ctx.line, m, std::regex(R"(\b(extends|over)\s+[\w]*$)"))) {
    auto c = compile(doc);
    for (const auto& [name, ref] : c->program().experiments)
      items.push_back(item(name, kClass, c->program().preset_names.count(name) ? "preset" : "experiment"));
    return items;
  }
  if (!ctx.in_experiment) {
    for (const char* k : {"experiment", "sweep", "import"}) items.push_back(item(k, kKeyword));
    return items;
  }
  if (std::regex_search(ctx.line, m, std::regex(R"(([A-Za-z_][\w.]*)\s*(=|\bin\b)[^=]*$)"))) {
    if (const Field* f = find_field(joined(ctx.blocks, m[1].str()))) return values_of(*f);
    return items;
  }
  // A statement's start: the fields and blocks under the blocks open here.
  const std::string prefix = joined(ctx.blocks);
  std::set<std::string> blocks;
  for (const auto& f : schema()) {
    if (!prefix.empty() && f.path.rfind(prefix + ".", 0) != 0) continue;
    const std::string rest = prefix.empty() ? f.path : f.path.substr(prefix.size() + 1);
    items.push_back(item(rest, kField, f.spec.describe(), f.doc));
    const size_t dot = rest.find('.');
    if (dot != std::string::npos && blocks.insert(rest.substr(0, dot)).second)
      items.push_back(item(rest.substr(0, dot), kModule, "block"));
  }
  if (prefix == "data" || prefix.empty()) {
    items.push_back(item(prefix.empty() ? "data.fix" : "fix", kKeyword, "fix token T at [positions]"));
    items.push_back(item(prefix.empty() ? "data.random" : "random", kKeyword, "random at [positions]"));
  }
  return items;
}

json Server::definition(const Document& doc, size_t offset) {
  auto c = compile(doc);
  const Program& p = c->program();
  const int own = p.sources.find(doc.path);
  for (const auto& m : p.modules) {
    if (m.file != own) continue;
    for (const auto& x : m.experiments)
      if (!x.base.empty() && contains(x.base_span, own, doc.text, offset)) {
        auto ref = p.experiments.find(x.base);
        if (ref == p.experiments.end()) return nullptr;
        return location_of(*c, p.experiment(ref->second).name_span);
      }
    for (const auto& imp : m.imports)
      if (contains(imp.span, own, doc.text, offset)) {
        std::vector<fs::path> candidates = {fs::path(doc.path).parent_path() / imp.path};
        if (!options_.stdlib_dir.empty()) {
          candidates.push_back(fs::path(options_.stdlib_dir) / imp.path);
          candidates.push_back(fs::path(options_.stdlib_dir).parent_path() / imp.path);
        }
        for (const auto& file : candidates) {
          std::error_code ec;
          if (!fs::is_regular_file(file, ec)) continue;
          const fs::path absolute = fs::absolute(file, ec).lexically_normal();
          const json start = {{"line", 0}, {"character", 0}};
          return {{"uri", uri_of_path(absolute.string())}, {"range", {{"start", start}, {"end", start}}}};
        }
        return nullptr;
      }
  }
  return nullptr;
}

}  // namespace sink::lsp
