// A small ORC LLJIT wrapper: LLVM IR text in, function addresses out. It owns
// its LLVM context and JIT; modules are compiled once per kernel hash, kept in
// memory, and their object code cached on disk so a second process does not
// recompile. No LibTorch here.
#pragma once
#include <memory>
#include <string>

namespace sink::rt {

class Jit {
 public:
  // cache_dir: where object files are kept ("" = memory only).
  explicit Jit(std::string cache_dir);
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // Compiles `ir` (once per `key`) and returns the address of `symbol` in it.
  // Throws std::runtime_error with LLVM's message on bad IR.
  void* lookup(const std::string& key, const std::string& ir, const std::string& symbol);
  // How many modules were compiled from IR (not loaded from the disk cache) in this process.
  int compiled() const;
  // The host CPU the code is tuned for.
  std::string cpu() const;

  // One per process, caching in kernel_cache_dir() (support/installation.h).
  static Jit& shared();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sink::rt
