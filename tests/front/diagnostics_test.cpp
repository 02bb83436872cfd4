// Golden diagnostics: every tests/front/golden/NAME.sink is compiled as a
// file named on the command line, and its diagnostics (sorted as `sinkc
// check` prints them) must equal NAME.expected, one per entry:
//
//   LINE:COL: error: MESSAGE              a diagnostic in NAME.sink itself
//   PATH:LINE:COL: error: MESSAGE         in another file (relative to golden/,
//                                         or to the source tree for stdlib/)
//     hint: HINT                          the hint, when there is one
//
// In hints, the source tree's absolute path is written $SRC. To rewrite the
// expected files after a deliberate change of wording, run with
// SINKLAB_UPDATE_GOLDEN=1 and read the diff before committing it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <tuple>

#include "helpers.h"
#include "tests/source_paths.h"

namespace fs = std::filesystem;
using sink::testing::compile_path;
using sink::testing::compile_text;

namespace {

fs::path golden_dir() { return fs::path(sinktest::source_dir()) / "tests" / "front" / "golden"; }

std::vector<std::string> golden_cases() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(golden_dir(), ec))
    if (entry.is_regular_file() && entry.path().extension() == ".sink") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

// Diagnostics in the order `sinkc check` prints them: by file, line, column.
std::vector<const sink::Diagnostic*> sorted(const sink::Diagnostics& diags) {
  std::vector<const sink::Diagnostic*> out;
  for (const auto& d : diags.all()) out.push_back(&d);
  std::stable_sort(out.begin(), out.end(), [](auto* a, auto* b) {
    return std::tie(a->span.file, a->span.line, a->span.col) < std::tie(b->span.file, b->span.line, b->span.col);
  });
  return out;
}

std::string shown_path(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  for (const fs::path& base : {golden_dir(), fs::path(sinktest::source_dir())}) {
    fs::path rel = p.lexically_relative(base.lexically_normal());
    if (!rel.empty() && rel.native().rfind("..", 0) != 0) return rel.string();
  }
  return p.string();
}

std::string actual_text(sink::Compilation& c, const fs::path& root) {
  const auto& sources = c.program().sources;
  int root_file = sources.find(root.string());
  std::string out;
  for (const sink::Diagnostic* d : sorted(c.diagnostics())) {
    std::string where;
    if (d->span.file >= 0 && d->span.file != root_file) where = shown_path(sources.file(d->span.file).path) + ":";
    if (d->span.valid()) where += std::to_string(d->span.line) + ":" + std::to_string(d->span.col) + ":";
    const char* kind = d->severity == sink::Severity::Error ? "error" : "warning";
    out += (where.empty() ? "" : where + " ") + kind + ": " + d->message + "\n";
    if (!d->hint.empty()) out += "  hint: " + replace_all(d->hint, sinktest::source_dir(), "$SRC") + "\n";
  }
  return out;
}

class DiagGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DiagGolden, MatchesExpected) {
  const fs::path spec = golden_dir() / (GetParam() + ".sink");
  const fs::path expected_path = golden_dir() / (GetParam() + ".expected");
  auto c = compile_path(spec.string());
  const std::string actual = actual_text(*c, spec);
  if (const char* update = std::getenv("SINKLAB_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(expected_path, std::ios::binary) << actual;
    GTEST_SKIP() << "wrote " << expected_path;
  }
  ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path << "; actual:\n" << actual;
  const std::string expected = read(expected_path);
  EXPECT_EQ(expected, actual) << "for " << spec << "; rendered:\n" << c->diagnostics().render();
  // A golden case exists to show an error: it must produce at least one, and
  // never plans alongside its errors.
  EXPECT_FALSE(c->diagnostics().all().empty());
  if (c->diagnostics().has_errors()) EXPECT_TRUE(c->plans().empty());
}

INSTANTIATE_TEST_SUITE_P(Diag, DiagGolden, ::testing::ValuesIn(golden_cases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The golden set is the coverage: it must not shrink unnoticed.
TEST(DiagGoldenSet, HasEnoughCasesEachWithExpectedFile) {
  auto names = golden_cases();
  EXPECT_GE(names.size(), 45u);
  for (const auto& n : names) {
    EXPECT_TRUE(fs::exists(golden_dir() / (n + ".expected"))) << n;
    EXPECT_NE(read(golden_dir() / (n + ".expected")), "") << n;
  }
  // And no stale expected file without its spec.
  for (const auto& entry : fs::directory_iterator(golden_dir()))
    if (entry.path().extension() == ".expected")
      EXPECT_TRUE(fs::exists(fs::path(entry.path()).replace_extension(".sink"))) << entry.path();
}

// The golden set covers every rule: each message shape below appears in at
// least one expected file.
TEST(DiagGoldenSet, CoversEveryRule) {
  std::string all;
  for (const auto& n : golden_cases()) all += read(golden_dir() / (n + ".expected"));
  const std::vector<std::string> rules = {"syntax error: unexpected end of file",
                                          "syntax error: unexpected '@'",
                                          "unterminated string",
                                          "unterminated comment",
                                          "invalid byte in source",
                                          "unknown field",
                                          "did you mean",
                                          "unknown block",
                                          "expects an integer, got",
                                          "expects a number, got",
                                          "expects true or false",
                                          "expects one of",
                                          "unknown value",
                                          "expects a string in double quotes",
                                          "expects a list such as",
                                          "expects a list of 2 values",
                                          "expects an expression, got",
                                          "must be a vector",
                                          "of two vectors is not defined",
                                          "expects an integer or none",
                                          "is out of range for",
                                          "is not a count of tokens",
                                          "has no meaning in an expression",
                                          "has no parameter",
                                          "given twice",
                                          "too many arguments",
                                          "unknown function",
                                          "unknown variable",
                                          "takes 2 arguments, got 1",
                                          "positional arguments only",
                                          "unknown preset or experiment",
                                          "unknown import",
                                          "import cycle",
                                          "'extends' cycle",
                                          "duplicate experiment name",
                                          "sweep axis 'optim.weight_decy' is not a field",
                                          "needs a non-empty list of values",
                                          "has no axis",
                                          "given twice",
                                          "two runs are named",
                                          "statements belong in a data block",
                                          "without normalization grows without bound",
                                          "must be below context",
                                          "covers the whole context",
                                          "is past train.context",
                                          "does not divide d",
                                          "does not divide heads",
                                          "exceeds heads",
                                          "exceeds d_head",
                                          "RoPE rotates pairs",
                                          "a fixed v* vector needs biases = k",
                                          "is outside the vocabulary",
                                          "is both fixed and random",
                                          "fixed to two different tokens",
                                          "is past measure.T",
                                          "learned positions stop at context",
                                          "give one offset or one per trigger",
                                          "leaves no ordinary tokens",
                                          "needs a path",
                                          "does not depend on qk",
                                          "has no effect with biases = none",
                                          "k_dims needs key biases",
                                          "in run '",
                                          "warning: measure.every"};
  for (const auto& r : rules) EXPECT_NE(all.find(r), std::string::npos) << "no golden case for: " << r;
}

// ---- all errors at once, in order -------------------------------------------

TEST(DiagAll, FiveIndependentErrorsAreAllReported) {
  auto c = compile_text(
      "experiment a extends tiny {\n"
      "  model { d = 64.5 }\n"          // not an integer
      "  optim.lr = 100\n"              // out of range
      "  modle.heads = 4\n"             // unknown block (as a dotted field)
      "  attention.score = expp(qk)\n"  // unknown function
      "}\n"
      "experiment b extends tinny {}\n");  // unknown preset
  const auto& all = c->diagnostics().all();
  ASSERT_EQ(all.size(), 5u) << c->diagnostics().render();
  EXPECT_EQ(c->diagnostics().error_count(), 5);
  std::vector<int> lines;
  for (const auto& d : all) lines.push_back(d.span.line);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 4, 5, 7}));
}

TEST(DiagAll, SyntaxErrorDoesNotHideSemanticErrorsElsewhere) {
  auto c = compile_text(
      "experiment a extends tiny {\n"
      "  model { d = }\n"   // syntax error
      "  optim.lr = 100\n"  // still checked
      "}\n"
      "experiment b extends tiny { train.context = 1 }\n");  // still checked
  std::vector<int> lines;
  for (const auto& d : c->diagnostics().all()) lines.push_back(d.span.line);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 5})) << c->diagnostics().render();
}

