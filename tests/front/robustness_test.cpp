// The built `sinkc` as a user runs it: exit statuses (0 clean, 1 spec errors,
// 2 usage or I/O) and "never a crash" on hostile input, each run in its own
// process so that a signal or a hang shows as a failure, not as a dead test
// binary.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "helpers.h"
#include "support/remove_tree.h"
#include "tests/file_text.h"
#include "tests/source_paths.h"

namespace fs = std::filesystem;
extern char** environ;

namespace {

using sinktest::slurp;

struct Result {
  bool exited = false;  // false: killed by a signal or by our time limit
  int status = -1;      // exit status when exited
  int signal = 0;
  bool timed_out = false;
  std::string out, err;
  std::string describe() const {
    std::ostringstream s;
    if (timed_out) s << "timed out; ";
    if (!exited)
      s << "killed by signal " << signal << " (" << strsignal(signal) << "); ";
    else
      s << "exit " << status << "; ";
    s << "stderr (" << err.size() << " bytes): " << err.substr(0, 2000);
    return s.str();
  }
};

class TempDir {
 public:
  TempDir() {
    path_ =
        fs::temp_directory_path() / ("sinklab-robust-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    sink::remove_tree(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    sink::remove_tree(path_, ec);
  }
  fs::path write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Runs sinkc with `args`, stdout and stderr to files; kills it after `limit`.
Result run_sinkc(const std::vector<std::string>& args, std::chrono::seconds limit = std::chrono::seconds(60)) {
  TempDir io;
  const fs::path out = io.path() / "stdout", err = io.path() / "stderr";
  std::vector<std::string> argv_s = {sinktest::sinkc_binary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  Result r;
  int rc = posix_spawn(&pid, sinktest::sinkc_binary(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.err = std::string("posix_spawn failed: ") + strerror(rc);
    return r;
  }
  int wstatus = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.exited = WIFEXITED(wstatus) && !r.timed_out;
  if (r.exited) r.status = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) r.signal = WTERMSIG(wstatus);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// ASan and UBSan (build-fuzz, where CI runs these tests a second time) make
// sinkc about 3 to 4 times slower; the limits are about the algorithm, so
// they grow by as much there.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kSanitizerSlowdown = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int kSanitizerSlowdown = 4;
#else
constexpr int kSanitizerSlowdown = 1;
#endif
#else
constexpr int kSanitizerSlowdown = 1;
#endif

// Pathological inputs must be refused quickly, not after a quadratic crawl:
// the limit is generous for a loaded machine, far below what a per-token scan
// of a long line costs.
Result check(const fs::path& file, std::chrono::seconds limit = std::chrono::seconds(20 * kSanitizerSlowdown)) {
  return run_sinkc({"check", "--no-color", "--stdlib", sink::testing::stdlib_dir(), file.string()}, limit);
}

// In a sanitized build (build-fuzz), ASan and UBSan exit with status 1 as
// well: a status alone cannot tell a report from spec errors.
void expect_no_sanitizer_report(const Result& r) {
  EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("runtime error:"), std::string::npos) << r.describe();
}

void expect_status(const Result& r, int status) {
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.status, status) << r.describe();
  expect_no_sanitizer_report(r);
}

// What every hostile input must give: a clean exit 1 with an error on stderr,
// and a bounded amount of it.
void expect_rejected(const Result& r) {
  expect_status(r, 1);
  EXPECT_NE(r.err.find("error"), std::string::npos) << r.describe();
  EXPECT_LT(r.err.size(), 256u * 1024) << "diagnostics must stay readable";
}

std::string random_bytes(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// ---- exit statuses -----------------------------------------------------------

TEST(Exit, CleanSpecIsZero) {
  TempDir dir;
  auto r = check(dir.write("clean.sink",
                           "experiment clean extends tiny {\n  optim.lr = 1e-3\n}\n"
                           "sweep wd over tiny { optim.weight_decay in [0.0, 0.1] }\n"));
  expect_status(r, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("ok: 1 file, 3 runs"), std::string::npos) << r.out;
}

TEST(Exit, EveryStdlibFileChecksClean) {
  for (const char* name : {"defaults.sink", "presets.sink"}) {
    auto r = check(fs::path(sink::testing::stdlib_dir()) / name);
    SCOPED_TRACE(name);
    expect_status(r, 0);
  }
}

TEST(Exit, WarningsAloneAreZero) {
  TempDir dir;
  auto r = check(dir.write("warn.sink", "experiment w extends tiny { train.steps = 100  measure.every = 250 }\n"));
  expect_status(r, 0);
  EXPECT_NE(r.err.find("warning:"), std::string::npos) << r.describe();
}

TEST(Exit, SpecErrorsAreOne) {
  TempDir dir;
  auto r = check(dir.write("bad.sink", "experiment bad extends tiny {\n  model.d = true\n}\n"));
  expect_rejected(r);
  EXPECT_NE(r.err.find("bad.sink:2:13: error: 'model.d' expects an integer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("1 error generated."), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Exit, ErrorsInAnyOfSeveralFilesAreOne) {
  TempDir dir;
  auto good = dir.write("good.sink", "experiment good extends tiny {}\n");
  auto bad = dir.write("bad.sink", "experiment bad extends tiny { optim.lr = 100 }\n");
  auto r = run_sinkc({"check", "--stdlib", sink::testing::stdlib_dir(), good.string(), bad.string()});
  expect_rejected(r);
}

TEST(Exit, MissingFileIsTwo) {
  TempDir dir;
  auto r = check(dir.path() / "no-such-file.sink");
  expect_status(r, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.describe();
}

TEST(Exit, ADirectoryWithoutSpecsIsTwo) {
  TempDir dir;
  auto r = check(dir.path());
  expect_status(r, 2);
  EXPECT_NE(r.err.find("no .sink files"), std::string::npos) << r.describe();
}

TEST(Exit, ADirectoryIsCheckedAsItsSpecs) {
  TempDir dir;
  dir.write("good.sink", "experiment good extends tiny {}\n");
  auto one = check(dir.path());
  expect_status(one, 0);
  EXPECT_NE(one.out.find("ok: 1 file, 1 run"), std::string::npos) << one.describe();
  dir.write("bad.sink", "experiment bad extends tiny { optim.lr = 100 }\n");
  auto both = check(dir.path());
  expect_rejected(both);
  EXPECT_NE(both.err.find("bad.sink:1:"), std::string::npos) << both.describe();
}

TEST(Exit, BadUsageIsTwo) {
  const std::vector<std::vector<std::string>> usages = {
      {},                                      // no command
      {"check"},                               // no file
      {"frobnicate", "x.sink"},                // no such command
      {"check", "--no-such-flag", "x.sink"},   // no such option
      {"plan", "x.sink", "--format", "yaml"},  // bad option value
  };
  for (const auto& args : usages) {
    auto r = run_sinkc(args);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    SCOPED_TRACE("sinkc " + shown);
    expect_status(r, 2);
  }
}

TEST(Exit, HelpIsZero) {
  auto r = run_sinkc({"--help"});
  expect_status(r, 0);
  EXPECT_NE(r.out.find("check"), std::string::npos);
}

// ---- never a crash -----------------------------------------------------------

TEST(Robust, BinaryGarbageWithNulBytes) {
  TempDir dir;
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    std::string bytes = random_bytes(seed, 64 * 1024);
    bytes[100] = '\0';  // and certainly NULs
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto r = check(dir.write("garbage.sink", bytes));
    expect_rejected(r);
    EXPECT_NE(r.err.find("invalid byte in source"), std::string::npos) << r.describe();
  }
}

TEST(Robust, PrintableGarbage) {
  TempDir dir;
  std::mt19937 rng(7);
  const std::string alphabet =
      "{}[]()=.,;+-*/^\"'#@!$%&|~<>?:_ \n\tabcxyz019 experiment sweep over in extends fix token at";
  std::string s;
  for (int k = 0; k < 64 * 1024; ++k) s += alphabet[rng() % alphabet.size()];
  expect_rejected(check(dir.write("printable.sink", s)));
}

TEST(Robust, OnlyNulBytes) {
  TempDir dir;
  expect_rejected(check(dir.write("nul.sink", std::string(4096, '\0'))));
}

TEST(Robust, TenMegabyteFile) {
  TempDir dir;
  std::string big;
  big.reserve(10 << 20);
  while (big.size() < (10u << 20)) big += "experiment e extends tiny { model.d = 64 }  // filler\n";
  auto r = check(dir.write("big.sink", big));
  expect_rejected(r);
  EXPECT_NE(r.err.find("MB"), std::string::npos) << r.describe();
}

TEST(Robust, LargestAcceptedFileIsFast) {
  // Just under the size limit: many experiments and comments, all valid.
  TempDir dir;
  std::string text = "// many experiments\n";
  for (int k = 0; text.size() < 900 * 1024; ++k)
    text += "experiment e" + std::to_string(k) + " extends tiny {\n  optim.lr = 1e-3  // a comment\n}\n";
  auto start = std::chrono::steady_clock::now();
  auto r = check(dir.write("large.sink", text));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  expect_status(r, 0);
  EXPECT_LT(seconds, 30.0 * kSanitizerSlowdown);
}

TEST(Robust, LongSingleLineIsFast) {
  // 900 KB on one line, with multi-byte characters: columns must not be
  // recomputed from the start of the line for every token.
  TempDir dir;
  std::string text;
  for (int k = 0; text.size() < 900 * 1024; ++k)
    text +=
        "experiment e" + std::to_string(k) + " extends tiny { data.corpus = builtin(\"\xc3\xa9\") optim.lr = 1e-3 } ";
  text += "experiment last extends tiny { model.d = true }";
  auto r = check(dir.write("oneline.sink", text));
  expect_rejected(r);
  EXPECT_NE(r.err.find("'model.d' expects an integer"), std::string::npos) << r.describe();
}

TEST(Robust, DeeplyNestedParentheses) {
  TempDir dir;
  std::string s = "experiment deep extends tiny {\n  model.d = " + std::string(100000, '(') + "64\n}\n";
  auto r = check(dir.write("parens.sink", s));
  expect_rejected(r);
  EXPECT_NE(r.err.find("nesting deeper than"), std::string::npos) << r.describe();
}

TEST(Robust, DeeplyNestedBracketsAndBlocks) {
  TempDir dir;
  expect_rejected(check(dir.write(
      "brackets.sink", "experiment a extends tiny { measure.positions = " + std::string(100000, '[') + "\n}\n")));
  expect_rejected(check(dir.write("blocks.sink", "experiment a extends tiny " + std::string(100000, '{'))));
  std::string closing(100000, ')');
  expect_rejected(check(dir.write("closing.sink", closing)));
}

TEST(Robust, HugeSum) {
  TempDir dir;
  std::string sum = "1";
  for (int k = 1; k < 200000; ++k) sum += "+1";
  auto r = check(dir.write("sum.sink", "experiment sum extends tiny {\n  model.d = " + sum + "\n}\n"));
  expect_rejected(r);
  EXPECT_NE(r.err.find("operators"), std::string::npos) << r.describe();
  // Also as a score expression and with unary minus chains.
  expect_rejected(check(dir.write(
      "score.sink", "experiment s extends tiny { attention.score = qk" + std::string(200000, '+') + "qk }\n")));
  expect_rejected(
      check(dir.write("neg.sink", "experiment s extends tiny { optim.lr = " + std::string(200000, '-') + "1 }\n")));
}

TEST(Robust, UnterminatedStringAndComment) {
  TempDir dir;
  auto r = check(dir.write("string.sink", "experiment a extends tiny {\n  data.corpus = file(\"data/x\n}\n"));
  expect_rejected(r);
  EXPECT_NE(r.err.find("unterminated string"), std::string::npos) << r.describe();
  r = check(dir.write("comment.sink", "experiment a extends tiny {\n  /* no end\n  optim.lr = 1e-3\n}\n"));
  expect_rejected(r);
  EXPECT_NE(r.err.find("unterminated comment"), std::string::npos) << r.describe();
  expect_rejected(check(dir.write("quote.sink", "\"")));
  expect_rejected(check(dir.write("slashstar.sink", "/*")));
  expect_rejected(check(dir.write("backslash.sink", "import \"abc\\")));
}

TEST(Robust, ManyErrorsAreCapped) {
  TempDir dir;
  std::string s;
  for (int k = 0; k < 5000; ++k) s += "experiment e" + std::to_string(k) + " extends tiny { model.d = true }\n";
  auto r = check(dir.write("many.sink", s));
  expect_rejected(r);
  EXPECT_NE(r.err.find("5000 errors generated."), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("more diagnostics not shown"), std::string::npos);
}

TEST(Robust, HugeNumbersAndLongNames) {
  TempDir dir;
  std::string digits(5000, '9');
  std::string name(100000, 'a');
  expect_rejected(check(dir.write(
      "num.sink", "experiment a extends tiny { model.d = " + digits + "\n optim.lr = " + digits + "e99999 }\n")));
  expect_rejected(check(dir.write("name.sink", "experiment a extends tiny { model." + name + " = 1 }\n")));
  expect_rejected(check(dir.write("exp.sink", "experiment a extends tiny { model.d = 2^2^2^2^2^2^2 }\n")));
}

TEST(Robust, SelfImportAndMissingImport) {
  TempDir dir;
  auto self = dir.write("self.sink", "import \"self.sink\"\nexperiment a extends tiny {}\n");
  auto r = check(self);
  expect_rejected(r);
  EXPECT_NE(r.err.find("import cycle"), std::string::npos) << r.describe();
  expect_rejected(check(dir.write("dir.sink", "import \".\"\nimport \"/\"\nimport \"\"\n")));
}

// In process: thousands of mutations of real specs through the whole front
// end. Each must end with diagnostics or plans, never both missing errors and
// plans, and never a crash (the test binary would die).
TEST(Robust, MutatedSpecsInProcess) {
  std::vector<std::string> seeds = {slurp(fs::path(sink::testing::stdlib_dir()) / "presets.sink"),
                                    "experiment a extends tiny {\n  model { biases = k  v_star = 5 * onehot(0) }\n"
                                    "  data { fix token 3 at 2  random at [4, 5] }\n"
                                    "  attention { score = sigmoid(qk) normalize = none }\n}\n"
                                    "sweep s over micro { optim.lr in [1e-3, 3e-3]  model.pe in [rope, alibi] }\n"};
  const std::string tokens[] = {"{",      "}",   "(",      ")",  "[",  "]",    "=",  ",",     ".",
                                "\"",     "/*",  "*/",     "//", "\n", "-",    "^",  "1e999", "0",
                                "tokens", "fix", "random", "at", "in", "none", "qk", "\xff"};
  std::mt19937 rng(12345);
  int with_errors = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    std::string text = seeds[iteration % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text.erase(at, 1 + rng() % 8); break;
        case 1: text.insert(at, tokens[rng() % std::size(tokens)]); break;
        default: text[at] = static_cast<char>(rng() & 0xff); break;
      }
    }
    auto c = sink::testing::compile_text(text);
    if (c->diagnostics().has_errors()) {
      ++with_errors;
      EXPECT_TRUE(c->plans().empty());
      c->diagnostics().render();  // renders without crashing
    }
  }
  EXPECT_GT(with_errors, 500);  // the mutations do break things
}

}  // namespace

TEST(Exit, RunNameSelectsEverySeedOfARun) {
  // `--run NAME` on a run with train.seeds = 3 means its three seed runs.
  TempDir dir;
  auto spec = dir.write("s.sink",
                        "experiment a extends tiny { train.seeds = 3 }\n"
                        "experiment b extends tiny {}\n");
  auto r = run_sinkc({"plan", "--stdlib", sink::testing::stdlib_dir(), spec.string(), "--run", "a"});
  expect_status(r, 0);
  for (const char* name : {"a.seed=0", "a.seed=1", "a.seed=2"})
    EXPECT_NE(r.out.find(std::string("name = \"") + name + "\""), std::string::npos) << name << "\n" << r.out;
  EXPECT_EQ(r.out.find("name = \"b\""), std::string::npos) << r.out;
  auto one = run_sinkc({"plan", "--stdlib", sink::testing::stdlib_dir(), spec.string(), "--run", "a.seed=1"});
  expect_status(one, 0);
  EXPECT_EQ(one.out.find("a.seed=0"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("a.seed=1"), std::string::npos) << one.out;
}
