// Helpers shared by the runtime tests: plans compiled from spec text, temp
// directories, the shared test models, small expression builders.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include "compiler/pipeline.h"
#include "plan/run_config.h"
#include "runtime/training/train.h"
#include "support/remove_tree.h"
#include "tests/source_paths.h"

namespace sinktest {

// Compiles `text` (experiments extending the stdlib presets) and returns its
// plans; a spec with errors fails the calling test with the diagnostics.
inline std::vector<sink::Plan> plans_of(const std::string& text) {
  sink::Compilation c({std::string(sinktest::source_dir()) + "/stdlib", {}, ""});
  c.add_text(std::string(sinktest::source_dir()) + "/t.sink", text);
  c.run();
  EXPECT_FALSE(c.diagnostics().has_errors()) << c.diagnostics().render(false) << "\nspec:\n" << text;
  return c.plans();
}

inline sink::Plan plan_of(const std::string& text) {
  auto plans = plans_of(text);
  if (plans.empty()) throw std::runtime_error("spec produced no plan:\n" + text);
  return plans[0];
}

inline sink::RunConfig config_of(const std::string& text) { return sink::read_config(plan_of(text)); }

// Options of a run trained by a test: into `out`, without the live progress line.
inline sink::rt::RunOptions run_options(const std::string& out) {
  sink::rt::RunOptions o;
  o.out = out;
  o.progress = false;
  return o;
}

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("sinklab-test-" + tag + "-" + std::to_string(getpid()) + "-" +
                                                     std::to_string(counter++) + "-" + std::to_string(rd() % 100000));
    sink::remove_tree(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    sink::remove_tree(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// A program started with argv (stdout and stderr to `output` when given),
// in its own process group, so that kill(-pid) reaches its children too.
inline pid_t spawn(std::vector<std::string> argv, const std::string& output = "") {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!output.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ), 0) << argv[0];
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return pid;
}

inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `sinkc ARGS`, its output in `log`, with PATH=`path` where given: its exit status.
inline int sinkc_status(std::vector<std::string> args, const std::string& log, const std::string& path = "") {
  args.insert(args.begin(), sinkc_binary());
  if (!path.empty()) args.insert(args.begin(), {"env", "PATH=" + path});
  return wait_exit(spawn(args, log));
}

// `micro` with `body` added, trained 6 steps with a checkpoint every 3, into `out`: its run directory. A few steps
// are enough for an export's comparisons: the weights move away from their initialization.
inline std::string trained_run(const TempDir& out, const std::string& body) {
  auto plan = plan_of("experiment exported extends micro { train { steps = 6  checkpoint_every = 3 } " + body + " }");
  sink::rt::RunOptions o;
  o.out = out.str();
  o.progress = false;
  auto r = sink::rt::run_plan(plan, o);
  EXPECT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  return r.dir;
}

// The message of what `f` throws; empty when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Resumes a run whose checkpoints were spoiled: it must fail, not throw, and
// the reason it records is returned.
inline std::string resume_must_fail(const sink::Plan& plan, sink::rt::RunOptions o) {
  o.stop_after = -1;
  o.resume = true;
  sink::rt::RunResult r;
  EXPECT_NO_THROW(r = sink::rt::run_plan(plan, o));
  EXPECT_EQ(r.status, sink::rt::RunOutcome::Failed);
  return r.summary.value("reason", "");
}

// The shared test models (stories260K.bin, tok512.*) are not in the
// repository: they are found in $SINKLAB_TEST_MODELS, else in shared/models
// beside the checkout. A test that needs one skips without it, so a fresh
// clone anywhere passes; but a variable naming a folder that lacks the file is
// a broken set-up, and skipping would hide it.
struct TestModel {
  std::string path;     // empty when not found
  std::string message;  // why not
  bool required = false;
};

inline TestModel find_test_model(const std::string& name) {
  const char* env = std::getenv("SINKLAB_TEST_MODELS");
  const bool named = env && *env;
  const std::filesystem::path dir =
      named ? std::filesystem::path(env)
            : (std::filesystem::path(sinktest::source_dir()) / ".." / "shared" / "models").lexically_normal();
  TestModel m;
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir / name, ec)) {
    m.path = (dir / name).string();
    return m;
  }
  m.required = named;
  m.message = named ? "SINKLAB_TEST_MODELS=" + dir.string() + " has no " + name
                    : name + " not found in " + dir.string() +
                          "; set SINKLAB_TEST_MODELS to a folder holding it to run this test";
  return m;
}

}  // namespace sinktest

// Declares `const std::string var`, the path of the test model `name`, or
// ends the test: skipped when no folder was named, failed when the named one lacks it.
#define SINKLAB_TEST_MODEL(var, name)                                                  \
  const auto var##_found = sinktest::find_test_model(name);                            \
  if (var##_found.path.empty() && var##_found.required) FAIL() << var##_found.message; \
  if (var##_found.path.empty()) GTEST_SKIP() << var##_found.message;                   \
  const std::string var = var##_found.path
