#include "runtime/gpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_text.h"
#include "runtime/attention/cuda_driver.h"
#include "support/fnv1a.h"
#include "support/installation.h"

namespace sink::rt {
namespace {

constexpr const char* kOverride = "SINKLAB_GPU_FEATURES";

std::string capability_text(int capability) {
  return fmt::format("compute capability {}.{}", capability / 10, capability % 10);
}

std::vector<std::string> words_of(std::string_view text, const char* separators) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text) {
    if (std::string_view(separators).find(c) != std::string_view::npos) {
      if (!word.empty()) out.push_back(word), word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(word);
  return out;
}

std::string every_name() {
  std::string names;
  for (const auto& row : kGpuFeatureRows) names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

// What the override says of `row`: nothing (nullopt), or its word ("on", "off" or a mode). Checks every entry,
// whichever row is asked: a misspelt name fails the first decision, not the one it was meant for.
std::optional<std::string> override_of(const GpuFeatureRow& row, std::string_view text) {
  std::optional<std::string> said;
  for (const std::string& entry : words_of(text, ", ")) {
    const auto eq = entry.find('=');
    const std::string name = entry.substr(0, eq);
    std::string word = eq == std::string::npos ? "on" : entry.substr(eq + 1);
    if (word == "1") word = "on";
    if (word == "0") word = "off";
    const GpuFeatureRow* named = nullptr;
    for (const auto& r : kGpuFeatureRows)
      if (r.name == name) named = &r;
    if (!named)
      throw std::runtime_error(
          fmt::format("{}: no GPU feature is called '{}' (the features: {})", kOverride, name, every_name()));
    const auto modes = words_of(named->modes, " ");
    if (word != "on" && word != "off" && std::find(modes.begin(), modes.end(), word) == modes.end())
      throw std::runtime_error(fmt::format("{}: {} takes on, off{}{}, not '{}' (the features: {})", kOverride, name,
                                           modes.empty() ? "" : " or ", std::string(named->modes), word, every_name()));
    if (named->feature == row.feature) said = word;
  }
  return said;
}

}  // namespace

FeatureDecision decide_gpu_feature(const GpuFeatureRow& row, int capability, std::string_view override_text,
                                   std::string_view kernel_hash) {
  if (auto word = override_of(row, override_text)) {
    if (*word == "off") return {false, "", fmt::format("off ({}={}=off)", kOverride, row.name)};
    const std::string mode = *word == "on" ? "" : *word;
    return {true, mode,
            fmt::format("on{} (asked: {}={})", mode.empty() ? "" : " in mode " + mode, kOverride, row.name)};
  }
  const std::string opt_in = fmt::format("{}={} runs it", kOverride, row.name);
  if (row.ran_on == 0) return {false, "", fmt::format("off (no GPU has run it; {})", opt_in)};
  if (row.kernel_hash != kernel_hash)
    return {
        false, "",
        fmt::format("off (it ran at kernel text {}, these kernels are {}; {})", row.kernel_hash, kernel_hash, opt_in)};
  if (row.ran_on != capability)
    return {false, "",
            fmt::format("off (it ran on {}, this GPU is {}; {})", capability_text(row.ran_on),
                        capability ? capability_text(capability) : "of unknown capability", opt_in)};
  return {true, "", fmt::format("on (a GPU check ran it on {} at these kernels)", capability_text(row.ran_on))};
}

FeatureDecision gpu_feature(GpuFeature feature, int capability) {
  const char* text = std::getenv(kOverride);
  return decide_gpu_feature(kGpuFeatureRows[static_cast<size_t>(feature)], capability, text ? text : "",
                            kernel_text_hash());
}

std::string gpu_features_report(int capability) {
  std::ostringstream out;
  for (const auto& row : kGpuFeatureRows) out << row.name << ": " << gpu_feature(row.feature, capability).why << "\n";
  return out.str();
}

int gpu_capability(int device) {
  try {
    return cuda::device_properties(device).capability;
  } catch (const std::exception&) {
    return 0;
  }
}

const std::string& kernel_text_hash() {
  static const std::string hash = [] {
    namespace text = kernels::cuda_text;
    Fnv1a h;
    for (int t = 0; t < text::kTextCount; ++t) h.add(text::kEveryText[t]);
    h.add(version());
    return h.hex();
  }();
  return hash;
}

}  // namespace sink::rt
