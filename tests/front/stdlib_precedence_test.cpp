// A project's own copy of the stdlib (or any of its files defining a preset's
// name) takes precedence over the installed stdlib, without duplicate-name
// errors; two of the project's own files defining one name still collide.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

#include "helpers.h"
#include "support/remove_tree.h"

namespace fs = std::filesystem;
using sink::testing::compile_path;

namespace {

class ProjectFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sinklab-precedence-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    sink::remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { sink::remove_tree(dir_); }

  void write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
  }
  // The installed presets, with `tiny`'s width changed to `d`.
  void copy_stdlib_with_tiny_width(int d) {
    fs::copy(sink::testing::stdlib_dir(), dir_ / "stdlib", fs::copy_options::recursive);
    std::ifstream in(dir_ / "stdlib/presets.sink");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex(R"(experiment tiny \{\s*model \{ d = (64))")))
        << "presets.sink no longer starts tiny with `model { d = 64`";
    text.replace(static_cast<size_t>(m.position(1)), 2, std::to_string(d));
    write("stdlib/presets.sink", text);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(ProjectFolder, CopiedStdlibReplacesTheInstalledPresets) {
  copy_stdlib_with_tiny_width(48);
  write("s.sink", "import \"stdlib/presets.sink\"\nexperiment a extends tiny { optim.lr = 1e-3 }\n");
  auto c = compile_path(path("s.sink"));
  ASSERT_FALSE(c->diagnostics().has_errors()) << c->diagnostics().render();
  ASSERT_EQ(c->plans().size(), 1u);
  EXPECT_EQ(c->plans()[0].integer("model.d"), 48);
}

TEST_F(ProjectFolder, BaseSwapUsesTheProjectsPresets) {
  copy_stdlib_with_tiny_width(48);
  write("s.sink", "import \"stdlib/presets.sink\"\nexperiment a extends tiny_text { optim.lr = 1e-3 }\n");
  sink::Options options;
  options.base = "tiny";
  auto c = compile_path(path("s.sink"), options);
  ASSERT_FALSE(c->diagnostics().has_errors()) << c->diagnostics().render();
  ASSERT_EQ(c->plans().size(), 1u);
  EXPECT_EQ(c->plans()[0].integer("model.d"), 48);
  EXPECT_DOUBLE_EQ(c->plans()[0].number("optim.lr"), 1e-3);
}

TEST_F(ProjectFolder, ASpecsOwnPresetNameReplacesTheInstalledOne) {
  write("s.sink", "experiment tiny extends tiny_text { model.d = 32 }\nexperiment a extends tiny {}\n");
  auto c = compile_path(path("s.sink"));
  ASSERT_FALSE(c->diagnostics().has_errors()) << c->diagnostics().render();
  bool found = false;
  for (const auto& p : c->plans())
    if (p.name == "a") {
      found = true;
      EXPECT_EQ(p.integer("model.d"), 32);
    }
  EXPECT_TRUE(found);
}

TEST_F(ProjectFolder, TwoProjectFilesDefiningOneNameStillCollide) {
  write("one.sink", "experiment tiny extends tiny_text { model.d = 32 }\n");
  write("s.sink", "import \"one.sink\"\nexperiment tiny extends tiny_text { model.d = 16 }\n");
  auto c = compile_path(path("s.sink"));
  ASSERT_EQ(c->diagnostics().error_count(), 1) << c->diagnostics().render();
  EXPECT_NE(c->diagnostics().render().find("duplicate experiment name 'tiny'"), std::string::npos)
      << c->diagnostics().render();
}

}  // namespace
