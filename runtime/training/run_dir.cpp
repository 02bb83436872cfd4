#include "runtime/training/run_dir.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "plan/run_record.h"

namespace sink::rt {
namespace fs = std::filesystem;

namespace {

struct WriteFault {
  std::string suffix;
  size_t bytes = 0;
  int error = 0;
};

WriteFault& write_fault() {
  static WriteFault f;
  return f;
}

}  // namespace

void inject_write_fault(const std::string& suffix, size_t bytes, int error) { write_fault() = {suffix, bytes, error}; }

FileWriter::FileWriter(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp") {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write '{}': {}", temp_, std::strerror(errno)));
  const WriteFault& f = write_fault();
  if (!f.suffix.empty() && path_.size() >= f.suffix.size() &&
      path_.compare(path_.size() - f.suffix.size(), f.suffix.size(), f.suffix) == 0) {
    fault_after_ = f.bytes;
    fault_errno_ = f.error;
  }
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

size_t FileWriter::write(const void* data, size_t n) noexcept {
  const char* p = static_cast<const char*>(data);
  for (size_t left = n; left > 0 && error_.empty();) {
    if (written_ >= fault_after_) {
      error_ = std::strerror(fault_errno_);
      break;
    }
    const ssize_t w = ::write(fd_, p, std::min(left, fault_after_ - written_));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      error_ = w < 0 ? std::strerror(errno) : "no progress";
      break;
    }
    p += w;
    written_ += static_cast<size_t>(w);
    left -= static_cast<size_t>(w);
  }
  return n;
}

void FileWriter::commit(const std::function<void()>& before_rename) {
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, what));
  };
  if (!error_.empty()) fail(error_);
  if (::fsync(fd_) != 0) fail(std::strerror(errno));
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail(std::strerror(errno));
  if (before_rename) before_rename();
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail(std::strerror(errno));
  committed_ = true;
  // The rename is durable once the folder is synced. A failure here leaves a
  // whole file under its name all the same, so it is not an error.
  const std::string folder = fs::path(path_).parent_path().empty() ? "." : fs::path(path_).parent_path().string();
  if (int dfd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void RunDir::commit_checkpoint(FileWriter& written) const {
  if (!writer_) return;
  written.commit([&] {
    const std::string latest = checkpoint(), previous = previous_checkpoint();
    std::error_code ec;
    if (!fs::exists(latest, ec)) return;
    const std::string staged = previous + ".tmp";
    ::unlink(staged.c_str());
    // Without hard links (some network file systems) a rename keeps the old
    // checkpoint too, leaving only a moment with no latest one.
    const bool linked = ::link(latest.c_str(), staged.c_str()) == 0;
    if (::rename(linked ? staged.c_str() : latest.c_str(), previous.c_str()) != 0)
      throw std::runtime_error(fmt::format("cannot keep '{}' as '{}': {}", latest, previous, std::strerror(errno)));
  });
}

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

void RunDir::set_aside_latest_checkpoint() const {
  if (!writer_) return;
  std::error_code ec;
  if (fs::exists(checkpoint(), ec)) fs::rename(checkpoint(), file("checkpoint/state.bad.pt"));
  fs::rename(previous_checkpoint(), checkpoint());
}

RunDir::RunDir(std::string path, bool writer) : path_(std::move(path)), writer_(writer) {
  if (!writer_) return;
  fs::create_directories(path_ + "/checkpoint");
  log_.open(file("log.txt"), std::ios::app);
}

std::optional<nlohmann::json> RunDir::read_summary(const std::string& run_dir) {
  std::ifstream f(run_dir + "/summary.json");
  if (!f) return std::nullopt;
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

void RunDir::write_summary(const nlohmann::json& j) const {
  if (writer_) write_atomically(file("summary.json"), j.dump(2) + "\n");
}

namespace {

void append_line(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path, std::ios::app);
  f << j.dump() << "\n";
  f.flush();
}

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);  // a torn last line from a crash is skipped
  }
  return out;
}

constexpr const char* kLineFiles[] = {run_record::files::kMetrics, run_record::files::kLosses};

}  // namespace

void RunDir::append_metrics(const nlohmann::json& j) {
  if (writer_) append_line(file(run_record::files::kMetrics), j);
}

void RunDir::append_loss(int64_t step, double loss) {
  if (writer_)
    append_line(file(run_record::files::kLosses), {{run_record::loss::kStep, step}, {run_record::loss::kLoss, loss}});
}

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  return read_lines(run_dir + "/" + run_record::files::kMetrics);
}

void RunDir::truncate_lines(int64_t step) {
  if (!writer_) return;
  for (const char* name : kLineFiles) {
    std::string kept;
    for (const auto& j : read_lines(file(name)))
      if (j.value("step", int64_t{0}) <= step) kept += j.dump() + "\n";
    write_atomically(file(name), kept);
  }
}

void RunDir::clear_lines() {
  if (!writer_) return;
  for (const char* name : kLineFiles) write_atomically(file(name), "");
}

void RunDir::log(const std::string& line) {
  if (!writer_) return;
  log_ << line << "\n";
  log_.flush();
}

}  // namespace sink::rt
