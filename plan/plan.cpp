#include "plan/plan.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <fnmatch.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <toml++/toml.h>

#include "plan/expr_text.h"
#include "plan/schema.h"
#include "support/fnv1a.h"

namespace sink {

const Value& Plan::at(const std::string& path) const {
  auto it = fields.find(path);
  if (it == fields.end()) throw PlanError(fmt::format("plan '{}' has no field '{}'", name, path));
  return it->second;
}

namespace {

std::string field_lines(const Plan& plan, bool for_hash) {
  std::string out;
  for (const auto& [path, value] : plan.fields) {
    const Field* f = find_field(path);
    const Value& written = for_hash && f && f->hashed_as ? *f->hashed_as : value;
    if (f && f->neutral && written == *f->neutral) continue;
    out += path + " = " + written.str() + "\n";
  }
  return out;
}

}  // namespace

std::string Plan::canonical_text() const { return field_lines(*this, false); }
std::string Plan::hashed_text() const { return field_lines(*this, true); }

std::string Plan::hash() const { return fnv1a_hex(hashed_text()); }

namespace {

// ---- writing -------------------------------------------------------------
// Written by hand rather than through toml++'s printer so that numbers come
// out in their shortest round-trip form (0.1, not 0.10000000000000001);
// toml++ reads it back.

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\u{:04x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string toml_key(const std::string& k) {
  for (char c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return toml_string(k);
  return k;
}

std::string toml_value(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return format_number(v.f);
    case Value::Kind::Bool: return v.b ? "true" : "false";
    case Value::Kind::String: return toml_string(v.s);
    case Value::Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < v.items.size(); ++k) out += (k ? ", " : "") + toml_value(v.items[k]);
      return out + "]";
    }
    case Value::Kind::Call: {
      if (v.args.empty()) return toml_string(v.s);
      std::string out = "{ form = " + toml_string(v.s);
      for (const auto& [k, a] : v.args) out += ", " + toml_key(k) + " = " + toml_value(a);
      return out + " }";
    }
    default: return toml_string(v.str());  // None, Enum, Expr: their source text
  }
}

nlohmann::ordered_json to_json_value(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Int: return v.i;
    case Value::Kind::Float: return v.f;
    case Value::Kind::Bool: return v.b;
    case Value::Kind::String: return v.s;
    case Value::Kind::List: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& item : v.items) a.push_back(to_json_value(item));
      return a;
    }
    case Value::Kind::Call: {
      if (v.args.empty()) return v.s;
      nlohmann::ordered_json o;
      o["form"] = v.s;
      for (const auto& [k, a] : v.args) o[k] = to_json_value(a);
      return o;
    }
    default: return v.str();
  }
}

// ---- reading: each TOML value typed by its schema entry ---------------------
// Structural, so the plan needs no grammar: expressions are read back from
// their canonical text (plan/expr_text.h), everything else from TOML types.

[[noreturn]] void bad(const std::string& key, const std::string& why) {
  throw PlanError(fmt::format("'{}': {}", key, why));
}

double checked_number(const toml::node& node, const TypeSpec& spec, bool whole, const std::string& key) {
  double v = 0;
  if (auto i = node.as_integer())
    v = static_cast<double>(i->get());
  else if (auto f = node.as_floating_point(); f && !whole)
    v = f->get();
  else
    bad(key, whole ? "expected an integer" : "expected a number");
  if (!spec.admits(v))
    bad(key, fmt::format("{} is out of range: expected {}",
                         whole ? std::to_string(static_cast<int64_t>(v)) : format_number(v), spec.describe()));
  return v;
}

Value read_expr_value(const std::string& text, const ExprRules& rules, const std::string& key) {
  ExprNode e;
  try {
    e = read_expr(text);
  } catch (const std::invalid_argument& err) {
    bad(key, err.what());
  }
  if (auto why = expr_violation(e, rules); !why.empty()) bad(key, fmt::format("{} in '{}'", why, text));
  return Value::of_expr(std::move(e));
}

