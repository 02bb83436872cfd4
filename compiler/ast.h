// The spec language's syntax tree, with source spans. Produced by parse,
// consumed by resolve/check/expand; the runtime never sees it.
#pragma once
#include <string>
#include <vector>

#include "compiler/source.h"

namespace sink::ast {

struct Expr {
  enum class Kind { Number, String, Name, Call, List, Neg, Binary };
  Kind kind = Kind::Number;
  Span span;
  std::string text;                    // Name/Call: identifier; String: unquoted; Binary: operator; Number: source text
  double number = 0;                   // Number: value after the count suffix
  bool integral = false;               // Number: no fraction, no exponent making it fractional
  bool tokens_unit = false;            // Number written with the unit word `tokens`
  std::vector<Expr> children;          // Call args, List items, Neg operand, Binary lhs/rhs
  std::vector<std::string> arg_names;  // Call: "" for positional arguments
};

struct Statement {
  enum class Kind { Assign, Fix, Random };
  Kind kind = Kind::Assign;
  Span span;         // whole statement
  std::string path;  // dotted, block prefixes included ("optim.lr")
  Span path_span;
  Expr value;     // Assign: value; Fix: token; Random: positions
  Expr position;  // Fix: position
};

struct Axis {
  std::string path;
  Span path_span;
  Expr values;  // a list literal, checked by the checker
};

struct Experiment {
  std::string name;
  Span name_span;
  std::string base;  // "" = the stdlib root `defaults`
  Span base_span;
  bool is_sweep = false;
  std::vector<Statement> statements;
  std::vector<Axis> axes;
  std::vector<std::pair<std::string, Span>> blocks;  // `name { ... }` blocks: dotted path, span of the name
  bool syntax_error = false;  // ANTLR recovered inside it: checks of what is missing would echo the error
  int module = -1;            // index into Program::modules
};

struct Import {
  std::string path;
  Span span;
};

struct Module {
  int file = -1;  // SourceManager id
  std::vector<Import> imports;
  std::vector<Experiment> experiments;
};

}  // namespace sink::ast
