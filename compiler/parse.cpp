#include "compiler/parse.h"

#include <antlr4-runtime.h>
#include <cmath>
#include <fmt/format.h>

#include "SinkLexer.h"
#include "SinkParser.h"

namespace sink {
namespace {

constexpr int kMaxNesting = 64;          // brackets and blocks
constexpr int kMaxOperatorsPerValue = 500;  // keeps recursion (ANTLR's and ours) shallow

struct TooManyErrors {};

// ANTLR reports columns in code points; our carets count bytes.
int byte_column(const SourceFile& f, int line, int codepoint_col0) {
  std::string text = f.line(line);
  size_t i = 0;
  for (int cp = 0; cp < codepoint_col0 && i < text.size(); ++cp) {
    unsigned char c = text[i];
    i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  }
  return static_cast<int>(std::min(i, text.size())) + 1;
}

class ErrorCollector : public antlr4::BaseErrorListener {
 public:
  ErrorCollector(int file, const SourceManager& sources, Diagnostics& diags)
      : file_(file), sources_(sources), diags_(diags) {}
  void syntaxError(antlr4::Recognizer*, antlr4::Token* offending, size_t line, size_t col,
                   const std::string& msg, std::exception_ptr) override {
    Span s;
    s.file = file_;
    s.line = static_cast<int>(line);
    s.col = byte_column(sources_.file(file_), s.line, static_cast<int>(col));
    s.end_line = s.line;
    s.end_col = s.col + 1;
    if (offending && offending->getType() != antlr4::Token::EOF) {
      s.end_col = s.col + static_cast<int>(std::min<size_t>(offending->getText().size(), 80));
    }
    diags_.error(s, "syntax error: " + tidy(msg));
    if (++count_ >= 50) throw TooManyErrors{};
  }
  int count() const { return count_; }

 private:
  // ANTLR's messages list token names like '<EOF>' and IDENT; keep them, but
  // make the unprintable readable.
  static std::string tidy(const std::string& msg) {
    std::string out;
    for (unsigned char c : msg) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
      else out += static_cast<char>(c);
    }
    if (out.size() > 200) out = out.substr(0, 200) + "...";
    return out;
  }
  int file_;
  const SourceManager& sources_;
  Diagnostics& diags_;
  int count_ = 0;
};

// Replaces bytes that are not valid UTF-8 (ANTLR's decoder throws on them)
// and reports the first one.
std::string sanitized_utf8(int file, const SourceManager& sources, Diagnostics& diags) {
  const std::string& in = sources.file(file).text;
  std::string out;
  out.reserve(in.size());
  bool reported = false;
  int line = 1, col = 1;
  for (size_t i = 0; i < in.size();) {
    unsigned char c = in[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(in[i + k]) >> 6) == 0x2;
    if (ok && c == 0) ok = false;
    if (!ok) {
      if (!reported) {
        diags.error({file, line, col, line, col + 1}, "invalid byte in source (not UTF-8 text)");
        reported = true;
      }
      out += '?';
      ++i, ++col;
      continue;
    }
    out.append(in, i, len);
    if (c == '\n') ++line, col = 1;
    else col += static_cast<int>(len);
    i += len;
  }
  return out;
}

// Guards the recursive parts (ANTLR's recursive descent and our tree walk)
// against pathological nesting before the parser sees the tokens.
bool nesting_ok(int file, antlr4::CommonTokenStream& tokens, Diagnostics& diags) {
  int depth = 0, operators = 0;
  for (antlr4::Token* t : tokens.getTokens()) {
    std::string text = t->getText();
    auto here = [&] {
      int line = static_cast<int>(t->getLine());
      int col = static_cast<int>(t->getCharPositionInLine()) + 1;
      return Span{file, line, col, line, col + 1};
    };
    if (text == "(" || text == "[" || text == "{") {
      if (++depth > kMaxNesting) {
        diags.error(here(), fmt::format("nesting deeper than {} levels", kMaxNesting));
        return false;
      }
    } else if (text == ")" || text == "]" || text == "}") {
      depth = std::max(0, depth - 1);
    }
    if (text == "=" || text == "{" || text == "}" || text == ";") operators = 0;
    if (text == "+" || text == "-" || text == "*" || text == "/" || text == "^" || text == ",") {
      if (++operators > kMaxOperatorsPerValue) {
        diags.error(here(), fmt::format("value longer than {} operators", kMaxOperatorsPerValue));
        return false;
      }
    }
  }
  return true;
}

class Builder {
 public:
  Builder(int file, const SourceManager& sources, Diagnostics& diags) : file_(file), sources_(sources), diags_(diags) {}

