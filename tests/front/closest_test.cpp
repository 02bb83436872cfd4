// `did you mean` hints: closest() skips candidates whose length alone puts
// them past the hint limit. The skip must not change a single answer.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compiler/source.h"
#include "plan/schema.h"

namespace {

// closest() as it was before the skip: every candidate's distance.
std::string closest_by_every_distance(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 1 << 30;
  const int limit = std::max(1, static_cast<int>(word.size()) / 3 + 1);
  for (const auto& c : candidates) {
    const int d = sink::edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best_d <= limit && best_d < static_cast<int>(word.size()) ? best : "";
}

}  // namespace

TEST(Closest, HintsForTypos) {
  std::vector<std::string> paths;
  for (const auto& f : sink::schema()) paths.push_back(f.path);
  EXPECT_EQ(sink::closest("optim.lrr", paths), "optim.lr");
  EXPECT_EQ(sink::closest("model.layrs", paths), "model.layers");
  EXPECT_EQ(sink::closest("x", {"a"}), "");
  EXPECT_EQ(sink::closest(std::string(5000, 'q'), paths), "");
}

TEST(Closest, SkippingFarLengthsChangesNoAnswer) {
  std::vector<std::string> paths;
  for (const auto& f : sink::schema()) paths.push_back(f.path);
  std::mt19937 rng(7);
  for (int n = 0; n < 3000; ++n) {
    // A field path with a few random edits, or a random word of any length.
    std::string word = paths[rng() % paths.size()];
    const int edits = static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !word.empty(); ++e) {
      const size_t at = rng() % word.size();
      switch (rng() % 3) {
        case 0: word.erase(at, 1); break;
        case 1: word.insert(at, 1, static_cast<char>('a' + rng() % 26)); break;
        default: word[at] = static_cast<char>('a' + rng() % 26);
      }
    }
    if (n % 5 == 0) word = std::string(rng() % 30, static_cast<char>('a' + rng() % 26));
    ASSERT_EQ(sink::closest(word, paths), closest_by_every_distance(word, paths)) << "'" << word << "'";
  }
}
