#include "runtime/processes/run_lock.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <sys/file.h>
#include <unistd.h>

#include "runtime/processes/process.h"

namespace sink::rt {

RunLock& RunLock::operator=(RunLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

std::optional<RunLock> RunLock::acquire(const std::string& run_dir, bool wait) {
  const std::string path = run_dir + "/lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  int rc;
  do rc = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB));
  while (rc != 0 && errno == EINTR && wait);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) return std::nullopt;
    throw std::runtime_error(fmt::format("cannot lock {}: {}", path, std::strerror(err)));
  }
  // Who holds it, for the process that finds it taken. Written in place:
  // the lock file itself must stay the same inode.
  const std::string who = fmt::format("{} {}\n", host_name(), getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, who.data(), who.size(), 0) != static_cast<ssize_t>(who.size())) {
    // The lock holds without its note; only the message to others is poorer.
  }
  RunLock lock;
  lock.fd_ = fd;
  return lock;
}

std::string RunLock::holder(const std::string& run_dir) {
  std::ifstream in(run_dir + "/lock");
  std::string host;
  long pid = 0;
  if (!(in >> host >> pid)) return "unknown process";
  return fmt::format("{}, pid {}", host, pid);
}

}  // namespace sink::rt