  Span span(antlr4::ParserRuleContext* ctx) const {
    Span s;
    s.file = file_;
    antlr4::Token* a = ctx->getStart();
    antlr4::Token* b = ctx->getStop();
    if (!a) return s;
    s.line = static_cast<int>(a->getLine());
    s.col = byte_column(sources_.file(file_), s.line, static_cast<int>(a->getCharPositionInLine()));
    if (!b || b->getType() == antlr4::Token::EOF) b = a;
    s.end_line = static_cast<int>(b->getLine());
    s.end_col = byte_column(sources_.file(file_), s.end_line,
                            static_cast<int>(b->getCharPositionInLine() + b->getText().size()));
    return s;
  }

  Span span(antlr4::tree::TerminalNode* node) const {
    antlr4::Token* t = node->getSymbol();
    Span s;
    s.file = file_;
    s.line = static_cast<int>(t->getLine());
    s.col = byte_column(sources_.file(file_), s.line, static_cast<int>(t->getCharPositionInLine()));
    s.end_line = s.line;
    s.end_col = byte_column(sources_.file(file_), s.line,
                            static_cast<int>(t->getCharPositionInLine() + t->getText().size()));
    return s;
  }

  static std::string text(SinkParser::IdentContext* ctx) { return ctx ? ctx->getStart()->getText() : ""; }

  std::string path(SinkParser::PathContext* ctx) const {
    std::string out;
    for (auto* id : ctx->ident()) out += (out.empty() ? "" : ".") + text(id);
    return out;
  }

  ast::Expr expr(SinkParser::ExprContext* ctx) {
    ast::Expr e;
    if (!ctx) return e;
    e.span = span(ctx);
    if (auto* p = dynamic_cast<SinkParser::ParenExprContext*>(ctx)) {
      ast::Expr inner = expr(p->expr());
      inner.span = e.span;
      return inner;
    }
    if (auto* c = dynamic_cast<SinkParser::CallExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::Call;
      e.text = text(c->ident());
      for (auto* a : c->arg()) {
        e.arg_names.push_back(a->ident() ? text(a->ident()) : "");
        e.children.push_back(expr(a->expr()));
      }
      return e;
    }
    if (auto* l = dynamic_cast<SinkParser::ListExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::List;
      for (auto* item : l->expr()) e.children.push_back(expr(item));
      return e;
    }
    if (auto* n = dynamic_cast<SinkParser::NumberExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::Number;
      e.text = n->NUMBER()->getText();
      e.tokens_unit = n->unit != nullptr;
      number(e);
      return e;
    }
    if (auto* s = dynamic_cast<SinkParser::StringExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::String;
      e.text = unquote(s->STRING()->getText());
      return e;
    }
    if (auto* n = dynamic_cast<SinkParser::NameExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::Name;
      e.text = text(n->ident());
      return e;
    }
    if (auto* n = dynamic_cast<SinkParser::NegExprContext*>(ctx)) {
      e.kind = ast::Expr::Kind::Neg;
      e.children.push_back(expr(n->expr()));
      return e;
    }
    e.kind = ast::Expr::Kind::Binary;
    std::vector<SinkParser::ExprContext*> operands;
    if (auto* b = dynamic_cast<SinkParser::PowExprContext*>(ctx)) e.text = "^", operands = b->expr();
    else if (auto* b = dynamic_cast<SinkParser::MulExprContext*>(ctx)) e.text = b->op->getText(), operands = b->expr();
    else if (auto* b = dynamic_cast<SinkParser::AddExprContext*>(ctx)) e.text = b->op->getText(), operands = b->expr();
    for (auto* o : operands) e.children.push_back(expr(o));
    if (e.children.size() != 2) e.kind = ast::Expr::Kind::Name, e.text = "<error>";
    return e;
  }

