#include "runtime/training/cpu_step_operations.h"

#include <ATen/Parallel.h>
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <vector>

#include "runtime/training/cpu_kernels.h"

namespace sink::rt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const float* in(const torch::Tensor& t) { return t.data_ptr<float>(); }
float* out(torch::Tensor& t) { return t.data_ptr<float>(); }

// Rows of `width` floats split over LibTorch's threads, about LibTorch's own grain of elements a task.
template <typename Body>
void over_rows(int64_t rows, int64_t width, const Body& body) {
  at::parallel_for(0, rows, std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(width, 1)), body);
}

bool cpu_floats(std::initializer_list<const torch::Tensor*> ts) {
  return std::all_of(ts.begin(), ts.end(), [](const torch::Tensor* t) {
    return t->defined() && t->device().is_cpu() && t->scalar_type() == torch::kFloat;
  });
}

class ResidualRms : public torch::autograd::Function<ResidualRms> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
    ctx->set_materialize_grads(false);  // a gradient nothing sent stays undefined, not a tensor of zeros
    x = x.contiguous(), r = r.contiguous(), w = w.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    auto s = torch::empty_like(x), n = torch::empty_like(x), rstd = torch::empty({rows}, x.options());
    over_rows(rows, d, [&](int64_t first, int64_t last) {
      cpu::residual_rms_forward(in(x), in(r), in(w), static_cast<float>(eps), d, first, last, out(s), out(n),
                                out(rstd));
    });
    ctx->save_for_backward({s, w, rstd});
    return {s, n};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &s = saved[0], &w = saved[1], &rstd = saved[2];
    const auto ds_after = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    if (!grads[1].defined()) {  // n not used: the stream's gradient passes through, w gets none
      auto ds = ds_after.defined() ? ds_after : torch::zeros_like(s);
      return {ds, ds, torch::Tensor(), torch::Tensor()};
    }
    const auto dn = grads[1].contiguous();
    const int64_t d = s.size(-1), rows = s.numel() / d;
    // dw summed over a fixed split of the rows, a partial sum per part whatever thread runs it: the same bits at any
    // thread count.
    const int64_t part = std::max<int64_t>(64, (rows + 255) / 256), parts = (rows + part - 1) / part;
    auto ds = torch::empty_like(s), dw_parts = torch::zeros({parts, d}, s.options());
    at::parallel_for(0, parts, 1, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p)
        cpu::residual_rms_backward(in(s), in(w), in(rstd), in(dn), ds_after.defined() ? in(ds_after) : nullptr, d,
                                   p * part, std::min(rows, (p + 1) * part), out(ds), out(dw_parts) + p * d);
    });
    return {ds, ds, dw_parts.sum(0), torch::Tensor()};
  }
};

class SwiGlu : public torch::autograd::Function<SwiGlu> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor gate, torch::Tensor up) {
    gate = gate.contiguous(), up = up.contiguous();
    auto h = torch::empty_like(gate);
    over_rows(gate.numel(), 1,
              [&](int64_t first, int64_t last) { cpu::swiglu_forward(in(gate), in(up), first, last, out(h)); });
    ctx->save_for_backward({gate, up});
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &gate = saved[0], &up = saved[1];
    const auto dh = grads[0].contiguous();
    auto d_gate = torch::empty_like(gate), d_up = torch::empty_like(up);
    over_rows(gate.numel(), 1, [&](int64_t first, int64_t last) {
      cpu::swiglu_backward(in(gate), in(up), in(dh), first, last, out(d_gate), out(d_up));
    });
    return {d_gate, d_up};
  }
};

class RopeHeads : public torch::autograd::Function<RopeHeads> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor cos, torch::Tensor sin,
                               int64_t heads) {
    x = x.contiguous(), cos = cos.contiguous(), sin = sin.contiguous();
    const int64_t B = x.size(0), T = x.size(1), dh = x.size(2) / heads;
    auto q = torch::empty({B, heads, T, dh}, x.options());
    over_rows(B * T, x.size(2), [&](int64_t first, int64_t last) {
      cpu::rope_heads_forward(in(x), in(cos), in(sin), T, heads, dh, first, last, out(q));
    });
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["heads"] = heads;
    return q;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &cos = saved[0], &sin = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const auto dq = grads[0].contiguous();
    const int64_t B = dq.size(0), T = dq.size(2), dh = dq.size(3);
    auto dx = torch::empty({B, T, heads * dh}, dq.options());
    over_rows(B * T, heads * dh, [&](int64_t first, int64_t last) {
      cpu::rope_heads_backward(in(dq), in(cos), in(sin), T, heads, dh, first, last, out(dx));
    });
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool CpuStepOperations::residual_rms_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                                          const torch::Tensor& b) {
  return !b.defined() && cpu_floats({&x, &r, &w}) && x.dim() >= 2 && r.sizes() == x.sizes() && w.dim() == 1 &&
         w.size(0) == x.size(-1) && x.size(-1) % cpu::kLanes == 0;
}

