#include "plan/value.h"

#include <charconv>
#include <cmath>

namespace sink {

bool ExprNode::operator==(const ExprNode& o) const {
  return op == o.op && (op != Op::Number || number == o.number) && name == o.name && args == o.args;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // Keep floats recognisable as floats when read back.
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

namespace {

int precedence(ExprNode::Op op) {
  switch (op) {
    case ExprNode::Op::Add:
    case ExprNode::Op::Sub: return 1;
    case ExprNode::Op::Mul:
    case ExprNode::Op::Div: return 2;
    case ExprNode::Op::Neg: return 3;
    case ExprNode::Op::Pow: return 4;
    default: return 5;
  }
}

std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    auto res = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v));
    return std::string(buf, res.ptr);
  }
  return format_number(v);
}

std::string wrap(const ExprNode& child, int min_prec) {
  std::string s = to_string(child);
  return precedence(child.op) < min_prec ? "(" + s + ")" : s;
}

}  // namespace

std::string to_string(const ExprNode& e) {
  using Op = ExprNode::Op;
  switch (e.op) {
    case Op::Number: return number_text(e.number);
    case Op::Var: return e.name;
    case Op::Call: {
      std::string s = e.name + "(";
      for (size_t k = 0; k < e.args.size(); ++k) s += (k ? ", " : "") + to_string(e.args[k]);
      return s + ")";
    }
    case Op::Neg: return std::string(1, '-') + wrap(e.args[0], 4);  // (not "-" + ...: a false GCC 12 -Wrestrict)
    case Op::Pow: return wrap(e.args[0], 5) + "^" + wrap(e.args[1], 4);
    default: {
      int p = precedence(e.op);
      const char* sym = e.op == Op::Add ? " + " : e.op == Op::Sub ? " - " : e.op == Op::Mul ? " * " : " / ";
      // Left-associative: the right operand needs parentheses at equal precedence.
      return wrap(e.args[0], p) + sym + wrap(e.args[1], p + 1);
    }
  }
}

bool mentions_call(const ExprNode& e, const std::string& fn) {
  if (e.op == ExprNode::Op::Call && e.name == fn) return true;
  for (const auto& a : e.args)
    if (mentions_call(a, fn)) return true;
  return false;
}

bool mentions_var(const ExprNode& e, const std::string& var) {
  if (e.op == ExprNode::Op::Var && e.name == var) return true;
  for (const auto& a : e.args)
    if (mentions_var(a, var)) return true;
  return false;
}

const Value* Value::arg(const std::string& name) const {
  for (const auto& [k, v] : args)
    if (k == name) return &v;
  return nullptr;
}

std::string Value::str() const {
  switch (kind) {
    case Kind::None: return "none";
    case Kind::Int: return std::to_string(i);
    case Kind::Float: return format_number(f);
    case Kind::Bool: return b ? "true" : "false";
    case Kind::Enum: return s;
    case Kind::String: {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    case Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + items[k].str();
      return out + "]";
    }
    case Kind::Call: {
      if (args.empty()) return s;
      std::string out = s + "(";
      for (size_t k = 0; k < args.size(); ++k) out += (k ? ", " : "") + args[k].first + " = " + args[k].second.str();
      return out + ")";
    }
    case Kind::Expr: return expr ? to_string(*expr) : "";
  }
  return "";
}

bool Value::operator==(const Value& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::None: return true;
    case Kind::Int: return i == o.i;
    case Kind::Float: return f == o.f || (std::isnan(f) && std::isnan(o.f));
    case Kind::Bool: return b == o.b;
    case Kind::Enum:
    case Kind::String: return s == o.s;
    case Kind::List: return items == o.items;
    case Kind::Call: return s == o.s && args == o.args;
    case Kind::Expr: return (expr && o.expr) ? *expr == *o.expr : expr == o.expr;
  }
  return false;
}

}  // namespace sink