Value read_value(const toml::node& node, const TypeSpec& spec, const std::string& key) {
  const auto* str = node.as_string();
  switch (spec.type) {
    case Type::Int:
    case Type::Count: return Value::of_int(static_cast<int64_t>(checked_number(node, spec, true, key)));
    case Type::Float: return Value::of_float(checked_number(node, spec, false, key));
    case Type::OptionalInt:
      if (str && str->get() == "none") return Value::none();
      return Value::of_int(static_cast<int64_t>(checked_number(node, spec, true, key)));
    case Type::NumberOr:
      if (str)
        for (const auto& c : spec.choices)
          if (c == str->get()) return Value::of_enum(c);
      if (str) bad(key, "expected " + spec.describe());
      if (spec.integral) return Value::of_int(static_cast<int64_t>(checked_number(node, spec, true, key)));
      return Value::of_float(checked_number(node, spec, false, key));
    case Type::Bool:
      if (auto b = node.as_boolean()) return Value::of_bool(b->get());
      bad(key, "expected true or false");
    case Type::Enum:
      if (str)
        for (const auto& c : spec.choices)
          if (c == str->get()) return Value::of_enum(c);
      bad(key, "expected " + spec.describe());
    case Type::String:
      if (str) return Value::of_string(str->get());
      bad(key, "expected a string");
    case Type::Variant: {
      const auto* table = node.as_table();
      std::string form_name = str ? str->get() : table ? (*table)["form"].value_or(std::string()) : "";
      const TypeSpec::Form* form = spec.form(form_name);
      if (!form) bad(key, fmt::format("expected {}", spec.describe()));
      Value out;
      out.kind = Value::Kind::Call;
      out.s = form->name;
      for (const auto& param : form->params) {
        const toml::node* given = table ? (*table)[param.name].node() : nullptr;
        out.args.emplace_back(param.name,
                              given ? read_value(*given, param.spec, key + "." + param.name) : param.default_value);
      }
      if (table)
        for (const auto& [k, n] : *table)
          if (k.str() != "form" && !out.arg(std::string(k.str())))
            bad(key, fmt::format("'{}' has no parameter '{}'", form->name, k.str()));
      return out;
    }
    case Type::ScoreExpr:
      if (!str) bad(key, "expected an expression in a string");
      return read_expr_value(str->get(), score_rules(), key);
    case Type::VectorExpr:
      if (!str) bad(key, "expected a vector expression or one of " + fmt::format("{}", fmt::join(spec.choices, "|")));
      for (const auto& c : spec.choices)
        if (c == str->get()) return Value::of_enum(c);
      return read_expr_value(str->get(), vector_rules(), key);
    case Type::IntList:
    case Type::FloatList: {
      const auto* a = node.as_array();
      if (!a) bad(key, "expected an array");
      if (spec.list_len && static_cast<int>(a->size()) != spec.list_len)
        bad(key, fmt::format("expected {} values", spec.list_len));
      TypeSpec item = spec;
      item.type = spec.type == Type::IntList ? Type::Int : Type::Float;
      Value out = Value::of_list({});
      for (const auto& n : *a) out.items.push_back(read_value(n, item, key));
      return out;
    }
    case Type::FixList: {
      const auto* a = node.as_array();
      if (!a) bad(key, "expected an array of [token, position] pairs");
      Value out = Value::of_list({});
      for (const auto& pair : *a) {
        const auto* p = pair.as_array();
        if (!p || p->size() != 2 || !(*p)[0].is_integer() || !(*p)[1].is_integer())
          bad(key, "expected [token, position] pairs");
        out.items.push_back(
            Value::of_list({Value::of_int((*p)[0].as_integer()->get()), Value::of_int((*p)[1].as_integer()->get())}));
      }
      return out;
    }
  }
  bad(key, "unsupported field type");
}

}  // namespace

