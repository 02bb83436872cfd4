// Removing a folder and everything in it, for every sinklab program: the one replacement of
// std::filesystem::remove_all, which a program linked against pip's LibTorch must not call.
//
// pip's libtorch.so carries its own copy of libstdc++'s filesystem functions and exports them, so the dynamic
// linker binds every program's std::filesystem::remove_all to that copy. The copy calls
// recursive_directory_iterator::__erase through a weak reference, which newer libstdc++ (Ubuntu 24.04's
// libstdc++.so.6.0.33) no longer exports: the call lands on address 0 (a segfault measured on an H100 node).
// Nothing else in libtorch.so's copy refers to libstdc++ that way.
#pragma once
#include <cstdint>
#include <filesystem>
#include <system_error>

namespace sink {

// Removes `path` and, if it is a folder, everything below it; a symbolic link is removed, never followed. A
// missing path is no error. Returns the number of files, links and folders removed; throws
// std::filesystem::filesystem_error naming the first one that could not be.
std::uintmax_t remove_tree(const std::filesystem::path& path);

// The same, reporting the first failure in `error` (cleared on success) instead of throwing; stops there.
std::uintmax_t remove_tree(const std::filesystem::path& path, std::error_code& error) noexcept;

}  // namespace sink
