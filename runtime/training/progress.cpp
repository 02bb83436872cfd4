#include "runtime/training/progress.h"

#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

namespace sink::rt {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02}m", int(s) / 3600, (int(s) % 3600) / 60);
}

TrainingProgress::TrainingProgress(std::string run, int64_t first_step, int64_t steps, int64_t tokens_per_step)
    : run_(std::move(run)), first_step_(first_step), steps_(steps), tokens_per_step_(tokens_per_step) {}

double TrainingProgress::tokens_per_second(int64_t step, double train_s) const {
  return static_cast<double>(step - first_step_) * tokens_per_step_ / std::max(train_s, 1e-9);
}

std::string TrainingProgress::line(int64_t step, double loss, double lr, double train_s) const {
  const double tps = tokens_per_second(step, train_s);
  // No step timed yet (the first line after a resume): no speed, so no time left to say.
  const std::string eta =
      tps > 0 ? format_duration(static_cast<double>(steps_ - step) * tokens_per_step_ / tps) : std::string("?");
  return fmt::format("{} step {}/{} loss {:.4f} lr {:.2e} {:.1f}k tok/s ETA {}", run_, step, steps_, loss, lr,
                     tps / 1000, eta);
}

ProgressDisplay::ProgressDisplay(bool enabled)
    : enabled_(enabled), terminal_(enabled && isatty(2)), last_redraw_(std::chrono::steady_clock::now()) {}

bool ProgressDisplay::redraw_due() const {
  return terminal_ && std::chrono::steady_clock::now() - last_redraw_ > std::chrono::milliseconds(250);
}

void ProgressDisplay::redraw(const std::string& line) {
  if (!terminal_) return;
  fmt::print(stderr, "\r{:<100}", line);
  last_redraw_ = std::chrono::steady_clock::now();
  drawn_ = true;
}

void ProgressDisplay::logged(const std::string& line) {
  if (enabled_ && !terminal_) fmt::print(stderr, "{}\n", line);
}

void ProgressDisplay::finish_line() {
  if (drawn_) fmt::print(stderr, "\n");
  drawn_ = false;
}

}  // namespace sink::rt