TEST(DiagAll, RenderedOutputIsSortedByLine) {
  // Passes report in their own order (parse, then check, then cross-field
  // rules); the rendered output must still read top to bottom.
  const std::string text =
      "experiment a extends tiny {\n"
      "  loss.prefix = 64\n"  // line 2: cross-field rule (reported last)
      "}\n"
      "experiment b extends tiny {\n"
      "  model.d = true\n"  // line 5: type error (reported second)
      "}\n"
      "experiment c extends tiny { model { d = 64 @ } }\n";  // line 7: syntax error (reported first)
  auto c = compile_text(text);
  const auto& all = c->diagnostics().all();
  ASSERT_EQ(all.size(), 3u) << c->diagnostics().render();
  // The raw order is not sorted, so the check below means something.
  EXPECT_FALSE(
      std::is_sorted(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.span.line < b.span.line; }));
  const std::string rendered = c->diagnostics().render();
  std::regex where("test\\.sink:(\\d+):(\\d+): ");
  std::vector<int> lines;
  for (auto it = std::sregex_iterator(rendered.begin(), rendered.end(), where); it != std::sregex_iterator(); ++it)
    lines.push_back(std::stoi((*it)[1]));
  EXPECT_EQ(lines, (std::vector<int>{2, 5, 7})) << rendered;
}

// ---- fixes -------------------------------------------------------------------

// A "did you mean" carries its fix as data: the text under the span and what it becomes. Each applied to the spec
// gives one that compiles, which is what the CLI shows and the language server's quick fix does.
TEST(DiagFix, EachFixAppliedCompiles) {
  const std::pair<std::string, std::string> cases[] = {
      {"experiment a extends tiny {\n  optim { weigth_decay = 0.5 }\n}\n", "weight_decay"},
      {"experiment a extends tiny {\n  optmi.lr = 1e-3\n}\n", "optim.lr"},
      {"experiment a extends tiny {\n  optmi { lr = 1e-3 }\n}\n", "optim"},
      {"experiment a extends tiny {\n  weight_decay = 0.1\n}\n", "optim.weight_decay"},
      {"experiment a extends tinny {}\n", "tiny"},
      {"experiment a extends tiny {\n  attention { score = sigmod(qk) }\n}\n", "sigmoid"},
      {"experiment a extends tiny {\n  attention { score = sigmoid(qq) }\n}\n", "qk"},
      {"experiment a extends tiny {\n  model.norm = rmsnrom\n}\n", "rmsnorm"},
  };
  for (const auto& [text, replacement] : cases) {
    SCOPED_TRACE(text);
    auto c = compile_text(text);
    ASSERT_EQ(c->diagnostics().all().size(), 1u) << c->diagnostics().render();
    const sink::Diagnostic& d = c->diagnostics().all().front();
    ASSERT_TRUE(d.fix.has_value()) << c->diagnostics().render();
    EXPECT_EQ(d.fix->replacement, replacement);
    int applied = 0;
    const std::string fixed = sink::apply_fixes(text, d.fix->span.file, c->diagnostics().all(), &applied);
    EXPECT_EQ(applied, 1);
    auto again = compile_text(fixed);
    EXPECT_FALSE(again->diagnostics().has_errors()) << fixed << again->diagnostics().render();
  }
}

// Several fixes in one file, two on one line, applied together; a fix in another file is not applied to this one.
TEST(DiagFix, FixesApplyTogether) {
  const std::string text =
      "experiment a extends tinny {\n  optim { weigth_decay = 0.5  lrr = 1e-3 }\n  model.norm = rmsnrom\n}\n";
  auto c = compile_text(text);
  const auto& all = c->diagnostics().all();
  ASSERT_FALSE(all.empty());
  int applied = 0;
  EXPECT_EQ(sink::apply_fixes(text, all.front().span.file + 1, all, &applied), text);
  EXPECT_EQ(applied, 0);
  std::string fixed = text;
  // (an unknown base stops the checking of the body: fixed first, the body's errors come out next)
  for (int round = 0; round < 3 && compile_text(fixed)->diagnostics().has_errors(); ++round) {
    auto again = compile_text(fixed);
    fixed = sink::apply_fixes(fixed, again->diagnostics().all().front().span.file, again->diagnostics().all());
  }
  EXPECT_EQ(fixed,
            "experiment a extends tiny {\n  optim { weight_decay = 0.5  lr = 1e-3 }\n  model.norm = rmsnorm\n}\n");
}

