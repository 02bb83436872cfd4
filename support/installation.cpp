#include "support/installation.h"

#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>
#include <system_error>

#ifndef SINKLAB_VERSION
#define SINKLAB_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace sink {

namespace {

fs::path executable_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self.parent_path();
}

std::string searched_places() {
  fs::path exe = executable_dir();
  return fmt::format("$SINKLAB_HOME (unset), {}, {}", (exe / "share/sinklab").string(),
                     (exe / "../share/sinklab").lexically_normal().string());
}

}  // namespace

fs::path data_home() {
  if (const char* env = std::getenv("SINKLAB_HOME"); env && *env) return env;
  fs::path exe = executable_dir();
  if (exe.empty()) return {};
  std::error_code ec;
  for (fs::path candidate : {exe / "share" / "sinklab", (exe / ".." / "share" / "sinklab").lexically_normal()})
    if (fs::is_directory(candidate / "stdlib", ec)) return candidate;
  return {};
}

fs::path stdlib_dir() {
  if (const char* env = std::getenv("SINKLAB_STDLIB"); env && *env) return env;
  fs::path home = data_home();
  return home.empty() ? fs::path() : home / "stdlib";
}

fs::path builtin_corpus(const std::string& name) {
  fs::path home = data_home();
  if (home.empty())
    throw std::runtime_error(
        fmt::format("builtin corpus '{}': sinklab's data folder was not found (looked in {}); "
                    "set SINKLAB_HOME to the folder holding stdlib/ and data/",
                    name, searched_places()));
  fs::path file = home / "data" / "builtin" / (name + ".jsonl");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    // The names scripts/build_corpus.py knows; the large one is never assembled by default (245 MB, apt packages).
    const bool large = name == "large";
    throw std::runtime_error(fmt::format(
        "builtin corpus '{}' not found at {}: {} in the sources (or scripts/build_corpus.py {}{}) to assemble it{}",
        name, file.string(), large ? "run scripts/setup.sh --large-corpus" : "run scripts/setup.sh",
        large ? "--large " : "", file.string(),
        large || name == "default" ? "" : " (the builtin corpora are \"default\" and \"large\")"));
  }
  return file;
}

fs::path shipped_tuning_table() {
  fs::path home = data_home();
  return home.empty() ? fs::path() : home / "data" / "tuning" / "tiles.json";
}

fs::path kernel_cache_dir() {
  if (const char* env = std::getenv("SINKLAB_KERNEL_CACHE")) return env;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/tmp") / ".cache" / "sinklab" / "kernels";
}

const char* version() { return SINKLAB_VERSION; }

}  // namespace sink
