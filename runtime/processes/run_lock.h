// One owner per run directory: an exclusive flock(2) on RUN/lock, held for
// as long as the run trains. The kernel releases it when the process dies,
// however it dies, so a crashed run never stays locked. flock is per open
// file, so two sweeps in one process exclude each other too; on NFS Linux
// maps it to a POSIX lock the server enforces across hosts.
#pragma once
#include <optional>
#include <string>

namespace sink::rt {

class RunLock {
 public:
  RunLock() = default;
  RunLock(RunLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RunLock& operator=(RunLock&& o) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  // The lock of `run_dir` (created if need be), or nothing when another
  // process holds it; `wait` blocks until it is free instead.
  static std::optional<RunLock> acquire(const std::string& run_dir, bool wait);
  // "host, pid N" of the process that holds (or last held) the lock.
  static std::string holder(const std::string& run_dir);

 private:
  int fd_ = -1;
};

}  // namespace sink::rt
