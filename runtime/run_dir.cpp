#include "runtime/run_dir.h"

#include <filesystem>
#include <fmt/format.h>
#include <sstream>
#include <stdexcept>

namespace sink::rt {
namespace fs = std::filesystem;

void write_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  fs::rename(tmp, path);
}

RunDir::RunDir(std::string path) : path_(std::move(path)) {
  fs::create_directories(path_ + "/checkpoint");
  log_.open(file("log.txt"), std::ios::app);
}

std::optional<nlohmann::json> RunDir::summary() const {
  std::ifstream f(file("summary.json"));
  if (!f) return std::nullopt;
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

void RunDir::write_summary(const nlohmann::json& j) const { write_atomically(file("summary.json"), j.dump(2) + "\n"); }

void RunDir::append_metrics(const nlohmann::json& j) {
  std::ofstream f(file("metrics.jsonl"), std::ios::app);
  f << j.dump() << "\n";
  f.flush();
}

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);  // a torn last line from a crash is skipped
  }
  return out;
}

void RunDir::truncate_metrics(int64_t step) {
  std::string kept;
  for (const auto& j : read_metrics(path_))
    if (j.value("step", int64_t{0}) <= step) kept += j.dump() + "\n";
  write_atomically(file("metrics.jsonl"), kept);
}

void RunDir::clear_metrics() { write_atomically(file("metrics.jsonl"), ""); }

void RunDir::log(const std::string& line) {
  log_ << line << "\n";
  log_.flush();
}

}  // namespace sink::rt
