// The generated entry points take exactly the arguments kernels/kernel_abi.h
// lists, in its order: the runtime fills its pointer arrays from the same lists.
#include <gtest/gtest.h>
#include <regex>

#include "kernels/kernel_abi.h"
#include "kernels/llvm/emit_llvm.h"
#include "plan/expr_text.h"
#include "plan/schema.h"

namespace {

namespace abi = sink::kernels::abi;

// The parameter names of `define ... @symbol(...)` in the module.
std::vector<std::string> parameters(const std::string& module, std::string_view symbol) {
  const std::regex define("define [^@]*@" + std::string(symbol) + "\\(([^)]*)\\)");
  std::smatch m;
  EXPECT_TRUE(std::regex_search(module, m, define)) << symbol;
  std::vector<std::string> names;
  const std::string list = m[1];
  const std::regex param("%([A-Za-z_0-9]+)");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), param); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

std::vector<std::string> expected(abi::Params params, const std::string& suffix, std::vector<std::string> sizes) {
  std::vector<std::string> out;
  for (auto p : params) out.push_back(std::string(p) + suffix);
  out.insert(out.end(), sizes.begin(), sizes.end());
  return out;
}

sink::kernels::KernelSpec variant(bool key_bias, bool position_bias) {
  sink::kernels::KernelSpec k;
  k.score = sink::read_expr("sigmoid(qk)");
  k.norm = &sink::normalizer_named("none");
  k.key_bias = key_bias;
  k.position_bias = position_bias;
  k.d_head = 16;
  return k;
}

TEST(KernelAbi, HostEntryPointsTakeTheListedArgumentsInOrder) {
  for (bool key_bias : {false, true})
    for (bool position_bias : {false, true}) {
      const std::string module = sink::kernels::emit_llvm(variant(key_bias, position_bias));
      EXPECT_EQ(parameters(module, abi::kForwardSymbol), expected(abi::kForward, "", {"T", "Tp"}));
      EXPECT_EQ(parameters(module, abi::kBackwardSymbol), expected(abi::kBackward, "", {"T", "Tp"}));
      EXPECT_EQ(parameters(module, abi::kProbeSymbol), expected(abi::kProbe, "", {"T", "Tp"}));
    }
}

TEST(KernelAbi, SlotsAreCompileTimePositions) {
  static_assert(abi::slot(abi::kForward, "q") == 0);
  static_assert(abi::slot(abi::kBackward, "dsink") == abi::kBackward.size() - 1);
  EXPECT_EQ(abi::slot(abi::kProbe, "out"), 5u);
}

}  // namespace

namespace {

// Every function the language allows in a score has a derivative in the
// emitter: emitting the kernels of f(qk) would throw otherwise.
TEST(KernelEmitters, EveryScoreFunctionHasADerivative) {
  for (const auto& f : sink::score_rules().functions) {
    sink::kernels::KernelSpec k = variant(false, false);
    std::vector<sink::ExprNode> args = {sink::read_expr("qk")};
    if (f.arity == 2) args.push_back(sink::read_expr("1.5"));
    k.score = {sink::ExprNode::Op::Call, 0, f.name, args};
    EXPECT_NO_THROW(sink::kernels::emit_llvm(k)) << f.name;
  }
  sink::kernels::KernelSpec unknown = variant(false, false);
  unknown.score = sink::read_expr("cosh(qk)");
  EXPECT_THROW(sink::kernels::emit_llvm(unknown), std::logic_error);
}

}  // namespace
