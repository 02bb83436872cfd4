// Values of resolved fields: what a Plan holds. Plain data, no AST, no ANTLR.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sink {

// An arithmetic expression over named variables (`qk`, `i`, `j`, `n`, `d_head`),
// used for attention score expressions and fixed value vectors.
struct ExprNode {
  enum class Op { Number, Var, Call, Neg, Add, Sub, Mul, Div, Pow };
  Op op = Op::Number;
  double number = 0;
  std::string name;  // Var or Call
  std::vector<ExprNode> args;
  bool operator==(const ExprNode& o) const;
};

// Canonical source text: minimal parentheses, shortest round-trip numbers.
std::string to_string(const ExprNode& e);
bool mentions_call(const ExprNode& e, const std::string& fn);
bool mentions_var(const ExprNode& e, const std::string& var);

struct Value {
  enum class Kind { None, Int, Float, Bool, Enum, String, List, Call, Expr };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;                                    // Enum and String text; Call name
  std::vector<Value> items;                         // List
  std::vector<std::pair<std::string, Value>> args;  // Call, every parameter named
  std::shared_ptr<const ExprNode> expr;             // Expr

  // User-provided: with the implicit one, clang and libstdc++ recurse through
  // std::pair<std::string, Value> (for `args`) while Value is being defined.
  Value() {}

  static Value none() { return Value(); }
  static Value of_int(int64_t v) {
    Value x;
    x.kind = Kind::Int;
    x.i = v;
    return x;
  }
  static Value of_float(double v) {
    Value x;
    x.kind = Kind::Float;
    x.f = v;
    return x;
  }
  static Value of_bool(bool v) {
    Value x;
    x.kind = Kind::Bool;
    x.b = v;
    return x;
  }
  static Value of_enum(std::string v) {
    Value x;
    x.kind = Kind::Enum;
    x.s = std::move(v);
    return x;
  }
  static Value of_string(std::string v) {
    Value x;
    x.kind = Kind::String;
    x.s = std::move(v);
    return x;
  }
  static Value of_list(std::vector<Value> v) {
    Value x;
    x.kind = Kind::List;
    x.items = std::move(v);
    return x;
  }
  static Value of_expr(ExprNode e) {
    Value x;
    x.kind = Kind::Expr;
    x.expr = std::make_shared<ExprNode>(std::move(e));
    return x;
  }

  // Numeric view of Int and Float.
  double number() const { return kind == Kind::Int ? static_cast<double>(i) : f; }
  const Value* arg(const std::string& name) const;
  // In the language's own syntax: `cosine(warmup = 100, min_lr = 4e-05)`.
  std::string str() const;
  bool operator==(const Value& o) const;
  bool operator!=(const Value& o) const { return !(*this == o); }
};

// Shortest text that reads back to the same double.
std::string format_number(double v);

}  // namespace sink
