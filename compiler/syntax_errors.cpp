#include "compiler/syntax_errors.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "plan/schema.h"

namespace sink {

void ErrorCollector::syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line, size_t col,
                                 const std::string& msg, std::exception_ptr) {
  Span s{file_, static_cast<int>(line), static_cast<int>(col) + 1, static_cast<int>(line), static_cast<int>(col) + 2};
  auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
  // One syntax error per top-level declaration: ANTLR's recovery inside a
  // broken declaration mostly finds echoes of the first error.
  if (parser && offending) {
    size_t index = offending->getTokenIndex();
    long decl = std::upper_bound(decl_starts.begin(), decl_starts.end(), index) - decl_starts.begin();
    if (decl == last_decl_) {
      if (++suppressed_ > 100000) throw TooManyErrors{};
      return;
    }
    last_decl_ = decl;
  }
  const bool at_eof = offending && offending->getType() == antlr4::Token::EOF;
  if (offending && !at_eof) {
    s = columns_.token(offending);
    if (s.end_line != s.line || s.end_col > s.col + 80) s.end_line = s.line, s.end_col = s.col + 80;
  }
  std::string hint;
  if (at_eof && parser) {
    // Point just past the last token (where the missing text goes), not at
    // the blank line after it.
    size_t index = offending->getTokenIndex();
    if (index > 0 && index != INVALID_INDEX) {
      antlr4::Token* last = parser->getTokenStream()->get(index - 1);
      s.line = static_cast<int>(last->getLine());
      s.col = columns_.at(s.line, last->getStopIndex() + 1);
      s.end_line = s.line;
      s.end_col = s.col + 1;
    }
    hint = eof_hint;
  }
  if (parser && offending && !at_eof && offending->getText() == ":" && offending->getTokenIndex() > 0 &&
      parser->getTokenStream()->get(offending->getTokenIndex() - 1)->getText() == "cuda")
    hint = find_field("train.device")->wrong_value_hint;  // `device = cuda:1`, as PyTorch writes a device
  diags_.error(s, "syntax error: " + rephrase(parser, offending, msg), hint);
  if (++count_ >= 50) throw TooManyErrors{};
}

std::string ErrorCollector::rephrase(antlr4::Parser* parser, antlr4::Token* offending, const std::string& msg) {
  if (!parser || !offending) return tidy(msg);
  std::string what =
      offending->getType() == antlr4::Token::EOF ? "end of file" : fmt::format("'{}'", tidy(offending->getText()));
  auto starts = [&](const char* prefix) { return msg.rfind(prefix, 0) == 0; };
  std::string expected;
  if (starts("missing ") || starts("mismatched input ") || starts("extraneous input ")) {
    try {
      expected = expected_text(parser->getExpectedTokens().toList(), parser->getVocabulary());
    } catch (...) {
    }
  }
  if (starts("missing ") && !expected.empty()) return fmt::format("missing {} before {}", expected, what);
  if (expected.empty()) return "unexpected " + what;
  return fmt::format("unexpected {}, expected {}", what, expected);
}

std::string ErrorCollector::expected_text(const std::vector<ssize_t>& types,
                                          const antlr4::dfa::Vocabulary& vocabulary) {
  std::set<std::string> names;
  std::vector<std::string> ordered;
  for (ssize_t t : types) {
    std::string n = t < 0 ? "<EOF>" : vocabulary.getDisplayName(static_cast<size_t>(t));
    names.insert(n);
    ordered.push_back(n);
  }
  // Keywords that are also names (see `ident` in the grammar) hide behind "a name".
  static const std::set<std::string> keyword_names = {"'random'",     "'fix'",   "'token'",  "'at'",
                                                      "'in'",         "'over'",  "'tokens'", "'import'",
                                                      "'experiment'", "'sweep'", "'extends'"};
  static const std::set<std::string> value_starts = {"'('", "'['", "'-'", "NUMBER", "STRING", "IDENT"};
  const bool name = names.count("IDENT") > 0;
  bool value = true;
  for (const auto& v : value_starts) value = value && names.count(v) > 0;
  std::vector<std::string> out;
  if (value) out.push_back("a value");
  for (const auto& n : ordered) {
    if (name && keyword_names.count(n)) continue;
    if (value && value_starts.count(n)) continue;
    if (n == "<EOF>" && ordered.size() > 1) continue;
    out.push_back(n == "IDENT"    ? "a name"
                  : n == "NUMBER" ? "a number"
                  : n == "STRING" ? "a string"
                  : n == "<EOF>"  ? "end of file"
                                  : n);
  }
  if (out.empty()) return "";
  std::string text = out[0];
  for (size_t k = 1; k < out.size(); ++k) text += (k + 1 == out.size() ? " or " : ", ") + out[k];
  return text;
}

std::string ErrorCollector::tidy(const std::string& msg) {
  std::string out;
  for (unsigned char c : msg) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out;
}

}  // namespace sink