std::pair<torch::Tensor, torch::Tensor> CpuStepOperations::residual_rms(const torch::Tensor& x, const torch::Tensor& r,
                                                                        const torch::Tensor& w, double eps) {
  auto sn = ResidualRms::apply(x, r, w, eps);
  return {sn[0], sn[1]};
}

bool CpuStepOperations::swiglu_fits(const torch::Tensor& gate, const torch::Tensor& up, Ffn act) {
  return act == Ffn::swish && cpu_floats({&gate, &up}) && gate.sizes() == up.sizes();
}

torch::Tensor CpuStepOperations::swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  return SwiGlu::apply(gate, up);
}

bool CpuStepOperations::rope_heads_fits(const torch::Tensor& x, const torch::Tensor& cos, int64_t heads) {
  if (!cos.defined() || !cpu_floats({&x, &cos}) || x.dim() != 3 || heads <= 0 || x.size(2) % heads != 0) return false;
  const int64_t dh = x.size(2) / heads;
  return dh % cpu::kLanes == 0 && cos.dim() == 2 && cos.size(0) >= x.size(1) && cos.size(1) == dh;
}

torch::Tensor CpuStepOperations::rope_heads(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                            int64_t heads) {
  const int64_t T = x.size(1);
  return RopeHeads::apply(x, cos.narrow(0, 0, T), sin.narrow(0, 0, T), heads);
}

std::string CpuStepOperations::fused(const ModelConfig& cfg) const {
  std::vector<std::string> fused;
  const bool norm = cfg.placement == NormPlacement::pre && cfg.norm == NormKind::rmsnorm && cfg.d % cpu::kLanes == 0;
  if (norm) fused.push_back("residual add + RMSNorm");
  if (cfg.ffn == Ffn::swiglu) fused.push_back("swiglu's activation");
  if (cfg.pe == PosEmbedding::rope && cfg.d_head % cpu::kLanes == 0) fused.push_back("q and k into heads with RoPE");
  return fmt::format("{}", fmt::join(fused, ", "));
}

std::pair<torch::Tensor, torch::Tensor> CpuStepOperations::residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                                         const torch::Tensor& w, const torch::Tensor& b,
                                                                         double eps) const {
  if (!residual_rms_fits(x, r, w, b)) return StepOperations::residual_norm(x, r, w, b, eps);
  return residual_rms(x, r, w, eps);
}

torch::Tensor CpuStepOperations::gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                                              Ffn act) const {
  const auto gate = linear(x, w1), up = linear(x, w3);
  return swiglu_fits(gate, up, act) ? swiglu(gate, up) : activation(gate, act) * up;
}

std::array<torch::Tensor, 3> CpuStepOperations::heads(const torch::Tensor& x, const torch::Tensor& wq,
                                                      const torch::Tensor& wk, const torch::Tensor& wv,
                                                      const torch::Tensor& cos, const torch::Tensor& sin, int64_t heads,
                                                      int64_t kv_heads) const {
  const auto q = linear(x, wq), k = linear(x, wk), v = linear(x, wv);
  if (!rope_heads_fits(q, cos, heads) || !rope_heads_fits(k, cos, kv_heads))
    return into_heads({q, k, v}, cos, sin, heads, kv_heads);
  const int64_t B = x.size(0), T = x.size(1);
  return {rope_heads(q, cos, sin, heads), rope_heads(k, cos, sin, kv_heads),
          v.view({B, T, kv_heads, v.size(2) / kv_heads}).transpose(1, 2)};
}

std::shared_ptr<const StepOperations> cpu_step_operations_for(const torch::Device& device) {
  static const auto cpu = std::make_shared<const CpuStepOperations>();
  return device.is_cpu() ? cpu : nullptr;
}

}  // namespace sink::rt
