#include "results/tensorboard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <unistd.h>

#include "results/metrics.h"
#include "results/tfevents.h"

namespace sink::results {
namespace fs = std::filesystem;

namespace {

// TensorBoard's "relative" axis is wall time since the first point. The
// runs record training seconds per evaluation (elapsed_s), restarted by a
// --resume, and no start date: the file's modification time, the moment of
// the last evaluation, anchors them, and resumed segments are laid end to end.
std::vector<double> wall_times(const RunData& run) {
  std::vector<double> offsets;
  double carried = 0, previous = 0;
  for (const auto& e : run.evals) {
    const double elapsed = std::isfinite(e.elapsed_s) ? e.elapsed_s : previous;
    if (elapsed < previous) carried += previous;
    previous = elapsed;
    offsets.push_back(carried + elapsed);
  }
  double end = static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  std::error_code ec;
  auto mtime = fs::last_write_time(fs::path(run.dir) / "metrics.jsonl", ec);
  if (!ec) end = std::chrono::duration<double>(fs::file_time_type::clock::to_sys(mtime).time_since_epoch()).count();
  const double start = end - (offsets.empty() ? 0 : offsets.back());
  for (double& t : offsets) t += start;
  return offsets;
}

std::string event_file(const RunData& run) {
  const std::vector<double> wall = wall_times(run);
  std::string file = tfevents::file_version_record(wall.empty() ? 0 : wall.front());
  for (size_t i = 0; i < run.evals.size(); ++i) {
    tfevents::Scalars values;
    for (const auto& s : eval_series(run.evals[i])) values.push_back({s.name, s.value});
    file += tfevents::scalars_record(wall[i], run.evals[i].step, values);
  }
  return file;
}

// Through a temporary name without "tfevents" in it, which TensorBoard
// ignores: a viewer polling DIR never reads half a file.
void write_file(const fs::path& folder, const std::string& name, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw ResultsError(fmt::format("cannot create {}: {}", folder.string(), ec.message()));
  const fs::path tmp = folder / (".export-" + std::to_string(getpid()) + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f.flush()) throw ResultsError(fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, folder / name, ec);
  if (ec) throw ResultsError(fmt::format("cannot write {}: {}", (folder / name).string(), ec.message()));
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string leaf = e.path().filename().string();
    if (leaf != name && leaf.rfind(tfevents::kFilePrefix, 0) == 0) fs::remove(e.path(), ec);
  }
}

}  // namespace

TensorBoardExport write_tensorboard(const std::vector<RunData>& runs, const std::string& dir) {
  std::map<std::string, int> uses;
  for (const auto& r : runs) ++uses[r.plan.name];
  const std::string name = tfevents::event_file_name(tfevents::wall_time_now());
  TensorBoardExport out;
  for (const auto& r : runs) {
    if (r.evals.empty()) {
      out.skipped.push_back(fmt::format("{}: no evaluation yet ({})", r.plan.name, r.status_text()));
      continue;
    }
    const std::string folder = uses[r.plan.name] > 1 ? r.plan.dir_name() : r.plan.name;
    write_file(fs::path(dir) / folder, name, event_file(r));
    out.written.push_back({folder, (fs::path(dir) / folder / name).string(), r.evals.size()});
  }
  return out;
}

}  // namespace sink::results
