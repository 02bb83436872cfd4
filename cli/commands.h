// The front end's commands, callable from tests and benchmarks as well as main.
#pragma once
#include <string>
#include <vector>

#include "compiler/pipeline.h"

namespace sink::cli {

struct CommonOptions {
  std::vector<std::string> overrides;
  std::string base;
  std::string stdlib;
  int color = -1;  // -1: when stderr is a terminal
  Options options() const { return {stdlib, overrides, base}; }
};

// Exit status: 0 clean, 1 spec errors, 2 usage or I/O.
int check(const std::vector<std::string>& files, const CommonOptions& common);
int plan(const std::string& file, const std::string& run, const std::string& format, const CommonOptions& common);
int fields(const std::string& format, const CommonOptions& common);
int compile(const std::string& file, const std::string& out, const CommonOptions& common);

// Compiles one file; prints diagnostics to stderr. Returns the exit status.
int compile_file(Compilation& c, const std::string& file, const CommonOptions& common);

}  // namespace sink::cli
