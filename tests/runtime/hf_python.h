// The Python with torch 2.x and Hugging Face's transformers, tokenizers and
// safetensors that the oracle and export tests run (scripts/torch-venv.sh;
// the build passes it as $SINKLAB_PYTHON), and `sinkc measure` as a child.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "runtime_test_util.h"
#include "support/shell.h"
#include "tests/source_paths.h"

namespace sinktest {

// Why the tests cannot run ("" when they can); sets `python`. Checked once per process.
inline std::string hf_python_missing(std::string& python) {
  const char* env = std::getenv("SINKLAB_PYTHON");
  if (!env || !*env)
    return "SINKLAB_PYTHON is not set: these tests need a Python with transformers (scripts/torch-venv.sh; "
           "scripts/setup.sh passes it to the build)";
  python = env;
  static std::map<std::string, bool> usable;
  if (!usable.count(python))
    usable[python] =
        std::system((sink::shell_quote(python) + " -c 'import transformers, tokenizers, safetensors' > /dev/null 2>&1")
                        .c_str()) == 0;
  if (!usable[python]) return "SINKLAB_PYTHON=" + python + " cannot import transformers, tokenizers and safetensors";
  return "";
}

// tests/runtime/hf_transformers_oracle.py ARGS: its exit status, its stdout in *out when given.
// Hugging Face's libraries stay offline and write nothing into $HOME.
inline int run_oracle(const std::string& python, const std::vector<std::string>& args, std::string* out = nullptr) {
  static TempDir home("hf-home");
  const std::string script = std::string(sinktest::source_dir()) + "/tests/runtime/hf_transformers_oracle.py";
  std::vector<std::string> words = {sink::shell_quote(python), sink::shell_quote(script)};
  for (const auto& a : args) words.push_back(sink::shell_quote(a));
  std::string command = "HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error HF_HOME=";
  command.append(sink::shell_quote(home.str()));
  for (const auto& w : words) command.append(" ").append(w);
  if (!out) command += " > /dev/null";
  FILE* p = popen(command.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  std::string text;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `sinkc measure ARGS --format json`, parsed; fails the test on a non-zero exit.
inline nlohmann::json measure_json(std::vector<std::string> args, const TempDir& tmp) {
  args.insert(args.begin(), {sinktest::sinkc_binary(), "measure"});
  args.insert(args.end(), {"--format", "json"});
  const std::string out = tmp.file("measure.out");
  const int rc = wait_exit(spawn(args, out));
  const std::string text = read_file(out);
  EXPECT_EQ(rc, 0) << text;
  auto j = nlohmann::json::parse(text.substr(std::min(text.find('{'), text.size())), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// `sinkc measure ARGS` that must fail: its output.
inline std::string measure_error(std::vector<std::string> args, const TempDir& tmp) {
  args.insert(args.begin(), {sinktest::sinkc_binary(), "measure"});
  const std::string out = tmp.file("measure-error.out");
  EXPECT_NE(wait_exit(spawn(args, out)), 0) << "measure succeeded";
  return read_file(out);
}

}  // namespace sinktest

// Declares `std::string var`, the Python to run, or skips the test saying why.
#define HF_PYTHON_OR_SKIP(var) \
  std::string var;             \
  if (auto why = sinktest::hf_python_missing(var); !why.empty()) GTEST_SKIP() << why