// Nothing close: a hint listing what there is, and no fix.
TEST(DiagFix, NoFixWithoutASuggestion) {
  auto c = compile_text("experiment a extends tiny {\n  optim { zzzzzzzzzz = 1 }\n}\n");
  ASSERT_EQ(c->diagnostics().all().size(), 1u);
  EXPECT_FALSE(c->diagnostics().all().front().fix.has_value()) << c->diagnostics().render();
}

// ---- rendering ---------------------------------------------------------------

TEST(DiagRender, SourceLineAndCaretUnderTheColumn) {
  auto c = compile_text("experiment a extends tiny {\n  optim { weigth_decay = 0.5 }\n}\n");
  ASSERT_EQ(c->diagnostics().all().size(), 1u);
  const std::string r = c->diagnostics().render();
  const std::string expected = sink::testing::source_dir() +
                               "/test.sink:2:11: error: unknown field 'optim.weigth_decay'\n"
                               "    optim { weigth_decay = 0.5 }\n"
                               "            ^~~~~~~~~~~~\n"
                               "            weight_decay\n"  // the fix, under what it replaces
                               "  hint: did you mean 'optim.weight_decay'?\n"
                               "1 error generated.\n";
  EXPECT_EQ(r, expected);
  // Spelled out: the caret sits under column 11 of the source line, both
  // printed with the same two-space indent.
  std::istringstream lines(r);
  std::string header, source, caret;
  std::getline(lines, header);
  std::getline(lines, source);
  std::getline(lines, caret);
  EXPECT_EQ(source.substr(2), "  optim { weigth_decay = 0.5 }");
  ASSERT_NE(caret.find('^'), std::string::npos);
  EXPECT_EQ(caret.find('^') - 2 + 1, 11u);
  EXPECT_EQ(source[caret.find('^')], 'w');
}

TEST(DiagRender, ColumnsCountBytesAfterMultiByteText) {
  // "é" is two bytes: the caret (and the column) count bytes, as the source
  // line is printed byte for byte.
  auto c = compile_text("experiment a extends tiny { data.corpus = builtin(\"\xc3\xa9t\xc3\xa9\") model.d = true }\n");
  ASSERT_EQ(c->diagnostics().all().size(), 1u) << c->diagnostics().render();
  const auto& d = c->diagnostics().all()[0];
  EXPECT_EQ(d.span.col, 70);
  EXPECT_EQ(d.span.end_col, 74);
  EXPECT_EQ(std::string("experiment a extends tiny { data.corpus = builtin(\"\xc3\xa9t\xc3\xa9\") model.d = true }")
                .substr(d.span.col - 1, 4),
            "true");
}

TEST(DiagRender, TabsKeepTheCaretAligned) {
  auto c = compile_text("experiment a extends tiny {\n\tmodel.d = true\n}\n");
  const std::string r = c->diagnostics().render();
  EXPECT_NE(r.find("\tmodel.d = true\n  \t          ^~~~\n"), std::string::npos) << r;
}

TEST(DiagRender, ColorOnlyWhenAsked) {
  auto c = compile_text("experiment a extends tiny { model.d = true }");
  EXPECT_EQ(c->diagnostics().render(false).find('\033'), std::string::npos);
  EXPECT_NE(c->diagnostics().render(true).find("\033[1;31merror"), std::string::npos);
}

TEST(DiagRender, GarbageBytesArePrintedSafely) {
  std::string text = "experiment a extends tiny { model.d = \x01\x02\x7f }\n";
  auto c = compile_text(text);
  ASSERT_TRUE(c->diagnostics().has_errors());
  const std::string r = c->diagnostics().render();
  for (char ch : {'\x01', '\x02', '\x7f'}) EXPECT_EQ(r.find(ch), std::string::npos);
}

}  // namespace
