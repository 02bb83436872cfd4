#include "runtime/attention/cuda_tuning.h"

#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "plan/installation.h"

namespace sink::rt {
namespace {

std::filesystem::path table_path() { return kernel_cache_dir() / "tiles.json"; }

nlohmann::json tiles_json(const kernels::CudaTiles& t) {
  return {{"forward_rows", t.forward_rows},
          {"forward_keys", t.forward_keys},
          {"key_rows", t.key_rows},
          {"key_queries", t.key_queries},
          {"query_rows", t.query_rows},
          {"query_keys", t.query_keys},
          {"min_blocks", t.min_blocks},
          {"row_frags", t.row_frags},
          {"fused_dq", t.fused_dq},
          {"hopper", t.hopper},
          {"overlap", t.overlap}};
}

kernels::CudaTiles tiles_of(const nlohmann::json& j) {
  kernels::CudaTiles t;
  t.tensor_cores = true;
  t.forward_rows = j.at("forward_rows"), t.forward_keys = j.at("forward_keys");
  t.key_rows = j.at("key_rows"), t.key_queries = j.at("key_queries");
  t.query_rows = j.at("query_rows"), t.query_keys = j.at("query_keys");
  t.min_blocks = j.at("min_blocks");
  t.row_frags = j.value("row_frags", 1);  // (tables written before the kernels had these choices)
  t.fused_dq = j.value("fused_dq", false);
  t.hopper = j.value("hopper", false);
  t.overlap = j.value("overlap", false);
  return t;
}

// The table at `path`; empty where there is none, and where the file is not a table (said once per file).
nlohmann::json read_table(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (path.empty() || !in) return nlohmann::json::object();
  try {
    nlohmann::json table = nlohmann::json::parse(in);
    if (table.is_object()) return table;
  } catch (const std::exception&) {
  }
  static std::set<std::string> warned;
  if (warned.insert(path.string()).second)
    std::cerr << "sinklab: " << path.string() << " is not a tuning table; measuring again\n";
  return nlohmann::json::object();
}

std::optional<KernelTiles> entry_tiles(const nlohmann::json& table, const std::string& key) {
  if (!table.contains(key)) return std::nullopt;
  try {
    const auto& e = table.at(key);
    KernelTiles t{tiles_of(e.at("forward")), tiles_of(e.at("backward_keys")), tiles_of(e.at("backward_queries"))};
    if (e.contains("fused_backward_keys")) t.fused = tiles_of(e.at("fused_backward_keys"));
    t.seconds = e.value("seconds", std::map<std::string, double>{});
    return t;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::string tuning_key(const std::string& gpu, const kernels::KernelSpec& spec, kernels::CudaStorage storage) {
  const char* stored = storage == kernels::CudaStorage::Float16 ? "half" : "bf16";
  return fmt::format("{} | {} | {} storage | d_head {}", gpu, spec.describe(), stored, spec.d_head);
}

std::optional<KernelTiles> remembered_tiles(const std::string& key) {
  if (auto measured_here = entry_tiles(read_table(table_path()), key)) return measured_here;
  const char* tune = std::getenv("SINKLAB_TUNE");
  if (tune && std::string(tune) == "1") return std::nullopt;  // measure here what the shipped table holds
  return entry_tiles(read_table(shipped_tuning_table()), key);
}

void remember_tiles(const std::string& key, const KernelTiles& tiles) {
  std::error_code ec;
  std::filesystem::create_directories(kernel_cache_dir(), ec);
  nlohmann::json table = read_table(table_path());
  table[key] = {{"forward", tiles_json(tiles.forward)},
                {"backward_keys", tiles_json(tiles.keys)},
                {"backward_queries", tiles_json(tiles.queries)}};
  if (tiles.fused) table[key]["fused_backward_keys"] = tiles_json(*tiles.fused);
  if (!tiles.seconds.empty()) table[key]["seconds"] = tiles.seconds;
  const auto temporary = table_path().string() + fmt::format(".{}.tmp", getpid());
  {
    std::ofstream out(temporary);
    out << table.dump(1) << "\n";
    if (!out) {
      std::filesystem::remove(temporary, ec);
      return;  // a full disk costs the next process a measurement, nothing else
    }
  }
  std::filesystem::rename(temporary, table_path(), ec);
  if (ec) std::filesystem::remove(temporary, ec);
}

bool tuning_enabled() {
  const char* v = std::getenv("SINKLAB_TUNE");
  return !(v && std::string(v) == "0");
}

std::optional<kernels::CudaTiles> fused_backward(const KernelTiles& tiles, const kernels::KernelSpec& spec,
                                                 kernels::CudaStorage storage) {
  const char* wanted = std::getenv("SINKLAB_FUSED_DQ");
  const std::string say = wanted ? wanted : "";
  if (say == "0") return std::nullopt;
  if (say == "1" && !tiles.fused) {
    // Where the Hopper kernels run (tiles_to_run's SINKLAB_WGMMA, on compute capability 9.0 alone), the Hopper one.
    const auto hopper =
        tiles.keys.hopper ? kernels::cuda_hopper_fused_candidates(spec, storage) : std::vector<kernels::CudaTiles>{};
    const auto candidates = hopper.empty() ? kernels::cuda_fused_candidates(spec, storage) : hopper;
    if (!candidates.empty()) return candidates.front();
  }
  return tiles.fused;
}

KernelTiles tiles_to_run(const KernelTiles& tiles, const kernels::KernelSpec& spec, kernels::CudaStorage storage,
                         int capability) {
  const char* wanted = std::getenv("SINKLAB_WGMMA");
  const std::string say = wanted ? wanted : "";
  KernelTiles out = tiles;
  kernels::CudaTiles* each[] = {&out.forward, &out.keys, &out.queries};
  if (say == "0") {
    for (kernels::CudaTiles* t : each)
      if (t->hopper) *t = kernels::cuda_tiles(spec, storage, capability);
    if (out.fused && out.fused->hopper) out.fused.reset();
  } else if ((say == "1" || say == "overlap") && capability == kernels::kHopperCapability) {
    // "1": the first candidate each kernel has (waiting for each product); "overlap": the forward's first
    // overlapped one besides.
    const auto candidates = kernels::cuda_hopper_candidates(spec, storage);
    for (kernels::CudaTiles* t : each)
      if (!candidates.empty() && (!t->hopper || t->overlap)) *t = candidates.front();
    for (const kernels::CudaTiles& c : candidates)
      if (say == "overlap" && c.overlap) {
        out.forward = c;
        break;
      }
    out.fused.reset();
  }
  return out;
}

std::string describe_kernels(const KernelTiles& tiles, const std::optional<kernels::CudaTiles>& fused) {
  // (row_frags and overlap shape the forward and backward_queries alone)
  const auto flags = [](const kernels::CudaTiles& t, bool query_rows) {
    return fmt::format("{}{}{}", query_rows && t.row_frags > 1 ? fmt::format(" row_frags {}", t.row_frags) : "",
                       t.hopper ? " wgmma" : "", query_rows && t.hopper && t.overlap ? " overlapped" : "");
  };
  const kernels::CudaTiles& f = tiles.forward;
  std::string out = fmt::format("forward {}x{}{}", f.forward_rows, f.forward_keys, flags(f, true));
  if (fused)
    return out +
           fmt::format(", backward_keys {}x{} fused dQ{}", fused->key_rows, fused->key_queries, flags(*fused, false));
  const kernels::CudaTiles &k = tiles.keys, &q = tiles.queries;
  return out + fmt::format(", backward_keys {}x{}{}, backward_queries {}x{}{}", k.key_rows, k.key_queries,
                           flags(k, false), q.query_rows, q.query_keys, flags(q, true));
}

}  // namespace sink::rt
