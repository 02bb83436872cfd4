#include "support/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace sink {
namespace {

struct Removal {
  std::uintmax_t removed = 0;
  int error = 0;
  std::string failed;  // the path of the first failure
};

void fail(Removal& r, const std::string& path) {
  if (r.error != 0) return;
  r.error = errno;
  r.failed = path;
}

// Removes the entry `name` of the open folder `parent` (`path`: the entry's whole path, for the error), depth
// first, through file descriptors (openat/unlinkat): no call's path grows with the depth, no link is followed.
void remove_entry(int parent, const char* name, const std::string& path, Removal& r) {
  if (unlinkat(parent, name, 0) == 0) {
    ++r.removed;
    return;
  }
  if (errno == ENOENT) return;
  const int why = errno;
  if (why != EISDIR && why != EPERM) return fail(r, path);  // Linux says EISDIR for a folder, POSIX EPERM
  const int folder = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (folder < 0) {
    if (errno == ENOTDIR || errno == ELOOP) errno = why;  // not a folder: the unlink's own reason stands
    return fail(r, path);
  }
  DIR* listing = fdopendir(folder);
  if (listing == nullptr) {
    fail(r, path);
    close(folder);
    return;
  }
  while (r.error == 0) {
    errno = 0;
    const dirent* entry = readdir(listing);
    if (entry == nullptr) {
      if (errno != 0) fail(r, path);
      break;
    }
    const std::string child = entry->d_name;
    if (child == "." || child == "..") continue;
    remove_entry(dirfd(listing), entry->d_name, path + "/" + child, r);
  }
  closedir(listing);  // closes `folder` too
  if (r.error != 0) return;
  if (unlinkat(parent, name, AT_REMOVEDIR) == 0)
    ++r.removed;
  else if (errno != ENOENT)
    fail(r, path);
}

Removal remove_path(const std::filesystem::path& path) {
  Removal r;
  const std::string text = path.string();
  if (text.empty()) return r;
  remove_entry(AT_FDCWD, text.c_str(), text, r);
  return r;
}

}  // namespace

std::uintmax_t remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept {
  Removal r;
  try {
    r = remove_path(path);
  } catch (const std::bad_alloc&) {
    error = std::make_error_code(std::errc::not_enough_memory);
    return static_cast<std::uintmax_t>(-1);
  }
  if (r.error != 0) {
    error = std::error_code(r.error, std::generic_category());
    return static_cast<std::uintmax_t>(-1);
  }
  error.clear();
  return r.removed;
}

std::uintmax_t remove_tree(const std::filesystem::path& path) {
  const Removal r = remove_path(path);
  if (r.error != 0)
    throw std::filesystem::filesystem_error("cannot remove", r.failed,
                                            std::error_code(r.error, std::generic_category()));
  return r.removed;
}

}  // namespace sink
