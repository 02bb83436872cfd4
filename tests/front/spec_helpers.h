// Shared by the spec tests: compile spec text and find runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "helpers.h"
#include "plan/plan.h"

namespace spectest {

namespace fs = std::filesystem;
using sink::Options;
using sink::Plan;
using sink::testing::compile_path;
using sink::testing::compile_text;

inline std::vector<std::string> sink_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(sink::testing::source_dir() + "/" + folder))
    if (e.is_regular_file() && e.path().extension() == ".sink") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::vector<std::string> spec_files() { return sink_files("specs"); }

inline Options with_base(const std::string& base) {
  Options o;
  o.base = base;
  return o;
}

inline Options with_set(std::vector<std::string> overrides, const std::string& base = "") {
  Options o;
  o.overrides = std::move(overrides);
  o.base = base;
  return o;
}

inline std::string rendered(sink::Compilation& c) { return c.diagnostics().render(); }

// Compiles and insists on no diagnostic at all (warnings included).
inline std::vector<Plan> clean_plans(const std::string& text, Options options = {}) {
  auto c = compile_text(text, options);
  EXPECT_TRUE(c->diagnostics().all().empty()) << "spec:\n" << text << "\n" << rendered(*c);
  return c->plans();
}

inline const Plan* find_plan(const std::vector<Plan>& plans, const std::string& name) {
  for (const auto& p : plans)
    if (p.name == name) return &p;
  return nullptr;
}

// The single run of `body` inside `experiment a extends BASE { ... }` (`defaults` when no base).
inline Plan run_of(const std::string& body, const std::string& base = "") {
  std::string text = "experiment a" + (base.empty() ? "" : " extends " + base) + " {\n" + body + "\n}\n";
  auto plans = clean_plans(text);
  if (plans.empty()) {
    ADD_FAILURE() << "no plan for:\n" << text;
    return Plan{};
  }
  return plans[0];
}

inline std::string hash_of(const std::string& body, const std::string& base = "") { return run_of(body, base).hash(); }

}  // namespace spectest
