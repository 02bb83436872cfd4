#include "compiler/pipeline.h"

#include "compiler/check.h"
#include "compiler/contradictions.h"
#include "compiler/expand.h"
#include "compiler/lower.h"
#include "compiler/parse.h"
#include "compiler/resolve.h"
#include "support/installation.h"

namespace sink {

Compilation::Compilation(Options options)
    : program_(std::make_unique<Program>(std::move(options))),
      diags_(std::make_unique<Diagnostics>(program_->sources)) {
  if (program_->options.stdlib_dir.empty()) program_->options.stdlib_dir = stdlib_dir().string();
}

bool Compilation::add_file(const std::string& path) { return load_root(*program_, path, *diags_); }

void Compilation::add_text(const std::string& name, std::string text) {
  load_root_text(*program_, name, std::move(text), *diags_);
}

void Compilation::run() {
  Program& p = *program_;
  Diagnostics& d = *diags_;
  for (size_t k = 0; k < p.options.overrides.size(); ++k) {
    int file = p.sources.add("--set", p.options.overrides[k]);
    if (auto s = parse_override(file, p.sources, d)) p.overrides.push_back(std::move(*s));
  }
  resolve(p, d);
  check(p, d);
  expand(p, d);
  check_contradictions(p, d);
  if (!d.has_errors()) plans_ = lower(p, d);
}

std::unique_ptr<Compilation> compile_defaults(const Options& options) {
  auto c = std::make_unique<Compilation>(options);
  c->add_text("<defaults>", "experiment __defaults {}\n");
  c->run();
  return c;
}

const Value* default_of(const Compilation& defaults, const std::string& path) {
  const auto& runs = defaults.program().runs;
  if (runs.empty()) return nullptr;
  auto it = runs.front().fields.find(path);
  return it == runs.front().fields.end() ? nullptr : &it->second.value;
}

}  // namespace sink
