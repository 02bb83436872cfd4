#pragma once
// What NVRTC's machine code for a kernel source holds, read without a GPU: the assembler's verbose report
// (registers, spills, shared memory per kernel) and the disassembly (nvdisasm) per kernel. Shared by the
// register and tensor-instruction checks (tests/kernels/cuda_tensor_core_test.cpp) and bench/kernel_anatomy.
#include <fmt/format.h>
#include <unistd.h>

#include "support/remove_tree.h"
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace sink::testing_machine_code {

// NVIDIA's disassembler: $SINKLAB_NVDISASM, the PATH, or the nvidia-cuda-nvdisasm wheel beside SINKLAB_PYTHON.
inline std::string find_nvdisasm() {
  if (const char* named = std::getenv("SINKLAB_NVDISASM"); named && *named) return named;
  if (std::system("command -v nvdisasm > /dev/null 2>&1") == 0) return "nvdisasm";
  if (const char* python = std::getenv("SINKLAB_PYTHON"); python && *python) {
    std::error_code ec;
    const auto lib = std::filesystem::path(python).parent_path().parent_path() / "lib";
    for (const auto& version : std::filesystem::directory_iterator(lib, ec)) {
      const auto tool = version.path() / "site-packages/nvidia/cu13/bin/nvdisasm";
      if (std::filesystem::exists(tool)) return tool.string();
    }
  }
  return {};
}

// ptxas's verbose report, per kernel: "Function properties for NAME", then its spills, registers and smem.
struct KernelResources {
  int registers = -1, spill_stores = -1, spill_loads = -1, shared_bytes = 0;
};
inline std::map<std::string, KernelResources> read_assembler_report(const std::string& report) {
  std::map<std::string, KernelResources> out;
  std::istringstream lines(report);
  std::string line, current;
  for (; std::getline(lines, line);) {
    if (auto at = line.find("Function properties for "); at != std::string::npos) {
      current = line.substr(at + 24);
      continue;
    }
    if (current.empty()) continue;
    KernelResources& r = out[current];
    if (auto at = line.find("bytes spill stores"); at != std::string::npos)
      std::sscanf(line.c_str() + line.find(',') + 1, " %d bytes spill stores, %d bytes spill loads", &r.spill_stores,
                  &r.spill_loads);
    if (auto at = line.find("Used "); at != std::string::npos) {
      std::sscanf(line.c_str() + at, "Used %d registers", &r.registers);
      if (auto smem = line.find(" bytes smem"); smem != std::string::npos) {
        const auto start = line.rfind(' ', smem - 1);
        r.shared_bytes = std::atoi(line.c_str() + start + 1);
      }
    }
  }
  return out;
}

// A cubin's instructions per kernel, as nvdisasm prints them (one string each, without the address comment);
// empty where the disassembler failed.
inline std::map<std::string, std::vector<std::string>> disassemble(const std::string& nvdisasm,
                                                                   const std::string& cubin) {
  const auto dir = std::filesystem::temp_directory_path() / ("sinklab-sass-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "k.cubin", std::ios::binary) << cubin;
  const std::string command =
      fmt::format("'{}' '{}' > '{}' 2>&1", nvdisasm, (dir / "k.cubin").string(), (dir / "k.sass").string());
  std::map<std::string, std::vector<std::string>> out;
  if (std::system(command.c_str()) == 0) {
    std::ifstream sass(dir / "k.sass");
    std::string line, current;
    while (std::getline(sass, line)) {
      if (auto at = line.find(".section\t.text."); at != std::string::npos) {
        current = line.substr(at + 15, line.find(',', at) - at - 15);
        out[current];
      } else if (!current.empty() && line.find(" */ ") == std::string::npos && line.find(';') != std::string::npos &&
                 line.find("/*") != std::string::npos) {
        // "        /*0040*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;"
        const auto start = line.find("*/") + 2;
        out[current].push_back(line.substr(line.find_first_not_of(' ', start)));
      }
    }
  }
  sink::remove_tree(dir);
  return out;
}

// An instruction's operation: its first word without modifiers or predicate ("@P0 HMMA.16816.F32" -> HMMA).
inline std::string operation_of(const std::string& instruction) {
  std::string word = instruction.substr(0, instruction.find(' '));
  if (!word.empty() && word[0] == '@') {
    const auto after = instruction.find_first_not_of(' ', instruction.find(' '));
    word = instruction.substr(after, instruction.find(' ', after) - after);
  }
  return word.substr(0, word.find('.'));
}

}  // namespace sink::testing_machine_code
