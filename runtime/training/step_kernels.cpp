#include "runtime/training/step_kernels.h"

#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/step_source.h"
#include "kernels/kernel_abi.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/gpu_features.h"

namespace sink::rt {
namespace {

using kernels::CudaStorage;
using kernels::abi::slot;

constexpr int64_t kNormWarps = 4;           // rows a block (kernels/cuda/residual_norm.cuh)
constexpr int64_t kNormBlocks = 1024;       // the backward's blocks at most: dw's partial sums, [blocks, d]
constexpr int64_t kGatedThreads = 256;      // a row's columns a block (kernels/cuda/gated_activation.cuh)
constexpr int64_t kGatedRowBlocks = 65535;  // the grid's y at most: the blocks stride over the rows past it
constexpr int64_t kSplitThreads = 256;      // a row's pairs of columns a block (kernels/cuda/split_heads.cuh)

bool storable(torch::ScalarType t) { return t == torch::kFloat || t == torch::kBFloat16 || t == torch::kHalf; }
CudaStorage storage_of(torch::ScalarType t) {
  return t == torch::kBFloat16 ? CudaStorage::BFloat16 : t == torch::kHalf ? CudaStorage::Float16 : CudaStorage::Real;
}
KernelBuffer buffer(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? KernelBuffer{t.data_ptr(), t.nbytes()} : KernelBuffer{};
}
unsigned blocks_for(int64_t n, int64_t per, int64_t most) {
  return static_cast<unsigned>(std::min((n + per - 1) / per, most));
}

// Autograd carries the kernels' name, not the object: the functions find them here.
std::mutex known_mutex;
std::map<std::string, std::shared_ptr<const StepKernels>> known;
const StepKernels& recall(const std::string& name) {
  std::lock_guard<std::mutex> lock(known_mutex);
  return *known.at(name);
}

class ResidualNorm : public torch::autograd::Function<ResidualNorm> {
 public:
  // b: LayerNorm's bias, or an empty tensor for RMSNorm.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor r,
                                                torch::Tensor w, torch::Tensor b, std::string kernels, double eps) {
    const StepKernels& step = recall(kernels);
    ctx->set_materialize_grads(false);  // a gradient nothing sent stays undefined, not a tensor of zeros
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const bool centered = b.numel() > 0;
    x = x.contiguous(), r = r.contiguous(), w = w.contiguous(), b = b.contiguous();
    auto s = torch::empty_like(x), n = torch::empty(x.sizes(), r.options());
    const auto source = kernels::residual_norm_source(storage_of(r.scalar_type()), d, eps, centered);
    constexpr auto& F = kernels::abi::kResidualNormForward;
    std::array<KernelBuffer, F.pointers.size()> buffers{};
    buffers[slot(F.pointers, "x")] = buffer(x), buffers[slot(F.pointers, "r")] = buffer(r);
    buffers[slot(F.pointers, "w")] = buffer(w), buffers[slot(F.pointers, "b")] = buffer(b);
    buffers[slot(F.pointers, "s")] = buffer(s), buffers[slot(F.pointers, "n")] = buffer(n);
    const int64_t sizes[] = {rows, 0, 0, 0};
    if (rows > 0)
      step.module(source, x.device())
          ->launch(F.symbol, {blocks_for(rows, kNormWarps, INT32_MAX), 1, kNormWarps * 32, 0, current_stream(x)},
                   buffers, sizes);
    ctx->save_for_backward({s, w});
    ctx->saved_data["kernels"] = kernels;
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["centered"] = centered;
    ctx->saved_data["r_dtype"] = static_cast<int64_t>(r.scalar_type());
    return {s, n};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &s = saved[0], &w = saved[1];
    const auto r_dtype = static_cast<torch::ScalarType>(ctx->saved_data["r_dtype"].toInt());
    torch::Tensor ds_after = grads[0].defined() ? grads[0].to(s.scalar_type()).contiguous() : torch::Tensor();
    if (!grads[1].defined()) {  // n not used: the stream's gradient passes through, w gets none
      auto ds = ds_after.defined() ? ds_after : torch::zeros_like(s);
      return {ds, ds.to(r_dtype), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const auto dn = grads[1].to(r_dtype).contiguous();
    const int64_t d = s.size(-1), rows = s.numel() / d;
    const unsigned blocks = std::max(1u, blocks_for(rows, kNormWarps, kNormBlocks));
    const bool centered = ctx->saved_data["centered"].toBool();
    auto ds = torch::empty_like(s), dw_part = torch::zeros({blocks, d}, s.options());
    auto db_part = centered ? torch::zeros({blocks, d}, s.options()) : torch::Tensor();
    const auto source =
        kernels::residual_norm_source(storage_of(r_dtype), d, ctx->saved_data["eps"].toDouble(), centered);
    constexpr auto& B = kernels::abi::kResidualNormBackward;
    std::array<KernelBuffer, B.pointers.size()> buffers{};
    buffers[slot(B.pointers, "dn")] = buffer(dn), buffers[slot(B.pointers, "ds_after")] = buffer(ds_after);
    buffers[slot(B.pointers, "s")] = buffer(s), buffers[slot(B.pointers, "w")] = buffer(w);
    buffers[slot(B.pointers, "ds")] = buffer(ds), buffers[slot(B.pointers, "dw_part")] = buffer(dw_part);
    buffers[slot(B.pointers, "db_part")] = buffer(db_part);
    const int64_t sizes[] = {rows, blocks, 0, 0};
    // ResidualNormShared: each warp's dw slice, and its db slice for LayerNorm (one float in its place for RMSNorm).
    const unsigned shared =
        static_cast<unsigned>(((centered ? 2 : 1) * kNormWarps * d + (centered ? 0 : 1)) * sizeof(float));
    if (rows > 0)
      recall(ctx->saved_data["kernels"].toStringRef())
          .module(source, s.device())
          ->launch(B.symbol, {blocks, 1, kNormWarps * 32, shared, current_stream(s)}, buffers, sizes);
    return {ds,
            ds.to(r_dtype),
            dw_part.sum(0).to(w.scalar_type()),
            centered ? db_part.sum(0).to(w.scalar_type()) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

kernels::GatedActivation activation_of(Ffn act) {
  return act == Ffn::relu   ? kernels::GatedActivation::Relu
         : act == Ffn::gelu ? kernels::GatedActivation::Gelu
                            : kernels::GatedActivation::Silu;
}

// A block per kGatedThreads columns of a row (x) and per row (y, striding past kGatedRowBlocks).
LaunchShape gated_shape(int64_t rows, int64_t width, const torch::Tensor& on) {
  return {blocks_for(width, kGatedThreads, INT32_MAX), std::max(1u, blocks_for(rows, 1, kGatedRowBlocks)),
          kGatedThreads, 0, current_stream(on)};
}

class Gated : public torch::autograd::Function<Gated> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor gate_up, std::string kernels,
                               int64_t activation) {
    const StepKernels& step = recall(kernels);
    gate_up = gate_up.contiguous();
    const int64_t width = gate_up.size(-1) / 2, rows = gate_up.numel() / gate_up.size(-1);
    auto sizes_out = gate_up.sizes().vec();
    sizes_out.back() = width;
    auto h = torch::empty(sizes_out, gate_up.options());
    const auto source = kernels::gated_activation_source(storage_of(gate_up.scalar_type()),
                                                         static_cast<kernels::GatedActivation>(activation));
    const LaunchShape shape = gated_shape(rows, width, gate_up);
    constexpr auto& F = kernels::abi::kGatedForward;
    std::array<KernelBuffer, F.pointers.size()> buffers{};
    buffers[slot(F.pointers, "gate_up")] = buffer(gate_up), buffers[slot(F.pointers, "h")] = buffer(h);
    const int64_t sizes[] = {rows, width, shape.grid_y, 0};
    if (h.numel() > 0) step.module(source, gate_up.device())->launch(F.symbol, shape, buffers, sizes);
    ctx->save_for_backward({gate_up});
    ctx->saved_data["kernels"] = kernels;
    ctx->saved_data["activation"] = activation;
    return h;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto gate_up = ctx->get_saved_variables()[0];
    const auto dh = grads[0].to(gate_up.scalar_type()).contiguous();
    const int64_t width = gate_up.size(-1) / 2, rows = gate_up.numel() / gate_up.size(-1);
    auto d_gate_up = torch::empty_like(gate_up);
    const auto source =
        kernels::gated_activation_source(storage_of(gate_up.scalar_type()),
                                         static_cast<kernels::GatedActivation>(ctx->saved_data["activation"].toInt()));
    const LaunchShape shape = gated_shape(rows, width, gate_up);
    constexpr auto& B = kernels::abi::kGatedBackward;
    std::array<KernelBuffer, B.pointers.size()> buffers{};
    buffers[slot(B.pointers, "dh")] = buffer(dh), buffers[slot(B.pointers, "gate_up")] = buffer(gate_up);
    buffers[slot(B.pointers, "d_gate_up")] = buffer(d_gate_up);
    const int64_t sizes[] = {rows, width, shape.grid_y, 0};
    if (dh.numel() > 0)
      recall(ctx->saved_data["kernels"].toStringRef())
          .module(source, gate_up.device())
          ->launch(B.symbol, shape, buffers, sizes);
    return {d_gate_up, torch::Tensor(), torch::Tensor()};
  }
};

// q, k, v into heads: a block per kSplitThreads pairs of a row's columns (x) and per row (y, striding).
LaunchShape split_shape(int64_t rows, int64_t width, const torch::Tensor& on) {
  return {blocks_for(width / 2, kSplitThreads, INT32_MAX), std::max(1u, blocks_for(rows, 1, kGatedRowBlocks)),
          kSplitThreads, 0, current_stream(on)};
}

class SplitHeads : public torch::autograd::Function<SplitHeads> {
 public:
  // cos and sin: empty tensors where there is no RoPE.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor qkv,
                                                torch::Tensor cos, torch::Tensor sin, std::string kernels,
                                                int64_t heads, int64_t kv_heads) {
    const StepKernels& step = recall(kernels);
    qkv = qkv.contiguous();
    const int64_t B = qkv.size(0), T = qkv.size(1), width = qkv.size(2);
    const int64_t head_dim = width / (heads + 2 * kv_heads);
    auto q = torch::empty({B, heads, T, head_dim}, qkv.options());
    auto k = torch::empty({B, kv_heads, T, head_dim}, qkv.options()), v = torch::empty_like(k);
    const bool rope = cos.numel() > 0;
    const auto source = kernels::split_heads_source(storage_of(qkv.scalar_type()), heads, kv_heads, head_dim, rope);
    const LaunchShape shape = split_shape(B * T, width, qkv);
    constexpr auto& F = kernels::abi::kSplitHeadsForward;
    std::array<KernelBuffer, F.pointers.size()> buffers{};
    buffers[slot(F.pointers, "qkv")] = buffer(qkv), buffers[slot(F.pointers, "cos")] = buffer(cos);
    buffers[slot(F.pointers, "sin")] = buffer(sin), buffers[slot(F.pointers, "q")] = buffer(q);
    buffers[slot(F.pointers, "k")] = buffer(k), buffers[slot(F.pointers, "v")] = buffer(v);
    const int64_t sizes[] = {B * T, T, shape.grid_y, 0};
    if (qkv.numel() > 0) step.module(source, qkv.device())->launch(F.symbol, shape, buffers, sizes);
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["kernels"] = kernels;
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["kv_heads"] = kv_heads;
    ctx->saved_data["dtype"] = static_cast<int64_t>(qkv.scalar_type());
    return {q, k, v};
  }

  // A gradient nothing sent arrives as zeros (autograd materializes it).
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &cos = saved[0], &sin = saved[1];
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const int64_t heads = ctx->saved_data["heads"].toInt(), kv_heads = ctx->saved_data["kv_heads"].toInt();
    const auto dq = grads[0].to(dtype).contiguous(), dk = grads[1].to(dtype).contiguous(),
               dv = grads[2].to(dtype).contiguous();
    const int64_t B = dq.size(0), T = dq.size(2), head_dim = dq.size(3), width = (heads + 2 * kv_heads) * head_dim;
    auto d_qkv = torch::empty({B, T, width}, dq.options());
    const auto source = kernels::split_heads_source(storage_of(dtype), heads, kv_heads, head_dim, cos.numel() > 0);
    const LaunchShape shape = split_shape(B * T, width, dq);
    constexpr auto& P = kernels::abi::kSplitHeadsBackward;
    std::array<KernelBuffer, P.pointers.size()> buffers{};
    buffers[slot(P.pointers, "dq")] = buffer(dq), buffers[slot(P.pointers, "dk")] = buffer(dk);
    buffers[slot(P.pointers, "dv")] = buffer(dv), buffers[slot(P.pointers, "cos")] = buffer(cos);
    buffers[slot(P.pointers, "sin")] = buffer(sin), buffers[slot(P.pointers, "d_qkv")] = buffer(d_qkv);
    const int64_t sizes[] = {B * T, T, shape.grid_y, 0};
    if (d_qkv.numel() > 0)
      recall(ctx->saved_data["kernels"].toStringRef())
          .module(source, dq.device())
          ->launch(P.symbol, shape, buffers, sizes);
    return {d_qkv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool StepKernels::residual_norm_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                                     const torch::Tensor& b) const {
  auto gain_like = [&](const torch::Tensor& t) {
    return t.scalar_type() == torch::kFloat && t.dim() == 1 && t.size(0) == x.size(-1) && t.device() == x.device();
  };
  return x.dim() >= 2 && x.scalar_type() == torch::kFloat && storable(r.scalar_type()) && r.sizes() == x.sizes() &&
         r.device() == x.device() && gain_like(w) && (!b.defined() || gain_like(b));
}

std::pair<torch::Tensor, torch::Tensor> StepKernels::residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                                   const torch::Tensor& w, const torch::Tensor& b,
                                                                   double eps) const {
  if (!residual_norm_fits(x, r, w, b)) return StepOperations::residual_norm(x, r, w, b, eps);
  auto out = ResidualNorm::apply(x, r, w, b.defined() ? b : torch::empty({0}, w.options()), name(), eps);
  return {out[0], out[1]};
}

bool StepKernels::gated_fits(const torch::Tensor& gate_up) const {
  return gate_up.dim() >= 2 && storable(gate_up.scalar_type()) && gate_up.size(-1) % 2 == 0;
}

torch::Tensor StepKernels::gated_activation(const torch::Tensor& gate_up, Ffn activation) const {
  return Gated::apply(gate_up, name(), static_cast<int64_t>(activation_of(activation)));
}

bool StepKernels::split_fits(const torch::Tensor& qkv, const torch::Tensor& cos, int64_t heads, int64_t kv_heads,
                             int64_t head_dim) const {
  const bool tables =
      !cos.defined() || (cos.scalar_type() == torch::kFloat && cos.is_contiguous() && cos.device() == qkv.device() &&
                         cos.dim() == 2 && cos.size(0) >= qkv.size(1) && cos.size(1) == head_dim);
  return qkv.dim() == 3 && storable(qkv.scalar_type()) && head_dim % 2 == 0 &&
         qkv.size(2) == (heads + 2 * kv_heads) * head_dim && qkv.size(0) * qkv.size(1) < INT32_MAX && tables;
}

std::vector<torch::Tensor> StepKernels::split_heads(const torch::Tensor& qkv, const torch::Tensor& cos,
                                                    const torch::Tensor& sin, int64_t heads, int64_t kv_heads) const {
  const auto none = torch::empty({0}, qkv.options().dtype(torch::kFloat));
  return SplitHeads::apply(qkv, cos.defined() ? cos.contiguous() : none, sin.defined() ? sin.contiguous() : none,
                           name(), heads, kv_heads);
}

std::string StepKernels::fused(const ModelConfig& cfg) const {
  std::vector<std::string> fused;
  if (cfg.placement == NormPlacement::pre)
    fused.push_back(cfg.norm == NormKind::rmsnorm ? "residual add + RMSNorm" : "residual add + LayerNorm");
  if (cfg.ffn == Ffn::reglu || cfg.ffn == Ffn::geglu || cfg.ffn == Ffn::swiglu)
    fused.push_back(std::string(name_of(cfg.ffn)) + "'s activation");
  fused.push_back(cfg.pe == PosEmbedding::rope ? "q, k, v into heads with RoPE" : "q, k, v into heads");
  return fmt::format("{}", fmt::join(fused, ", "));
}

torch::Tensor StepKernels::gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                                        Ffn act) const {
  const auto gate_up = torch::linear(x, torch::cat({w1, w3}, 0));
  if (gated_fits(gate_up)) return gated_activation(gate_up, act);
  const auto halves = gate_up.chunk(2, -1);
  return activation(halves[0], act) * halves[1];
}

std::array<torch::Tensor, 3> StepKernels::heads(const torch::Tensor& x, const torch::Tensor& wq,
                                                const torch::Tensor& wk, const torch::Tensor& wv,
                                                const torch::Tensor& cos, const torch::Tensor& sin, int64_t heads,
                                                int64_t kv_heads) const {
  // One kernel each way from the stacked product to the head-major q, k, v the attention reads, RoPE on the way.
  const auto stacked = torch::linear(x, torch::cat({wq, wk, wv}, 0));
  const int64_t head_dim = wq.size(0) / heads;
  if (split_fits(stacked, cos, heads, kv_heads, head_dim)) {
    const auto split = split_heads(stacked, cos, sin, heads, kv_heads);
    return {split[0], split[1], split[2]};
  }
  return into_heads(stacked.split_with_sizes({wq.size(0), wk.size(0), wv.size(0)}, -1), cos, sin, heads, kv_heads);
}

std::shared_ptr<KernelModule> StepKernels::module(const std::string& source, const torch::Device& device) const {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<KernelModule>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& m = loaded[modules_.name + "\n" + device.str() + "\n" + source];
  if (!m) m = modules_.load(source, device);
  return m;
}

std::shared_ptr<const StepKernels> register_step_kernels(KernelModules modules) {
  std::lock_guard<std::mutex> lock(known_mutex);
  auto& k = known[modules.name];
  if (!k) k = std::make_shared<const StepKernels>(std::move(modules));
  return k;
}

std::shared_ptr<const StepKernels> step_kernels_for(const torch::Device& device) {
  if (!device.is_cuda() || !cuda::backend_compiled()) return nullptr;
  if (!gpu_feature_on(GpuFeature::step_kernels, gpu_capability(device.has_index() ? device.index() : 0)))
    return nullptr;
  return register_step_kernels(cuda_modules());
}

}  // namespace sink::rt
