// A run's directory, runs/<run>-<hash8>/: plan.toml, metrics.jsonl (one
// flushed line per evaluation), summary.json (written atomically), log.txt,
// checkpoint/. Whatever is written survives a crash.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace sink::rt {

class RunDir {
 public:
  explicit RunDir(std::string path);
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string checkpoint() const { return file("checkpoint/state.pt"); }

  std::optional<nlohmann::json> summary() const;
  void write_summary(const nlohmann::json& j) const;
  void append_metrics(const nlohmann::json& j);
  // Drops metric lines past `step` (a resumed run rewrites them).
  void truncate_metrics(int64_t step);
  void clear_metrics();
  void log(const std::string& line);

 private:
  std::string path_;
  std::ofstream log_;
};

// Writes `text` to `path` through a temporary file and a rename.
void write_atomically(const std::string& path, const std::string& text);
std::vector<nlohmann::json> read_metrics(const std::string& run_dir);

}  // namespace sink::rt
