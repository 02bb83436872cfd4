// Reads an expression back from its canonical text (`to_string(ExprNode)`),
// as plan.toml stores score and vector expressions. A small reader of its own
// so that the plan library needs no grammar: precedence and associativity are
// the language's (grammar/Sink.g4): ^ (right) > unary - > * / > + -.
#pragma once
#include <string>

#include "plan/value.h"

namespace sink {

// Variables and functions an expression may use.
struct ExprRules {
  std::vector<std::string> vars;
  struct Function {
    std::string name;
    int arity;
  };
  std::vector<Function> functions;
  const Function* function(const std::string& name) const;
  bool has_var(const std::string& name) const;
};

// Throws std::invalid_argument with the offset and what was expected.
ExprNode read_expr(const std::string& text);

// The first name `e` uses that `rules` do not allow ("unknown function 'foo'"),
// or "" when every name is allowed with the right number of arguments.
std::string expr_violation(const ExprNode& e, const ExprRules& rules);

}  // namespace sink
