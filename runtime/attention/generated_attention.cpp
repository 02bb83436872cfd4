#include "runtime/attention/generated_attention.h"

#include <map>
#include <mutex>

#include "runtime/attention/attention.h"

namespace sink::rt {
namespace {

// Autograd cannot carry a launcher to the backward: it carries the key, and
// the launcher waits here. Autograd may run the backward on another thread.
std::mutex launchers_mutex;
std::map<std::string, std::shared_ptr<const KernelLauncher>> launchers;

void remember(const std::shared_ptr<const KernelLauncher>& launcher) {
  std::lock_guard<std::mutex> lock(launchers_mutex);
  launchers.try_emplace(launcher->key(), launcher);
}

std::shared_ptr<const KernelLauncher> recall(const std::string& key) {
  std::lock_guard<std::mutex> lock(launchers_mutex);
  return launchers.at(key);
}

// Function::apply takes tensors only: an undefined one travels as an empty one.
torch::Tensor or_empty(const torch::Tensor& t, const torch::Tensor& like) {
  return t.defined() ? t : torch::empty({0}, like.options());
}
torch::Tensor defined_or_none(const torch::Tensor& t) { return t.defined() && t.numel() > 0 ? t : torch::Tensor(); }

// A parameter [H|1, n]'s gradient from its per-slice partial sums [B, H, n].
torch::Tensor per_head(const torch::Tensor& partial, const torch::Tensor& like) {
  if (!like.defined() || !partial.defined()) return {};  // (no gradient wanted)
  auto summed = partial.sum(0);
  return like.size(0) == 1 ? summed.sum(0, true) : summed;
}

class GeneratedAttention : public torch::autograd::Function<GeneratedAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor g, torch::Tensor k_star, torch::Tensor v_star, torch::Tensor sink,
                               std::string key) {
    auto launcher = recall(key);
    std::vector<int64_t> dtypes;
    for (const auto& t : {q, k, v, g, k_star, v_star, sink}) dtypes.push_back(static_cast<int64_t>(t.scalar_type()));
    ctx->saved_data["key"] = key;
    ctx->saved_data["dtypes"] = dtypes;
    KernelTensors in = launcher->prepare(
        {q, k, v, defined_or_none(g), defined_or_none(k_star), defined_or_none(v_star), defined_or_none(sink)});
    auto [o, stats] = launcher->forward(in);
    ctx->save_for_backward({in.q, in.k, in.v, in.g, in.k_star, in.v_star, in.sink, o, stats});
    return o;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const KernelTensors in{saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6]};
    const auto launcher = recall(ctx->saved_data["key"].toStringRef());
    const auto dtypes = ctx->saved_data["dtypes"].toIntVector();
    const bool position_grad = ctx->needs_input_grad(3);
    SliceGradients d =
        launcher->backward(in, saved[7], saved[8], grads[0].to(in.q.scalar_type()).contiguous(), position_grad);
    if (!position_grad) d.dg = torch::Tensor();
    torch::Tensor dsink = in.sink.defined() ? d.dsink.sum(std::vector<int64_t>{0, 2}) : torch::Tensor();
    torch::autograd::variable_list out = {
        d.dq, d.dk, d.dv, per_head(d.dg, in.g), per_head(d.dk_star, in.k_star), per_head(d.dv_star, in.v_star), dsink};
    // Each gradient in its input's dtype (a bf16 q computes in float).
    for (size_t n = 0; n < out.size(); ++n)
      if (out[n].defined()) out[n] = out[n].to(static_cast<torch::ScalarType>(dtypes[n]));
    out.push_back(torch::Tensor());  // the key
    return out;
  }
};

// The probe's weights w and Z as the metric reads them: A = alpha w / Z, or the weights themselves.
torch::Tensor attention_from_probe(const AttentionConfig& cfg, const torch::Tensor& scores, const torch::Tensor& Z) {
  const int64_t T = scores.size(2);
  auto allowed = allowed_pairs(cfg, T).to(scores.device());
  if (scores.size(-1) > T) allowed = torch::cat({torch::ones({T, 1}, allowed.options()), allowed}, -1);
  auto A = scores * (cfg.scale / Z.unsqueeze(-1));
  return metric_attention(cfg, scores, A, allowed);
}

// v* travels only with k*.
AttentionCall kernel_call(const AttentionCall& call) {
  AttentionCall in = call;
  if (!call.k_star.defined()) in.v_star = torch::Tensor();
  return in;
}

}  // namespace

torch::Tensor generated_attention(const std::shared_ptr<const KernelLauncher>& launcher, const AttentionCall& call) {
  remember(launcher);
  const AttentionCall in = kernel_call(call);
  return GeneratedAttention::apply(in.q, in.k, in.v, or_empty(in.g, in.q), or_empty(in.k_star, in.q),
                                   or_empty(in.v_star, in.q), or_empty(in.sink_logit, in.q), launcher->key());
}

AttentionProbe generated_probe(const KernelLauncher& launcher, const AttentionConfig& cfg, const AttentionCall& call) {
  torch::NoGradGuard no_grad;
  const KernelTensors in = launcher.prepare(kernel_call(call));
  const torch::Tensor stats = launcher.forward(in).second;
  const int64_t T = in.q.size(2);
  const torch::Tensor first = stats.select(2, 0).narrow(2, 0, T), second = stats.select(2, 1).narrow(2, 0, T);
  AttentionProbe probe;
  probe.attention = attention_from_probe(cfg, launcher.probe(in, stats), first);
  if (in.sink.defined()) probe.sink_share = sink_logit_share(cfg, in.sink.view({1, -1, 1}), first, second);
  return probe;
}

}  // namespace sink::rt
