// sink::remove_tree (support/remove_tree.h), the replacement of std::filesystem::remove_all, against trees built
// here whose entries are counted by hand: what goes, what stays (a linked folder outside), and what fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/remove_tree.h"

namespace fs = std::filesystem;

namespace {

class RemoveTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sinklab-remove-tree-" + std::to_string(getpid()));
    fs::remove(root_ / "outside" / "kept.txt");
    fs::create_directories(root_ / "outside");
    std::ofstream(root_ / "outside" / "kept.txt") << "not below the removed folder";
  }
  void TearDown() override {
    std::error_code ignored;
    sink::remove_tree(root_, ignored);
  }
  static void write(const fs::path& file) { std::ofstream(file) << file.filename().string(); }
  fs::path root_;
};

TEST_F(RemoveTree, RemovesAFolderAndEverythingBelowItCountingEachEntry) {
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree / "a" / "b" / "c");
  fs::create_directories(tree / "empty");
  write(tree / "top.txt");
  write(tree / "a" / "one.txt");
  write(tree / "a" / "b" / "two.txt");
  write(tree / "a" / "b" / "c" / "three.txt");
  // 5 folders (tree, a, b, c, empty) and 4 files.
  std::error_code error;
  EXPECT_EQ(sink::remove_tree(tree, error), 9u);
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(root_));
}

TEST_F(RemoveTree, RemovesALinkNeverWhatItLinksTo) {
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree);
  fs::create_directory_symlink(root_ / "outside", tree / "folder-link");
  fs::create_symlink(root_ / "outside" / "kept.txt", tree / "file-link");
  fs::create_symlink(root_ / "nowhere", tree / "dangling");
  EXPECT_EQ(sink::remove_tree(tree), 4u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_TRUE(fs::exists(root_ / "outside" / "kept.txt"));
  // A link named as the path itself: the link goes, its folder stays.
  fs::create_directory_symlink(root_ / "outside", root_ / "link");
  EXPECT_EQ(sink::remove_tree(root_ / "link"), 1u);
  EXPECT_TRUE(fs::exists(root_ / "outside" / "kept.txt"));
}

TEST_F(RemoveTree, AFileAloneAndAMissingPath) {
  write(root_ / "file.txt");
  EXPECT_EQ(sink::remove_tree(root_ / "file.txt"), 1u);
  EXPECT_FALSE(fs::exists(root_ / "file.txt"));
  std::error_code error = std::make_error_code(std::errc::io_error);
  EXPECT_EQ(sink::remove_tree(root_ / "never-made", error), 0u);
  EXPECT_FALSE(error) << "a missing path is no error, and a success clears the code";
  EXPECT_EQ(sink::remove_tree(""), 0u);
}

TEST_F(RemoveTree, AFailureIsReportedWithItsPath) {
  // A path through a file cannot be removed, whatever the user's rights (root's included).
  write(root_ / "file.txt");
  const fs::path through = root_ / "file.txt" / "below";
  std::error_code error;
  EXPECT_EQ(sink::remove_tree(through, error), static_cast<std::uintmax_t>(-1));
  EXPECT_EQ(error, std::make_error_code(std::errc::not_a_directory)) << error.message();
  try {
    sink::remove_tree(through);
    ADD_FAILURE() << "no exception";
  } catch (const fs::filesystem_error& e) {
    EXPECT_EQ(e.path1(), through);
    EXPECT_EQ(e.code(), std::make_error_code(std::errc::not_a_directory));
  }
  EXPECT_TRUE(fs::exists(root_ / "file.txt"));
}

}  // namespace
