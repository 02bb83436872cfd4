#include "runtime/data/batches.h"

#include <algorithm>
#include <numeric>

namespace sink::rt {
namespace {

constexpr uint64_t kValidStream = 1ull << 40;  // synthetic validation draws from its own index range

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

}  // namespace

Batches::Batches(const TokenData& data, const DataConfig& cfg, int64_t context, int64_t batch, int64_t seed)
    : data_(data), cfg_(cfg), context_(context), batch_(batch), seed_(seed) {
  if (!data_.synthetic && train_chunks() < 1)
    throw std::runtime_error("the training data is shorter than one context-length chunk");
}

int64_t Batches::train_chunks() const {
  if (data_.synthetic) return cfg_.amount > 0 ? std::max<int64_t>(1, cfg_.amount / context_) : 0;
  return (static_cast<int64_t>(data_.train.size()) - 1) / context_;
}

int64_t Batches::train_tokens() const {
  return !data_.synthetic ? static_cast<int64_t>(data_.train.size()) : train_chunks() * context_;
}

std::vector<int32_t> Batches::sequence(bool validation, int64_t index, int64_t length, bool bos, bool do_modify) const {
  std::vector<int32_t> seq;
  seq.reserve(length + 1);
  if (bos) seq.push_back(data_.bos);
  const int64_t body = length + 1 - (bos ? 1 : 0);
  if (data_.synthetic) {
    std::mt19937_64 rng(
        mix(static_cast<uint64_t>(seed_) ^ (validation ? kValidStream : 0), static_cast<uint64_t>(index)));
    if (*data_.synthetic == SyntheticKind::bigram_backcopy) {
      auto s = data_.bigram->sample(body, rng);
      seq.insert(seq.end(), s.begin(), s.end());
    } else if (*data_.synthetic == SyntheticKind::random) {
      std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(data_.ordinary - 1));
      for (int64_t k = 0; k < body; ++k) seq.push_back(tok(rng));
    } else {  // repeat: a short random pattern, repeated
      std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(data_.ordinary - 1));
      std::vector<int32_t> pattern(1 + rng() % 8);
      for (auto& t : pattern) t = tok(rng);
      for (int64_t k = 0; k < body; ++k) seq.push_back(pattern[k % pattern.size()]);
    }
  } else {
    const auto& stream = validation ? data_.valid : data_.train;
    const int64_t stride = length;
    const int64_t n = std::max<int64_t>(1, (static_cast<int64_t>(stream.size()) - body) / stride + 1);
    const int64_t start = (index % n) * stride;
    for (int64_t k = 0; k < body; ++k) {
      size_t at = static_cast<size_t>(start + k);
      seq.push_back(at < stream.size() ? stream[at] : data_.eos);
    }
  }
  if (do_modify) modify(seq, mix(static_cast<uint64_t>(seed_) + (validation ? 7 : 3), static_cast<uint64_t>(index)));
  return seq;
}

void Batches::modify(std::vector<int32_t>& seq, uint64_t salt) const {
  std::mt19937_64 rng(salt);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(data_.ordinary - 1));
  for (int64_t p : cfg_.random_positions)
    if (p >= 1 && p <= static_cast<int64_t>(seq.size())) seq[p - 1] = tok(rng);
  for (auto [token, p] : cfg_.fixed)
    if (p >= 1 && p <= static_cast<int64_t>(seq.size())) seq[p - 1] = static_cast<int32_t>(token);
}

// Epoch e visits every chunk once, in an order seeded by (seed, e).
int64_t Batches::chunk_index(int64_t g, int64_t n) const {
  const int64_t epoch = g / n, within = g % n;
  if (epoch != cached_epoch_) {
    order_.resize(static_cast<size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    std::shuffle(order_.begin(), order_.end(),
                 std::mt19937_64(mix(static_cast<uint64_t>(seed_), static_cast<uint64_t>(epoch))));
    cached_epoch_ = epoch;
  }
  return order_[static_cast<size_t>(within)];
}

std::pair<torch::Tensor, torch::Tensor> Batches::train(int64_t step) const {
  auto inputs = torch::empty({batch_, context_}, torch::kLong);
  auto targets = torch::empty({batch_, context_}, torch::kLong);
  auto in = inputs.accessor<int64_t, 2>();
  auto out = targets.accessor<int64_t, 2>();
  const int64_t n = train_chunks();
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t g = step * batch_ + b;
    const int64_t index = n > 0 ? chunk_index(g, n) : g;
    auto seq = sequence(false, index, context_, cfg_.bos, true);
    for (int64_t t = 0; t < context_; ++t) in[b][t] = seq[t], out[b][t] = seq[t + 1];
  }
  return {inputs, targets};
}

int64_t Batches::valid_tokens() const { return data_.synthetic ? 0 : static_cast<int64_t>(data_.valid.size()); }

std::pair<torch::Tensor, torch::Tensor> Batches::valid(int64_t n, int64_t length) const {
  auto inputs = torch::empty({n, length}, torch::kLong);
  auto targets = torch::empty({n, length}, torch::kLong);
  // Through accessors, as train() does: `inputs[b][t] = v` would build two tensor views and a
  // fill per token, every evaluation.
  auto in = inputs.accessor<int64_t, 2>();
  auto out = targets.accessor<int64_t, 2>();
  for (int64_t b = 0; b < n; ++b) {
    auto seq = sequence(true, b, length, cfg_.bos, true);
    for (int64_t t = 0; t < length; ++t) in[b][t] = seq[t], out[b][t] = seq[t + 1];
  }
  return {inputs, targets};
}

torch::Tensor Batches::measure_inputs(int64_t n, int64_t T, MeasureInput input, bool bos) const {
  auto x = torch::empty({n, T}, torch::kLong);
  auto acc = x.accessor<int64_t, 2>();
  std::mt19937_64 rng(mix(static_cast<uint64_t>(seed_), 0x5EED));
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(data_.ordinary - 1));
  for (int64_t b = 0; b < n; ++b) {
    std::vector<int32_t> seq;
    if (input == MeasureInput::natural) {
      seq = sequence(true, b, T, bos, true);
    } else {
      if (bos) seq.push_back(data_.bos);
      int32_t repeated = tok(rng);
      while (static_cast<int64_t>(seq.size()) < T) seq.push_back(input == MeasureInput::random ? tok(rng) : repeated);
    }
    for (int64_t t = 0; t < T; ++t) acc[b][t] = seq[t];
  }
  return x;
}

}  // namespace sink::rt
