#include "compiler/parse.h"

#include <antlr4-runtime.h>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "SinkLexer.h"
#include "SinkParser.h"
#include "compiler/source_text.h"
#include "compiler/syntax_errors.h"

namespace sink {
namespace {

constexpr int kMaxNesting = 64;             // brackets and blocks
constexpr int kMaxOperatorsPerValue = 500;  // keeps recursion (ANTLR's and ours) shallow

// ANTLR recovers from an unexpected token by deleting it when the token
// after it fits. For a closing bracket that is the wrong guess: `d = }`
// would delete the block's `}` and read the next line as d's value, and
// every block after it would be misread. Closing brackets are kept; the
// statement is abandoned instead and the bracket closes its block.
class KeepClosers : public antlr4::DefaultErrorStrategy {
 protected:
  antlr4::Token* singleTokenDeletion(antlr4::Parser* parser) override {
    std::string next = parser->getCurrentToken()->getText();
    if (next == "}" || next == ")" || next == "]") return nullptr;
    return antlr4::DefaultErrorStrategy::singleTokenDeletion(parser);
  }
};

// Guards the recursive parts (ANTLR's recursive descent and our tree walk)
// against pathological nesting before the parser sees the tokens.
bool nesting_ok(const Columns& columns, antlr4::CommonTokenStream& tokens, Diagnostics& diags) {
  int depth = 0, operators = 0;
  for (antlr4::Token* t : tokens.getTokens()) {
    std::string text = t->getText();
    auto here = [&] { return columns.token(t); };
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

// Errors the lexer cannot say well: an unclosed string or comment lexes as
// stray characters, and the parser would report those one by one. Returns
// false if the file should not be parsed. Also finds the innermost bracket
// left open at the end of the file, for the hint of an end-of-file error.
bool lexical_ok(const Columns& columns, antlr4::CommonTokenStream& tokens, Diagnostics& diags, std::string& eof_hint,
                std::vector<size_t>& decl_starts) {
  bool ok = true;
  std::vector<antlr4::Token*> open;
  const auto& all = tokens.getTokens();
  int string_line = 0;  // the rest of a line after an unterminated string is its text
  for (size_t k = 0; k < all.size(); ++k) {
    antlr4::Token* t = all[k];
    std::string text = t->getText();
    int line = static_cast<int>(t->getLine());
    if (line == string_line) continue;
    if (t->getType() == SinkLexer::ANY && text == "\"") {
      diags.error(columns.token(t), "unterminated string", "a string ends with \" on the same line");
      ok = false;
      string_line = line;
    } else if (text == "/" && k + 1 < all.size() && all[k + 1]->getText() == "*" &&
               all[k + 1]->getStartIndex() == t->getStopIndex() + 1) {
      diags.error(columns.tokens(t, all[k + 1]), "unterminated comment", "a comment started with /* ends with */");
      return false;  // the rest of the file is inside it
    }
    // A declaration starts outside brackets, or (when a bracket was left
    // open above) with its keyword first on a line.
    const bool first_on_line = k == 0 || all[k - 1]->getLine() != t->getLine();
    if ((open.empty() || first_on_line) && (text == "experiment" || text == "sweep" || text == "import"))
      decl_starts.push_back(k);
    if (text == "(" || text == "[" || text == "{")
      open.push_back(t);
    else if ((text == ")" || text == "]" || text == "}") && !open.empty())
      open.pop_back();
  }
  if (!open.empty()) {
    antlr4::Token* t = open.back();
    int line = static_cast<int>(t->getLine());
    eof_hint = fmt::format("the '{}' at line {}, column {} is never closed", t->getText(), line,
                           columns.at(line, t->getStartIndex()));
  }
  return ok;
}

// True if ANTLR recovered from a syntax error inside `tree`: what it built
// there is a guess, and checking it would only repeat the syntax error.
bool has_syntax_error(antlr4::tree::ParseTree* tree) {
  if (!tree) return false;
  if (dynamic_cast<antlr4::tree::ErrorNode*>(tree)) return true;
  if (auto* ctx = dynamic_cast<antlr4::ParserRuleContext*>(tree); ctx && ctx->exception) return true;
  for (auto* child : tree->children)
    if (has_syntax_error(child)) return true;
  return false;
}

class Builder {
 public:
  explicit Builder(const Columns& columns) : columns_(columns) {}

  Span span(antlr4::ParserRuleContext* ctx) const {
    antlr4::Token* a = ctx->getStart();
    antlr4::Token* b = ctx->getStop();
    if (!a) return Span{};
    if (!b || b->getType() == antlr4::Token::EOF || b->getTokenIndex() < a->getTokenIndex()) b = a;
    return columns_.tokens(a, b);
  }

  Span span(antlr4::tree::TerminalNode* node) const { return columns_.token(node->getSymbol()); }

  static std::string text(SinkParser::IdentContext* ctx) { return ctx ? ctx->getStart()->getText() : ""; }

  std::string path(SinkParser::PathContext* ctx) const {
    std::string out;
    for (auto* id : ctx->ident()) {
      if (!out.empty()) out += '.';
      out += text(id);
    }
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
    if (auto* b = dynamic_cast<SinkParser::PowExprContext*>(ctx))
      e.text = "^", operands = b->expr();
    else if (auto* b = dynamic_cast<SinkParser::MulExprContext*>(ctx))
      e.text = b->op->getText(), operands = b->expr();
    else if (auto* b = dynamic_cast<SinkParser::AddExprContext*>(ctx))
      e.text = b->op->getText(), operands = b->expr();
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
      if (blocks_ && !has_syntax_error(b->ident())) blocks_->push_back({join(text(b->ident())), span(b->ident())});
      statements(b->statement(), join(text(b->ident())), out);
      return;
    }
    if (has_syntax_error(ctx)) return;  // reported; its value would be a guess
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
    header(x, ctx->name, ctx->base);
    blocks_ = &x.blocks;
    statements(ctx->statement(), "", x.statements);
    blocks_ = nullptr;
    return x;
  }

  ast::Experiment sweep(SinkParser::SweepDeclContext* ctx) {
    ast::Experiment x;
    x.is_sweep = true;
    header(x, ctx->name, ctx->base);
    blocks_ = &x.blocks;
    for (auto* item : ctx->sweepItem()) {
      if (auto* a = dynamic_cast<SinkParser::SweepAxisContext*>(item)) {
        if (has_syntax_error(a))
          x.syntax_error = true;
        else
          x.axes.push_back({path(a->path()), span(a->path()), expr(a->expr())});
      } else if (auto* s = dynamic_cast<SinkParser::SweepStatementContext*>(item)) {
        statement(s->statement(), "", x.statements);
      }
    }
    blocks_ = nullptr;
    return x;
  }

 private:
  // A name or base that ANTLR had to make up is left empty: an unnamed
  // experiment is skipped, a missing base means `defaults`.
  void header(ast::Experiment& x, SinkParser::IdentContext* name, SinkParser::IdentContext* base) {
    if (name && !has_syntax_error(name)) x.name = text(name), x.name_span = span(name);
    if (base && !has_syntax_error(base)) x.base = text(base), x.base_span = span(base);
  }

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
      if (c == 'K')
        scale = 1e3;
      else if (c == 'M')
        scale = 1e6;
      else if (c == 'B')
        scale = 1e9;
      else if (c == 'T')
        scale = 1e12;
      else
        digits += c;
    }
    // Overflow gives inf, underflow 0: the checker reports either against the field's range.
    e.number = std::strtod(digits.c_str(), nullptr) * scale;
    // `64.0` is a float; `2.5K` and `1e3` are whole counts.
    bool whole = std::isfinite(e.number) && e.number == std::floor(e.number) && std::fabs(e.number) < 9.0e15;
    e.integral = whole && (digits.find('.') == std::string::npos || scale > 1);
  }

