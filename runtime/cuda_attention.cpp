#include "runtime/cuda_attention.h"

#include <fmt/format.h>
#include <map>
#include <mutex>

#include "kernels/emit_cuda.h"
#include "kernels/kernel_abi.h"

namespace sink::rt {
namespace {

using kernels::abi::slot;

// One variant compiled for one storage type and device.
struct Variant {
  kernels::KernelSpec spec;
  kernels::CudaTiles tiles;
  std::shared_ptr<KernelModule> module;
};

// Every layer calls this every step: emit and load once per variant. The
// backward finds its forward's variant by key (autograd cannot carry it).
std::mutex variants_mutex;
std::map<std::string, std::shared_ptr<const Variant>> variants;

std::string variant_key(const kernels::KernelSpec& spec, torch::ScalarType storage, const torch::Device& device,
                        const KernelModules& modules) {
  return fmt::format("{} storage={} device={} loader={}", spec.describe(), c10::toString(storage), device.str(), modules.name);
}

// bf16 and half stay as they are (float arithmetic), double stays double, the rest computes in float.
torch::ScalarType storage_dtype(const torch::Tensor& q) {
  const auto t = q.scalar_type();
  return t == torch::kBFloat16 || t == torch::kHalf || t == torch::kDouble ? t : torch::kFloat;
}
kernels::CudaStorage layout_of(torch::ScalarType storage) {
  return storage == torch::kBFloat16 ? kernels::CudaStorage::BFloat16
         : storage == torch::kHalf   ? kernels::CudaStorage::Float16
                                     : kernels::CudaStorage::Real;
}
torch::ScalarType real_dtype(torch::ScalarType storage) { return storage == torch::kDouble ? torch::kDouble : torch::kFloat; }

std::string prepare(kernels::KernelSpec spec, torch::ScalarType storage, const torch::Device& device,
                    const KernelModules& modules) {
  spec.f64 = storage == torch::kDouble;
  std::string key = variant_key(spec, storage, device, modules);
  std::lock_guard<std::mutex> lock(variants_mutex);
  if (!variants.count(key)) {
    auto module = modules.load(cuda_source_for(spec, storage), device);
    variants.emplace(key, std::make_shared<const Variant>(Variant{spec, kernels::cuda_tiles(spec), std::move(module)}));
  }
  return key;
}

std::shared_ptr<const Variant> recall(const std::string& key) {
  std::lock_guard<std::mutex> lock(variants_mutex);
  return variants.at(key);
}

KernelBuffer buffer(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? KernelBuffer{t.data_ptr(), t.nbytes()} : KernelBuffer{};
}

torch::Tensor as(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() && t.numel() > 0 ? t.to(dtype).contiguous() : torch::Tensor();
}

unsigned blocks(int64_t n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

// The sizes every kernel takes after its pointers (abi::kCudaSizes): T, H and
// the steps between heads of g [H|1, T] and of k*, v* [H|1, D] (0: shared by all heads).
struct Slices {
  int64_t B, H, T, D;
  std::array<int64_t, 4> sizes;
  Slices(const torch::Tensor& q, const torch::Tensor& g, const torch::Tensor& k_star)
      : B(q.size(0)), H(q.size(1)), T(q.size(2)), D(q.size(3)) {
    sizes = {T, H, g.defined() && g.size(0) > 1 ? g.size(1) : 0, k_star.defined() && k_star.size(0) > 1 ? D : 0};
    if (B * H > 65535) throw std::runtime_error(fmt::format("CUDA attention: {} x {} slices exceed a grid's 65535 rows; lower train.micro_batch", B, H));
  }
  LaunchShape shape(int64_t items, int threads) const {
    return {blocks(items, threads), static_cast<unsigned>(B * H), static_cast<unsigned>(threads)};
  }
};

// Sums a per-slice partial [B, H, n] to the parameter's shape [H|1, n].
torch::Tensor per_head(const torch::Tensor& partial, const torch::Tensor& like) {
  auto summed = partial.sum(0);
  return like.size(0) == 1 ? summed.sum(0, true) : summed;
}

std::pair<torch::Tensor, torch::Tensor> run_forward(const Variant& var, const torch::Tensor& q, const torch::Tensor& k,
                                                    const torch::Tensor& v, const torch::Tensor& g,
                                                    const torch::Tensor& k_star, const torch::Tensor& v_star,
                                                    const torch::Tensor& sink) {
  const Slices s(q, g, k_star);
  auto o = torch::empty_like(q);
  auto stats = torch::empty({s.B, s.H, 2, s.T}, q.options().dtype(real_dtype(q.scalar_type())));
  constexpr auto& F = kernels::abi::kCudaForward;
  std::array<KernelBuffer, F.size()> a{};
  a[slot(F, "q")] = buffer(q), a[slot(F, "k")] = buffer(k), a[slot(F, "v")] = buffer(v), a[slot(F, "g")] = buffer(g);
  a[slot(F, "kstar")] = buffer(k_star), a[slot(F, "vstar")] = buffer(v_star), a[slot(F, "sink")] = buffer(sink);
  a[slot(F, "o")] = buffer(o), a[slot(F, "stats")] = buffer(stats);
  var.module->launch(kernels::abi::kForwardSymbol, s.shape(s.T, var.tiles.forward_rows), a, s.sizes);
  return {o, stats};
}

class CudaAttention : public torch::autograd::Function<CudaAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q, torch::Tensor k, torch::Tensor v,
                               torch::Tensor g, torch::Tensor k_star, torch::Tensor v_star, torch::Tensor sink,
                               std::string key) {
    const auto storage = storage_dtype(q), real = real_dtype(storage);
    ctx->saved_data["key"] = key;
    ctx->saved_data["dtypes"] = std::vector<int64_t>{static_cast<int64_t>(q.scalar_type()), static_cast<int64_t>(k.scalar_type()),
                                                     static_cast<int64_t>(v.scalar_type())};
    q = as(q, storage), k = as(k, storage), v = as(v, storage);
    g = as(g, real), k_star = as(k_star, real), v_star = as(v_star, real), sink = as(sink, real);
    auto [o, stats] = run_forward(*recall(key), q, k, v, g, k_star, v_star, sink);
    ctx->save_for_backward({q, k, v, g, k_star, v_star, sink, o, stats});
    return o;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto q = saved[0], k = saved[1], v = saved[2], g = saved[3], k_star = saved[4], v_star = saved[5], sink = saved[6],
         o = saved[7], stats = saved[8];
    const auto var = recall(ctx->saved_data["key"].toStringRef());
    const auto dtypes = ctx->saved_data["dtypes"].toIntVector();
    const auto real = stats.scalar_type();
    const Slices s(q, g, k_star);
    auto dout = grads[0].to(q.scalar_type()).contiguous();
    auto rows = [&](bool wanted) { return wanted ? torch::empty({s.B, s.H, s.T}, stats.options()) : torch::Tensor(); };
    auto delta = rows(true), astar = rows(var->spec.key_bias), sdxstar = rows(var->spec.key_bias), dsink = rows(var->spec.sink_logit);
    {
      constexpr auto& R = kernels::abi::kCudaBackwardRows;
      std::array<KernelBuffer, R.size()> a{};
      a[slot(R, "q")] = buffer(q), a[slot(R, "kstar")] = buffer(k_star), a[slot(R, "vstar")] = buffer(v_star);
      a[slot(R, "sink")] = buffer(sink), a[slot(R, "o")] = buffer(o), a[slot(R, "stats")] = buffer(stats);
      a[slot(R, "dout")] = buffer(dout), a[slot(R, "delta")] = buffer(delta), a[slot(R, "astar")] = buffer(astar);
      a[slot(R, "sdxstar")] = buffer(sdxstar), a[slot(R, "dsink")] = buffer(dsink);
      var->module->launch(kernels::abi::kCudaBackwardRowsSymbol, s.shape(s.T, var->tiles.row_threads), a, s.sizes);
    }
    auto dk = torch::empty_like(k), dv = torch::empty_like(v);
    auto dg = var->spec.position_bias ? torch::zeros({s.B, s.H, s.T}, stats.options()) : torch::Tensor();
    {
      constexpr auto& K = kernels::abi::kCudaBackwardKeys;
      std::array<KernelBuffer, K.size()> a{};
      a[slot(K, "q")] = buffer(q), a[slot(K, "k")] = buffer(k), a[slot(K, "v")] = buffer(v), a[slot(K, "g")] = buffer(g);
      a[slot(K, "stats")] = buffer(stats), a[slot(K, "dout")] = buffer(dout), a[slot(K, "delta")] = buffer(delta);
      a[slot(K, "dk")] = buffer(dk), a[slot(K, "dv")] = buffer(dv), a[slot(K, "dg")] = buffer(dg);
      var->module->launch(kernels::abi::kCudaBackwardKeysSymbol, s.shape(s.T, var->tiles.key_rows), a, s.sizes);
    }
    auto dq = torch::empty_like(q);
    {
      constexpr auto& Q = kernels::abi::kCudaBackwardQueries;
      std::array<KernelBuffer, Q.size()> a{};
      a[slot(Q, "q")] = buffer(q), a[slot(Q, "k")] = buffer(k), a[slot(Q, "v")] = buffer(v), a[slot(Q, "g")] = buffer(g);
      a[slot(Q, "kstar")] = buffer(k_star), a[slot(Q, "stats")] = buffer(stats), a[slot(Q, "dout")] = buffer(dout);
      a[slot(Q, "delta")] = buffer(delta), a[slot(Q, "sdxstar")] = buffer(sdxstar), a[slot(Q, "dq")] = buffer(dq);
      var->module->launch(kernels::abi::kCudaBackwardQueriesSymbol, s.shape(s.T, var->tiles.query_rows), a, s.sizes);
    }
    // The shared parameters' gradients: sums over batch and rows of per-row terms.
    torch::Tensor dks, dvs, dsink_head, dg_head;
    if (k_star.defined()) {
      dks = per_head(torch::einsum("bht,bhtd->bhd", {sdxstar, q.to(real)}), k_star);
      dvs = per_head(torch::einsum("bht,bhtd->bhd", {astar, dout.to(real)}), v_star);
    }
    if (sink.defined()) dsink_head = dsink.sum(std::vector<int64_t>{0, 2});
    if (g.defined()) dg_head = per_head(dg, g);
    auto back = [&](const torch::Tensor& t, size_t n) { return t.to(static_cast<torch::ScalarType>(dtypes[n])); };
    return {back(dq, 0), back(dk, 1), back(dv, 2), dg_head, dks, dvs, dsink_head, torch::Tensor()};
  }
};

// The call's tensors, prepared as the kernels read them.
struct Prepared {
  std::string key;
  torch::Tensor q, k, v, g, k_star, v_star, sink;
};

Prepared prepare_call(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules) {
  const auto storage = storage_dtype(call.q), real = real_dtype(storage);
  Prepared p;
  p.key = prepare(spec, storage, call.q.device(), modules);
  p.q = as(call.q, storage), p.k = as(call.k, storage), p.v = as(call.v, storage), p.g = as(call.g, real);
  p.k_star = as(call.k_star, real), p.v_star = call.k_star.defined() ? as(call.v_star, real) : torch::Tensor();
  p.sink = as(call.sink_logit, real);
  return p;
}

}  // namespace

