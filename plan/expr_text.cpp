#include "plan/expr_text.h"

#include <cctype>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace sink {

const ExprRules::Function* ExprRules::function(const std::string& name) const {
  for (const auto& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

bool ExprRules::has_var(const std::string& name) const {
  for (const auto& v : vars)
    if (v == name) return true;
  return false;
}

namespace {

using Op = ExprNode::Op;

class Reader {
 public:
  explicit Reader(const std::string& text) : s_(text) {}

  ExprNode whole() {
    ExprNode e = sum();
    skip_space();
    if (pos_ != s_.size()) fail("an operator or the end");
    return e;
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const char* expected) const {
    throw std::invalid_argument(fmt::format("expected {} at offset {} of '{}'", expected, pos_, s_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  static ExprNode binary(Op op, ExprNode a, ExprNode b) { return ExprNode{op, 0, "", {std::move(a), std::move(b)}}; }

  ExprNode sum() {
    ExprNode e = product();
    for (;;) {
      if (accept('+'))
        e = binary(Op::Add, std::move(e), product());
      else if (accept('-'))
        e = binary(Op::Sub, std::move(e), product());
      else
        return e;
    }
  }
  ExprNode product() {
    ExprNode e = unary();
    for (;;) {
      if (accept('*'))
        e = binary(Op::Mul, std::move(e), unary());
      else if (accept('/'))
        e = binary(Op::Div, std::move(e), unary());
      else
        return e;
    }
  }
  // `-a^b` is -(a^b); `a^-b` is a^(-b).
  ExprNode unary() {
    if (accept('-')) return ExprNode{Op::Neg, 0, "", {unary()}};
    return power();
  }
  ExprNode power() {
    ExprNode base = atom();
    if (accept('^')) return binary(Op::Pow, std::move(base), unary());
    return base;
  }
  ExprNode atom() {
    skip_space();
    if (pos_ >= s_.size()) fail("a number, a name or '('");
    if (accept('(')) {
      ExprNode e = sum();
      if (!accept(')')) fail("')'");
      return e;
    }
    const char c = s_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.c_str() + pos_;
      char* end = nullptr;
      const double v = std::strtod(begin, &end);
      if (end == begin) fail("a number");
      pos_ += static_cast<size_t>(end - begin);
      return ExprNode{Op::Number, v, "", {}};
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') fail("a number, a name or '('");
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    std::string name = s_.substr(start, pos_ - start);
    if (!accept('(')) return ExprNode{Op::Var, 0, std::move(name), {}};
    ExprNode call{Op::Call, 0, std::move(name), {}};
    if (accept(')')) return call;
    do call.args.push_back(sum());
    while (accept(','));
    if (!accept(')')) fail("',' or ')'");
    return call;
  }
};

}  // namespace

ExprNode read_expr(const std::string& text) { return Reader(text).whole(); }

std::string expr_violation(const ExprNode& e, const ExprRules& rules) {
  if (e.op == Op::Var && !rules.has_var(e.name)) return fmt::format("unknown variable '{}'", e.name);
  if (e.op == Op::Call) {
    const auto* f = rules.function(e.name);
    if (!f) return fmt::format("unknown function '{}'", e.name);
    if (static_cast<int>(e.args.size()) != f->arity)
      return fmt::format("'{}' takes {} argument{}", f->name, f->arity, f->arity == 1 ? "" : "s");
  }
  for (const auto& a : e.args)
    if (auto v = expr_violation(a, rules); !v.empty()) return v;
  return "";
}

}  // namespace sink