  const Columns& columns_;
  std::vector<std::pair<std::string, Span>>* blocks_ = nullptr;  // of the experiment being built
};

// Runs `entry` over the file with error collection; nullptr if the input was
// refused before parsing.
template <typename Entry>
auto with_parser(int file, const SourceManager& sources, Diagnostics& diags, Entry entry) {
  const SourceFile& f = sources.file(file);
  if (f.text.size() > kMaxSpecBytes) {
    // Files are read only up to the limit: their size comes from the disk.
    std::error_code ec;
    uintmax_t size = std::filesystem::file_size(f.path, ec);
    if (ec || size < f.text.size()) size = f.text.size();
    diags.error({file, 0, 0, 0, 0},
                fmt::format("file is {:.1f} MB; sinkc reads specs up to {} MB", size / 1048576.0, kMaxSpecBytes >> 20));
    return entry(nullptr, nullptr);
  }
  Columns columns(file, f);
  antlr4::ANTLRInputStream input;
  try {
    input.load(sanitized_utf8(file, sources, diags, columns));
  } catch (const std::exception& e) {  // sanitized_utf8 should have made this impossible
    diags.error({file, 0, 0, 0, 0}, std::string("cannot decode the file as UTF-8: ") + e.what());
    return entry(nullptr, nullptr);
  }
  SinkLexer lexer(&input);
  ErrorCollector errors(file, columns, diags);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&errors);
  antlr4::CommonTokenStream tokens(&lexer);
  try {
    tokens.fill();
  } catch (const TooManyErrors&) {
    return entry(nullptr, nullptr);
  } catch (const std::exception& e) {
    diags.error({file, 0, 0, 0, 0}, std::string("lexer failure: ") + e.what());
    return entry(nullptr, nullptr);
  }
  if (!lexical_ok(columns, tokens, diags, errors.eof_hint, errors.decl_starts)) return entry(nullptr, nullptr);
  if (!nesting_ok(columns, tokens, diags)) return entry(nullptr, nullptr);
  SinkParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&errors);
  parser.setErrorHandler(std::make_shared<KeepClosers>());
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
  with_parser(file, sources, diags, [&](SinkParser* parser, ErrorCollector* errors) -> int {
    if (!parser) return 0;
    SinkParser::FileContext* tree = parser->file();
    Builder b(errors->columns());
    for (auto* top : tree->topLevel()) {
      if (auto* imp = top->importDecl()) {
        if (has_syntax_error(imp)) continue;
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
    Builder b(errors->columns());
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
    out = Builder(errors->columns()).expr(tree->expr());
    return 0;
  });
  return out;
}

namespace {

// The layout of a file whose parse had no error (parse_layout).
class LayoutBuilder {
 public:
  explicit LayoutBuilder(const Columns& columns) : b_(columns) {}

  LayoutNode top(SinkParser::TopLevelContext* ctx) {
    if (auto* imp = ctx->importDecl()) {
      LayoutNode n = node(LayoutNode::Kind::Import, imp);
      n.name = imp->STRING()->getText();
      return n;
    }
    if (auto* x = ctx->experimentDecl()) {
      LayoutNode n = braced(LayoutNode::Kind::Experiment, x, x->name, x->base);
      for (auto* st : x->statement()) n.children.push_back(statement(st));
      return n;
    }
    auto* w = ctx->sweepDecl();
    LayoutNode n = braced(LayoutNode::Kind::Sweep, w, w->name, w->base);
    for (auto* item : w->sweepItem()) {
      if (auto* a = dynamic_cast<SinkParser::SweepAxisContext*>(item)) {
        LayoutNode axis = node(LayoutNode::Kind::Axis, a);
        axis.name = b_.path(a->path());
        axis.values.push_back(b_.expr(a->expr()));
        n.children.push_back(std::move(axis));
      } else {
        n.children.push_back(statement(dynamic_cast<SinkParser::SweepStatementContext*>(item)->statement()));
      }
    }
    return n;
  }

 private:
  LayoutNode node(LayoutNode::Kind kind, antlr4::ParserRuleContext* ctx) const {
    LayoutNode n;
    n.kind = kind;
    n.span = b_.span(ctx);
    return n;
  }

  template <typename Ctx>
  LayoutNode braced(LayoutNode::Kind kind, Ctx* ctx, SinkParser::IdentContext* name, SinkParser::IdentContext* base) {
    LayoutNode n = node(kind, ctx);
    n.name = Builder::text(name);
    n.base = base ? Builder::text(base) : "";
    n.open = b_.span(brace(ctx, "{"));
    n.close = b_.span(brace(ctx, "}"));
    return n;
  }

  static antlr4::tree::TerminalNode* brace(antlr4::ParserRuleContext* ctx, const char* text) {
    for (auto* child : ctx->children)
      if (auto* t = dynamic_cast<antlr4::tree::TerminalNode*>(child); t && t->getText() == text) return t;
    throw std::logic_error("a block without its braces parsed without an error");
  }

  LayoutNode statement(SinkParser::StatementContext* ctx) {
    if (auto* b = dynamic_cast<SinkParser::BlockStatementContext*>(ctx)) {
      LayoutNode n = braced(LayoutNode::Kind::Block, b, b->ident(), nullptr);
      for (auto* st : b->statement()) n.children.push_back(statement(st));
      return n;
    }
    if (auto* f = dynamic_cast<SinkParser::FixStatementContext*>(ctx)) {
      LayoutNode n = node(LayoutNode::Kind::Fix, f);
      n.values = {b_.expr(f->expr(0)), b_.expr(f->expr(1))};
      return n;
    }
    if (auto* r = dynamic_cast<SinkParser::RandomStatementContext*>(ctx)) {
      LayoutNode n = node(LayoutNode::Kind::Random, r);
      n.values = {b_.expr(r->expr())};
      return n;
    }
    auto* a = dynamic_cast<SinkParser::AssignStatementContext*>(ctx);
    LayoutNode n = node(LayoutNode::Kind::Assign, a);
    n.name = b_.path(a->path());
    n.values = {b_.expr(a->expr())};
    return n;
  }

  Builder b_;
};

}  // namespace

std::optional<std::vector<LayoutNode>> parse_layout(int file, const SourceManager& sources, Diagnostics& diags) {
  std::optional<std::vector<LayoutNode>> out;
  with_parser(file, sources, diags, [&](SinkParser* parser, ErrorCollector* errors) -> int {
    if (!parser) return 0;
    SinkParser::FileContext* tree = parser->file();
    if (errors->count() > 0 || has_syntax_error(tree)) return 0;
    LayoutBuilder b(errors->columns());
    out.emplace();
    for (auto* top : tree->topLevel()) out->push_back(b.top(top));
    return 0;
  });
  return out;
}

}  // namespace sink