  void statements(const std::vector<SinkParser::StatementContext*>& list, const std::string& prefix,
                  std::vector<ast::Statement>& out) {
    for (auto* st : list) statement(st, prefix, out);
  }

  void statement(SinkParser::StatementContext* ctx, const std::string& prefix, std::vector<ast::Statement>& out) {
    auto join = [&](const std::string& p) { return prefix.empty() ? p : prefix + "." + p; };
    if (auto* b = dynamic_cast<SinkParser::BlockStatementContext*>(ctx)) {
      statements(b->statement(), join(text(b->ident())), out);
      return;
    }
    ast::Statement s;
    s.span = span(ctx);
    if (auto* a = dynamic_cast<SinkParser::AssignStatementContext*>(ctx)) {
      s.kind = ast::Statement::Kind::Assign;
      s.path = join(path(a->path()));
      s.path_span = span(a->path());
      s.value = expr(a->expr());
    } else if (auto* f = dynamic_cast<SinkParser::FixStatementContext*>(ctx)) {
      s.kind = ast::Statement::Kind::Fix;
      s.path = join("fix");
      s.path_span = s.span;
      s.value = expr(f->expr(0));
      s.position = expr(f->expr(1));
    } else if (auto* r = dynamic_cast<SinkParser::RandomStatementContext*>(ctx)) {
      s.kind = ast::Statement::Kind::Random;
      s.path = join("random");
      s.path_span = s.span;
      s.value = expr(r->expr());
    } else {
      return;  // a syntax error already reported
    }
    out.push_back(std::move(s));
  }

  ast::Experiment experiment(SinkParser::ExperimentDeclContext* ctx) {
    ast::Experiment x;
    x.name = text(ctx->name);
    if (ctx->name) x.name_span = span(ctx->name);
    if (ctx->base) x.base = text(ctx->base), x.base_span = span(ctx->base);
    statements(ctx->statement(), "", x.statements);
    return x;
  }

  ast::Experiment sweep(SinkParser::SweepDeclContext* ctx) {
    ast::Experiment x;
    x.is_sweep = true;
    x.name = text(ctx->name);
    if (ctx->name) x.name_span = span(ctx->name);
    x.base = text(ctx->base);
    if (ctx->base) x.base_span = span(ctx->base);
    for (auto* item : ctx->sweepItem()) {
      if (auto* a = dynamic_cast<SinkParser::SweepAxisContext*>(item)) {
        x.axes.push_back({path(a->path()), span(a->path()), expr(a->expr())});
      } else if (auto* s = dynamic_cast<SinkParser::SweepStatementContext*>(item)) {
        statement(s->statement(), "", x.statements);
      }
    }
    return x;
  }

 private:
  static std::string unquote(const std::string& quoted) {
    std::string out;
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
      char c = quoted[i];
      if (c == '\\' && i + 2 < quoted.size()) {
        char n = quoted[++i];
        out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
      } else {
        out += c;
      }
    }
    return out;
  }

  void number(ast::Expr& e) {
    std::string digits;
    double scale = 1;
    for (char c : e.text) {
      if (c == '_') continue;
      if (c == 'K') scale = 1e3;
      else if (c == 'M') scale = 1e6;
      else if (c == 'B') scale = 1e9;
      else if (c == 'T') scale = 1e12;
      else digits += c;
    }
    try {
      e.number = std::stod(digits) * scale;
    } catch (...) {
      diags_.error(e.span, "number out of range: " + e.text);
      e.number = 0;
    }
    // `64.0` is a float; `2.5K` and `1e3` are whole counts.
    bool whole = std::isfinite(e.number) && e.number == std::floor(e.number) && std::fabs(e.number) < 9.0e15;
    e.integral = whole && (digits.find('.') == std::string::npos || scale > 1);
  }

