#include "runtime/attention_backend.h"

#include <fmt/format.h>

#include "kernels/emit_llvm.h"
#include "plan/kernel_spec.h"
#include "runtime/attention.h"
#if SINKLAB_HAVE_JIT
#include "runtime/jit_attention.h"
#endif

namespace sink::rt {
namespace {

// g [H, T] by distance -> the bias g(|i - j|) [1, H, T, T] that the
// reference adds to the logits; indexing keeps g's gradient.
torch::Tensor bias_from_distance(const torch::Tensor& g, int64_t T) {
  auto i = torch::arange(T, g.options().dtype(torch::kLong)).unsqueeze(1);
  auto j = torch::arange(T, g.options().dtype(torch::kLong)).unsqueeze(0);
  return g.index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);
}

class ReferenceBackend : public AttentionBackend {
 public:
  explicit ReferenceBackend(const AttentionConfig& cfg) : cfg_(cfg) {}
  std::string name() const override { return "reference"; }

  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    AttentionInputs in{call.q, call.k, call.v, {}, {}, {}, {}};
    if (call.g.defined()) in.bias = bias_from_distance(call.g, call.q.size(2));
    if (call.k_star.defined()) {
      in.k_star = call.k_star;
      in.v_star = call.v_star;
    }
    if (call.sink_logit.defined()) in.sink_logit = call.sink_logit;
    AttentionOutput o = reference_attention(cfg_, in, probe != nullptr);
    if (probe) *probe = {o.probe, o.sink_share};
    return o.out;
  }

 private:
  AttentionConfig cfg_;
};

#if SINKLAB_HAVE_JIT
class CpuJitBackend : public AttentionBackend {
 public:
  explicit CpuJitBackend(const ModelConfig& cfg) : cfg_(cfg.attention), kernel_(kernels::kernel_spec(cfg)) {}
  std::string name() const override { return "jit"; }
  std::string kernel_source() const override { return kernels::emit_llvm(kernel_); }

  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    JitInputs in{call.q, call.k, call.v, call.g, call.k_star, call.k_star.defined() ? call.v_star : torch::Tensor(),
                 call.sink_logit};
    torch::Tensor out = jit_attention(kernel_, in);
    if (probe) {
      if (call.sink_logit.defined()) probe->sink_share = jit_sink_share(kernel_, in);
      // The generated probe gives A (softmax) or s and Z; the metric reads them as the reference does.
      auto [scores, Z] = jit_probe(kernel_, in);
      const int64_t T = call.q.size(2);
      auto allowed = allowed_pairs(T, cfg_.prefix, cfg_.window);
      if (scores.size(-1) > T) allowed = torch::cat({torch::ones({T, 1}, allowed.options()), allowed}, -1);
      auto A = cfg_.softmax ? scores : scores * (cfg_.scale / Z.unsqueeze(-1));
      probe->attention = metric_attention(cfg_, scores, A, allowed);
    }
    return out;
  }

 private:
  AttentionConfig cfg_;
  kernels::KernelSpec kernel_;
};
#endif

}  // namespace

std::shared_ptr<AttentionBackend> make_attention_backend(const ModelConfig& cfg, const torch::Device& device) {
  const std::string& wanted = cfg.attention.backend;
  if (wanted == "reference") return std::make_shared<ReferenceBackend>(cfg.attention);
#if SINKLAB_HAVE_JIT
  if (wanted == "jit" && device.is_cpu()) return std::make_shared<CpuJitBackend>(cfg);
#else
  if (wanted == "jit" && device.is_cpu())
    throw std::runtime_error("attention.backend = jit: this build has no CPU JIT (LLVM 19 was not found when it was "
                             "configured); set attention.backend = reference, or rebuild with llvm-19-dev");
#endif
  throw std::runtime_error(fmt::format("attention.backend = {} has no kernels for device {} in this build; "
                                       "set attention.backend = reference to run there",
                                       wanted, device.str()));
}

}  // namespace sink::rt
