// TensorBoard's event files, written without protobuf: the runtime appends to one as a run logs (so
// `tensorboard --logdir runs/` follows a run, a Slurm job's included), and `sinkc export --tensorboard`
// writes one per run after the fact. The format is TFRecord framing (a length, its masked CRC-32C, the
// bytes, their masked CRC-32C) around protobuf-encoded `Event` messages, of which sinklab writes two kinds:
// the file version first, then scalars (wall time, step, tag = value...). Both messages are three fields
// deep, so they are encoded here by their wire format rather than by linking protobuf: the runtime must
// build on a GPU node with a pip PyTorch and nothing else, and protobuf beside LibTorch's own has crashed
// processes before. A standard-library reader in the tests decodes the files independently.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sink::tfevents {

// CRC-32C (Castagnoli), and the framing's "masked" form of it: rotated right by 15 bits, plus 0xa282ead8.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

using Scalars = std::vector<std::pair<std::string, double>>;  // tag, value (stored as float32, as TensorBoard does)

// One framed record of each kind of Event.
std::string file_version_record(double wall_time);
std::string scalars_record(double wall_time, int64_t step, const Scalars& values);

// "events.out.tfevents.<seconds>.<host>": the names TensorBoard reads.
inline constexpr const char* kFilePrefix = "events.out.tfevents.";
std::string event_file_name(double wall_time);

// Seconds since the epoch, now.
double wall_time_now();

// An event file in a run's folder that grows as the run logs: opened (and its version record written) on the
// first point, each point appended and flushed whole, so a reader polling the folder sees complete records.
// A run resumed later starts a file of its own beside the first; TensorBoard reads both as one run.
class EventLog {
 public:
  explicit EventLog(std::string folder) : folder_(std::move(folder)) {}
  // Throws std::runtime_error when the file cannot be written (the caller decides whether a run goes on).
  void add(int64_t step, const Scalars& values);
  const std::string& path() const { return path_; }

 private:
  std::string folder_, path_;
};

}  // namespace sink::tfevents
