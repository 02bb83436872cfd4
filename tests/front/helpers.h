// Shared by the front-end tests: compile spec text in memory.
#pragma once
#include <memory>
#include <string>

#include "compiler/pipeline.h"
#include "tests/source_paths.h"

namespace sink::testing {

inline std::string stdlib_dir() { return std::string(sinktest::source_dir()) + "/stdlib"; }
inline std::string source_dir() { return sinktest::source_dir(); }

// Compiles `text` as if it were a file named `name` (imports resolve from the
// source tree's root).
inline std::unique_ptr<Compilation> compile_text(const std::string& text, Options options = {},
                                                 const std::string& name = "") {
  if (options.stdlib_dir.empty()) options.stdlib_dir = stdlib_dir();
  auto c = std::make_unique<Compilation>(options);
  c->add_text(name.empty() ? source_dir() + "/test.sink" : name, text);
  c->run();
  return c;
}

inline std::unique_ptr<Compilation> compile_path(const std::string& path, Options options = {}) {
  if (options.stdlib_dir.empty()) options.stdlib_dir = stdlib_dir();
  auto c = std::make_unique<Compilation>(options);
  c->add_file(path);
  c->run();
  return c;
}

}  // namespace sink::testing
