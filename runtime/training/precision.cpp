#include "runtime/training/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

// PyTorch 2.4 made autocast's switches per device type; Debian's LibTorch
// (1.13) has one pair for CUDA and one for the CPU.
#define SINKLAB_AUTOCAST_BY_DEVICE (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace sink::rt {
namespace {

bool enabled(c10::DeviceType t) {
#if SINKLAB_AUTOCAST_BY_DEVICE
  return at::autocast::is_autocast_enabled(t);
#else
  return t == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

void set_enabled(c10::DeviceType t, bool on) {
#if SINKLAB_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(t, on);
#else
  if (t == c10::DeviceType::CUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
#endif
}

at::ScalarType dtype(c10::DeviceType t) {
#if SINKLAB_AUTOCAST_BY_DEVICE
  return at::autocast::get_autocast_dtype(t);
#else
  return t == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}

void set_dtype(c10::DeviceType t, at::ScalarType d) {
#if SINKLAB_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_dtype(t, d);
#else
  if (t == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(d);
  else
    at::autocast::set_autocast_cpu_dtype(d);
#endif
}

}  // namespace

AutocastScope::AutocastScope(Precision precision, const torch::Device& device) {
  if (precision != Precision::bf16) return;
  if (!device.is_cpu() && !device.is_cuda())
    throw std::runtime_error("train.precision = bf16: autocast is set up for cpu and cuda, not " + device.str());
  active_ = true;
  type_ = device.type();
  was_enabled_ = enabled(type_);
  was_dtype_ = dtype(type_);
  set_dtype(type_, at::kBFloat16);
  set_enabled(type_, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast weights are cached for the scope; the next step's weights differ.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(type_, was_enabled_);
  set_dtype(type_, was_dtype_);
}

}  // namespace sink::rt
