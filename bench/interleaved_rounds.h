// Two forms of one computation timed in the same process, in interleaved rounds (one of each per round), so that a
// machine that slows down or speeds up shifts both alike: each form's median seconds.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

namespace sink::bench {

inline std::pair<double, double> interleaved_medians(const std::function<void()>& a, const std::function<void()>& b,
                                                     int rounds) {
  auto seconds = [](const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  a(), b();  // warm-up
  std::vector<double> a_s, b_s;
  for (int r = 0; r < rounds; ++r) a_s.push_back(seconds(a)), b_s.push_back(seconds(b));
  return {median(a_s), median(b_s)};
}

}  // namespace sink::bench
