#include "runtime/training/live_events.h"

#include <cmath>

#include "results/metrics.h"

namespace sink::rt {

void LiveEvents::step(int64_t step, double loss) {
  if (!std::isfinite(loss)) return;  // no loss read yet (or a diverged one, which the run reports itself)
  add(step, {{"loss", loss}});
}

void LiveEvents::measurement(int64_t step, const nlohmann::json& metrics_line) {
  if (!on_) return;
  tfevents::Scalars values;
  for (const auto& s : results::eval_series(results::read_eval(metrics_line, "the measurement")))
    values.push_back({s.name, s.value});
  add(step, values);
}

void LiveEvents::add(int64_t step, const tfevents::Scalars& values) {
  if (!on_ || values.empty()) return;
  try {
    log_.add(step, values);
  } catch (const std::exception& e) {
    on_ = false;
    dir_.log(std::string("TensorBoard events stopped: ") + e.what());
  }
}

}  // namespace sink::rt