std::string to_toml(const Plan& plan) {
  std::string out = "# sinklab plan: every field resolved. Read back by sinkc and the runtime.\n";
  out += "name = " + toml_string(plan.name) + "\n";
  out += "hash = " + toml_string(plan.hash()) + "\n";
  if (!plan.source.empty()) out += "source = " + toml_string(plan.source) + "\n";
  if (!plan.sweep_point.empty()) {
    out += "\n[sweep_point]\n";
    for (const auto& [path, v] : plan.sweep_point) out += toml_key(path) + " = " + toml_value(v) + "\n";
  }
  std::string block;
  for (const auto& [path, value] : plan.fields) {
    std::string b = path.substr(0, path.find('.'));
    if (b != block) out += "\n[" + (block = b) + "]\n";
    out += toml_key(path.substr(path.find('.') + 1)) + " = " + toml_value(value) + "\n";
  }
  return out;
}

std::string to_json(const Plan& plan) {
  nlohmann::ordered_json j;
  j["name"] = plan.name;
  j["hash"] = plan.hash();
  j["source"] = plan.source;
  nlohmann::ordered_json fields;
  for (const auto& [path, value] : plan.fields) fields[path] = to_json_value(value);
  j["fields"] = fields;
  return j.dump(2);
}

Plan plan_from_toml(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw PlanError(fmt::format("{}: not a valid plan: {}", origin, e.description()));
  }
  Plan plan;
  plan.name = root["name"].value_or(std::string());
  plan.source = root["source"].value_or(std::string());
  if (plan.name.empty()) throw PlanError(origin + ": plan has no name");
  for (const Field& f : schema()) {
    std::string block = f.path.substr(0, f.path.find('.'));
    std::string leaf = f.path.substr(f.path.find('.') + 1);
    const toml::node* node = root[block][leaf].node();
    if (!node && f.neutral) {
      plan.fields[f.path] = *f.neutral;  // written before the field existed
      continue;
    }
    if (!node) throw PlanError(fmt::format("{}: plan has no field '{}'", origin, f.path));
    plan.fields[f.path] = read_value(*node, f.spec, f.path);
  }
  if (auto point = root["sweep_point"].as_table()) {
    // toml++ tables iterate in key order; the axes' order is the order written.
    std::vector<std::pair<const toml::key*, const toml::node*>> entries;
    for (const auto& [k, n] : *point) entries.emplace_back(&k, &n);
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      const auto& x = a.first->source().begin;
      const auto& y = b.first->source().begin;
      return std::pair(x.line, x.column) < std::pair(y.line, y.column);
    });
    for (const auto& [k, n] : entries) {
      const Field* f = find_field(std::string(k->str()));
      if (f) plan.sweep_point.emplace_back(std::string(k->str()), read_value(*n, f->spec, f->path));
    }
  }
  std::string stored = root["hash"].value_or(std::string());
  if (!stored.empty() && stored != plan.hash())
    throw PlanError(fmt::format("{}: hash {} does not match the plan's content ({}): edited by hand?", origin, stored,
                                plan.hash()));
  return plan;
}

Plan read_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlanError(fmt::format("cannot read plan '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return plan_from_toml(ss.str(), path);
}

std::optional<int64_t> seed_suffix(const std::string& run_name) {
  auto pos = run_name.rfind(".seed=");
  if (pos == std::string::npos) return std::nullopt;
  std::string digits = run_name.substr(pos + 6);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return std::stoll(digits);
}

std::string seed_base(const std::string& run_name) {
  return seed_suffix(run_name) ? run_name.substr(0, run_name.rfind(".seed=")) : run_name;
}

bool run_answers_to(const std::string& run_name, const std::string& pattern) {
  const std::string base = seed_base(run_name);
  if (run_name == pattern || base == pattern) return true;
  return fnmatch(pattern.c_str(), run_name.c_str(), 0) == 0 || fnmatch(pattern.c_str(), base.c_str(), 0) == 0;
}

bool Plan::answers_to(const std::string& pattern) const { return run_answers_to(name, pattern); }

}  // namespace sink
