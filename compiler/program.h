// What the front-end passes share: loaded modules, resolved chains, typed
// statements, expanded runs. Owned by the pipeline; plain data.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/ast.h"
#include "plan/value.h"

namespace sink {

struct ExperimentRef {
  int module = -1;
  int index = -1;
  bool valid() const { return module >= 0; }
};

// A field's value in a run and the place that set it (for diagnostics).
struct Setting {
  Value value;
  Span origin;
};

struct Run {
  std::string name;
  ExperimentRef experiment;  // the experiment or sweep that produced it
  Span name_span;
  std::map<std::string, Setting> fields;
  std::vector<std::pair<std::string, Value>> axis_values;  // sweep point, in axis order
};

struct Options {
  std::string stdlib_dir;              // folder of defaults.sink and presets.sink
  std::vector<std::string> overrides;  // --set path=value, applied to every run
  std::string base;                    // --base PRESET: replaces the preset at the root of every chain
};

struct Program {
  explicit Program(Options opts) : options(std::move(opts)) {}
  Options options;
  SourceManager sources;
  std::vector<ast::Module> modules;
  std::vector<int> root_modules;            // the files named on the command line: their experiments are the runs
  std::vector<ast::Statement> overrides;    // parsed --set statements
  std::map<std::string, int> loaded_paths;  // canonical path -> module
  int prelude_modules = 0;                  // modules [0, n) are the installed stdlib
  std::set<std::string> preset_names;       // its presets (what --base swaps), by name

  // resolve
  std::map<std::string, ExperimentRef> experiments;
  std::map<std::string, std::vector<ExperimentRef>> chains;  // root first, the experiment last

  // check: typed values, keyed by the AST node they came from
  std::map<const ast::Statement*, Value> typed_statements;
  std::map<const ast::Expr*, Value> typed_axis_values;

  // expand
  std::vector<Run> runs;

  const ast::Experiment& experiment(ExperimentRef r) const { return modules[r.module].experiments[r.index]; }
};

}  // namespace sink
