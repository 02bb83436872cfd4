#include "runtime/jit_attention.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "kernels/emit_llvm.h"
#include "kernels/kernel_abi.h"
#include "runtime/jit.h"

namespace sink::rt {
namespace {

using kernels::abi::slot;

// Entry points of one compiled variant. Their arguments: kernels/kernel_abi.h.
struct Kernels {
  void* forward;
  void* backward;
  void* probe;
};

// Calls `entry` with the pointers and then the sizes T, Tp.
template <size_t N>
void call(void* entry, const std::array<void*, N>& pointers, int64_t T, int64_t Tp) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    using Fn = void (*)(decltype((void)I, static_cast<void*>(nullptr))..., int64_t, int64_t);
    reinterpret_cast<Fn>(entry)(pointers[I]..., T, Tp);
  }(std::make_index_sequence<N>{});
}

Kernels compile_kernels(const kernels::KernelSpec& spec) {
  const std::string ir = kernels::emit_llvm(spec);
  // Keyed by the IR itself, so a changed generator never reuses a stale cached object.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : ir) h = (h ^ c) * 0x100000001b3ull;
  const std::string key = fmt::format("{}-{:016x}", spec.hash(), h);
  Jit& jit = Jit::shared();
  return {jit.lookup(key, ir, std::string(kernels::abi::kForwardSymbol)),
          jit.lookup(key, ir, std::string(kernels::abi::kBackwardSymbol)),
          jit.lookup(key, ir, std::string(kernels::abi::kProbeSymbol))};
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

// Element n of a contiguous tensor, whatever its element type.
char* at(const torch::Tensor& t, int64_t n) { return static_cast<char*>(t.data_ptr()) + n * t.element_size(); }

// Raw pointers of one (batch, head) slice.
struct Slices {
  int64_t B, H, T, D;
  explicit Slices(const torch::Tensor& q) : B(q.size(0)), H(q.size(1)), T(q.size(2)), D(q.size(3)) {}
  void* rows(const torch::Tensor& t, int64_t bh) const { return at(t, bh * T * D); }
  // Per-head tensors [H|1, n]: the row of head h.
  static void* head(const torch::Tensor& t, int64_t h, int64_t n) {
    if (!t.defined() || t.numel() == 0) return nullptr;
    return at(t, (t.size(0) == 1 ? 0 : h) * n);
  }
};

// [B, H, T, D] -> [B, H, D, Tp], zero padded: the kernels read a block of
// key columns as one vector load per element of d_head.
torch::Tensor transposed(const torch::Tensor& t) {
  const int64_t T = t.size(2);
  auto out = torch::zeros({t.size(0), t.size(1), t.size(3), T + kernels::kKeyBlock}, t.options());
  out.narrow(3, 0, T).copy_(t.transpose(2, 3));
  return out;
}

// Double inputs run the double kernels (finite-difference checks); all else float.
torch::ScalarType kernel_dtype(const torch::Tensor& q) {
  return q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

torch::Tensor contiguous_as(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() && t.numel() > 0 ? t.contiguous().to(dtype) : torch::Tensor();
}

// The forward kernel over every slice: o and the row statistics [B, H, 2, Tp].
std::pair<torch::Tensor, torch::Tensor> run_forward(const Kernels& kern, const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const torch::Tensor& g,
                                                    const torch::Tensor& k_star, const torch::Tensor& v_star,
                                                    const torch::Tensor& sink) {
  const Slices s(q);
  auto o = torch::empty_like(q);
  auto kt = transposed(k);
  const int64_t Tp = kt.size(3);
  auto stats = torch::zeros({s.B, s.H, 2, Tp}, q.options());
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t h = bh % s.H;
      constexpr auto& F = kernels::abi::kForward;
      std::array<void*, F.size()> a{};
      a[slot(F, "q")] = s.rows(q, bh);
      a[slot(F, "kt")] = at(kt, bh * s.D * Tp);
      a[slot(F, "v")] = s.rows(v, bh);
      a[slot(F, "g")] = Slices::head(g, h, s.T);
      a[slot(F, "kstar")] = Slices::head(k_star, h, s.D);
      a[slot(F, "vstar")] = Slices::head(v_star, h, s.D);
      a[slot(F, "sink")] = Slices::head(sink, h, 1);
      a[slot(F, "o")] = s.rows(o, bh);
      a[slot(F, "stats")] = at(stats, bh * 2 * Tp);
      call(kern.forward, a, s.T, Tp);
    }
  });
  return {o, stats};
}

