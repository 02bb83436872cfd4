#include "runtime/attention/cuda_tuning.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "kernels/cuda/cuda_text.h"
#include "runtime/gpu_features.h"
#include "runtime/processes/process.h"
#include "support/installation.h"

namespace sink::rt {
namespace {

// A tile choice as a tuning table records it: the fields of kernels/cuda/tile_choice.h's SINK_CUDA_TILE_FIELDS.
nlohmann::json tiles_json(const kernels::CudaTiles& t) {
  nlohmann::json j;
#define SINK_TILE_TO_JSON(type, name, initial) j[#name] = t.name;
  SINK_CUDA_TILE_FIELDS(SINK_TILE_TO_JSON)
#undef SINK_TILE_TO_JSON
  return j;
}

// A table's tensor-core tiles; a field it lacks (a table written before the kernels had that choice) the default.
kernels::CudaTiles tiles_of(const nlohmann::json& j) {
  kernels::CudaTiles t;
  t.tensor_cores = true;
#define SINK_TILE_OF_JSON(type, name, initial) t.name = j.value(#name, type{initial});
  SINK_CUDA_TILE_FIELDS(SINK_TILE_OF_JSON)
#undef SINK_TILE_OF_JSON
  return t;
}

// The table at `path`; empty where there is none, and where the file is not a table (said once per file).
nlohmann::json read_table(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (path.empty() || !in) return nlohmann::json::object();
  try {
    nlohmann::json table = nlohmann::json::parse(in);
    if (table.is_object()) return table;
  } catch (const std::exception&) {
  }
  static std::set<std::string> warned;
  if (warned.insert(path.string()).second)
    std::cerr << "sinklab: " << path.string() << " is not a tuning table; measuring again\n";
  return nlohmann::json::object();
}

std::optional<KernelTiles> entry_tiles(const nlohmann::json& table, const std::string& key) {
  if (!table.contains(key)) return std::nullopt;
  try {
    const auto& e = table.at(key);
    // Tiles measured on other kernel text are not these kernels' tiles (nor checked against their results).
    if (e.value("kernels", "") != kernel_text_hash()) return std::nullopt;
    KernelTiles t{tiles_of(e.at("forward")), tiles_of(e.at("backward_keys")), tiles_of(e.at("backward_queries"))};
    if (e.contains("fused_backward_keys")) t.fused = tiles_of(e.at("fused_backward_keys"));
    t.seconds = e.value("seconds", std::map<std::string, double>{});
    return t;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::filesystem::path tuning_table_path() { return kernel_cache_dir() / "tiles.json"; }

std::string tuning_key(const std::string& gpu, const kernels::KernelSpec& spec, kernels::CudaStorage storage) {
  const char* stored = storage == kernels::CudaStorage::Float16 ? "half" : "bf16";
  return fmt::format("{} | {} | {} storage | d_head {}", gpu, spec.describe(), stored, spec.d_head);
}

std::optional<KernelTiles> remembered_tiles(const std::string& key) {
  if (auto measured_here = entry_tiles(read_table(tuning_table_path()), key)) return measured_here;
  const char* tune = std::getenv("SINKLAB_TUNE");
  if (tune && std::string(tune) == "1") return std::nullopt;  // measure here what the shipped table holds
  return entry_tiles(read_table(shipped_tuning_table()), key);
}

namespace {

// The table, changed by `change`, written whole to a temporary and renamed: what other processes wrote in between
// reading and writing is kept. A full disk costs the next process a measurement, nothing else.
void change_table(const std::function<void(nlohmann::json&)>& change) {
  std::error_code ec;
  std::filesystem::create_directories(kernel_cache_dir(), ec);
  nlohmann::json table = read_table(tuning_table_path());
  change(table);
  const auto temporary = tuning_table_path().string() + fmt::format(".{}.tmp", getpid());
  {
    std::ofstream out(temporary);
    out << table.dump(1) << "\n";
    if (!out) {
      std::filesystem::remove(temporary, ec);
      return;
    }
  }
  std::filesystem::rename(temporary, tuning_table_path(), ec);
  if (ec) std::filesystem::remove(temporary, ec);
}

void record_failure(const nlohmann::json& measurement, const std::string& why) {
  char at[32] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json record = measurement;
  record["why"] = why, record["at"] = at;
  change_table([&](nlohmann::json& table) {
    if (!table.contains("failed") || !table["failed"].is_array()) table["failed"] = nlohmann::json::array();
    table["failed"].push_back(record);
  });
}

nlohmann::json measurement_json(const std::string& gpu, const std::string& key, const std::string& kernel,
                                const kernels::CudaTiles& tiles) {
  return {
      {"gpu", gpu}, {"key", key}, {"kernel", kernel}, {"tiles", tiles_json(tiles)}, {"kernels", kernel_text_hash()}};
}

// Replaces what the open file `fd` holds (nothing where it could not be opened).
void overwrite(int fd, const std::string& text) {
  if (fd < 0 || ftruncate(fd, 0) != 0) return;
  if (pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // A journal without its note: a crash now is not recorded, which costs one more crash at most.
  }
}

std::filesystem::path journal_dir() { return kernel_cache_dir() / "measuring"; }

}  // namespace

void remember_tiles(const std::string& key, const KernelTiles& tiles) {
  change_table([&](nlohmann::json& table) {
    table[key] = {{"kernels", kernel_text_hash()},
                  {"forward", tiles_json(tiles.forward)},
                  {"backward_keys", tiles_json(tiles.keys)},
                  {"backward_queries", tiles_json(tiles.queries)}};
    if (tiles.fused) table[key]["fused_backward_keys"] = tiles_json(*tiles.fused);
    if (!tiles.seconds.empty()) table[key]["seconds"] = tiles.seconds;
  });
}

std::string failed_before(const std::string& gpu, const std::string& key, const kernels::CudaTiles& tiles) {
  const nlohmann::json table = read_table(tuning_table_path());
  if (!table.contains("failed") || !table.at("failed").is_array()) return {};
  const nlohmann::json wanted = tiles_json(tiles);
  for (const auto& f : table.at("failed")) {
    try {
      if (f.at("gpu") != gpu || f.at("kernels") != kernel_text_hash()) continue;
      const kernels::CudaTiles failed = tiles_of(f.at("tiles"));
      const bool these = f.at("key") == key && f.at("tiles") == wanted;
      if (!these && !(failed.hopper && tiles.hopper)) continue;
      const std::string what =
          fmt::format("{} with tiles {} failed on this GPU at {}: {}", f.at("kernel").get<std::string>(),
                      failed.describe(), f.at("at").get<std::string>(), f.at("why").get<std::string>());
      return these ? what
                   : fmt::format("{} ({}); no Hopper tiles are measured here since", what,
                                 f.at("key").get<std::string>());
    } catch (const std::exception&) {  // (a record another sinklab wrote differently: not ours to read)
    }
  }
  return {};
}

void record_failed_measurement(const std::string& gpu, const std::string& key, const std::string& kernel,
                               const kernels::CudaTiles& tiles, const std::string& why) {
  record_failure(measurement_json(gpu, key, kernel, tiles), why);
}

struct MeasurementJournal::Watch {
  std::mutex mutex;
  std::condition_variable changed;
  bool stop = false, said = false;
  std::string what;  // the measurement in flight, if any
  std::chrono::steady_clock::time_point since;
  std::thread thread;
};

MeasurementJournal::MeasurementJournal(std::string gpu, std::string key, std::chrono::seconds patience)
    : gpu_(std::move(gpu)), key_(std::move(key)), watch_(std::make_unique<Watch>()) {
  static std::atomic<int> journals{0};
  std::error_code ec;
  std::filesystem::create_directories(journal_dir(), ec);
  path_ = journal_dir() / fmt::format("{}-{}-{}.json", host_name(), getpid(), journals++);
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ >= 0 && flock(fd_, LOCK_EX | LOCK_NB) != 0) close(fd_), fd_ = -1;
  Watch& w = *watch_;
  w.thread = std::thread([&w, patience] {
    std::unique_lock<std::mutex> lock(w.mutex);
    while (!w.stop) {
      if (w.what.empty() || w.said) {
        w.changed.wait(lock);
        continue;
      }
      const auto deadline = w.since + patience;
      if (w.changed.wait_until(lock, deadline) == std::cv_status::timeout && !w.what.empty() && !w.said &&
          std::chrono::steady_clock::now() >= deadline) {
        std::cerr << fmt::format(
            "sinklab: measuring {} has taken {} s: a kernel that hangs never returns. Stop this process if it "
            "does not go on; the next tuning on this machine does not measure these tiles\n",
            w.what, patience.count());
        w.said = true;
      }
    }
  });
}

MeasurementJournal::~MeasurementJournal() {
  {
    std::lock_guard<std::mutex> lock(watch_->mutex);
    watch_->stop = true;
  }
  watch_->changed.notify_all();
  watch_->thread.join();
  if (fd_ >= 0) {
    unlink(path_.c_str());  // (while locked: a collector that opened it first finds it unlinked)
    close(fd_);
  }
}

void MeasurementJournal::measuring(const std::string& kernel, const kernels::CudaTiles& tiles) {
  kernel_ = kernel, tiles_ = tiles;
  overwrite(fd_, measurement_json(gpu_, key_, kernel, tiles).dump());
  {
    std::lock_guard<std::mutex> lock(watch_->mutex);
    watch_->what = fmt::format("{} with tiles {} ({})", kernel, tiles.describe(), key_);
    watch_->since = std::chrono::steady_clock::now(), watch_->said = false;
  }
  watch_->changed.notify_all();
}

void MeasurementJournal::done() {
  overwrite(fd_, "{}");
  {
    std::lock_guard<std::mutex> lock(watch_->mutex);
    watch_->what.clear();
  }
  watch_->changed.notify_all();
}

namespace {
std::atomic<bool> context_lost{false};
}  // namespace

bool device_context_lost() { return context_lost.load(); }

void MeasurementJournal::lost_device(const std::string& why) {
  context_lost.store(true);
  record_failed_measurement(gpu_, key_, kernel_, tiles_, "the device's context was lost: " + why);
  done();
}

int MeasurementJournal::collect_abandoned() {
  std::error_code ec;
  std::vector<std::filesystem::path> journals;
  for (const auto& entry : std::filesystem::directory_iterator(journal_dir(), ec)) journals.push_back(entry.path());
  int collected = 0;
  for (const auto& path : journals) {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st{};
    // Locked: its tuning is alive. Unlinked once we hold it: another collector (or its own tuning) took it first.
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0 || st.st_nlink == 0) {
      close(fd);
      continue;
    }
    std::string text(static_cast<size_t>(st.st_size), '\0');
    const bool read_whole = pread(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
    try {
      const nlohmann::json measurement = nlohmann::json::parse(read_whole ? text : "{}");
      if (measurement.contains("kernel")) {
        record_failure(measurement,
                       "the process measuring it ended before the measurement did (a fault, or a "
                       "hang it was stopped in)");
        ++collected;
      }
    } catch (const std::exception&) {  // (cut short: nothing to say about it)
    }
    unlink(path.c_str());
    close(fd);
  }
  return collected;
}

bool hopper_kernels_allowed(int capability) { return gpu_feature_on(GpuFeature::hopper, capability); }

bool tuning_enabled() {
  const char* v = std::getenv("SINKLAB_TUNE");
  return !(v && std::string(v) == "0");
}

bool fused_backward_allowed(int capability) {
  return gpu_feature_on(GpuFeature::fused_backward, capability) &&
         (capability < kernels::kHopperCapability || gpu_feature_on(GpuFeature::bulk_reduction, capability));
}

std::optional<kernels::CudaTiles> fused_backward(const KernelTiles& tiles, const kernels::KernelSpec& spec,
                                                 kernels::CudaStorage storage, int capability) {
  if (!fused_backward_allowed(capability)) return std::nullopt;
  if (gpu_feature(GpuFeature::fused_backward, capability).mode == "force" && !tiles.fused) {
    // Where the Hopper kernels run (tiles_to_run, on compute capability 9.0 alone), the Hopper one.
    const auto hopper =
        tiles.keys.hopper ? kernels::cuda_hopper_fused_candidates(spec, storage) : std::vector<kernels::CudaTiles>{};
    const auto candidates = hopper.empty() ? kernels::cuda_fused_candidates(spec, storage) : hopper;
    if (!candidates.empty()) return candidates.front();
  }
  return tiles.fused;
}

KernelTiles tiles_to_run(const KernelTiles& tiles, const kernels::KernelSpec& spec, kernels::CudaStorage storage,
                         int capability) {
  const FeatureDecision hopper = gpu_feature(GpuFeature::hopper, capability);
  KernelTiles out = tiles;
  kernels::CudaTiles* each[] = {&out.forward, &out.keys, &out.queries};
  if (!hopper.on) {
    for (kernels::CudaTiles* t : each)
      if (t->hopper) *t = kernels::cuda_tiles(spec, storage, capability);
    if (out.fused && out.fused->hopper) out.fused.reset();
  } else if ((hopper.mode == "force" || hopper.mode == "overlap") && capability == kernels::kHopperCapability) {
    // force: the first candidate each kernel has (waiting for each product); overlap: the forward's first
    // overlapped one besides.
    const auto candidates = kernels::cuda_hopper_candidates(spec, storage);
    for (kernels::CudaTiles* t : each)
      if (!candidates.empty() && (!t->hopper || t->overlap)) *t = candidates.front();
    for (const kernels::CudaTiles& c : candidates)
      if (hopper.mode == "overlap" && c.overlap) {
        out.forward = c;
        break;
      }
    out.fused.reset();
  }
  return out;
}

std::string describe_kernels(const KernelTiles& tiles, const std::optional<kernels::CudaTiles>& fused) {
  // (row_frags and overlap shape the forward and backward_queries alone)
  const auto flags = [](const kernels::CudaTiles& t, bool query_rows) {
    return fmt::format("{}{}{}", query_rows && t.row_frags > 1 ? fmt::format(" row_frags {}", t.row_frags) : "",
                       t.hopper ? " wgmma" : "", query_rows && t.hopper && t.overlap ? " overlapped" : "");
  };
  const kernels::CudaTiles& f = tiles.forward;
  std::string out = fmt::format("forward {}x{}{}", f.forward_rows, f.forward_keys, flags(f, true));
  if (fused)
    return out +
           fmt::format(", backward_keys {}x{} fused dQ{}", fused->key_rows, fused->key_queries, flags(*fused, false));
  const kernels::CudaTiles &k = tiles.keys, &q = tiles.queries;
  return out + fmt::format(", backward_keys {}x{}{}, backward_queries {}x{}{}", k.key_rows, k.key_queries,
                           flags(k, false), q.query_rows, q.query_keys, flags(q, true));
}

}  // namespace sink::rt
