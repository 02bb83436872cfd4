#include "runtime/training/stale_runs.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "plan/numerics_version.h"
#include "plan/run_record.h"
#include "support/remove_tree.h"

namespace sink::rt {
namespace fs = std::filesystem;
namespace key = run_record::summary;

namespace {

void sync_to_disk(const fs::path& path, bool folder) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (folder ? O_DIRECTORY : 0));
  if (fd < 0) throw std::runtime_error(fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  const bool synced = ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!synced) throw std::runtime_error(fmt::format("cannot sync '{}': {}", path.string(), std::strerror(error)));
}

// `from` into `to`: hard links where `link` allows (a file the runtime replaces by rename keeps its old bytes
// in the link), copies where the runtime appends in place (log.txt) or links are refused.
void keep(const fs::path& from, const fs::path& to, bool link) {
  if (fs::is_directory(from)) {
    fs::create_directory(to);
    for (const auto& e : fs::directory_iterator(from)) keep(e.path(), to / e.path().filename(), link);
    sync_to_disk(to, true);
    return;
  }
  if (link && ::link(from.c_str(), to.c_str()) == 0) return;
  fs::copy_file(from, to);
  sync_to_disk(to, false);
}

}  // namespace

int64_t recorded_numerics_version(const nlohmann::json& summary) {
  auto it = summary.find(key::kNumericsVersion);
  return it != summary.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

bool is_stale(const nlohmann::json& summary) {
  return summary.value(key::kStatus, "") == run_record::status_name(run_record::RunStatus::Completed) &&
         numerics_are_stale(recorded_numerics_version(summary));
}

std::string stale_note(const nlohmann::json& summary) {
  const int64_t v = recorded_numerics_version(summary);
  return fmt::format(
      "trained under numerics version {}, this sinklab computes version {}: its numbers may differ from what "
      "this sinklab would compute; kept as it is, `sinkc run --retrain-stale` trains it again",
      v == 0 ? std::string("0 (none recorded)") : std::to_string(v), kNumericsVersion);
}

std::string set_aside_stale_results(const std::string& run_dir, const nlohmann::json& summary) {
  const fs::path run(run_dir), stale = run / "stale";
  fs::create_directories(stale);
  // A copy a crash interrupted: the run's own files are still where they were.
  const fs::path incoming = stale / ".incoming";
  sink::remove_tree(incoming);
  fs::create_directory(incoming);
  for (const auto& e : fs::directory_iterator(run)) {
    const std::string name = e.path().filename().string();
    if (name == "stale" || name == "lock" || e.path().extension() == ".tmp") continue;
    keep(e.path(), incoming / name, name == "checkpoint");
  }
  sync_to_disk(incoming, true);
  const int64_t v = recorded_numerics_version(summary);
  fs::path kept = stale / fmt::format("numerics-{}", v);
  for (int k = 2; fs::exists(kept); ++k) kept = stale / fmt::format("numerics-{}-{}", v, k);
  fs::rename(incoming, kept);
  sync_to_disk(stale, true);
  for (const char* checkpoint : {"state.pt", "state.prev.pt", "state.bad.pt"}) {
    std::error_code ec;
    fs::remove(run / "checkpoint" / checkpoint, ec);
  }
  return kept.string();
}

}  // namespace sink::rt
