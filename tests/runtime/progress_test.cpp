// The progress line a run prints (runtime/training/progress.h), against values worked out by hand.
#include <gtest/gtest.h>

#include "runtime/training/progress.h"

using namespace sink::rt;

TEST(Progress, DurationsReadAsAPersonWrites) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(2 * 3600 + 17 * 60 + 40), "2h17m");
}

// 4,096 tokens a step; resumed at step 10, so 30 steps trained in 10 s at step 40: 12,288 tokens/s, and the 60 steps
// left take 20 s at that speed.
TEST(Progress, SpeedCountsFromTheFirstStepTrainedHere) {
  const TrainingProgress progress("tiny", 10, 100, 4096);
  EXPECT_DOUBLE_EQ(progress.tokens_per_second(40, 10.0), 30 * 4096 / 10.0);
  EXPECT_EQ(progress.line(40, 5.12345, 3e-4, 10.0), "tiny step 40/100 loss 5.1235 lr 3.00e-04 12.3k tok/s ETA 20s");
}

// No step trained yet (the first line after a resume): no division by zero, a speed of 0 and an unknown time left
// rather than a NaN or an overflowed number of hours.
TEST(Progress, NoStepsTrainedYetReadsAsZeroSpeed) {
  const TrainingProgress progress("tiny", 10, 100, 4096);
  EXPECT_EQ(progress.tokens_per_second(10, 0.0), 0.0);
  const std::string line = progress.line(10, 5.0, 1e-3, 0.0);
  EXPECT_EQ(line.find("nan"), std::string::npos) << line;
  EXPECT_NE(line.find("0.0k tok/s ETA ?"), std::string::npos) << line;
}

// Off (a worker, --no-progress) nothing is due and nothing is drawn; with stderr not a terminal (as under ctest) no
// redraw is ever due either.
TEST(Progress, NoRedrawWithoutATerminal) {
  ProgressDisplay off(false), piped(true);
  EXPECT_FALSE(off.on_terminal());
  EXPECT_FALSE(off.redraw_due());
  if (piped.on_terminal()) GTEST_SKIP() << "stderr is a terminal here";
  EXPECT_FALSE(piped.redraw_due());
}
