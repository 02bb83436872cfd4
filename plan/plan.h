// The Plan: the contract between compiler and runtime. One run, every field
// resolved, plain values. Round-trips through TOML exactly; its content hash
// is computed from the canonical text, so formatting and field order in the
// spec never change it, and any semantic change does.
#pragma once
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "plan/value.h"

namespace sink {

struct Plan {
  std::string name;
  std::string source;                                      // the spec file it came from (not hashed)
  std::map<std::string, Value> fields;                     // every schema field, by dotted path
  std::vector<std::pair<std::string, Value>> sweep_point;  // axis values (not hashed: they are in fields)

  const Value& at(const std::string& path) const;
  int64_t integer(const std::string& path) const { return at(path).i; }
  double number(const std::string& path) const { return at(path).number(); }
  bool flag(const std::string& path) const { return at(path).b; }
  const std::string& choice(const std::string& path) const { return at(path).s; }  // Enum value or Call name

  // `path = value` lines in path order: what `sinkc diff` reads.
  std::string canonical_text() const;
  // The same, with the fields that say where a run trains (schema's
  // hashed_as: train.device) at one value: what the hash reads.
  std::string hashed_text() const;
  std::string hash() const;  // 16 hex digits
  std::string hash8() const { return hash().substr(0, 8); }
  std::string dir_name() const { return name + "-" + hash8(); }
  bool operator==(const Plan& o) const { return name == o.name && fields == o.fields; }
  // `--run PATTERN`: see run_answers_to.
  bool answers_to(const std::string& pattern) const;
};

struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The seeds of a run are named NAME.seed=K.
std::optional<int64_t> seed_suffix(const std::string& run_name);
std::string seed_base(const std::string& run_name);  // "x.seed=3" -> "x"
// `--run PATTERN`: a run's name, or a shell-style pattern of names (fnmatch's *, ? and [...]: `wd.*`,
// `op_sig*`). A run answers to it when its name, or its seed base (NAME for the seeds NAME.seed=K of a run with
// `train.seeds > 1`), is that name or matches that pattern; a name is itself first, so one holding [ or * is
// still named exactly.
bool run_answers_to(const std::string& run_name, const std::string& pattern);

std::string to_toml(const Plan& plan);
std::string to_json(const Plan& plan);
// Throws PlanError with the offending key on anything that does not match the schema.
Plan plan_from_toml(const std::string& text, const std::string& origin);
Plan read_plan(const std::string& path);

}  // namespace sink
