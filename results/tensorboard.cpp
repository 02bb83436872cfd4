#include "results/tensorboard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <isa-l/crc.h>
#include <map>
#include <unistd.h>

#include "results/metrics.h"
#include "results/tensorboard_event.pb.h"

namespace sink::results {
namespace fs = std::filesystem;

bool tensorboard_supported() { return true; }
void require_tensorboard() {}

uint32_t crc32c(const void* data, size_t size) {
  // ISA-L's crc32_iscsi leaves the initial and final inversion of the CRC
  // register to the caller, and takes an int length: long inputs go in parts.
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t reg = 0xFFFFFFFFu;
  while (size > 0) {
    const size_t part = std::min<size_t>(size, size_t{1} << 30);
    reg = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(part), reg);
    p += part;
    size -= part;
  }
  return ~reg;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

namespace {

constexpr const char* kPrefix = "events.out.tfevents.";

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A TFRecord: length (u64), its masked CRC (u32), the bytes, their masked CRC (u32); little-endian.
void append_record(std::string& file, const std::string& data) {
  std::string header;
  put_le(header, data.size(), 8);
  file += header;
  put_le(file, masked_crc32c(header.data(), header.size()), 4);
  file += data;
  put_le(file, masked_crc32c(data.data(), data.size()), 4);
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "localhost";
  return host;
}

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

std::string serialize(const tensorboard::Event& event) {
  std::string out;
  if (!event.SerializeToString(&out)) throw ResultsError("cannot encode a TensorBoard event");
  return out;
}

std::string event_file(const RunData& run) {
  const std::vector<double> wall = wall_times(run);
  std::string file;
  tensorboard::Event version;
  version.set_wall_time(wall.empty() ? 0 : wall.front());
  version.set_file_version("brain.Event:2");
  append_record(file, serialize(version));
  for (size_t i = 0; i < run.evals.size(); ++i) {
    tensorboard::Event event;
    event.set_wall_time(wall[i]);
    event.set_step(run.evals[i].step);
    auto* summary = event.mutable_summary();
    for (const auto& s : eval_series(run.evals[i])) {
      auto* v = summary->add_value();
      v->set_tag(s.name);
      v->set_simple_value(static_cast<float>(s.value));  // TensorBoard's scalars are float32
    }
    append_record(file, serialize(event));
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
    if (leaf != name && leaf.rfind(kPrefix, 0) == 0) fs::remove(e.path(), ec);
  }
}

}  // namespace

TensorBoardExport write_tensorboard(const std::vector<RunData>& runs, const std::string& dir) {
  std::map<std::string, int> uses;
  for (const auto& r : runs) ++uses[r.plan.name];
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  const std::string name = fmt::format("{}{}.{}", kPrefix, now.count(), host_name());
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
