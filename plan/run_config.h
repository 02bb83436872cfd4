// The typed view of a Plan: read once, then plain fields. The runtime reads
// plan values only through this, and the decisions that several places need
// (softmax, d_head, the k* column, the BOS at measurement) are made here once.
#pragma once
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "plan/choices.h"
#include "plan/plan.h"
#include "plan/visibility.h"

namespace sink {

// exp(qk) normalized by the sum is softmax. exp(qk) under any scale-free
// normaliser (softmax's sum, the p-norm, softpick) runs in the online form,
// as exp(qk - row max) (plan/normalizers.h); everything else directly.
bool is_softmax(const ExprNode& score, const std::string& normalize);
bool is_shifted_exp(const ExprNode& score, const std::string& normalize);

struct AttentionConfig {
  ExprNode score;            // over qk, i, j, n (plan/schema.cpp score_rules)
  bool shifted_exp = false;  // is_shifted_exp(score, normalize); tests clear it to force the direct form
  AttnKernel kernel = AttnKernel::identity;
  int64_t kernel_hidden = 64;
  std::string normalize = "sum";  // a row of plan/normalizers.h
  double pnorm_p = 1;             // its parameter p, where it takes one
  double scale = 1;               // alpha
  // Which keys each query sees (plan/visibility.h): loss.prefix, loss.window and the rules beyond them; its prefix
  // is also the loss's (rule.prefix).
  Visibility rule = visibility(0, 0);
  Backend backend = Backend::reference;
  Gate gate = Gate::none;
  SinkLogit sink_logit = SinkLogit::none;  // a per-head logit in the softmax denominator
  double sink_logit_value = 0;             // when fixed (0: softmax+1)
  bool differential = false;               // A1 - lambda A2 from the halves of q and k (Ye et al. 2025)
  double lambda_init = 0.8;

  bool has_sink_logit() const { return sink_logit != SinkLogit::none; }
};

struct ModelConfig {
  int64_t vocab = 0, d = 0, layers = 0, heads = 0, kv_heads = 0, d_head = 0;
  Ffn ffn = Ffn::relu;
  int64_t ffn_hidden = 0;
  PosEmbedding pe = PosEmbedding::nope;
  int64_t rel_buckets = 32, rel_max_distance = 128;
  double rope_theta = 10000;
  NormKind norm = NormKind::rmsnorm;
  NormPlacement placement = NormPlacement::pre;
  HeadsCombine heads_combine = HeadsCombine::concat;
  double norm_eps = 1e-5;
  bool sink_token = false;
  Biases biases = Biases::none;
  bool bias_shared = false;
  int64_t k_dims = 0;
  VStar v_star = VStar::zero;  // learned | zero | fixed (auto is lowered away)
  ExprNode v_star_expr;        // when fixed
  bool tie_embeddings = false;
  double init_std = 0.02;
  int64_t max_positions = 0;  // learned/sinusoidal table size
  AttentionConfig attention;

  // K biases (k, kv) add one key column k* that every query sees.
  bool key_column() const { return biases == Biases::k || biases == Biases::kv; }
  // ALiBi and T5 buckets add g(|i - j|) to the logits.
  bool position_term() const { return pe == PosEmbedding::alibi || pe == PosEmbedding::relative; }
};

// Where tokens come from and how chunks are modified.
struct DataConfig {
  CorpusKind corpus = CorpusKind::builtin;
  std::string corpus_arg;  // name or path
  SyntheticKind synthetic_kind = SyntheticKind::bigram_backcopy;
  int64_t synthetic_vocab = 64, triggers = 4, synthetic_seed = 0;
  std::vector<int64_t> offsets;
  double sparsity = 0.1;
  TokenizerKind tokenizer = TokenizerKind::bytes;
  int64_t tokenizer_vocab = 0;
  std::string tokenizer_path;
  bool bos = false;
  int64_t amount = 0;
  std::vector<int64_t> random_positions;           // 1-based
  std::vector<std::pair<int64_t, int64_t>> fixed;  // (token, 1-based position)
  double valid_fraction = 0.05;
};

struct TrainConfig {
  double lr = 4e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, clip = 1;
  Schedule schedule = Schedule::constant;
  int64_t warmup = 0;
  double min_lr = 0;
  int64_t steps = 0, batch = 0, context = 0, seed = 0, checkpoint_every = 0, threads = 0;
  int64_t micro_batch = 0;        // 0: the whole batch in one pass
  bool micro_batch_auto = false;  // micro_batch = auto, until the run resolves it (auto_settings.h)
  int64_t log_every = 10;         // steps between train-loss lines
  DeviceKind device = DeviceKind::cpu;
  Precision precision = Precision::fp32;  // auto until the run resolves it
};

struct MeasureConfig {
  int64_t every = 0, T = 64, sequences = 100;
  double eps = 0.3;
  std::vector<int64_t> positions;
  MeasureInput input = MeasureInput::natural;
  MeasureBos bos = MeasureBos::auto_;
  bool massive_activations = true;
  // What a sink costs (runtime/measurement/sink_costs.h): off where false or empty.
  bool windowed_loss = false, outliers = false;
  int64_t window = 0;  // keys; 0 = a quarter of train.context (window_size() says)
  std::vector<int64_t> window_keeps, quantized_bits, longer_contexts;
  int64_t window_size(int64_t context) const { return window > 0 ? window : std::max<int64_t>(1, context / 4); }
};

struct RunConfig {
  std::string name, hash;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  MeasureConfig measure;
};

// Whether sink measurement prepends the BOS: `with`, `without`, or `auto`
// (as the training data does).
bool measures_with_bos(MeasureBos mode, const DataConfig& data);

// model.vocab = 0 is filled in by the caller once the tokenizer is known.
RunConfig read_config(const Plan& plan);

}  // namespace sink
