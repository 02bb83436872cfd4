// Attention variants of the paper as kernel tests see them: the attention
// config the reference path takes and the kernel spec the runtime asks for.
// Shared by the JIT tests and the GPU fixture writer (tests/gpu).
#pragma once
#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "plan/normalizers.h"
#include "plan/run_config.h"
#include "plan/score_functions.h"
#include "runtime/attention/jit_attention.h"

namespace sink::testing_variants {

using sink::AttentionConfig;
using sink::ExprNode;
using sink::ModelConfig;

inline ExprNode var(const std::string& n) { return {ExprNode::Op::Var, 0, n, {}}; }
inline ExprNode num(double v) { return {ExprNode::Op::Number, v, "", {}}; }
inline ExprNode call(const std::string& f, std::vector<ExprNode> a) { return {ExprNode::Op::Call, 0, f, std::move(a)}; }
inline ExprNode bin(ExprNode::Op op, ExprNode a, ExprNode b) { return {op, 0, "", {std::move(a), std::move(b)}}; }

struct Variant {
  std::string name;
  ExprNode score = call("exp", {var("qk")});
  std::string normalize = "sum";
  double p = 1, alpha = 1;
  int64_t prefix = 0, window = 0;
  int64_t window_keeps = 0;     // the first keys every query sees under the window (plan/visibility.h)
  int64_t window_dilation = 1;  // every d-th key under the window (plan/visibility.h)
  bool position_bias = false, key_bias = false, learned_v = false;
  int64_t T = 9, D = 8;
  double q_scale = 1;
  double grad_tol = 1e-4;
  bool sink_logit = false;  // a learned logit per head in the softmax denominator
  // The 16-bit comparisons take g's gradient too (a learned table, as T5's), where a constant (ALiBi's) has
  // none and the kernels skip it; the float comparisons always take it.
  bool position_grad = false;
};

inline AttentionConfig config_of(const Variant& v) {
  AttentionConfig a;
  a.score = v.score;
  a.normalize = v.normalize;
  a.pnorm_p = v.p;
  a.scale = v.alpha;
  // The rule as a plan asks for it.
  Plan plan;
  plan.fields["loss.prefix"] = Value::of_int(v.prefix);
  plan.fields["loss.window"] = Value::of_int(v.window);
  plan.fields["loss.window_keeps"] = Value::of_int(v.window_keeps);
  plan.fields["loss.window_dilation"] = Value::of_int(v.window_dilation);
  a.rule = visibility(plan);
  a.shifted_exp = sink::is_shifted_exp(v.score, v.normalize);
  a.sink_logit = v.sink_logit ? SinkLogit::learned : SinkLogit::none;
  return a;
}

// The kernel a model with this attention asks for (the runtime's own mapping).
inline kernels::KernelSpec spec_of(const Variant& v) {
  ModelConfig m;
  m.attention = config_of(v);
  m.pe = v.position_bias ? PosEmbedding::alibi : PosEmbedding::rope;
  m.biases = v.key_bias ? Biases::k : Biases::none;
  m.d_head = v.D;
  return sink::kernels::kernel_spec(m);
}

inline std::vector<Variant> paper_variants() {
  using Op = ExprNode::Op;
  auto sig = call("sigmoid", {var("qk")});
  std::vector<Variant> variants = {
      {.name = "softmax"},
      {.name = "sigmoid, no norm", .score = sig, .normalize = "none"},
      {.name = "sigmoid, normalized", .score = sig},
      {.name = "elu+1, no norm", .score = bin(Op::Add, call("elu", {var("qk")}), num(1)), .normalize = "none"},
      {.name = "elu+1, normalized", .score = bin(Op::Add, call("elu", {var("qk")}), num(1))},
      {.name = "identity, abs-clamped", .score = var("qk"), .normalize = "abs_clamped"},
      {.name = "identity, no norm", .score = var("qk"), .normalize = "none"},
      {.name = "softmax p-norm 1/2", .normalize = "pnorm", .p = 0.5},
      {.name = "softmax p-norm 2", .normalize = "pnorm", .p = 2},
      {.name = "softmax alpha 0.2", .alpha = 0.2},
      {.name = "sigmoid alpha 2", .score = sig, .alpha = 2},
      {.name = "prefix 4", .prefix = 4},
      {.name = "prefix T-1", .prefix = 8},
      {.name = "window 1", .window = 1},
      {.name = "window 3 + prefix 2", .prefix = 2, .window = 3},
      {.name = "sigmoid window 2", .score = sig, .normalize = "none", .window = 2},
      {.name = "ALiBi / T5 position term", .position_bias = true},
      {.name = "position term, sigmoid", .score = sig, .normalize = "none", .position_bias = true},
      {.name = "K biases (v* = 0)", .key_bias = true},
      {.name = "KV biases", .key_bias = true, .learned_v = true},
      {.name = "K biases, sigmoid no norm", .score = sig, .normalize = "none", .key_bias = true, .learned_v = true},
      {.name = "T = 1", .T = 1},
      {.name = "d_head 16, T 33", .T = 33, .D = 16},
      {.name = "very large scores", .T = 12, .q_scale = 30},
      {.name = "position variables", .score = bin(Op::Mul, sig, call("sigmoid", {bin(Op::Sub, var("j"), var("i"))}))},
      {.name = "T 20 (key blocks and a masked tail)", .T = 20},
      {.name = "window 5, T 30", .score = sig, .window = 5, .T = 30},
      {.name = "d_head 64, T 19 (key groups of 2)", .T = 19, .D = 64},
      {.name = "d_head 64, sigmoid, prefix 3 + window 6, ALiBi",
       .score = sig,
       .normalize = "none",
       .prefix = 3,
       .window = 6,
       .position_bias = true,
       .T = 23,
       .D = 64},
      {.name = "prefix 6 + window 2, KV biases, T 17",
       .prefix = 6,
       .window = 2,
       .key_bias = true,
       .learned_v = true,
       .T = 17},
      {.name = "softmax p-norm 1/3, KV biases, window 4, T 21",
       .normalize = "pnorm",
       .p = 1.0 / 3,
       .window = 4,
       .key_bias = true,
       .learned_v = true,
       .T = 21},
      {.name = "softmax p-norm 3, ALiBi, large scores",
       .normalize = "pnorm",
       .p = 3,
       .position_bias = true,
       .q_scale = 6},
  };
  return variants;
}

// The designs proposed since the paper that are kernel variants (gates and
// differential attention compose ordinary calls), alone and with masks,
// position terms and the k* column.
inline std::vector<Variant> beyond_the_paper_variants() {
  using Op = ExprNode::Op;
  auto sigmoid_minus_log_n = [] { return call("sigmoid", {bin(Op::Sub, var("qk"), call("log", {var("n")}))}); };
  return {
      {.name = "softpick", .normalize = "softpick"},
      {.name = "softpick, T = 1", .normalize = "softpick", .T = 1},
      {.name = "softpick, KV biases", .normalize = "softpick", .key_bias = true, .learned_v = true},
      {.name = "softpick, window 3 + prefix 2", .normalize = "softpick", .prefix = 2, .window = 3},
      {.name = "softpick, ALiBi / T5", .normalize = "softpick", .position_bias = true},
      {.name = "softpick, alpha 0.5, T 20", .normalize = "softpick", .alpha = 0.5, .T = 20},
      // Logits in the hundreds: float rounding of the logits themselves, as for "very large scores" above.
      {.name = "softpick, large scores", .normalize = "softpick", .T = 12, .q_scale = 30, .grad_tol = 5e-3},
      {.name = "softpick, small scores (all e^x - 1 near 0)", .normalize = "softpick", .q_scale = 0.05},
      {.name = "softpick, d_head 64, T 19", .normalize = "softpick", .T = 19, .D = 64},
      {.name = "sink logit", .sink_logit = true},
      {.name = "sink logit, T = 1", .T = 1, .sink_logit = true},
      {.name = "sink logit, KV biases", .key_bias = true, .learned_v = true, .sink_logit = true},
      {.name = "sink logit, window 3 + prefix 2", .prefix = 2, .window = 3, .sink_logit = true},
      {.name = "sink logit, ALiBi / T5", .position_bias = true, .sink_logit = true},
      {.name = "sink logit, alpha 0.5, T 20", .alpha = 0.5, .T = 20, .sink_logit = true},
      {.name = "sink logit, large scores", .T = 12, .q_scale = 30, .grad_tol = 5e-3, .sink_logit = true},
      {.name = "sink logit, d_head 64, T 19, K biases", .key_bias = true, .T = 19, .D = 64, .sink_logit = true},
      // Sigmoid attention with b = -log n (Ramapuram et al., 2024), n the keys the query sees: n = i causally,
      // min(i, window) in a window, the whole prefix (or all of a shorter sequence) inside a prefix.
      {.name = "sigmoid(qk - log n), no norm", .score = sigmoid_minus_log_n(), .normalize = "none", .T = 20},
      {.name = "sigmoid(qk - log n), window 3 + prefix 2, KV biases",
       .score = sigmoid_minus_log_n(),
       .normalize = "none",
       .prefix = 2,
       .window = 3,
       .key_bias = true,
       .learned_v = true,
       .T = 20},
      {.name = "sigmoid(qk - log n), prefix 12 beyond T 9", .score = sigmoid_minus_log_n(), .prefix = 12},
      {.name = "n / (n + qk^2), normalized, window 4, T 21",
       .score = bin(Op::Div, var("n"), bin(Op::Add, var("n"), bin(Op::Mul, var("qk"), var("qk")))),
       .window = 4,
       .T = 21},
      // A window that keeps the first keys in sight (StreamingLLM's attention sinks): a rule checked per pair,
      // its n the window's keys and the kept ones below it.
      {.name = "softmax, window 3 keeping the first 2, T 21", .window = 3, .window_keeps = 2, .T = 21},
      {.name = "sigmoid(qk - log n), window 2 keeping 1 + prefix 3, KV biases, ALiBi",
       .score = sigmoid_minus_log_n(),
       .normalize = "none",
       .prefix = 3,
       .window = 2,
       .window_keeps = 1,
       .position_bias = true,
       .key_bias = true,
       .learned_v = true,
       .T = 20},
      // A dilated window (Longformer's): every d-th key back from the query, a rule checked per pair; its n,
      // min(w, floor((i - 1) / d) + 1), a remainder in each kernel's float arithmetic.
      {.name = "softmax, window 3 dilated by 2, T 21", .window = 3, .window_dilation = 2, .T = 21},
      {.name = "sigmoid(qk - log n), window 4 dilated by 3, KV biases, ALiBi",
       .score = sigmoid_minus_log_n(),
       .normalize = "none",
       .window = 4,
       .window_dilation = 3,
       .position_bias = true,
       .key_bias = true,
       .learned_v = true,
       .T = 20},
  };
}

// Every function of the score language (plan/score_functions.h), one variant each, read from the table: a
// function added there is tested through every backend without a line here. The argument is qk where the
// function is defined everywhere, softplus(qk) + 0.25 where only for positive arguments. Functions with
// positive values alone run under the sum or the p-norm (a signed row can sum to zero), the others with
// no normalization; a window and a prefix on the way.
inline std::vector<Variant> score_function_variants() {
  using Op = ExprNode::Op;
  const std::vector<std::string> positive_values = {"exp", "sigmoid", "softplus", "sqrt", "pow", "stablemax"};
  std::vector<Variant> out;
  int n = 0;
  for (const auto& f : sink::score_functions()) {
    ExprNode x = f.positive_domain ? bin(Op::Add, call("softplus", {var("qk")}), num(0.25)) : var("qk");
    std::vector<ExprNode> args = {x};
    if (f.arity == 2) args.push_back(num(1.5));
    Variant v;
    v.score = call(f.name, args);
    const bool positive = std::find(positive_values.begin(), positive_values.end(), f.name) != positive_values.end();
    // exp(qk) under the sum is softmax, which the kernels compute max-shifted, not through the function.
    v.normalize = !positive ? "none" : n % 2 || f.name == "exp" ? "pnorm" : "sum";
    v.p = 0.5;
    v.window = n % 2 ? 4 : 0;
    v.prefix = n % 4 == 1 ? 2 : 0;
    v.name = "score function " + to_string(v.score) + " / " + v.normalize;
    out.push_back(v);
    ++n;
  }
  return out;
}

// Every direct normaliser (plan/normalizers.h), read from the table: a row added there is tested through
// every backend without a line here. Each runs a bounded positive score (sigmoid), a signed one where the
// normaliser is defined for it (identity under abs_clamped and none; relu for the rest), with K biases,
// a window and a prefix, ALiBi; a scale-free row also runs exp(qk) in its max-shifted form, with large
// scores. A row with a parameter runs p = 1/2 and p = 3.
inline std::vector<Variant> normalizer_variants() {
  std::vector<Variant> out;
  for (const auto& row : sink::normalizers()) {
    // A row over the logit x itself (softpick) is defined for exp(qk) alone: its exp variants below, and its
    // own (beyond_the_paper_variants).
    const bool over_logit = sink::mentions_var(row.term, "x") || sink::mentions_var(row.weight, "x");
    for (double p : row.parameters.empty() ? std::vector<double>{1} : std::vector<double>{0.5, 3}) {
      const std::string tag = row.name + (row.parameters.empty() ? "" : " p=" + sink::format_number(p)) + ": ";
      const bool signed_ok = row.name == "none" || row.name == "abs_clamped";
      const ExprNode sig = call("sigmoid", {var("qk")}), relu = call("relu", {var("qk")});
      if (!over_logit) {
        out.push_back({.name = tag + "sigmoid", .score = sig, .normalize = row.name, .p = p});
        out.push_back({.name = tag + "sigmoid, KV biases, window 3 + prefix 2",
                       .score = sig,
                       .normalize = row.name,
                       .p = p,
                       .prefix = 2,
                       .window = 3,
                       .key_bias = true,
                       .learned_v = true});
        out.push_back({.name = tag + (signed_ok ? "identity, ALiBi" : "relu, ALiBi"),
                       .score = signed_ok ? var("qk") : relu,
                       .normalize = row.name,
                       .p = p,
                       .position_bias = true,
                       .T = 13});
      }
      if (sink::is_shifted_exp(call("exp", {var("qk")}), row.name)) {
        out.push_back({.name = tag + "exp, max-shifted", .normalize = row.name, .p = p, .T = 11});
        out.push_back({.name = tag + "exp, max-shifted, large scores, KV biases",
                       .normalize = row.name,
                       .p = p,
                       .key_bias = true,
                       .learned_v = true,
                       .T = 12,
                       .q_scale = 6,
                       .grad_tol = 1e-3});
      }
    }
  }
  return out;
}

// Random trees of the grammar's functions over qk, i, j; kept finite by
// bounding the leaves (sigmoid/tanh/scaled positions) where needed.
inline std::vector<Variant> random_score_variants(int count = 12) {
  using Op = ExprNode::Op;
  std::mt19937 rng(11);
  std::function<ExprNode(int)> gen = [&](int depth) -> ExprNode {
    int pick = depth <= 0 ? rng() % 3 : rng() % 9;
    switch (pick) {
      case 0: return var("qk");
      case 1: return bin(Op::Div, var(rng() % 2 ? "i" : "j"), num(10));
      case 2: return num(0.25 + (rng() % 8) / 4.0);
      case 3: return call("sigmoid", {gen(depth - 1)});
      case 4: return call("tanh", {gen(depth - 1)});
      case 5: return bin(Op::Add, gen(depth - 1), gen(depth - 1));
      case 6: return bin(Op::Mul, gen(depth - 1), gen(depth - 1));
      case 7: return call("softplus", {gen(depth - 1)});
      default: return call("abs", {gen(depth - 1)});
    }
  };
  std::vector<Variant> out;
  for (int n = 0; n < count; ++n) {
    Variant v;
    // Non-negative, qk-dependent scores keep every normalizer well defined.
    v.score = call("softplus", {bin(Op::Add, var("qk"), gen(3))});
    v.normalize = n % 3 == 0 ? "none" : n % 3 == 1 ? "sum" : "pnorm";
    v.p = 0.5;
    v.name = to_string(v.score) + " / " + v.normalize;
    out.push_back(v);
  }
  return out;
}

// The variants above at the tensor-core kernels' sizes (kernels/cuda/*.cuh): d_head 64, 96 and 128, and
// sequences of several 64-row blocks with ragged tails (T, a prefix and a window scaled by 8; a window of 1
// stays 1), so masks fall on tiles that are full, partial and skipped. `storage` alternates bf16 and half.
struct TensorCoreVariant {
  Variant variant;
  bool half = false;
};
inline std::vector<TensorCoreVariant> tensor_core_variants() {
  std::vector<Variant> all = paper_variants();
  for (auto& v : beyond_the_paper_variants()) all.push_back(v);
  for (auto& v : normalizer_variants()) all.push_back(v);
  for (auto& v : random_score_variants(4)) all.push_back(v);
  // Two comparisons with the float kernels that 16-bit storage cannot pass whatever the kernel, left out:
  // softpick with one key, where dq and dk are dA - D over a small Z, zero but for O's rounding to the
  // storage; and relu under the sum with a position term, where a logit within rounding of 0 falls on either
  // side of relu's kink in the two summation orders, and its key's gradient jumps by (dA - D) / Z.
  std::erase_if(
      all, [](const Variant& v) { return (v.normalize == "softpick" && v.T == 1) || v.name == "sum: relu, ALiBi"; });
  std::vector<TensorCoreVariant> out;
  int n = 0;
  for (Variant v : all) {
    v.T = v.T <= 1 ? v.T : 8 * v.T + 3;
    v.prefix *= 8;
    v.window = v.window <= 1 ? v.window : 8 * v.window;
    v.window_keeps *= 8;
    v.D = n % 5 == 3 ? 96 : n % 5 == 4 ? 128 : 64;
    v.position_grad = v.position_bias && n % 2 == 0;
    v.name = fmt::format("{} (T {}, d_head {}{})", v.name, v.T, v.D, v.position_grad ? ", g learned" : "");
    out.push_back({v, n % 4 == 1});
    ++n;
  }
  return out;
}

}  // namespace sink::testing_variants
