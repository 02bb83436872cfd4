// Pass 1: text -> AST. ANTLR stays inside parse.cpp.
#pragma once
#include <optional>

#include "compiler/ast.h"

namespace sink {

// Specs larger than this are refused with a diagnostic before lexing.
constexpr size_t kMaxSpecBytes = 1 << 20;

// Parses a whole .sink file already added to `sources`.
ast::Module parse_module(int file, const SourceManager& sources, Diagnostics& diags);

// `path = value`, as given to --set on the command line.
std::optional<ast::Statement> parse_override(int file, const SourceManager& sources, Diagnostics& diags);

// A lone expression (plan.toml stores score expressions as text).
std::optional<ast::Expr> parse_expression(int file, const SourceManager& sources, Diagnostics& diags);

}  // namespace sink