std::string cuda_source_for(kernels::KernelSpec spec, torch::ScalarType storage) {
  spec.f64 = storage == torch::kDouble;
  return kernels::emit_cuda(spec, layout_of(storage));
}

KernelModules cuda_modules() {
  return {"nvrtc", [](const std::string& source, const torch::Device& device) -> std::shared_ptr<KernelModule> {
            if (!device.is_cuda()) throw std::logic_error("cuda_modules: tensors on " + device.str());
            return cuda::module_for(source, device.has_index() ? device.index() : 0);
          }};
}

torch::Tensor cuda_attention(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules) {
  const auto storage = storage_dtype(call.q);
  const std::string key = prepare(spec, storage, call.q.device(), modules);
  auto empty = [&](const torch::Tensor& t) { return t.defined() ? t : torch::empty({0}, call.q.options()); };
  return CudaAttention::apply(call.q, call.k, call.v, empty(call.g), empty(call.k_star),
                              call.k_star.defined() ? empty(call.v_star) : empty(torch::Tensor()), empty(call.sink_logit), key);
}

std::pair<torch::Tensor, torch::Tensor> cuda_probe(const kernels::KernelSpec& spec, const AttentionCall& call,
                                                   const KernelModules& modules) {
  torch::NoGradGuard no_grad;
  Prepared p = prepare_call(spec, call, modules);
  const auto var = recall(p.key);
  auto stats = run_forward(*var, p.q, p.k, p.v, p.g, p.k_star, p.v_star, p.sink).second;
  const Slices s(p.q, p.g, p.k_star);
  const int64_t S = s.T + (spec.key_bias ? 1 : 0);
  auto scores = torch::empty({s.B, s.H, s.T, S}, stats.options());
  constexpr auto& P = kernels::abi::kCudaProbe;
  std::array<KernelBuffer, P.size()> a{};
  a[slot(P, "q")] = buffer(p.q), a[slot(P, "k")] = buffer(p.k), a[slot(P, "g")] = buffer(p.g);
  a[slot(P, "kstar")] = buffer(p.k_star), a[slot(P, "stats")] = buffer(stats), a[slot(P, "out")] = buffer(scores);
  var->module->launch(kernels::abi::kProbeSymbol, s.shape(s.T * S, var->tiles.row_threads), a, s.sizes);
  return {scores, stats.select(2, 0)};
}

torch::Tensor cuda_sink_share(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules) {
  torch::NoGradGuard no_grad;
  Prepared p = prepare_call(spec, call, modules);
  auto stats = run_forward(*recall(p.key), p.q, p.k, p.v, p.g, p.k_star, p.v_star, p.sink).second;
  auto m = stats.select(2, 0), l = stats.select(2, 1);
  return torch::exp(p.sink.view({1, -1, 1}) - m) / l;
}

}  // namespace sink::rt
