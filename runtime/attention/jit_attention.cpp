#include "runtime/attention/jit_attention.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "kernels/kernel_abi.h"
#include "kernels/llvm/emit_llvm.h"
#include "runtime/attention/generated_attention.h"
#include "runtime/attention/jit.h"
#include "support/fnv1a.h"

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
  const uint64_t h = fnv1a(ir);
  const std::string key = fmt::format("{}-{:016x}", spec.hash(), h);
  Jit& jit = Jit::shared();
  return {jit.lookup(key, ir, std::string(kernels::abi::kForwardSymbol)),
          jit.lookup(key, ir, std::string(kernels::abi::kBackwardSymbol)),
          jit.lookup(key, ir, std::string(kernels::abi::kProbeSymbol))};
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
  auto out = torch::empty({t.size(0), t.size(1), t.size(3), T + kernels::kKeyBlock}, t.options());
  out.narrow(3, 0, T).copy_(t.transpose(2, 3));
  out.narrow(3, T, kernels::kKeyBlock).zero_();  // the padding alone: the copy writes the rest
  return out;
}

torch::Tensor contiguous_as(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() && t.numel() > 0 ? t.contiguous().to(dtype) : torch::Tensor();
}

// The compiled kernels of one variant, run over batch x heads with at::parallel_for.
class JitLauncher : public KernelLauncher {
 public:
  explicit JitLauncher(const kernels::KernelSpec& spec)
      : spec_(spec),
        kernels_(compile_kernels(spec)),
        key_("jit " + spec.describe()),
        description_(spec.f64 ? "jit double" : "jit float") {}
  const std::string& key() const override { return key_; }
  const std::string& description() const override { return description_; }

  KernelTensors prepare(const AttentionCall& call) const override {
    const auto dtype = spec_.f64 ? torch::kDouble : torch::kFloat;
    return {contiguous_as(call.q, dtype),         contiguous_as(call.k, dtype),      contiguous_as(call.v, dtype),
            contiguous_as(call.g, dtype),         contiguous_as(call.k_star, dtype), contiguous_as(call.v_star, dtype),
            contiguous_as(call.sink_logit, dtype)};
  }

