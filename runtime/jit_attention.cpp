#include "runtime/jit_attention.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "compiler/kernels/emit_llvm.h"
#include "runtime/jit.h"

namespace sink::rt {
namespace {

using Forward = void (*)(const float*, const float*, const float*, const float*, const float*, const float*, float*, float*,
                         int64_t);
using Backward = void (*)(const float*, const float*, const float*, const float*, const float*, const float*, const float*,
                          const float*, const float*, float*, float*, float*, float*, float*, float*, int64_t);
using Probe = void (*)(const float*, const float*, const float*, const float*, const float*, float*, int64_t);

struct Kernels {
  Forward forward;
  Backward backward;
  Probe probe;
};

Kernels compile_kernels(const kernels::KernelSpec& spec) {
  const std::string ir = kernels::emit_llvm(spec);
  // Keyed by the IR itself, so a changed generator never reuses a stale cached object.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : ir) h = (h ^ c) * 0x100000001b3ull;
  const std::string key = fmt::format("{}-{:016x}", spec.hash(), h);
  Jit& jit = Jit::shared();
  return {reinterpret_cast<Forward>(jit.lookup(key, ir, "sink_forward")),
          reinterpret_cast<Backward>(jit.lookup(key, ir, "sink_backward")),
          reinterpret_cast<Probe>(jit.lookup(key, ir, "sink_probe"))};
}

// Every layer calls this every step: emit and look up once per variant.
Kernels kernels_for(const kernels::KernelSpec& spec) {
  static std::mutex mutex;
  static std::map<std::string, Kernels> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = known.try_emplace(spec.describe());
  if (fresh) it->second = compile_kernels(spec);
  return it->second;
}

// Raw pointers of one (batch, head) slice.
struct Slices {
  int64_t B, H, T, D;
  const float* ptr(const torch::Tensor& t, int64_t bh) const { return t.data_ptr<float>() + bh * T * D; }
  float* mut(torch::Tensor& t, int64_t bh) const { return t.data_ptr<float>() + bh * T * D; }
  // Per-head tensors [H|1, n]: the row of head h.
  static const float* head(const torch::Tensor& t, int64_t h, int64_t n) {
    if (!t.defined() || t.numel() == 0) return nullptr;
    return t.data_ptr<float>() + (t.size(0) == 1 ? 0 : h) * n;
  }
};

torch::Tensor contiguous_float(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.contiguous().to(torch::kFloat) : torch::Tensor();
}

class JitAttention : public torch::autograd::Function<JitAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor g, torch::Tensor k_star, torch::Tensor v_star, kernels::KernelSpec spec) {
    q = contiguous_float(q), k = contiguous_float(k), v = contiguous_float(v);
    g = contiguous_float(g), k_star = contiguous_float(k_star), v_star = contiguous_float(v_star);
    const Slices s{q.size(0), q.size(1), q.size(2), q.size(3)};
    Kernels kern = kernels_for(spec);
    auto o = torch::empty_like(q);
    auto stats = torch::empty({s.B, s.H, s.T, 2}, q.options());
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % s.H;
        kern.forward(s.ptr(q, bh), s.ptr(k, bh), s.ptr(v, bh), Slices::head(g, h, s.T), Slices::head(k_star, h, s.D),
                     Slices::head(v_star, h, s.D), s.mut(o, bh), stats.data_ptr<float>() + bh * s.T * 2, s.T);
      }
    });
    ctx->save_for_backward({q, k, v, g, k_star, v_star, o, stats});
    ctx->saved_data["spec"] = spec.describe();
    spec_cache()[spec.describe()] = spec;
    return o;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto q = saved[0], k = saved[1], v = saved[2], g = saved[3], k_star = saved[4], v_star = saved[5], o = saved[6],
         stats = saved[7];
    const kernels::KernelSpec& spec = spec_cache().at(ctx->saved_data["spec"].toStringRef());
    auto dout = grads[0].contiguous().to(torch::kFloat);
    const Slices s{q.size(0), q.size(1), q.size(2), q.size(3)};
    Kernels kern = kernels_for(spec);
    auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    auto dg = torch::zeros({s.B, s.H, s.T}, q.options());
    auto dks = torch::zeros({s.B, s.H, s.D}, q.options()), dvs = torch::zeros({s.B, s.H, s.D}, q.options());
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % s.H;
        kern.backward(s.ptr(q, bh), s.ptr(k, bh), s.ptr(v, bh), Slices::head(g, h, s.T), Slices::head(k_star, h, s.D),
                      Slices::head(v_star, h, s.D), s.ptr(o, bh), stats.data_ptr<float>() + bh * s.T * 2, s.ptr(dout, bh),
                      s.mut(dq, bh), s.mut(dk, bh), s.mut(dv, bh), dg.data_ptr<float>() + bh * s.T,
                      dks.data_ptr<float>() + bh * s.D, dvs.data_ptr<float>() + bh * s.D, s.T);
      }
    });
    // Per-slice partial sums of the shared parameters, reduced here.
    auto per_head = [&](const torch::Tensor& partial, const torch::Tensor& like) -> torch::Tensor {
      if (!like.defined()) return {};
      auto summed = partial.sum(0);  // [H, n]
      return like.size(0) == 1 ? summed.sum(0, true) : summed;
    };
    return {dq, dk, dv, per_head(dg, g), per_head(dks, k_star), per_head(dvs, v_star), torch::Tensor()};
  }

 private:
  // The spec travels to backward by its description (IValue cannot hold it).
  static std::map<std::string, kernels::KernelSpec>& spec_cache() {
    static std::map<std::string, kernels::KernelSpec> cache;
    return cache;
  }
};

}  // namespace