class JitAttention : public torch::autograd::Function<JitAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor g, torch::Tensor k_star, torch::Tensor v_star, torch::Tensor sink,
                               kernels::KernelSpec spec) {
    const auto dtype = kernel_dtype(q);
    spec.f64 = dtype == torch::kDouble;
    q = contiguous_as(q, dtype), k = contiguous_as(k, dtype), v = contiguous_as(v, dtype);
    g = contiguous_as(g, dtype), k_star = contiguous_as(k_star, dtype), v_star = contiguous_as(v_star, dtype);
    sink = contiguous_as(sink, dtype);
    auto [o, stats] = run_forward(kernels_for(spec), q, k, v, g, k_star, v_star, sink);
    ctx->save_for_backward({q, k, v, g, k_star, v_star, sink, o, stats});
    ctx->saved_data["spec"] = spec.describe();
    remember(spec);
    return o;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto q = saved[0], k = saved[1], v = saved[2], g = saved[3], k_star = saved[4], v_star = saved[5], sink = saved[6],
         o = saved[7], stats = saved[8];
    const kernels::KernelSpec spec = recall(ctx->saved_data["spec"].toStringRef());
    auto dout = grads[0].contiguous().to(q.scalar_type());
    const Slices s(q);
    Kernels kern = kernels_for(spec);
    auto dq = torch::zeros_like(q), dk = torch::zeros_like(k), dv = torch::zeros_like(v);
    auto dg = torch::zeros({s.B, s.H, s.T}, q.options());
    auto dks = torch::zeros({s.B, s.H, s.D}, q.options()), dvs = torch::zeros({s.B, s.H, s.D}, q.options());
    auto dsink = torch::zeros({s.B, s.H, 1}, q.options());
    auto qt = transposed(q), kt = transposed(k), vt = transposed(v), doutt = transposed(dout);
    const int64_t Tp = kt.size(3), tile = s.D * Tp;
    auto delta = torch::zeros({s.B, s.H, Tp}, q.options());
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % s.H;
        constexpr auto& B = kernels::abi::kBackward;
        std::array<void*, B.size()> a{};
        a[slot(B, "q")] = s.rows(q, bh);
        a[slot(B, "qt")] = at(qt, bh * tile);
        a[slot(B, "k")] = s.rows(k, bh);
        a[slot(B, "kt")] = at(kt, bh * tile);
        a[slot(B, "v")] = s.rows(v, bh);
        a[slot(B, "vt")] = at(vt, bh * tile);
        a[slot(B, "g")] = Slices::head(g, h, s.T);
        a[slot(B, "kstar")] = Slices::head(k_star, h, s.D);
        a[slot(B, "vstar")] = Slices::head(v_star, h, s.D);
        a[slot(B, "sink")] = Slices::head(sink, h, 1);
        a[slot(B, "o")] = s.rows(o, bh);
        a[slot(B, "stats")] = at(stats, bh * 2 * Tp);
        a[slot(B, "dout")] = s.rows(dout, bh);
        a[slot(B, "doutt")] = at(doutt, bh * tile);
        a[slot(B, "delta")] = at(delta, bh * Tp);
        a[slot(B, "dq")] = s.rows(dq, bh);
        a[slot(B, "dk")] = s.rows(dk, bh);
        a[slot(B, "dv")] = s.rows(dv, bh);
        a[slot(B, "dg")] = at(dg, bh * s.T);
        a[slot(B, "dkstar")] = at(dks, bh * s.D);
        a[slot(B, "dvstar")] = at(dvs, bh * s.D);
        a[slot(B, "dsink")] = at(dsink, bh);
        call(kern.backward, a, s.T, Tp);
      }
    });
    // Per-slice partial sums of the shared parameters, reduced here.
    auto per_head = [&](const torch::Tensor& partial, const torch::Tensor& like) -> torch::Tensor {
      if (!like.defined()) return {};
      auto summed = partial.sum(0);  // [H, n]
      return like.size(0) == 1 ? summed.sum(0, true) : summed;
    };
    torch::Tensor dsink_head = sink.defined() ? dsink.sum(0).view({s.H}) : torch::Tensor();
    return {dq, dk, dv, per_head(dg, g), per_head(dks, k_star), per_head(dvs, v_star), dsink_head, torch::Tensor()};
  }

 private:
  // The spec travels to backward by its description (IValue cannot hold it).
  // Autograd may run backward on another thread than forward: guarded.
  static void remember(const kernels::KernelSpec& spec) {
    std::lock_guard<std::mutex> lock(spec_mutex());
    spec_cache().try_emplace(spec.describe(), spec);
  }
  static kernels::KernelSpec recall(const std::string& description) {
    std::lock_guard<std::mutex> lock(spec_mutex());
    return spec_cache().at(description);
  }
  static std::map<std::string, kernels::KernelSpec>& spec_cache() {
    static std::map<std::string, kernels::KernelSpec> cache;
    return cache;
  }
  static std::mutex& spec_mutex() {
    static std::mutex m;
    return m;
  }
};

}  // namespace

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const AttentionCall& in) {
  auto undefined_to_empty = [](const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}); };
  return JitAttention::apply(in.q, in.k, in.v, undefined_to_empty(in.g), undefined_to_empty(in.k_star),
                             undefined_to_empty(in.v_star), undefined_to_empty(in.sink_logit), spec);
}

