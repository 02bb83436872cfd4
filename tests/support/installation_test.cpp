// The builtin corpora's lookup (support/installation.h): a missing one is an
// error that says how to assemble it; the large one has its own set-up flag.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/installation.h"
#include "support/remove_tree.h"

namespace fs = std::filesystem;

namespace {

class BuiltinCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::temp_directory_path() / ("sinklab-installation-" + std::to_string(getpid()));
    fs::create_directories(home_ / "data" / "builtin");
    const char* old = std::getenv("SINKLAB_HOME");
    if (old) old_home_ = old;
    setenv("SINKLAB_HOME", home_.c_str(), 1);
  }
  void TearDown() override {
    if (old_home_.empty())
      unsetenv("SINKLAB_HOME");
    else
      setenv("SINKLAB_HOME", old_home_.c_str(), 1);
    sink::remove_tree(home_);
  }
  static std::string error_of(const std::string& name) {
    try {
      sink::builtin_corpus(name);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  fs::path home_;
  std::string old_home_;
};

TEST_F(BuiltinCorpus, FoundUnderDataHome) {
  std::ofstream(home_ / "data" / "builtin" / "large.jsonl") << "{\"text\": \"x\"}\n";
  EXPECT_EQ(sink::builtin_corpus("large"), home_ / "data" / "builtin" / "large.jsonl");
}

TEST_F(BuiltinCorpus, AMissingOneSaysHowToAssembleIt) {
  EXPECT_NE(error_of("default").find("run scripts/setup.sh in the sources"), std::string::npos) << error_of("default");
  EXPECT_NE(error_of("large").find("scripts/setup.sh --large-corpus"), std::string::npos) << error_of("large");
  EXPECT_NE(error_of("large").find("build_corpus.py --large "), std::string::npos) << error_of("large");
  EXPECT_NE(error_of("larg").find("the builtin corpora are \"default\" and \"large\""), std::string::npos)
      << error_of("larg");
  EXPECT_EQ(error_of("default").find("the builtin corpora are"), std::string::npos) << error_of("default");
}

}  // namespace
