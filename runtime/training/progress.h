// The progress a run shows as it trains: one line (step, loss, learning rate, speed, time left), redrawn in place on
// a terminal a few times a second, and written as a line of its own every train.log_every steps where stderr is a
// Slurm log or a pipe. The training loop says what happened; this file says how it reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sink::rt {

// A duration as a person reads it: "42s", "3m05s", "2h17m".
std::string format_duration(double seconds);

class TrainingProgress {
 public:
  // `first_step`: the step the loop began at (after a resume, the checkpoint's), which the speed counts from.
  TrainingProgress(std::string run, int64_t first_step, int64_t steps, int64_t tokens_per_step);

  // Tokens per second over the steps trained since the first, `train_s` the time those steps took.
  double tokens_per_second(int64_t step, double train_s) const;
  // "run step 40/100 loss 5.1234 lr 3.00e-04 12.3k tok/s ETA 1m05s": `step` steps done, time left at the speed so far.
  std::string line(int64_t step, double loss, double lr, double train_s) const;

 private:
  std::string run_;
  int64_t first_step_, steps_, tokens_per_step_;
};

// Where the line goes: redrawn on a terminal (at most every 250 ms), a line per log interval elsewhere, nowhere
// where progress is off (--no-progress, or a worker).
class ProgressDisplay {
 public:
  explicit ProgressDisplay(bool enabled);
  bool on_terminal() const { return terminal_; }
  // Whether a redraw is due now (a terminal's; the loop then reads the step's loss, which waits for the GPU).
  bool redraw_due() const;
  void redraw(const std::string& line);
  // A log interval's line: a line of its own, except on a terminal, where the redraw shows it.
  void logged(const std::string& line);
  // Leaves the terminal's line as it is and moves below it (before a message, and at the end).
  void finish_line();

 private:
  bool enabled_, terminal_;
  std::chrono::steady_clock::time_point last_redraw_;
  bool drawn_ = false;
};

}  // namespace sink::rt
