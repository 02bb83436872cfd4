// sinkc fmt: the formatter's promises over every spec in the repository (the
// specs, the stdlib, the diagnostics' golden files, the plan fixtures): one
// pass reaches the fixed point, every comment is kept, and the plans are the
// original's, hash for hash; and the layout itself on hand-written cases.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "compiler/format.h"
#include "spec_helpers.h"
#include "support/remove_tree.h"
#include "tests/source_paths.h"

using namespace spectest;

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> every_spec() {
  std::vector<std::string> all = spec_files();
  for (const char* folder : {"stdlib", "tests/front/golden", "tests/plan/fixtures"})
    for (const auto& f : sink_files(folder)) all.push_back(f);
  return all;
}

std::string formatted(const std::string& text, const std::string& name = "test.sink") {
  std::string errors;
  auto out = sink::format_spec(name, text, errors);
  EXPECT_TRUE(out) << errors;
  return out.value_or("");
}

// Every `//` and `/* */` comment outside strings, in order, without trailing blanks.
std::vector<std::string> comments(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\') ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      size_t end = text.find('\n', i);
      std::string c = text.substr(i, end == std::string::npos ? std::string::npos : end - i);
      while (!c.empty() && (c.back() == ' ' || c.back() == '\r')) c.pop_back();
      out.push_back(c);
      i = end == std::string::npos ? text.size() : end;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      out.push_back(text.substr(i, end == std::string::npos ? std::string::npos : end + 2 - i));
      i = end == std::string::npos ? text.size() : end + 1;
    }
  }
  return out;
}

std::map<std::string, std::string> hashes(sink::Compilation& c) {
  std::map<std::string, std::string> out;
  for (const auto& p : c.plans()) out[p.name] = p.hash();
  return out;
}

}  // namespace

TEST(Format, OnePassReachesTheFixedPointAndKeepsEveryComment) {
  size_t formatted_files = 0;
  for (const auto& path : every_spec()) {
    SCOPED_TRACE(path);
    const std::string text = read(path);
    std::string errors;
    auto once = sink::format_spec(path, text, errors);
    if (!once) {  // a golden file whose point is a syntax error: refused, with its diagnostic
      EXPECT_NE(errors.find("error"), std::string::npos) << errors;
      continue;
    }
    ++formatted_files;
    auto twice = sink::format_spec(path, *once, errors);
    ASSERT_TRUE(twice) << errors;
    EXPECT_EQ(*twice, *once);
    EXPECT_EQ(comments(*once), comments(text));
  }
  EXPECT_GT(formatted_files, 40u);
}

TEST(Format, ThePlansOfAFormattedSpecAreTheOriginals) {
  for (const auto& path : spec_files()) {
    SCOPED_TRACE(path);
    auto original = compile_path(path);
    ASSERT_FALSE(original->diagnostics().has_errors()) << rendered(*original);
    auto reformatted = compile_text(formatted(read(path), path), {}, path);
    ASSERT_FALSE(reformatted->diagnostics().has_errors()) << rendered(*reformatted);
    EXPECT_EQ(hashes(*reformatted), hashes(*original));
    EXPECT_FALSE(original->plans().empty());
  }
}

TEST(Format, AFormattedStdlibGivesEveryRunTheSameHash) {
  // The presets and defaults feed every run: format them into a folder of their own and compile every spec on it.
  const fs::path root = fs::temp_directory_path() / ("sinklab-fmt-stdlib-" + std::to_string(::getpid()));
  const fs::path dir = root / "stdlib";  // specs import "stdlib/presets.sink"
  fs::create_directories(dir);
  for (const auto& path : sink_files("stdlib"))
    std::ofstream(dir / fs::path(path).filename()) << formatted(read(path), path);
  for (const auto& path : spec_files()) {
    SCOPED_TRACE(path);
    Options o;
    o.stdlib_dir = dir.string();
    auto on_formatted = compile_path(path, o);
    ASSERT_FALSE(on_formatted->diagnostics().has_errors()) << rendered(*on_formatted);
    EXPECT_EQ(hashes(*on_formatted), hashes(*compile_path(path)));
  }
  sink::remove_tree(root);
}

