#include "runtime/interop/safetensors.h"

#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/training/run_dir.h"

namespace sink::rt {

namespace fs = std::filesystem;

namespace {

// A read-only mapping that lives as long as the last tensor viewing it.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) munmap(data, size);
  }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  struct stat st{};
  auto mapping = std::make_shared<Mapping>();
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    mapping->size = static_cast<size_t>(st.st_size);
    mapping->data = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);
  if (mapping->data == MAP_FAILED)
    throw std::runtime_error(fmt::format("{}: cannot map the file (empty or unreadable)", path));
  return mapping;
}

struct DtypeInfo {
  torch::ScalarType type;
  size_t bytes;
};

const std::map<std::string, DtypeInfo>& known_dtypes() {
  static const std::map<std::string, DtypeInfo> known = {{"F32", {torch::kFloat, 4}},     {"F16", {torch::kHalf, 2}},
                                                         {"BF16", {torch::kBFloat16, 2}}, {"F64", {torch::kDouble, 8}},
                                                         {"I64", {torch::kLong, 8}},      {"I32", {torch::kInt, 4}},
                                                         {"I16", {torch::kShort, 2}},     {"I8", {torch::kChar, 1}},
                                                         {"U8", {torch::kByte, 1}},       {"BOOL", {torch::kBool, 1}}};
  return known;
}

DtypeInfo dtype_of(const std::string& name, const std::string& file, const std::string& tensor) {
  const auto& known = known_dtypes();
  auto it = known.find(name);
  if (it == known.end())
    throw std::runtime_error(
        fmt::format("{}: tensor '{}' has dtype '{}', which sinklab does not read", file, tensor, name));
  return it->second;
}

void load_file(const std::string& path, std::map<std::string, torch::Tensor>& out) {
  auto mapping = map_file(path);
  const auto* bytes = static_cast<const unsigned char*>(mapping->data);
  if (mapping->size < 8) throw std::runtime_error(fmt::format("{}: too short for a safetensors file", path));
  uint64_t header_size = 0;
  for (int b = 7; b >= 0; --b) header_size = (header_size << 8) | bytes[b];
  if (header_size > mapping->size - 8)
    throw std::runtime_error(
        fmt::format("{}: header length {} exceeds the file ({} bytes): truncated or not safetensors", path, header_size,
                    mapping->size));
  auto header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_size, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    throw std::runtime_error(fmt::format("{}: the header is not a JSON object: not a safetensors file", path));
  const size_t data_start = 8 + header_size;
  const size_t data_size = mapping->size - data_start;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& why) {
      return std::runtime_error(fmt::format("{}: tensor '{}': {}", path, name, why));
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad("needs dtype, shape and data_offsets");
    const auto& offsets = entry["data_offsets"];
    if (!entry["dtype"].is_string() || !entry["shape"].is_array() || !offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw bad("malformed dtype, shape or data_offsets");
    DtypeInfo dtype = dtype_of(entry["dtype"].get<std::string>(), path, name);
    std::vector<int64_t> shape;
    uint64_t count = 1;
    for (const auto& s : entry["shape"]) {
      if (!s.is_number_unsigned()) throw bad("a dimension is not a non-negative integer");
      shape.push_back(s.get<int64_t>());
      count *= s.get<uint64_t>();
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      throw bad(fmt::format("data_offsets [{}, {}] outside the {} bytes of data", begin, end, data_size));
    if (count * dtype.bytes != end - begin)
      throw bad(fmt::format("shape holds {} bytes but data_offsets span {}", count * dtype.bytes, end - begin));
    void* at = const_cast<unsigned char*>(bytes + data_start + begin);
    if (out.count(name)) throw bad("defined in two files");
    // Little-endian storage, as on every machine sinklab runs on.
    out[name] = torch::from_blob(at, shape, [mapping](void*) {}, torch::TensorOptions().dtype(dtype.type));
  }
}

}  // namespace

std::map<std::string, torch::Tensor> load_safetensors(const std::string& path) {
  std::map<std::string, torch::Tensor> out;
  if (!fs::is_directory(path)) {
    load_file(path, out);
    return out;
  }
  std::set<std::string> files;
  fs::path index = fs::path(path) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw std::runtime_error(fmt::format("{}: not a safetensors index (no weight_map object)", index.string()));
    for (auto& [_, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw std::runtime_error(fmt::format("{}: a weight_map entry is not a file name", index.string()));
      files.insert((fs::path(path) / file.get<std::string>()).string());
    }
  } else {
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".safetensors") files.insert(e.path().string());
  }
  if (files.empty()) throw std::runtime_error(fmt::format("{}: no *.safetensors file", path));
  for (const auto& f : files) load_file(f, out);
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    std::string dtype;
    for (const auto& [n, info] : known_dtypes())
      if (info.type == tensor.scalar_type()) dtype = n;
    if (dtype.empty())
      throw std::runtime_error(fmt::format("{}: tensor '{}' has dtype {}, which safetensors does not name", path, name,
                                           c10::toString(tensor.scalar_type())));
    // Little-endian, row-major, on the CPU: what the format stores.
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    data.push_back(t);
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference writer does
  unsigned char length[8];
  for (int b = 0; b < 8; ++b) length[b] = static_cast<unsigned char>((uint64_t{text.size()} >> (8 * b)) & 0xff);
  FileWriter out(path);
  out.write(length, sizeof length);
  out.write(text.data(), text.size());
  for (const auto& t : data) out.write(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  out.commit();
}

}  // namespace sink::rt