std::pair<torch::Tensor, torch::Tensor> jit_probe(const kernels::KernelSpec& spec, const AttentionCall& in) {
  torch::NoGradGuard no_grad;
  const auto dtype = kernel_dtype(in.q);
  kernels::KernelSpec typed = spec;
  typed.f64 = dtype == torch::kDouble;
  auto q = contiguous_as(in.q, dtype), k = contiguous_as(in.k, dtype), v = contiguous_as(in.v, dtype);
  auto g = contiguous_as(in.g, dtype), k_star = contiguous_as(in.k_star, dtype), v_star = contiguous_as(in.v_star, dtype);
  const Slices s(q);
  Kernels kern = kernels_for(typed);
  auto stats = run_forward(kern, q, k, v, g, k_star, v_star, contiguous_as(in.sink_logit, dtype)).second;
  const int64_t S = s.T + (spec.key_bias ? 1 : 0), Tp = stats.size(3);
  auto scores = torch::zeros({s.B, s.H, s.T, S}, q.options());
  at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      constexpr auto& P = kernels::abi::kProbe;
      std::array<void*, P.size()> a{};
      a[slot(P, "q")] = s.rows(q, bh);
      a[slot(P, "k")] = s.rows(k, bh);
      a[slot(P, "g")] = Slices::head(g, bh % s.H, s.T);
      a[slot(P, "kstar")] = Slices::head(k_star, bh % s.H, s.D);
      a[slot(P, "stats")] = at(stats, bh * 2 * Tp);
      a[slot(P, "out")] = at(scores, bh * s.T * S);
      call(kern.probe, a, s.T, Tp);
    }
  });
  return {scores, stats.select(2, 0).narrow(2, 0, s.T)};
}

torch::Tensor jit_sink_share(const kernels::KernelSpec& spec, const AttentionCall& in) {
  torch::NoGradGuard no_grad;
  const auto dtype = kernel_dtype(in.q);
  kernels::KernelSpec typed = spec;
  typed.f64 = dtype == torch::kDouble;
  auto stats = run_forward(kernels_for(typed), contiguous_as(in.q, dtype), contiguous_as(in.k, dtype), contiguous_as(in.v, dtype),
                           contiguous_as(in.g, dtype), contiguous_as(in.k_star, dtype), contiguous_as(in.v_star, dtype),
                           contiguous_as(in.sink_logit, dtype))
                   .second;
  const int64_t T = in.q.size(2);
  auto m = stats.select(2, 0).narrow(2, 0, T), l = stats.select(2, 1).narrow(2, 0, T);
  auto b = in.sink_logit.to(dtype).view({1, -1, 1});
  return torch::exp(b - m) / l;
}

}  // namespace sink::rt
