// A run's directory, runs/<run>-<hash8>/: plan.toml, metrics.jsonl (one
// flushed line per evaluation), losses.jsonl (one per train.log_every steps),
// summary.json (written atomically), log.txt,
// checkpoint/ (the latest state.pt and the one before, state.prev.pt).
// Whatever is written survives a crash.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace sink::rt {

// A file that appears under its name whole or not at all: written to
// `path`.tmp with every write(2) checked, fsync'd, then renamed. A full disk
// is an exception from commit(), never a short file under the final name; a
// writer destroyed before commit() removes its temporary file.
class FileWriter {
 public:
  explicit FileWriter(std::string path);  // throws when the temporary file cannot be created
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  // Never throws and always returns n: LibTorch's zip writer, which calls
  // this, throws from its destructor on a short write (std::terminate). The
  // first error is kept, later bytes dropped, and commit() reports it.
  size_t write(const void* data, size_t n) noexcept;
  // fsync, close, then `before_rename` (the checkpoint rotation), the rename
  // and an fsync of the folder. Throws std::runtime_error naming the file.
  void commit(const std::function<void()>& before_rename = {});
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  std::string error_;
  bool committed_ = false;
  size_t written_ = 0, fault_after_ = SIZE_MAX;
  int fault_errno_ = 0;
};

// For tests: FileWriters opened afterwards for a path ending in `suffix`
// fail with `error` once `bytes` are written, as a disk filling up mid-file
// does. A size limit (RLIMIT_FSIZE) cannot single out one file of a run;
// this can. An empty suffix turns it off.
void inject_write_fault(const std::string& suffix, size_t bytes, int error);

class RunDir {
 public:
  // `writer` false: the view a data-parallel worker other than rank 0 has,
  // whose writes do nothing (rank 0 alone writes a run directory).
  explicit RunDir(std::string path, bool writer = true);
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string checkpoint() const { return file("checkpoint/state.pt"); }
  std::string previous_checkpoint() const { return file("checkpoint/state.prev.pt"); }
  // Commits `written` (a FileWriter for checkpoint()) as the latest
  // checkpoint, the one it replaces becoming the previous. The latest name
  // always holds a whole checkpoint: the old one is hard-linked to the
  // previous name before the new one is renamed over it.
  void commit_checkpoint(FileWriter& written) const;
  // After resuming from the previous checkpoint: it becomes the latest, and
  // the unusable latest is kept as checkpoint/state.bad.pt for inspection.
  void set_aside_latest_checkpoint() const;

  std::optional<nlohmann::json> summary() const { return read_summary(path_); }
  // Without a RunDir, which creates the folder: for readers of finished runs.
  static std::optional<nlohmann::json> read_summary(const std::string& run_dir);
  void write_summary(const nlohmann::json& j) const;
  void append_metrics(const nlohmann::json& j);
  void append_loss(int64_t step, double loss);  // a losses.jsonl line
  // Drops the metrics.jsonl and losses.jsonl lines past `step` (a resumed run rewrites them).
  void truncate_lines(int64_t step);
  void clear_lines();  // both files emptied: a run starting over
  void log(const std::string& line);

 private:
  std::string path_;
  bool writer_ = true;
  std::ofstream log_;
};

// Writes `text` to `path` through a temporary file and a rename.
void write_atomically(const std::string& path, const std::string& text);
std::vector<nlohmann::json> read_metrics(const std::string& run_dir);

}  // namespace sink::rt
