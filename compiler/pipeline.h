// The front end's passes, in order (see pipeline.cpp):
//   parse -> resolve -> check -> expand -> contradictions -> lower
// A Compilation owns the program and its diagnostics.
#pragma once
#include <memory>

#include "compiler/program.h"
#include "plan/plan.h"

namespace sink {

class Compilation {
 public:
  explicit Compilation(Options options);
  // Pass 1 (parse) for a file named on the command line and its imports.
  bool add_file(const std::string& path);  // false if the file cannot be read
  void add_text(const std::string& name, std::string text);
  // Passes 2-6. Plans are produced only when there is no error.
  void run();

  const std::vector<Plan>& plans() const { return plans_; }
  Diagnostics& diagnostics() { return *diags_; }
  const Program& program() const { return *program_; }

 private:
  std::unique_ptr<Program> program_;
  std::unique_ptr<Diagnostics> diags_;
  std::vector<Plan> plans_;
};

// An experiment that sets nothing, compiled alone: its run holds every field's default as the stdlib's
// defaults.sink writes it (with --set and --base applied). `sinkc fields` lists these and the language server's
// hover shows them, so neither restates a default.
std::unique_ptr<Compilation> compile_defaults(const Options& options);
// A field's default in such a compilation, as written, before lowering (`rope(theta = 10000)`, sugar included);
// null when the defaults did not compile or do not set it.
const Value* default_of(const Compilation& defaults, const std::string& path);

}  // namespace sink
