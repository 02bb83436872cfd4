// A file's bytes as a string ("" where it cannot be read): what the front end's tests compare.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sinktest {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace sinktest
