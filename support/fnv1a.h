// FNV-1a, 64 bit: the hash that names what sinklab keeps on disk (plan hashes, kernel caches, tokenizer caches).
// Stable across platforms, compilers and runs, which std::hash is not; one definition, so every name is made the
// same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace sink {

class Fnv1a {
 public:
  Fnv1a& add(std::string_view bytes) {
    for (unsigned char c : bytes) state_ = (state_ ^ c) * 0x100000001b3ull;
    return *this;
  }
  uint64_t value() const { return state_; }
  std::string hex() const { return fmt::format("{:016x}", state_); }  // 16 hex digits, as file names carry it

 private:
  uint64_t state_ = 0xcbf29ce484222325ull;
};

inline uint64_t fnv1a(std::string_view bytes) { return Fnv1a().add(bytes).value(); }
inline std::string fnv1a_hex(std::string_view bytes) { return Fnv1a().add(bytes).hex(); }

}  // namespace sink
