#include "runtime/training/auto_settings.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <vector>

#include "runtime/training/lm_head_loss.h"

namespace sink::rt {
namespace {

bool gated(Ffn f) { return f == Ffn::reglu || f == Ffn::geglu || f == Ffn::swiglu; }

std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

}  // namespace

MemoryEstimate estimate_training_memory(const ModelConfig& m, int64_t context, Precision precision) {
  const double d = static_cast<double>(m.d), heads = static_cast<double>(m.heads);
  const double d_head = m.d_head > 0 ? static_cast<double>(m.d_head) : d / std::max<double>(1, heads);
  const double kv_heads = m.kv_heads > 0 ? static_cast<double>(m.kv_heads) : heads;
  const double hidden = static_cast<double>(m.ffn_hidden), vocab = static_cast<double>(m.vocab);
  const double layers = static_cast<double>(m.layers), T = static_cast<double>(context);
  const double up = gated(m.ffn) ? 3 : 2;

  MemoryEstimate e;
  const double per_layer = 2 * d * heads * d_head + 2 * d * kv_heads * d_head + up * d * hidden + 2 * d;
  e.parameters = vocab * d * (m.tie_embeddings ? 1 : 2) + layers * per_layer + d +
                 (m.pe == PosEmbedding::learned ? static_cast<double>(m.max_positions) * d : 0);
  const bool half = precision == Precision::bf16;
  // fp32 weights and gradients, AdamW's two moments; autocast keeps a bf16
  // copy of each weight for the step; the CUDA context and cuBLAS's
  // workspace take about a GiB whatever the model.
  e.fixed_bytes = e.parameters * (16 + (half ? 2 : 0)) + 1024.0 * 1024 * 1024;

  // Kept for the backward, per token and layer: the residual stream's norm
  // inputs, outputs and statistics stay fp32 under autocast (two norms,
  // about six d-wide tensors); the matmuls' inputs and outputs are in the
  // compute precision: q, k, v, the attention output, the projections'
  // inputs, and the FFN's hidden activations (gate, up, activation and
  // product for a gated FFN). The generated kernels and SDPA keep row
  // statistics, not T x T scores; the reference path keeps scores and
  // probabilities in fp32.
  const double bytes = half ? 2 : 4;
  const double ffn_kept = gated(m.ffn) ? 4 : 2;
  double token_layer = 4 * 6 * d + bytes * (2 * heads * d_head + 2 * kv_heads * d_head + 2 * d + ffn_kept * hidden);
  if (m.attention.backend == Backend::reference) token_layer += heads * T * (8 + bytes);
  // The LM head and its loss hold no batch's logits (runtime/training/lm_head_loss.h): per token only the
  // features' gradient, formed in the forward; fixed, one chunk's logits in fp32 with its compute-precision
  // copy and exponentials, and the head's fp32 gradient sum.
  e.fixed_bytes += 3.0 * 4 * static_cast<double>(cross_entropy_chunk_rows(m.vocab) * m.vocab) + 4 * vocab * d;
  e.per_sequence_bytes = T * (layers * token_layer + 4 * d);
  return e;
}

DeviceFacts shared_by(const DeviceFacts& device, int runs) {
  DeviceFacts share = device;
  if (device.gpu && runs > 1) share.memory_bytes = device.memory_bytes / runs;
  return share;
}

Precision resolve_precision(Precision asked, const DeviceFacts& device) {
  if (asked != Precision::auto_) return asked;
  return device.gpu && device.capability >= 80 ? Precision::bf16 : Precision::fp32;
}

int64_t resolve_micro_batch(int64_t rows, const MemoryEstimate& estimate, const DeviceFacts& device) {
  if (!device.gpu || rows <= 1) return 0;
  if (device.memory_bytes <= 0)
    throw std::runtime_error(
        "train.micro_batch = auto: this GPU's memory size could not be read (a runtime built without the CUDA "
        "toolkit's headers); set train.micro_batch to a number");
  const double room = kUsableMemoryShare * static_cast<double>(device.memory_bytes) - estimate.fixed_bytes;
  const double fit = std::floor(room / std::max(estimate.per_sequence_bytes, 1.0));
  if (fit >= static_cast<double>(rows)) return 0;
  int64_t micro = 1;
  for (int64_t k = 1; k <= rows && static_cast<double>(k) <= fit; ++k)
    if (rows % k == 0) micro = k;
  return micro;
}

ResolvedSettings resolve_auto_settings(const RunConfig& cfg, int64_t rows, const DeviceFacts& device) {
  ResolvedSettings r;
  r.precision = resolve_precision(cfg.train.precision, device);
  r.micro_batch = cfg.train.micro_batch;
  std::vector<std::string> notes;
  if (cfg.train.precision == Precision::auto_)
    notes.push_back(
        fmt::format("precision auto: {} ({})", name_of(r.precision),
                    !device.gpu ? std::string("a CPU")
                    : device.capability == 0
                        ? std::string("the GPU's compute capability is unknown")
                        : fmt::format("compute capability {}.{}", device.capability / 10, device.capability % 10)));
  if (cfg.train.micro_batch_auto) {
    const MemoryEstimate e = estimate_training_memory(cfg.model, cfg.train.context, r.precision);
    r.micro_batch = resolve_micro_batch(rows, e, device);
    const std::string size = r.micro_batch == 0 ? fmt::format("all {} sequences in one pass", rows)
                                                : fmt::format("{} of {} sequences per pass", r.micro_batch, rows);
    const double usable = kUsableMemoryShare * static_cast<double>(device.memory_bytes);
    const bool short_of_memory = device.gpu && e.fixed_bytes + e.per_sequence_bytes > usable;
    notes.push_back(device.gpu ? fmt::format("micro_batch auto: {} (estimated {} per sequence + {} fixed, within "
                                             "{:.0f}% of {}{})",
                                             size, gigabytes(e.per_sequence_bytes), gigabytes(e.fixed_bytes),
                                             100 * kUsableMemoryShare, gigabytes(double(device.memory_bytes)),
                                             short_of_memory ? "; even one sequence is estimated not to fit" : "")
                               : fmt::format("micro_batch auto: {} (a CPU)", size));
  }
  r.note = fmt::format("{}", fmt::join(notes, "; "));
  return r;
}

}  // namespace sink::rt
