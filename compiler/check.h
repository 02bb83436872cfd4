// Pass 3: every assignment, data statement, sweep axis value and --set
// override is typed against the schema: unknown fields, wrong types, values
// out of range. Cross-field rules run later, on expanded runs (contradictions).
#pragma once
#include <optional>

#include "compiler/program.h"
#include "plan/schema.h"

namespace sink {

void check(Program& program, Diagnostics& diags);

// Types one value against a field or parameter type; nullopt after reporting.
std::optional<Value> type_value(const TypeSpec& spec, const ast::Expr& e, const std::string& what, Diagnostics& diags);

// Converts an AST expression to the plan's ExprNode (no checking).
ExprNode to_expr_node(const ast::Expr& e);

}  // namespace sink