  int file_;
  const SourceManager& sources_;
  Diagnostics& diags_;
};

// Runs `entry` over the file with error collection; nullptr if the input was
// refused before parsing.
template <typename Entry>
auto with_parser(int file, const SourceManager& sources, Diagnostics& diags, Entry entry) {
  const SourceFile& f = sources.file(file);
  if (f.text.size() > kMaxSpecBytes) {
    diags.error({file, 0, 0, 0, 0},
                fmt::format("file is {:.1f} MB; sinkc reads specs up to {} MB", f.text.size() / 1048576.0,
                            kMaxSpecBytes >> 20));
    return entry(nullptr, nullptr);
  }
  antlr4::ANTLRInputStream input(sanitized_utf8(file, sources, diags));
  SinkLexer lexer(&input);
  ErrorCollector errors(file, sources, diags);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&errors);
  antlr4::CommonTokenStream tokens(&lexer);
  try {
    tokens.fill();
  } catch (const TooManyErrors&) {
    return entry(nullptr, nullptr);
  }
  if (!nesting_ok(file, tokens, diags)) return entry(nullptr, nullptr);
  SinkParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&errors);
  parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(antlr4::atn::PredictionMode::SLL);
  try {
    return entry(&parser, &errors);
  } catch (const TooManyErrors&) {
    return entry(nullptr, nullptr);
  } catch (const std::exception& e) {
    diags.error({file, 0, 0, 0, 0}, std::string("parser failure: ") + e.what());
    return entry(nullptr, nullptr);
  }
}

}  // namespace

ast::Module parse_module(int file, const SourceManager& sources, Diagnostics& diags) {
  ast::Module m;
  m.file = file;
  with_parser(file, sources, diags, [&](SinkParser* parser, ErrorCollector*) -> int {
    if (!parser) return 0;
    SinkParser::FileContext* tree = parser->file();
    Builder b(file, sources, diags);
    for (auto* top : tree->topLevel()) {
      if (auto* imp = top->importDecl()) {
        std::string raw = imp->STRING() ? imp->STRING()->getText() : "\"\"";
        m.imports.push_back({raw.size() >= 2 ? raw.substr(1, raw.size() - 2) : raw, b.span(imp)});
      } else if (auto* x = top->experimentDecl()) {
        m.experiments.push_back(b.experiment(x));
      } else if (auto* s = top->sweepDecl()) {
        m.experiments.push_back(b.sweep(s));
      }
    }
    return 0;
  });
  return m;
}

std::optional<ast::Statement> parse_override(int file, const SourceManager& sources, Diagnostics& diags) {
  std::optional<ast::Statement> out;
  with_parser(file, sources, diags, [&](SinkParser* parser, ErrorCollector* errors) -> int {
    if (!parser) return 0;
    auto* tree = parser->overrideEntry();
    if (errors->count() > 0) return 0;
    Builder b(file, sources, diags);
    ast::Statement s;
    s.span = b.span(tree);
    s.path = b.path(tree->path());
    s.path_span = b.span(tree->path());
    s.value = b.expr(tree->expr());
    out = std::move(s);
    return 0;
  });
  return out;
}

std::optional<ast::Expr> parse_expression(int file, const SourceManager& sources, Diagnostics& diags) {
  std::optional<ast::Expr> out;
  with_parser(file, sources, diags, [&](SinkParser* parser, ErrorCollector* errors) -> int {
    if (!parser) return 0;
    auto* tree = parser->exprEntry();
    if (errors->count() > 0) return 0;
    out = Builder(file, sources, diags).expr(tree->expr());
    return 0;
  });
  return out;
}

}  // namespace sink