kernels::KernelSpec kernel_spec_of(const ModelConfig& cfg) {
  kernels::KernelSpec k;
  const AttentionConfig& a = cfg.attention;
  k.score = a.score;
  k.softmax = a.softmax;
  k.normalize = a.normalize;
  k.p = a.pnorm_p;
  k.alpha = a.scale;
  k.prefix = a.prefix;
  k.window = a.window;
  k.position_bias = cfg.pe == "alibi" || cfg.pe == "relative";
  k.key_bias = cfg.biases == "k" || cfg.biases == "kv";
  k.d_head = cfg.d_head;
  return k;
}

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const JitInputs& in) {
  auto undefined_to_empty = [](const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}); };
  return JitAttention::apply(in.q, in.k, in.v, undefined_to_empty(in.g), undefined_to_empty(in.k_star),
                             undefined_to_empty(in.v_star), spec);
}

std::pair<torch::Tensor, torch::Tensor> jit_probe(const kernels::KernelSpec& spec, const JitInputs& in) {
  torch::NoGradGuard no_grad;
  auto q = contiguous_float(in.q), k = contiguous_float(in.k), v = contiguous_float(in.v);
  auto g = contiguous_float(in.g), k_star = contiguous_float(in.k_star), v_star = contiguous_float(in.v_star);
  const Slices s{q.size(0), q.size(1), q.size(2), q.size(3)};
  Kernels kern = kernels_for(spec);
  const int64_t S = s.T + (spec.key_bias ? 1 : 0);
  auto o = torch::empty_like(q);
  auto stats = torch::empty({s.B, s.H, s.T, 2}, q.options());
  auto scores = torch::zeros({s.B, s.H, s.T, S}, q.options());
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t h = bh % s.H;
      float* st = stats.data_ptr<float>() + bh * s.T * 2;
      kern.forward(s.ptr(q, bh), s.ptr(k, bh), s.ptr(v, bh), Slices::head(g, h, s.T), Slices::head(k_star, h, s.D),
                   Slices::head(v_star, h, s.D), s.mut(o, bh), st, s.T);
      kern.probe(s.ptr(q, bh), s.ptr(k, bh), Slices::head(g, h, s.T), Slices::head(k_star, h, s.D), st,
                 scores.data_ptr<float>() + bh * s.T * S, s.T);
    }
  });
  return {scores, stats.select(3, 0)};
}

}  // namespace sink::rt
