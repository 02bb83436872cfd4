// What a sink costs a model in use, measured beside whether one forms: the losses that papers on sink-free designs
// report. Each on the validation sequences whose loss is valid_loss, so that a gap is a paired difference (the same
// model on the same sequences):
//   windowed loss   the loss under window attention of W keys that keeps the first K tokens in sight, for each K
//                   (StreamingLLM's streaming evaluation: a softmax model loses its sink when K = 0);
//   quantized loss  the loss after fake quantization of every linear layer in the blocks, weights and inputs b-bit,
//                   per-tensor symmetric round-to-nearest, the input's scale from its largest |value| in each call
//                   (dynamic); the embedding and the LM head stay unquantized (the outlier papers' W8A8);
//   longer contexts the loss on sequences F x train.context long, positions never trained (where the positional
//                   embedding cannot reach them, why not instead of a number).
// The activation outliers (kurtosis, maxima) are read from the sink measurement's own forward
// (runtime/measurement/measure.h). Fields: measure.windowed_loss, window, window_keeps, quantized_bits,
// longer_contexts.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/data/batches.h"
#include "runtime/training/model.h"

namespace sink::rt {

// v rounded to `bits`-bit symmetric integers on one scale, max |v| / (2^(bits-1) - 1), and back.
torch::Tensor fake_quantize(const torch::Tensor& v, int64_t bits);

// Why a model cannot be evaluated on `length` tokens (learned positions it does not have), or "" where it can.
std::string longer_context_obstacle(const ModelConfig& model, int64_t length);

// Holds the windowed rules' attention backends between evaluations: each compiles its kernels once.
class SinkCosts {
 public:
  // The attention of a model configuration (the windowed rules'); by default the one its plan and device select.
  using BackendFactory = std::function<std::shared_ptr<AttentionBackend>(const ModelConfig&)>;
  explicit SinkCosts(const RunConfig& cfg, BackendFactory make_backend = {})
      : cfg_(cfg), make_backend_(std::move(make_backend)) {}
  // The measured costs' keys of a metrics.jsonl line (plan/run_record.h), on the validation sequences x, y
  // (which valid_loss is the mean loss of, in chunks of `chunk` sequences) and the batches' longer sequences.
  nlohmann::json measure(Transformer& model, const Batches& batches, const torch::Tensor& x, const torch::Tensor& y,
                         int64_t chunk);

  // The validation loss under `keep`'s window (plan/visibility.h's streaming_window), chunked as valid_loss.
  double windowed_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t chunk, int64_t keep);

 private:
  RunConfig cfg_;
  BackendFactory make_backend_;
  std::map<int64_t, std::shared_ptr<AttentionBackend>> windowed_;  // by kept tokens
};

// chunked_loss with every linear layer of the blocks fake-quantized to `bits` (weights and inputs).
double quantized_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t prefix, int64_t chunk,
                      int64_t bits);

// The mean of lm_loss over chunks of `chunk` sequences of x, y, as valid_loss is computed.
double chunked_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t prefix, int64_t chunk);

}  // namespace sink::rt
