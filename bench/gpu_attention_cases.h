#pragma once
// The variants bench/gpu_attention times (and bench/kernel_anatomy dissects): the paper's softmax family, the
// attention operations of its Table 6 beyond it, and one score expression of no paper.
#include <sstream>
#include <string>
#include <vector>

#include "tests/runtime/jit_variants.h"

namespace sink::bench {

// A benchmark variant: the kernel's Variant and what the baselines script needs to build the same attention
// in PyTorch (a score and a normaliser by name, the masks and columns).
struct Case {
  testing_variants::Variant variant;
  std::string score = "exp";     // exp, sigmoid, elu1, relu, stablemax, or expr: torch_score
  std::string torch_score = {};  // the score as a PyTorch expression of the logit x, where score is "expr"
};

inline std::vector<Case> gpu_attention_cases() {
  using namespace testing_variants;
  using Op = ExprNode::Op;
  const ExprNode sig = call("sigmoid", {var("qk")});
  return {
      {{.name = "softmax"}},
      {{.name = "softmax + learnable k*", .key_bias = true}},
      {{.name = "sink logit", .sink_logit = true}},
      {{.name = "softmax, ALiBi", .position_bias = true}},
      {{.name = "softmax, window 256", .window = 256}},
      {{.name = "softmax, prefix 64", .prefix = 64}},
      {{.name = "sigmoid, no normalization", .score = sig, .normalize = "none"}, "sigmoid"},
      {{.name = "elu+1, normalized", .score = bin(Op::Add, call("elu", {var("qk")}), num(1))}, "elu1"},
      {{.name = "exp, p-norm 2", .normalize = "pnorm", .p = 2}},
      {{.name = "softpick", .normalize = "softpick"}},
      {{.name = "relu, count", .score = call("relu", {var("qk")}), .normalize = "count"}, "relu"},
      {{.name = "stablemax", .score = call("stablemax", {var("qk")})}, "stablemax"},
      // A score expression no paper names, as a researcher may write one: the kernels take any the algebra does.
      {{.name = "softplus(x) (1 + tanh x), sum",
        .score = bin(Op::Mul, call("softplus", {var("qk")}), bin(Op::Add, num(1), call("tanh", {var("qk")})))},
       "expr",
       "F.softplus(x) * (1 + torch.tanh(x))"},
  };
}
// "a,b,c" as its items (variant names hold commas: their lists take '|').
inline std::vector<std::string> split_list(const std::string& list, char separator = ',') {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, separator);) out.push_back(item);
  return out;
}

}  // namespace sink::bench
