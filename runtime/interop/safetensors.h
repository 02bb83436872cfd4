// Hugging Face safetensors: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw tensors. A folder
// holds one file, or shards listed by model.safetensors.index.json.
#pragma once
#include <map>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

// Every tensor of `path` (a .safetensors file, or a folder of them), in its
// stored dtype (F32, F16, BF16, F64, I64, I32, I8, U8, BOOL), memory-mapped:
// nothing is copied until a tensor is converted. Throws std::runtime_error
// naming the file and what is wrong with it (a truncated file, a header that
// is not JSON, offsets outside the data, a shape that does not match its
// bytes, an unknown dtype).
std::map<std::string, torch::Tensor> load_safetensors(const std::string& path);

// Writes `tensors` as one safetensors file in their own dtypes (those above),
// with {"format": "pt"} metadata as transformers' own files have. `path` ends
// up whole or untouched; throws std::runtime_error naming it when the write
// fails or a dtype has no safetensors name.
void save_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors);

}  // namespace sink::rt
