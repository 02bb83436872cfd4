#include "runtime/training/step_kernels.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/step_source.h"
#include "runtime/attention/cuda_driver.h"

namespace sink::rt {
namespace {

using kernels::CudaStorage;

constexpr int64_t kNormWarps = 4;           // rows a block (kernels/cuda/residual_norm.cuh)
constexpr int64_t kNormBlocks = 1024;       // the backward's blocks at most: dw's partial sums, [blocks, d]
constexpr int64_t kGatedThreads = 256;      // a row's columns a block (kernels/cuda/gated_activation.cuh)
constexpr int64_t kGatedRowBlocks = 65535;  // the grid's y at most: the blocks stride over the rows past it

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
    const KernelBuffer buffers[] = {buffer(x), buffer(r), buffer(w), buffer(b), buffer(s), buffer(n)};
    const int64_t sizes[] = {rows, 0, 0, 0};
    if (rows > 0)
      step.module(source, x.device())
          ->launch(kernels::kResidualNormForwardSymbol,
                   {blocks_for(rows, kNormWarps, INT32_MAX), 1, kNormWarps * 32, 0, current_stream(x)}, buffers, sizes);
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
    const KernelBuffer buffers[] = {buffer(dn), buffer(ds_after), buffer(s),      buffer(w),
                                    buffer(ds), buffer(dw_part),  buffer(db_part)};
    const int64_t sizes[] = {rows, blocks, 0, 0};
    // ResidualNormShared: each warp's dw slice, and its db slice for LayerNorm (one float in its place for RMSNorm).
    const unsigned shared =
        static_cast<unsigned>(((centered ? 2 : 1) * kNormWarps * d + (centered ? 0 : 1)) * sizeof(float));
    if (rows > 0)
      recall(ctx->saved_data["kernels"].toStringRef())
          .module(source, s.device())
          ->launch(kernels::kResidualNormBackwardSymbol, {blocks, 1, kNormWarps * 32, shared, current_stream(s)},
                   buffers, sizes);
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
    const KernelBuffer buffers[] = {buffer(gate_up), buffer(h)};
    const int64_t sizes[] = {rows, width, shape.grid_y, 0};
    if (h.numel() > 0)
      step.module(source, gate_up.device())->launch(kernels::kGatedForwardSymbol, shape, buffers, sizes);
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
    const KernelBuffer buffers[] = {buffer(dh), buffer(gate_up), buffer(d_gate_up)};
    const int64_t sizes[] = {rows, width, shape.grid_y, 0};
    if (dh.numel() > 0)
      recall(ctx->saved_data["kernels"].toStringRef())
          .module(source, gate_up.device())
          ->launch(kernels::kGatedBackwardSymbol, shape, buffers, sizes);
    return {d_gate_up, torch::Tensor(), torch::Tensor()};
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
  auto out = ResidualNorm::apply(x, r, w, b.defined() ? b : torch::empty({0}, w.options()), name(), eps);
  return {out[0], out[1]};
}

bool StepKernels::gated_fits(const torch::Tensor& gate_up) const {
  return gate_up.dim() >= 2 && storable(gate_up.scalar_type()) && gate_up.size(-1) % 2 == 0;
}

torch::Tensor StepKernels::gated_activation(const torch::Tensor& gate_up, Ffn activation) const {
  return Gated::apply(gate_up, name(), static_cast<int64_t>(activation_of(activation)));
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
  const char* wanted = std::getenv("SINKLAB_STEP_KERNELS");
  if (!device.is_cuda() || !wanted || std::string(wanted) != "1" || !cuda::backend_compiled()) return nullptr;
  return register_step_kernels(cuda_modules());
}

}  // namespace sink::rt