TEST(Format, TheCanonicalLayout) {
  // One line stays one line, spaced; semicolons go.
  EXPECT_EQ(formatted("experiment a extends micro {optim.lr=1e-3;train{steps=10  seeds=2}}"),
            "experiment a extends micro { optim.lr = 1e-3  train { steps = 10  seeds = 2 } }\n");
  // Several lines: one statement per line where the source had one, blank lines kept (one), none at a block's
  // edges, comments where they were.
  EXPECT_EQ(formatted("// head\n\n\nexperiment a extends micro {   // why\n\n  optim {\n lr = 1e-3\n\n\n"
                      "    weight_decay=0.5 // decay\n  }\n  model.d = 32  model.heads = 2\n\n}\n\n\n// tail\n"),
            "// head\n\nexperiment a extends micro {  // why\n  optim {\n    lr = 1e-3\n\n"
            "    weight_decay = 0.5  // decay\n  }\n  model.d = 32  model.heads = 2\n}\n\n// tail\n");
  // Expressions: spaces around + - * /, none around ^, the parentheses precedence needs and no others.
  EXPECT_EQ(formatted("experiment a { attention.score = ((exp((qk))))*-(1/2)+(x^2)^3-(a-(b-c))  }"),
            "experiment a { attention.score = exp(qk) * -(1 / 2) + (x^2)^3 - (a - (b - c)) }\n");
  // Calls with named arguments, lists, sweeps, fix and random, strings re-escaped.
  EXPECT_EQ(formatted("import \"stdlib/presets.sink\"\nsweep s over micro{optim.lr in[1e-3,2e-3]\n"
                      "data{fix token 7 at [2,3]\nrandom at [1]\ncorpus=file( \"a\\\"b.jsonl\" )}}\n"),
            "import \"stdlib/presets.sink\"\nsweep s over micro {\n  optim.lr in [1e-3, 2e-3]\n  data {\n"
            "    fix token 7 at [2, 3]\n    random at [1]\n    corpus = file(\"a\\\"b.jsonl\")\n  }\n}\n");
  // Names the source aligned stay aligned; trailing comments the source aligned too.
  EXPECT_EQ(formatted("experiment a {\n  model {\n    d     = 32   // width\n    heads = 2    // heads\n"
                      "    layers = 1\n  }\n}\n"),
            "experiment a {\n  model {\n    d     = 32  // width\n    heads = 2   // heads\n    layers = 1\n  }\n}\n");
  // An empty block, and one too long for a line.
  EXPECT_EQ(formatted("experiment a extends micro {\n}\n"), "experiment a extends micro {}\n");
  const std::string long_line = "experiment a { data.corpus = file(\"" + std::string(100, 'x') + "\")  model.d = 8 }";
  EXPECT_EQ(formatted(long_line),
            "experiment a {\n  data.corpus = file(\"" + std::string(100, 'x') + "\")\n  model.d = 8\n}\n");
}

TEST(Format, AFileThatDoesNotParseIsRefusedWithItsDiagnostic) {
  std::string errors;
  EXPECT_FALSE(sink::format_spec("broken.sink", "experiment a { model.d = }\n", errors));
  EXPECT_NE(errors.find("broken.sink:1:"), std::string::npos) << errors;
  for (const std::string bad : {"\xff\xfe", "experiment", "/* never closed", "experiment a { x = \"open }"}) {
    errors.clear();
    EXPECT_FALSE(sink::format_spec("bad.sink", bad, errors)) << bad;
    EXPECT_FALSE(errors.empty()) << bad;
  }
  EXPECT_EQ(formatted(""), "");
}

TEST(Format, TheCommandChecksAndWrites) {
  const fs::path dir = fs::temp_directory_path() / ("sinklab-fmt-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string messy = (dir / "messy.sink").string(), tidy = (dir / "tidy.sink").string();
  std::ofstream(messy) << "experiment a extends micro {optim.lr=1e-3}\n";
  std::ofstream(tidy) << "experiment b extends micro { optim.lr = 1e-3 }\n";
  auto sinkc = [](const std::string& args) {
    const int status =
        std::system((std::string(sinktest::sinkc_binary()) + " fmt " + args + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(sinkc("--check " + tidy), 0);
  EXPECT_EQ(sinkc("--check " + messy + " " + tidy), 1);
  EXPECT_EQ(read(messy), "experiment a extends micro {optim.lr=1e-3}\n") << "--check changed the file";
  EXPECT_EQ(sinkc("--write " + dir.string()), 0);
  EXPECT_EQ(read(messy), "experiment a extends micro { optim.lr = 1e-3 }\n");
  EXPECT_EQ(sinkc("--check " + dir.string()), 0);
  std::ofstream(dir / "broken.sink") << "experiment {\n";
  EXPECT_EQ(sinkc("--check " + dir.string()), 2);
  sink::remove_tree(dir);
}
