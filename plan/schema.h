// The one table of every field of the language. The checker, `sinkc fields`,
// the plan reader/writer and docs/LANGUAGE.md all read it. Defaults are not
// here: they are written in stdlib/defaults.sink, in the language itself.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "plan/expr_text.h"
#include "plan/value.h"

namespace sink {

enum class Type {
  Int,  // whole number, count suffixes allowed (2K)
  Float,
  Count,  // whole number of tokens: suffixes and the unit word `tokens`
  Bool,
  Enum,  // one of `choices`
  String,
  Variant,     // one of `forms`: a bare name or a call with named arguments
  ScoreExpr,   // attention score: expression of qk, i, j, n and constants
  VectorExpr,  // a vector of d_head values (onehot(k), ones, d_head), or one of `choices`
  IntList,
  FloatList,
  FixList,      // (token, position) pairs, from `fix token T at P`
  OptionalInt,  // `none` or a whole number
  NumberOr      // one of the keywords `choices`, or a number in range
};

struct Param;

// The type of a field or of a call parameter, with its valid range.
struct TypeSpec {
  Type type = Type::Int;
  double min = -1e300, max = 1e300;
  bool min_open = false;  // min itself excluded
  std::vector<std::string> choices;
  struct Form {
    std::string name;
    std::vector<Param> params;  // positional order
    std::string doc;
  };
  std::vector<Form> forms;
  int list_len = 0;              // lists: exact length, 0 = any
  bool integral = false;         // NumberOr: the number is a whole number
  std::string describe() const;  // "int in [1, 65536]", "one of relu|gelu|..."
  bool admits(double v) const;   // inside [min, max] (min excluded when min_open); never NaN
  const Form* form(const std::string& name) const;
};

struct Param {
  std::string name;
  TypeSpec spec;
  Value default_value;
};

struct Field {
  std::string path;
  TypeSpec spec;
  std::string doc;
  // For a field added after plans were first hashed: the value at which it
  // changes nothing. A plan holding it hashes as before the field existed,
  // so runs trained then are still found by name and hash.
  std::optional<Value> neutral = std::nullopt;
  // Said with an error about a value this field does not take, where the
  // likely intent is something the language keeps elsewhere.
  std::string wrong_value_hint = "";
  // Where a run trains, not what it trains: the hash reads this value
  // whatever the plan holds, so a run keeps its name and run directory when
  // it moves between devices (started on a GPU, resumed on a CPU).
  std::optional<Value> hashed_as = std::nullopt;
  std::string block() const { return path.substr(0, path.find('.')); }
};

const std::vector<Field>& schema();
const Field* find_field(const std::string& path);
std::vector<std::string> field_paths();
std::vector<std::string> block_names();
const char* type_name(Type t);

// What score expressions (qk, i, j, n; exp, sigmoid, ...) and fixed value
// vectors (ones, d_head; onehot, sqrt) may use: the checker and the plan
// reader both ask these.
const ExprRules& score_rules();
const ExprRules& vector_rules();

}  // namespace sink
