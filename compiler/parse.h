// Pass 1: text -> AST. ANTLR stays inside the parse pass (parse.cpp, syntax_errors.cpp, source_text.cpp).
#pragma once
#include <optional>
#include <vector>

#include "compiler/ast.h"

namespace sink {

// Specs larger than this are refused with a diagnostic before lexing.
constexpr size_t kMaxSpecBytes = 1 << 20;

// Parses a whole .sink file already added to `sources`.
ast::Module parse_module(int file, const SourceManager& sources, Diagnostics& diags);

// `path = value`, as given to --set on the command line.
std::optional<ast::Statement> parse_override(int file, const SourceManager& sources, Diagnostics& diags);

// What `sinkc fmt` reprints: the declarations and statements of a file as
// written, blocks kept, with where each is. Comments are not in it: the
// formatter finds them between the nodes.
struct LayoutNode {
  enum class Kind { Import, Experiment, Sweep, Block, Assign, Fix, Random, Axis };
  Kind kind = Kind::Assign;
  std::string name;               // Import: the path; Experiment, Sweep, Block: the name; Assign, Axis: the path
  std::string base;               // Experiment, Sweep: what it extends ("" for none)
  std::vector<ast::Expr> values;  // Assign, Axis, Random: the value; Fix: the token, then the position
  std::vector<LayoutNode> children;
  Span span;         // the whole node
  Span open, close;  // Experiment, Sweep, Block: the braces
};
// nullopt, with the diagnostics, for a file with a syntax error.
std::optional<std::vector<LayoutNode>> parse_layout(int file, const SourceManager& sources, Diagnostics& diags);

// A lone expression (plan.toml stores score expressions as text).
std::optional<ast::Expr> parse_expression(int file, const SourceManager& sources, Diagnostics& diags);

}  // namespace sink
