#include "compiler/check.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace sink {
namespace {

using Kind = ast::Expr::Kind;

std::string describe(const ast::Expr& e) {
  switch (e.kind) {
    case Kind::Number: return e.integral ? "an integer" : "a number";
    case Kind::String: return "a string";
    case Kind::Name: return fmt::format("the name '{}'", e.text);
    case Kind::Call: return fmt::format("a call of '{}'", e.text);
    case Kind::List: return "a list";
    default: return "an expression";
  }
}

// Constant-folds arithmetic on numbers (`64 * 12`, `2 ^ 10`, `-1e-3`).
std::optional<double> fold(const ast::Expr& e, bool& integral, bool& tokens) {
  switch (e.kind) {
    case Kind::Number:
      integral = integral && e.integral;
      tokens = tokens || e.tokens_unit;
      return e.number;
    case Kind::Neg: {
      auto v = fold(e.children[0], integral, tokens);
      if (v) return -*v;
      return std::nullopt;
    }
    case Kind::Binary: {
      auto a = fold(e.children[0], integral, tokens);
      auto b = fold(e.children[1], integral, tokens);
      if (!a || !b) return std::nullopt;
      if (e.text == "+") return *a + *b;
      if (e.text == "-") return *a - *b;
      if (e.text == "*") return *a * *b;
      if (e.text == "/") {
        double q = *a / *b;
        integral = integral && std::isfinite(q) && q == std::floor(q);
        return q;
      }
      if (e.text == "^") {
        double q = std::pow(*a, *b);
        integral = integral && std::isfinite(q) && q == std::floor(q);
        return q;
      }
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::string range_text(const TypeSpec& spec) {
  TypeSpec t = spec;
  t.type = Type::Float;
  std::string d = t.describe();
  return d.substr(d.find(' ') + 4);  // drop "float in "
}

std::optional<Value> type_number(const TypeSpec& spec, const ast::Expr& e, const std::string& what,
                                 Diagnostics& diags) {
  bool integral = true, tokens = false;
  auto v = fold(e, integral, tokens);
  bool want_int =
      spec.type != Type::Float && spec.type != Type::FloatList && (spec.type != Type::NumberOr || spec.integral);
  const std::string want = spec.type == Type::OptionalInt ? "an integer or none"
                           : spec.type == Type::NumberOr  ? fmt::format("{} or {}", fmt::join(spec.choices, ", "),
                                                                       want_int ? "an integer" : "a number")
                           : want_int                     ? "an integer"
                                                          : "a number";
  if (!v) {
    diags.error(e.span, fmt::format("'{}' expects {}, got {}", what, want, describe(e)));
    return std::nullopt;
  }
  if (tokens && spec.type != Type::Count) {
    diags.error(e.span, fmt::format("'{}' is not a count of tokens: drop the unit 'tokens'", what));
    return std::nullopt;
  }
  // Too large to be told whole from fractional (1e20, 2^100, 1e999): a range error.
  const bool huge = !std::isfinite(*v) || std::fabs(*v) >= 9.0e15;
  if (want_int && !integral && !huge) {
    diags.error(e.span, fmt::format("'{}' expects {}, got {}", what, want, format_number(*v)));
    return std::nullopt;
  }
  if (huge || !spec.admits(*v)) {
    std::string shown = want_int && !huge ? std::to_string(static_cast<long long>(*v)) : format_number(*v);
    diags.error(e.span, fmt::format("{} is out of range for '{}': expected {}", shown, what, range_text(spec)),
                "see `sinkc fields` for every field's range");
    return std::nullopt;
  }
  return want_int ? Value::of_int(static_cast<int64_t>(*v)) : Value::of_float(*v);
}

std::optional<Value> type_list(const TypeSpec& spec, const ast::Expr& e, const std::string& what, Diagnostics& diags) {
  if (e.kind != Kind::List) {
    diags.error(e.span, fmt::format("'{}' expects a list such as [1, 2], got {}", what, describe(e)));
    return std::nullopt;
  }
  if (spec.list_len && static_cast<int>(e.children.size()) != spec.list_len) {
    diags.error(e.span,
                fmt::format("'{}' expects a list of {} values, got {}", what, spec.list_len, e.children.size()));
    return std::nullopt;
  }
  TypeSpec item = spec;
  item.type = spec.type == Type::IntList ? Type::Int : Type::Float;
  std::vector<Value> items;
  bool ok = true;
  for (const auto& c : e.children) {
    auto v = type_number(item, c, what, diags);
    if (v)
      items.push_back(*v);
    else
      ok = false;
  }
  if (!ok) return std::nullopt;
  return Value::of_list(std::move(items));
}

std::optional<Value> type_variant(const TypeSpec& spec, const ast::Expr& e, const std::string& what,
                                  Diagnostics& diags) {
  std::vector<std::string> names;
  for (const auto& f : spec.forms) names.push_back(f.name);
  if (e.kind != Kind::Name && e.kind != Kind::Call) {
    diags.error(e.span, fmt::format("'{}' expects one of {}, got {}", what, spec.describe(), describe(e)));
    return std::nullopt;
  }
  const TypeSpec::Form* form = spec.form(e.text);
  if (!form) {
    std::string guess = closest(e.text, names);
    diags.error(e.span, fmt::format("unknown value '{}' for '{}'", e.text, what),
                did_you_mean(e.text, guess, fmt::format("expected one of {}", spec.describe())));
    return std::nullopt;
  }
  Value out;
  out.kind = Value::Kind::Call;
  out.s = form->name;
  std::vector<std::optional<Value>> given(form->params.size());
  bool ok = true;
  for (size_t k = 0; k < e.children.size(); ++k) {
    const std::string& name = e.arg_names[k];
    size_t slot = k;
    if (!name.empty()) {
      slot = form->params.size();
      for (size_t p = 0; p < form->params.size(); ++p)
        if (form->params[p].name == name) slot = p;
      if (slot == form->params.size()) {
        std::vector<std::string> pnames;
        for (const auto& p : form->params) pnames.push_back(p.name);
        std::string guess = closest(name, pnames);
        diags.error(e.children[k].span, fmt::format("'{}' has no parameter '{}'", form->name, name),
                    did_you_mean(name, guess,
                                 pnames.empty() ? fmt::format("'{}' takes no arguments", form->name)
                                                : fmt::format("parameters: {}", fmt::join(pnames, ", "))));
        ok = false;
        continue;
      }
    } else if (slot >= form->params.size()) {
      diags.error(e.children[k].span,
                  fmt::format("too many arguments to '{}' (it takes {})", form->name, form->params.size()));
      ok = false;
      continue;
    }
    if (given[slot]) {
      diags.error(e.children[k].span, fmt::format("'{}' given twice", form->params[slot].name));
      ok = false;
      continue;
    }
    auto v = type_value(form->params[slot].spec, e.children[k], what + "." + form->params[slot].name, diags);
    if (!v) ok = false;
    given[slot] = v;
  }
  if (!ok) return std::nullopt;
  for (size_t p = 0; p < form->params.size(); ++p)
    out.args.emplace_back(form->params[p].name, given[p] ? *given[p] : form->params[p].default_value);
  return out;
}

bool check_expr(const ast::Expr& e, const ExprRules& rules, const std::string& what, Diagnostics& diags) {
  switch (e.kind) {
    case Kind::Number:
      if (e.tokens_unit) {
        diags.error(e.span, "the unit 'tokens' has no meaning in an expression");
        return false;
      }
      if (!std::isfinite(e.number)) {
        diags.error(e.span, fmt::format("number {} is too large", e.text));
        return false;
      }
      return true;
    case Kind::Name: {
      for (const auto& v : rules.vars)
        if (v == e.text) return true;
      std::string guess = closest(e.text, rules.vars);
      diags.error(e.span, fmt::format("unknown variable '{}' in '{}'", e.text, what),
                  did_you_mean(e.text, guess, fmt::format("variables: {}", fmt::join(rules.vars, ", "))));
      return false;
    }
    case Kind::Call: {
      const ExprRules::Function* fn = nullptr;
      std::vector<std::string> names;
      for (const auto& f : rules.functions) {
        names.push_back(f.name);
        if (e.text == f.name) fn = &f;
      }
      if (!fn) {
        std::string guess = closest(e.text, names);
        diags.error(e.span, fmt::format("unknown function '{}' in '{}'", e.text, what),
                    did_you_mean(e.text, guess, fmt::format("functions: {}", fmt::join(names, ", "))));
        return false;
      }
      bool ok = true;
      if (static_cast<int>(e.children.size()) != fn->arity) {
        diags.error(e.span, fmt::format("'{}' takes {} argument{}, got {}", fn->name, fn->arity,
                                        fn->arity == 1 ? "" : "s", e.children.size()));
        ok = false;
      }
      for (size_t k = 0; k < e.children.size(); ++k) {
        if (!e.arg_names[k].empty()) {
          diags.error(e.children[k].span, fmt::format("'{}' takes positional arguments only", fn->name));
          ok = false;
        }
        ok = check_expr(e.children[k], rules, what, diags) && ok;
      }
      return ok;
    }
    case Kind::Neg: return check_expr(e.children[0], rules, what, diags);
    case Kind::Binary: {
      bool a = check_expr(e.children[0], rules, what, diags);
      bool b = check_expr(e.children[1], rules, what, diags);
      return a && b;
    }
    default: diags.error(e.span, fmt::format("'{}' expects an expression, got {}", what, describe(e))); return false;
  }
}

// Is a vector expression vector-valued? (scalar * vector is; vector * vector is not allowed)
std::optional<bool> vector_valued(const ast::Expr& e, const std::string& what, Diagnostics& diags) {
  switch (e.kind) {
    case Kind::Number: return false;
    case Kind::Name: return e.text == "ones";
    case Kind::Call: return e.text == "onehot";
    case Kind::Neg: return vector_valued(e.children[0], what, diags);
    case Kind::Binary: {
      auto a = vector_valued(e.children[0], what, diags);
      auto b = vector_valued(e.children[1], what, diags);
      if (!a || !b) return std::nullopt;
      if (*a && *b && e.text != "+" && e.text != "-") {
        diags.error(e.span, fmt::format("'{}': '{}' of two vectors is not defined", what, e.text));
        return std::nullopt;
      }
      if (*b && e.text == "/") {
        diags.error(e.span, fmt::format("'{}': cannot divide by a vector", what));
        return std::nullopt;
      }
      if (*a != *b && (e.text == "+" || e.text == "-")) {
        diags.error(e.span, fmt::format("'{}': cannot add a scalar and a vector", what));
        return std::nullopt;
      }
      return *a || *b;
    }
    default: return false;
  }
}

std::optional<Value> type_vector(const TypeSpec& spec, const ast::Expr& e, const std::string& what,
                                 Diagnostics& diags) {
  if (e.kind == Kind::Name)
    for (const auto& c : spec.choices)
      if (c == e.text) return Value::of_enum(c);
  const ExprRules& rules = vector_rules();
  if (e.kind == Kind::Name && e.text != "ones") {
    std::vector<std::string> options = spec.choices;
    options.push_back("ones");
    std::string guess = closest(e.text, options);
    diags.error(e.span, fmt::format("unknown value '{}' for '{}'", e.text, what),
                did_you_mean(e.text, guess, fmt::format("expected {}", spec.describe())));
    return std::nullopt;
  }
  if (!check_expr(e, rules, what, diags)) return std::nullopt;
  auto is_vector = vector_valued(e, what, diags);
  if (!is_vector) return std::nullopt;
  if (!*is_vector) {
    diags.error(e.span, fmt::format("'{}' must be a vector: use onehot(k) or ones, e.g. 5 * onehot(0)", what));
    return std::nullopt;
  }
  return Value::of_expr(to_expr_node(e));
}

}  // namespace

ExprNode to_expr_node(const ast::Expr& e) {
  ExprNode n;
  switch (e.kind) {
    case Kind::Number:
      n.op = ExprNode::Op::Number;
      n.number = e.number;
      break;
    case Kind::Name:
      n.op = ExprNode::Op::Var;
      n.name = e.text;
      break;
    case Kind::Call:
      n.op = ExprNode::Op::Call;
      n.name = e.text;
      break;
    case Kind::Neg: n.op = ExprNode::Op::Neg; break;
    case Kind::Binary:
      n.op = e.text == "+"   ? ExprNode::Op::Add
             : e.text == "-" ? ExprNode::Op::Sub
             : e.text == "*" ? ExprNode::Op::Mul
             : e.text == "/" ? ExprNode::Op::Div
                             : ExprNode::Op::Pow;
      break;
    default: break;
  }
  for (const auto& c : e.children) n.args.push_back(to_expr_node(c));
  return n;
}

std::optional<Value> type_value(const TypeSpec& spec, const ast::Expr& e, const std::string& what, Diagnostics& diags) {
  switch (spec.type) {
    case Type::Int:
    case Type::Float:
    case Type::Count: return type_number(spec, e, what, diags);
    case Type::OptionalInt:
      if (e.kind == Kind::Name && e.text == "none") return Value::none();
      return type_number(spec, e, what, diags);
    case Type::NumberOr:
      if (e.kind == Kind::Name) {
        for (const auto& c : spec.choices)
          if (c == e.text) return Value::of_enum(c);
        std::string guess = closest(e.text, spec.choices);
        diags.error(e.span, fmt::format("unknown value '{}' for '{}'", e.text, what),
                    did_you_mean(e.text, guess, fmt::format("expected {}", spec.describe())));
        return std::nullopt;
      }
      return type_number(spec, e, what, diags);
    case Type::Bool:
      if (e.kind == Kind::Name && (e.text == "true" || e.text == "false")) return Value::of_bool(e.text == "true");
      diags.error(e.span, fmt::format("'{}' expects true or false, got {}", what, describe(e)));
      return std::nullopt;
    case Type::Enum: {
      if (e.kind == Kind::Name)
        for (const auto& c : spec.choices)
          if (c == e.text) return Value::of_enum(c);
      const Field* field = find_field(what);
      const std::string field_hint = field ? field->wrong_value_hint : "";
      if (e.kind == Kind::String) {
        const bool quoted_choice = std::find(spec.choices.begin(), spec.choices.end(), e.text) != spec.choices.end();
        diags.error(e.span, fmt::format("'{}' expects {}, got {}", what, spec.describe(), describe(e)),
                    quoted_choice ? fmt::format("write it without quotes: {}", e.text) : field_hint);
        return std::nullopt;
      }
      if (e.kind != Kind::Name) {
        diags.error(e.span, fmt::format("'{}' expects {}, got {}", what, spec.describe(), describe(e)), field_hint);
        return std::nullopt;
      }
      std::string guess = closest(e.text, spec.choices);
      diags.error(e.span, fmt::format("unknown value '{}' for '{}'", e.text, what),
                  !field_hint.empty() ? Hint(field_hint)
                                      : did_you_mean(e.text, guess, fmt::format("expected {}", spec.describe())));
      return std::nullopt;
    }
    case Type::String:
      if (e.kind == Kind::String) return Value::of_string(e.text);
      diags.error(e.span, fmt::format("'{}' expects a string in double quotes, got {}", what, describe(e)));
      return std::nullopt;
    case Type::Variant: return type_variant(spec, e, what, diags);
    case Type::ScoreExpr: {
      if (!check_expr(e, score_rules(), what, diags)) return std::nullopt;
      return Value::of_expr(to_expr_node(e));
    }
    case Type::VectorExpr: return type_vector(spec, e, what, diags);
    case Type::IntList:
    case Type::FloatList: return type_list(spec, e, what, diags);
    case Type::FixList:
      if (e.kind == Kind::List && e.children.empty()) return Value::of_list({});
      diags.error(e.span, fmt::format("'{}' is set with `fix token T at P` statements (or cleared with [])", what));
      return std::nullopt;
  }
  return std::nullopt;
}

namespace {

const Field* lookup(const std::string& path, Span span, Diagnostics& diags) {
  if (const Field* f = find_field(path)) return f;
  std::string block = path.substr(0, path.find('.'));
  auto blocks = block_names();
  Hint hint;
  if (std::find(blocks.begin(), blocks.end(), block) == blocks.end() && path.find('.') != std::string::npos) {
    std::string guess = closest(block, blocks);
    hint = did_you_mean(path, guess.empty() ? "" : guess + path.substr(block.size()),
                        fmt::format("blocks: {}", fmt::join(blocks, ", ")));
  } else {
    std::string guess = closest(path, field_paths());
    if (guess.empty() && path.find('.') == std::string::npos) {
      // A bare field outside any block: find the block that has it.
      for (const auto& f : schema())
        if (f.path.substr(f.path.find('.') + 1) == path) guess = f.path;
    }
    hint = did_you_mean(path, guess);
  }
  diags.error(span, fmt::format("unknown field '{}'", path), hint);
  return nullptr;
}

void check_statement(Program& p, const ast::Statement& s, Diagnostics& diags) {
  using SK = ast::Statement::Kind;
  if (s.kind == SK::Fix || s.kind == SK::Random) {
    if (s.path != "data.fix" && s.path != "data.random") {
      diags.error(s.span,
                  fmt::format("`{}` statements belong in a data block", s.kind == SK::Fix ? "fix token" : "random at"));
      return;
    }
  }
  if (s.kind == SK::Fix) {
    TypeSpec token;
    token.type = Type::Int;
    token.min = 0;
    token.max = 1e7;
    TypeSpec position = token;
    position.min = 1;
    position.max = 1e15;
    auto t = type_value(token, s.value, "fix token", diags);
    auto at = type_value(position, s.position, "fix position", diags);
    if (t && at) p.typed_statements[&s] = Value::of_list({*t, *at});
    return;
  }
  const Field* field = lookup(s.path, s.path_span, diags);
  if (!field) return;
  ast::Expr value = s.value;
  if (s.kind == SK::Random && value.kind != ast::Expr::Kind::List) {  // `random at 1` = `random at [1]`
    ast::Expr list;
    list.kind = ast::Expr::Kind::List;
    list.span = value.span;
    list.children.push_back(value);
    value = list;
  }
  auto v = type_value(field->spec, value, s.path, diags);
  if (v) p.typed_statements[&s] = *v;
}

}  // namespace

void check(Program& program, Diagnostics& diags) {
  const std::vector<std::string> blocks = block_names();
  for (const auto& m : program.modules) {
    for (const auto& x : m.experiments) {
      // Unknown blocks: said once, at the block's name, not once per field in it.
      std::vector<std::string> bad;
      auto inside_bad = [&](const std::string& path) {
        for (const auto& b : bad)
          if (path == b || path.rfind(b + ".", 0) == 0) return true;
        return false;
      };
      for (const auto& [path, span] : x.blocks) {
        if (inside_bad(path) || std::find(blocks.begin(), blocks.end(), path) != blocks.end()) continue;
        bad.push_back(path);
        Hint hint;
        if (size_t dot = path.rfind('.'); dot != std::string::npos) {
          hint = fmt::format("blocks do not nest inside '{}'", path.substr(0, dot));
        } else {
          hint = did_you_mean(path, closest(path, blocks), fmt::format("blocks: {}", fmt::join(blocks, ", ")));
        }
        diags.error(span, fmt::format("unknown block '{}'", path), hint);
      }
      for (const auto& s : x.statements)
        if (!inside_bad(s.path)) check_statement(program, s, diags);
      std::vector<std::string> seen;
      for (const auto& axis : x.axes) {
        const Field* field = find_field(axis.path);
        if (!field) {
          std::string guess = closest(axis.path, field_paths());
          diags.error(axis.path_span, fmt::format("sweep axis '{}' is not a field", axis.path),
                      did_you_mean(axis.path, guess));
          continue;
        }
        if (std::find(seen.begin(), seen.end(), axis.path) != seen.end())
          diags.error(axis.path_span, fmt::format("sweep axis '{}' given twice", axis.path));
        seen.push_back(axis.path);
        if (axis.values.kind != ast::Expr::Kind::List || axis.values.children.empty()) {
          diags.error(axis.values.span, fmt::format("sweep axis '{}' needs a non-empty list of values", axis.path));
          continue;
        }
        for (const auto& v : axis.values.children) {
          auto typed = type_value(field->spec, v, axis.path, diags);
          if (typed) program.typed_axis_values[&v] = *typed;
        }
      }
    }
  }
  for (const auto& s : program.overrides) check_statement(program, s, diags);
}

}  // namespace sink
