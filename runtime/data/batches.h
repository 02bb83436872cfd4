// Packing (the paper's Figure 1): token streams cut into context-length
// chunks (a BOS first when data.bos), the per-chunk modifications applied
// (random tokens, fixed tokens), and batches that are a pure function of the
// step, so that a resumed run sees exactly the data an uninterrupted one would.
#pragma once
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/data/corpus.h"

namespace sink::rt {

class Batches {
 public:
  Batches(const TokenData& data, const DataConfig& cfg, int64_t context, int64_t batch, int64_t seed);

  // inputs and targets, [batch, context] int64.
  std::pair<torch::Tensor, torch::Tensor> train(int64_t step) const;
  // The first n validation sequences (modified like training chunks), context tokens long or `length`.
  std::pair<torch::Tensor, torch::Tensor> valid(int64_t n) const { return valid(n, context_); }
  std::pair<torch::Tensor, torch::Tensor> valid(int64_t n, int64_t length) const;
  // The validation text's tokens, 0 for synthetic data (any length).
  int64_t valid_tokens() const;
  // Inputs for sink measurement: [n, T].
  torch::Tensor measure_inputs(int64_t n, int64_t T, MeasureInput input, bool bos) const;

  int64_t train_chunks() const;  // distinct training sequences (0 = unlimited synthetic)
  int64_t train_tokens() const;

  // One sequence of length+1 tokens (inputs then the last target), for tests.
  std::vector<int32_t> sequence(bool validation, int64_t index, int64_t length, bool bos, bool modify) const;

 private:
  void modify(std::vector<int32_t>& seq, uint64_t salt) const;
  int64_t chunk_index(int64_t g, int64_t n) const;
  mutable int64_t cached_epoch_ = -1;  // the shuffled order of one epoch, reused across steps
  mutable std::vector<int64_t> order_;
  const TokenData& data_;
  DataConfig cfg_;
  int64_t context_, batch_, seed_;
};

}  // namespace sink::rt