  std::pair<torch::Tensor, torch::Tensor> forward(const KernelTensors& in) const override {
    const Slices s(in.q);
    auto o = torch::empty_like(in.q);
    auto kt = transposed(in.k);
    const int64_t Tp = kt.size(3);
    auto stats = torch::zeros({s.B, s.H, 2, Tp}, in.q.options());
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % s.H;
        constexpr auto& F = kernels::abi::kForward;
        std::array<void*, F.size()> a{};
        a[slot(F, "q")] = s.rows(in.q, bh);
        a[slot(F, "kt")] = at(kt, bh * s.D * Tp);
        a[slot(F, "v")] = s.rows(in.v, bh);
        a[slot(F, "g")] = Slices::head(in.g, h, s.T);
        a[slot(F, "kstar")] = Slices::head(in.k_star, h, s.D);
        a[slot(F, "vstar")] = Slices::head(in.v_star, h, s.D);
        a[slot(F, "sink")] = Slices::head(in.sink, h, 1);
        a[slot(F, "o")] = s.rows(o, bh);
        a[slot(F, "stats")] = at(stats, bh * 2 * Tp);
        call(kernels_.forward, a, s.T, Tp);
      }
    });
    return {o, stats};
  }

  SliceGradients backward(const KernelTensors& in, const torch::Tensor& o, const torch::Tensor& stats,
                          const torch::Tensor& dout, bool /*position_grad: dg costs little here*/) const override {
    const Slices s(in.q);
    const auto& options = in.q.options();
    SliceGradients d{torch::zeros_like(in.q),
                     torch::zeros_like(in.k),
                     torch::zeros_like(in.v),
                     torch::zeros({s.B, s.H, s.T}, options),
                     torch::zeros({s.B, s.H, s.D}, options),
                     torch::zeros({s.B, s.H, s.D}, options),
                     torch::zeros({s.B, s.H, 1}, options)};
    auto qt = transposed(in.q), kt = transposed(in.k), vt = transposed(in.v), doutt = transposed(dout);
    const int64_t Tp = kt.size(3), tile = s.D * Tp;
    auto delta = torch::zeros({s.B, s.H, Tp}, options);
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t h = bh % s.H;
        constexpr auto& B = kernels::abi::kBackward;
        std::array<void*, B.size()> a{};
        a[slot(B, "q")] = s.rows(in.q, bh);
        a[slot(B, "qt")] = at(qt, bh * tile);
        a[slot(B, "k")] = s.rows(in.k, bh);
        a[slot(B, "kt")] = at(kt, bh * tile);
        a[slot(B, "v")] = s.rows(in.v, bh);
        a[slot(B, "vt")] = at(vt, bh * tile);
        a[slot(B, "g")] = Slices::head(in.g, h, s.T);
        a[slot(B, "kstar")] = Slices::head(in.k_star, h, s.D);
        a[slot(B, "vstar")] = Slices::head(in.v_star, h, s.D);
        a[slot(B, "sink")] = Slices::head(in.sink, h, 1);
        a[slot(B, "o")] = s.rows(o, bh);
        a[slot(B, "stats")] = at(stats, bh * 2 * Tp);
        a[slot(B, "dout")] = s.rows(dout, bh);
        a[slot(B, "doutt")] = at(doutt, bh * tile);
        a[slot(B, "delta")] = at(delta, bh * Tp);
        a[slot(B, "dq")] = s.rows(d.dq, bh);
        a[slot(B, "dk")] = s.rows(d.dk, bh);
        a[slot(B, "dv")] = s.rows(d.dv, bh);
        a[slot(B, "dg")] = at(d.dg, bh * s.T);
        a[slot(B, "dkstar")] = at(d.dk_star, bh * s.D);
        a[slot(B, "dvstar")] = at(d.dv_star, bh * s.D);
        a[slot(B, "dsink")] = at(d.dsink, bh);
        call(kernels_.backward, a, s.T, Tp);
      }
    });
    return d;
  }

  torch::Tensor probe(const KernelTensors& in, const torch::Tensor& stats) const override {
    const Slices s(in.q);
    const int64_t S = s.T + (spec_.key_bias ? 1 : 0), Tp = stats.size(3);
    auto scores = torch::zeros({s.B, s.H, s.T, S}, in.q.options());
    at::parallel_for(0, s.B * s.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        constexpr auto& P = kernels::abi::kProbe;
        std::array<void*, P.size()> a{};
        a[slot(P, "q")] = s.rows(in.q, bh);
        a[slot(P, "k")] = s.rows(in.k, bh);
        a[slot(P, "g")] = Slices::head(in.g, bh % s.H, s.T);
        a[slot(P, "kstar")] = Slices::head(in.k_star, bh % s.H, s.D);
        a[slot(P, "stats")] = at(stats, bh * 2 * Tp);
        a[slot(P, "out")] = at(scores, bh * s.T * S);
        call(kernels_.probe, a, s.T, Tp);
      }
    });
    return scores;
  }

 private:
  kernels::KernelSpec spec_;
  Kernels kernels_;
  std::string key_, description_;
};

}  // namespace

// Every layer calls this every step: emit and compile once per variant.
std::shared_ptr<const KernelLauncher> jit_launcher(kernels::KernelSpec spec, const torch::Tensor& q) {
  spec.f64 = q.scalar_type() == torch::kDouble;  // finite-difference checks; all else computes in float
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const KernelLauncher>> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = known.try_emplace(spec.describe());
  if (fresh) it->second = std::make_shared<JitLauncher>(spec);
  return it->second;
}

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const AttentionCall& call) {
  return generated_attention(jit_launcher(spec, call.q), call);
}

AttentionProbe jit_probe(const kernels::KernelSpec& spec, const AttentionConfig& cfg, const AttentionCall& call) {
  return generated_probe(*jit_launcher(spec, call.q), cfg, call);
}

}  // namespace sink::rt
