#include "runtime/attention/cuda_attention.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kernels/cuda/emit_cuda.h"
#include "kernels/kernel_abi.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/attention/generated_attention.h"

#if SINKLAB_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace sink::rt {
namespace {

using kernels::abi::slot;

// A measurement that took the device's context with it: nothing else can run in this process, the default tiles
// included, so the run ends here (said, and recorded for the next process).
struct DeviceLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
torch::ScalarType real_dtype(torch::ScalarType storage) {
  return storage == torch::kDouble ? torch::kDouble : torch::kFloat;
}

KernelBuffer buffer(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? KernelBuffer{t.data_ptr(), t.nbytes()} : KernelBuffer{};
}

// Contiguous, in `dtype`, and starting on a 16-byte boundary: the tensor-core kernels copy rows in 16-byte
// pieces (cp.async), and a view into another tensor may start anywhere.
torch::Tensor as(const torch::Tensor& t, torch::ScalarType dtype) {
  if (!t.defined() || t.numel() == 0) return torch::Tensor();
  torch::Tensor out = t.to(dtype).contiguous();
  return reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0 ? out : out.clone();
}

// The position table g [H|1, T] with kTablePadding zeros after each head's T entries. The tensor-core kernels form
// a whole tile's logits before they mask them: the pairs of a tile that reaches past the last row or key read the
// table at distances up to T - 2 + the tile's width (128 at most), past its end; they read the zeros and are
// masked. (The kernels step between heads by the table's width, whatever it is.)
constexpr int64_t kTablePadding = 128;
torch::Tensor padded_table(const torch::Tensor& g) {
  return g.defined() ? torch::constant_pad_nd(g, {0, kTablePadding}) : g;
}

unsigned blocks(int64_t n, int per) { return static_cast<unsigned>((n + per - 1) / per); }

// The sizes every kernel takes after its pointers (abi::kCudaSizes): T, H and
// the steps between heads of g [H|1, T] and of k*, v* [H|1, D] (0: shared by all heads).
struct Slices {
  int64_t B, H, T, D;
  std::array<int64_t, 4> sizes;
  void* stream;
  Slices(const torch::Tensor& q, const torch::Tensor& g, const torch::Tensor& k_star)
      : B(q.size(0)), H(q.size(1)), T(q.size(2)), D(q.size(3)), stream(current_stream(q)) {
    sizes = {T, H, g.defined() && g.size(0) > 1 ? g.size(1) : 0, k_star.defined() && k_star.size(0) > 1 ? D : 0};
    if (B * H > 65535)
      throw std::runtime_error(
          fmt::format("CUDA attention: {} x {} slices exceed a grid's 65535 rows; lower train.micro_batch", B, H));
  }
  // Blocks of `per_block` items each, `threads` threads per block, `shared_bytes` of dynamic shared memory each.
  LaunchShape shape(int64_t items, int per_block, int threads, int shared_bytes = 0) const {
    return {blocks(items, per_block), static_cast<unsigned>(B * H), static_cast<unsigned>(threads),
            static_cast<unsigned>(shared_bytes), stream};
  }
  LaunchShape shape(int64_t items, int threads) const { return shape(items, threads, threads); }
};

// Why a tuning candidate's result is not the default tiles' (empty where it is): a value that is not finite, or an
// element further from the reference than 2^-6 of the reference's largest, four units in the last place of bf16
// (other tiles sum in another order, each result rounded once to 16 bits: a unit apart at most).
std::string disagreement(const torch::Tensor& result, const torch::Tensor& reference) {
  const auto r = result.to(torch::kFloat), ref = reference.to(torch::kFloat);
  if (!torch::isfinite(r).all().item<bool>() && torch::isfinite(ref).all().item<bool>()) return "not finite";
  const double largest = ref.abs().max().item<double>(), apart = (r - ref).abs().max().item<double>();
  if (apart <= std::ldexp(largest, -6)) return {};
  return fmt::format("{:.3g} apart where the largest is {:.3g}", apart, largest);
}

// Seconds per call of `run`, its launches waited for: one call first (loading, caches), then the mean of 3.
double seconds_per_call(KernelModule& module, const std::function<void()>& run) {
  run();
  module.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) run();
  module.synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3;
}

// The device's compute capability, where the loader says it; 0 (assume tensor cores) otherwise.
int capability_of(const KernelModules& modules, const torch::Device& device) {
  return modules.capability ? modules.capability(device) : 0;
}

// A variant in bf16 or fp16 that runs on the scalar kernels only because the GPU is older than the tensor-core
// kernels: said once per process, since a run then trains many times slower than on an A100 or newer.
void say_scalar_once(const kernels::KernelSpec& spec, torch::ScalarType storage, int capability) {
  const std::string reason = kernels::scalar_kernels_reason(spec, layout_of(storage), capability);
  if (reason.empty() || !kernels::scalar_kernels_reason(spec, layout_of(storage)).empty()) return;
  static std::once_flag said;
  std::call_once(said, [&] {
    std::cerr << "sinklab: " << storage_name(storage) << " attention runs on the scalar CUDA kernels, a row per "
              << "thread: " << reason << "\n";
  });
}

// What the backward's per-row kernel (backward_rows) leaves for the other two, and the sink logit's terms.
struct RowTerms {
  torch::Tensor delta, astar, dx_kstar, dsink;
};

// One variant compiled for one storage type and device, launched on the call's tensors. The three
// tensor-core kernels may each come from a source of its own tiles (runtime/attention/cuda_tuning.h);
// backward_rows and the probe come from the default tiles' source.
class CudaLauncher : public KernelLauncher {
 public:
  CudaLauncher(const kernels::KernelSpec& spec, torch::ScalarType storage, KernelModules modules, torch::Device device,
               std::string key)
      : spec_(spec),
        storage_(storage),
        modules_(std::move(modules)),
        device_(device),
        key_(std::move(key)),
        capability_(capability_of(modules_, device)),
        default_(kernels::cuda_tiles(spec, layout_of(storage), capability_)),
        chosen_{default_, default_, default_},
        description_(fmt::format("{} {}", default_.tensor_cores ? "cuda-tensor" : "cuda", storage_name(storage))) {
    if (!default_.tensor_cores) {
      say_scalar_once(spec, storage, capability_);
      return;
    }
    tuning_key_ = tuning_key(module(default_)->device_name(), spec_, layout_of(storage_));
    if (auto remembered = remembered_tiles(tuning_key_))
      chosen_ = *remembered;
    else
      must_tune_ = modules_.tune && tuning_enabled();
  }
  const std::string& key() const override { return key_; }
  const std::string& description() const override { return description_; }
  std::string kernels_in_use() const override {
    if (!default_.tensor_cores) return description_;
    const KernelTiles tiles = tiles_to_run(chosen_, spec_, layout_of(storage_), capability_);
    return description_ + ": " +
           describe_kernels(tiles, fused_backward(tiles, spec_, layout_of(storage_), capability_));
  }

  KernelTensors prepare(const AttentionCall& call) const override {
    const auto real = real_dtype(storage_);
    return {as(call.q, storage_),  as(call.k, storage_),  as(call.v, storage_),     padded_table(as(call.g, real)),
            as(call.k_star, real), as(call.v_star, real), as(call.sink_logit, real)};
  }

  std::pair<torch::Tensor, torch::Tensor> forward(const KernelTensors& in) const override {
    if (must_tune_ && !tuned_.load()) {
      std::lock_guard<std::mutex> lock(tune_mutex_);
      if (!tuned_.load()) {
        try {
          tune(in);
        } catch (const DeviceLost&) {
          tuned_.store(true);
          throw;
        } catch (const std::exception& e) {  // the default tiles still run: a run goes on untuned
          chosen_ = {default_, default_, default_};
          std::cerr << "sinklab: measuring the tiles of " << spec_.describe() << " failed (" << e.what()
                    << "); the default tiles run\n";
        }
        tuned_.store(true);
      }
    }
    auto o = torch::empty_like(in.q);
    auto stats =
        torch::empty({in.q.size(0), in.q.size(1), 2, in.q.size(2)}, in.q.options().dtype(real_dtype(storage_)));
    launch_forward(tiles_to_run(chosen_, spec_, layout_of(storage_), capability_).forward, in, o, stats);
    return {o, stats};
  }

  SliceGradients backward(const KernelTensors& in, const torch::Tensor& o, const torch::Tensor& stats,
                          const torch::Tensor& dout, bool position_grad) const override {
    const auto real = stats.scalar_type();
    const RowTerms rows = launch_rows(in, o, stats, dout);
    SliceGradients d;
    d.dsink = rows.dsink;
    d.dk = torch::empty_like(in.k), d.dv = torch::empty_like(in.v);
    const KernelTiles tiles = tiles_to_run(chosen_, spec_, layout_of(storage_), capability_);
    const auto fused = fused_backward(tiles, spec_, layout_of(storage_), capability_);
    if (!fused) d.dq = torch::empty_like(in.q);
    // dg from a source of its own, where the table wants a gradient (tiles.position_grad).
    kernels::CudaTiles keys = fused ? *fused : tiles.keys;
    keys.position_grad = spec_.position_bias && position_grad;
    d.dg = keys.position_grad ? torch::zeros({in.q.size(0), in.q.size(1), in.q.size(2)}, stats.options())
                              : torch::Tensor();
    if (keys.fused_dq) {
      d.dq = launch_fused_keys(keys, in, stats, dout, rows, d.dk, d.dv, d.dg);
    } else {
      launch_keys(keys, in, stats, dout, rows, d.dk, d.dv, d.dg, torch::Tensor());
      launch_queries(tiles.queries, in, stats, dout, rows, d.dq);
    }
    // k* and v*'s per-slice terms: sums over the rows.
    if (in.k_star.defined()) {
      d.dk_star = torch::einsum("bht,bhtd->bhd", {rows.dx_kstar, in.q.to(real)});
      d.dv_star = torch::einsum("bht,bhtd->bhd", {rows.astar, dout.to(real)});
    }
    return d;
  }

  torch::Tensor probe(const KernelTensors& in, const torch::Tensor& stats) const override {
    const Slices s(in.q, in.g, in.k_star);
    const int64_t S = s.T + (spec_.key_bias ? 1 : 0);
    auto scores = torch::empty({s.B, s.H, s.T, S}, stats.options());
    constexpr auto& P = kernels::abi::kCudaProbe;
    std::array<KernelBuffer, P.size()> a{};
    a[slot(P, "q")] = buffer(in.q), a[slot(P, "k")] = buffer(in.k), a[slot(P, "g")] = buffer(in.g);
    a[slot(P, "kstar")] = buffer(in.k_star), a[slot(P, "stats")] = buffer(stats), a[slot(P, "out")] = buffer(scores);
    module(default_)->launch(kernels::abi::kProbeSymbol, s.shape(s.T * S, default_.row_threads), a, s.sizes);
    return scores;
  }

 private:
  kernels::KernelSpec spec_;
  torch::ScalarType storage_;
  KernelModules modules_;
  torch::Device device_;
  std::string key_, tuning_key_;
  int capability_;  // the device's compute capability (0: unknown), asked once
  kernels::CudaTiles default_;
  mutable KernelTiles chosen_;
  std::string description_;
  bool must_tune_ = false;
  mutable std::mutex tune_mutex_;
  mutable std::atomic<bool> tuned_{false};
  mutable std::mutex modules_mutex_;
  mutable std::map<std::string, std::shared_ptr<KernelModule>> modules_by_tiles_;

  // Whether the device still runs kernels after a failed one: a fault (an illegal address or instruction) is
  // sticky, every later call in the context fails; a launch the GPU refused (too much shared memory) is not.
  bool device_usable() const {
    try {
      module(default_)->synchronize();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

  // The module of the source with these tiles, loaded once (the load outside the lock: autograd's thread and
  // the caller's may load one source at once; both load, and the first kept wins).
  std::shared_ptr<KernelModule> module(const kernels::CudaTiles& tiles) const {
    {
      std::lock_guard<std::mutex> lock(modules_mutex_);
      if (auto it = modules_by_tiles_.find(tiles.describe()); it != modules_by_tiles_.end()) return it->second;
    }
    auto loaded = modules_.load(kernels::emit_cuda(spec_, layout_of(storage_), tiles), device_);
    std::lock_guard<std::mutex> lock(modules_mutex_);
    return modules_by_tiles_.try_emplace(tiles.describe(), std::move(loaded)).first->second;
  }

  void launch_forward(const kernels::CudaTiles& tiles, const KernelTensors& in, const torch::Tensor& o,
                      const torch::Tensor& stats) const {
    const Slices s(in.q, in.g, in.k_star);
    constexpr auto& F = kernels::abi::kCudaForward;
    std::array<KernelBuffer, F.size()> a{};
    a[slot(F, "q")] = buffer(in.q), a[slot(F, "k")] = buffer(in.k), a[slot(F, "v")] = buffer(in.v);
    a[slot(F, "g")] = buffer(in.g), a[slot(F, "kstar")] = buffer(in.k_star), a[slot(F, "vstar")] = buffer(in.v_star);
    a[slot(F, "sink")] = buffer(in.sink), a[slot(F, "o")] = buffer(o), a[slot(F, "stats")] = buffer(stats);
    module(tiles)->launch(
        kernels::abi::kForwardSymbol,
        s.shape(s.T, tiles.forward_rows, tiles.forward_threads(), kernels::cuda_shared_bytes(tiles, s.D).forward), a,
        s.sizes);
  }

  RowTerms launch_rows(const KernelTensors& in, const torch::Tensor& o, const torch::Tensor& stats,
                       const torch::Tensor& dout) const {
    const Slices s(in.q, in.g, in.k_star);
    auto rows = [&](bool wanted) { return wanted ? torch::empty({s.B, s.H, s.T}, stats.options()) : torch::Tensor(); };
    RowTerms r{rows(true), rows(spec_.key_bias), rows(spec_.key_bias), rows(spec_.sink_logit)};
    constexpr auto& R = kernels::abi::kCudaBackwardRows;
    std::array<KernelBuffer, R.size()> a{};
    a[slot(R, "q")] = buffer(in.q), a[slot(R, "kstar")] = buffer(in.k_star), a[slot(R, "vstar")] = buffer(in.v_star);
    a[slot(R, "sink")] = buffer(in.sink), a[slot(R, "o")] = buffer(o), a[slot(R, "stats")] = buffer(stats);
    a[slot(R, "dout")] = buffer(dout), a[slot(R, "delta")] = buffer(r.delta), a[slot(R, "astar")] = buffer(r.astar);
    a[slot(R, "dx_kstar")] = buffer(r.dx_kstar), a[slot(R, "dsink")] = buffer(r.dsink);
    module(default_)->launch(kernels::abi::kCudaBackwardRowsSymbol, s.shape(s.T, default_.row_threads), a, s.sizes);
    return r;
  }

  void launch_keys(const kernels::CudaTiles& tiles, const KernelTensors& in, const torch::Tensor& stats,
                   const torch::Tensor& dout, const RowTerms& rows, const torch::Tensor& dk, const torch::Tensor& dv,
                   const torch::Tensor& dg, const torch::Tensor& dq_sum) const {
    const Slices s(in.q, in.g, in.k_star);
    constexpr auto& K = kernels::abi::kCudaBackwardKeys;
    std::array<KernelBuffer, K.size()> a{};
    a[slot(K, "q")] = buffer(in.q), a[slot(K, "k")] = buffer(in.k), a[slot(K, "v")] = buffer(in.v);
    a[slot(K, "g")] = buffer(in.g), a[slot(K, "stats")] = buffer(stats), a[slot(K, "dout")] = buffer(dout);
    a[slot(K, "delta")] = buffer(rows.delta), a[slot(K, "dk")] = buffer(dk), a[slot(K, "dv")] = buffer(dv);
    a[slot(K, "dg")] = buffer(dg), a[slot(K, "dq_sum")] = buffer(dq_sum);
    module(tiles)->launch(
        kernels::abi::kCudaBackwardKeysSymbol,
        s.shape(s.T, tiles.key_rows, tiles.key_threads(), kernels::cuda_shared_bytes(tiles, s.D).keys), a, s.sizes);
  }

  // backward_keys summing dQ as well (tiles.fused_dq): the float sums start from k*'s term (where
  // backward_queries starts its rows) and end in the storage type.
  torch::Tensor launch_fused_keys(const kernels::CudaTiles& tiles, const KernelTensors& in, const torch::Tensor& stats,
                                  const torch::Tensor& dout, const RowTerms& rows, const torch::Tensor& dk,
                                  const torch::Tensor& dv, const torch::Tensor& dg) const {
    const torch::Tensor dq_sum =
        in.k_star.defined()
            ? (rows.dx_kstar.unsqueeze(-1) * in.k_star.view({1, in.k_star.size(0), 1, in.k_star.size(1)})).contiguous()
            : torch::zeros(in.q.sizes(), stats.options());
    launch_keys(tiles, in, stats, dout, rows, dk, dv, dg, dq_sum);
    return dq_sum.to(in.q.scalar_type());
  }

  void launch_queries(const kernels::CudaTiles& tiles, const KernelTensors& in, const torch::Tensor& stats,
                      const torch::Tensor& dout, const RowTerms& rows, const torch::Tensor& dq) const {
    const Slices s(in.q, in.g, in.k_star);
    constexpr auto& Q = kernels::abi::kCudaBackwardQueries;
    std::array<KernelBuffer, Q.size()> a{};
    a[slot(Q, "q")] = buffer(in.q), a[slot(Q, "k")] = buffer(in.k), a[slot(Q, "v")] = buffer(in.v);
    a[slot(Q, "g")] = buffer(in.g), a[slot(Q, "kstar")] = buffer(in.k_star), a[slot(Q, "stats")] = buffer(stats);
    a[slot(Q, "dout")] = buffer(dout), a[slot(Q, "delta")] = buffer(rows.delta);
    a[slot(Q, "dx_kstar")] = buffer(rows.dx_kstar), a[slot(Q, "dq")] = buffer(dq);
    module(tiles)->launch(
        kernels::abi::kCudaBackwardQueriesSymbol,
        s.shape(s.T, tiles.query_rows, tiles.query_threads(), kernels::cuda_shared_bytes(tiles, s.D).queries), a,
        s.sizes);
  }

  // Times every candidate's three kernels on this call's shapes (the backward's on the default forward's
  // statistics and a random dO), keeps the fastest of each, then the fastest fused backward_keys where it
  // beats the two backward kernels together, and remembers the choice for this GPU.
  void tune(const KernelTensors& in) const {
    // What a process before this one did not live through on this GPU is not measured again (cuda_tuning.h).
    const std::string gpu = module(default_)->device_name();
    MeasurementJournal::collect_abandoned();
    MeasurementJournal journal(gpu, tuning_key_);
    auto untried = [&](std::vector<kernels::CudaTiles> tiles) {
      std::erase_if(tiles, [&](const kernels::CudaTiles& c) {
        const std::string why = failed_before(gpu, tuning_key_, c);
        if (!why.empty())
          std::cerr << fmt::format("sinklab: tuning {}: tiles {} not measured: {}\n", description_, c.describe(), why);
        return !why.empty();
      });
      return tiles;
    };
    const auto candidates = untried(kernels::cuda_tile_candidates(spec_, layout_of(storage_)));
    auto fused =
        untried(fused_backward_allowed(capability_) ? kernels::cuda_fused_candidates(spec_, layout_of(storage_))
                                                    : std::vector<kernels::CudaTiles>{});
    const bool on_hopper = capability_ == kernels::kHopperCapability && hopper_kernels_allowed(capability_);
    const auto hopper = untried(on_hopper ? kernels::cuda_hopper_candidates(spec_, layout_of(storage_))
                                          : std::vector<kernels::CudaTiles>{});
    if (on_hopper && fused_backward_allowed(capability_))
      for (const auto& c : untried(kernels::cuda_hopper_fused_candidates(spec_, layout_of(storage_))))
        fused.push_back(c);
    std::vector<kernels::CudaTiles> every = candidates;
    every.insert(every.end(), fused.begin(), fused.end());
    every.insert(every.end(), hopper.begin(), hopper.end());
    if (modules_.prepare) {  // compiled side by side (NVRTC takes a second or two each where the cache has not
                             // got them); a failure shows again when the candidate loads below
      std::vector<std::thread> compiling;
      for (const auto& c : every)
        compiling.emplace_back([&, c] {
          try {
            modules_.prepare(kernels::emit_cuda(spec_, layout_of(storage_), c), device_);
          } catch (const std::exception&) {
          }
        });
      for (auto& t : compiling) t.join();
    }
    // Loaded on this thread, where they launch. A candidate that fails to load or launch (none should: each keeps
    // within what every GPU from sm_80 on gives a block) is said and skipped; the default and the others run.
    for (const auto& c : every) {
      try {
        module(c);
      } catch (const std::exception&) {  // (said where it is measured)
      }
    }
    auto measured = [&](const kernels::CudaTiles& c, const char* kernel, const std::function<void()>& run) {
      journal.measuring(kernel, c);
      try {
        const double seconds = seconds_per_call(*module(c), run);
        journal.done();
        return seconds;
      } catch (const std::exception& e) {
        if (!device_usable()) {  // (a fault: no later launch in this process can run)
          journal.lost_device(e.what());
          throw DeviceLost(fmt::format(
              "CUDA: measuring {} with tiles {} for {} lost the device ({}); recorded in {}, so the next process on "
              "this GPU does not measure them: run again",
              kernel, c.describe(), spec_.describe(), e.what(), tuning_table_path().string()));
        }
        journal.done();
        std::cerr << fmt::format("sinklab: tuning {}: {} with tiles {} skipped: {}\n", description_, kernel,
                                 c.describe(), e.what());
        return static_cast<double>(INFINITY);
      }
    };
    auto o = torch::empty_like(in.q);
    auto stats =
        torch::empty({in.q.size(0), in.q.size(1), 2, in.q.size(2)}, in.q.options().dtype(real_dtype(storage_)));
    launch_forward(default_, in, o, stats);
    const auto dout = torch::randn_like(in.q);
    const RowTerms rows = launch_rows(in, o, stats, dout);
    auto scratch_o = torch::empty_like(o), scratch_stats = torch::empty_like(stats);
    auto dk = torch::empty_like(in.k), dv = torch::empty_like(in.v), dq = torch::empty_like(in.q);
    const torch::Tensor dg;  // timed without the position table's gradient, as ALiBi trains (a constant table)
    // The default tiles' results, which each candidate's must match to be kept: a faster candidate that computes
    // something else (a GPU's behaviour no emulation showed) is said and skipped, never trained with. A forward's
    // row statistics too, each row apart: the backward reads them.
    const auto ref_dk = torch::empty_like(dk), ref_dv = torch::empty_like(dv), ref_dq = torch::empty_like(dq);
    launch_keys(default_, in, stats, dout, rows, ref_dk, ref_dv, dg, {});
    launch_queries(default_, in, stats, dout, rows, ref_dq);
    auto agreeing = [&](double seconds, const kernels::CudaTiles& c, const char* kernel,
                        std::initializer_list<std::pair<torch::Tensor, torch::Tensor>> results) {
      if (!std::isfinite(seconds)) return seconds;
      for (const auto& [result, reference] : results)
        if (const std::string why = disagreement(result, reference); !why.empty()) {
          std::cerr << fmt::format(
              "sinklab: tuning {}: {} with tiles {} skipped: its results differ from the "
              "default tiles' ({})\n",
              description_, kernel, c.describe(), why);
          return static_cast<double>(INFINITY);
        }
      return seconds;
    };
    double best[3] = {INFINITY, INFINITY, INFINITY};
    std::vector<kernels::CudaTiles> each_kernel = candidates;  // (measured per kernel: the fused ones apart)
    each_kernel.insert(each_kernel.end(), hopper.begin(), hopper.end());
    for (const auto& c : each_kernel) {
      const double times[3] = {
          agreeing(measured(c, "forward", [&] { launch_forward(c, in, scratch_o, scratch_stats); }), c, "forward",
                   {{scratch_o, o},
                    {scratch_stats.select(2, 0), stats.select(2, 0)},
                    {scratch_stats.select(2, 1), stats.select(2, 1)}}),
          agreeing(measured(c, "backward_keys", [&] { launch_keys(c, in, stats, dout, rows, dk, dv, dg, {}); }), c,
                   "backward_keys", {{dk, ref_dk}, {dv, ref_dv}}),
          agreeing(measured(c, "backward_queries", [&] { launch_queries(c, in, stats, dout, rows, dq); }), c,
                   "backward_queries", {{dq, ref_dq}})};
      kernels::CudaTiles* slots[3] = {&chosen_.forward, &chosen_.keys, &chosen_.queries};
      for (int k = 0; k < 3; ++k)
        if (times[k] < best[k]) best[k] = times[k], *slots[k] = c;
    }
    double best_fused = INFINITY;
    kernels::CudaTiles fastest_fused;
    for (const auto& c : fused) {
      torch::Tensor fused_dq;  // (a new tensor each call: read once the measurement is over)
      const double seconds = measured(c, "fused backward_keys",
                                      [&] { fused_dq = launch_fused_keys(c, in, stats, dout, rows, dk, dv, dg); });
      const double t = agreeing(seconds, c, "fused backward_keys", {{dk, ref_dk}, {dv, ref_dv}, {fused_dq, ref_dq}});
      if (t < best_fused) best_fused = t, fastest_fused = c;
    }
    if (best_fused < best[1] + best[2]) chosen_.fused = fastest_fused;
    chosen_.seconds.clear();
    const std::pair<const char*, double> seconds[] = {{"forward", best[0]},
                                                      {"backward_keys", best[1]},
                                                      {"backward_queries", best[2]},
                                                      {"fused_backward_keys", best_fused}};
    for (const auto& [kernel, s] : seconds)
      if (std::isfinite(s)) chosen_.seconds[kernel] = s;
    remember_tiles(tuning_key_, chosen_);
  }
};

}  // namespace

void* current_stream(const torch::Tensor& q) {
#if SINKLAB_TORCH_CUDA
  if (q.is_cuda()) return c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
#endif
  return nullptr;
}

std::string cuda_source_for(kernels::KernelSpec spec, torch::ScalarType storage) {
  spec.f64 = storage == torch::kDouble;
  return kernels::emit_cuda(spec, layout_of(storage));
}

KernelModules cuda_modules() {
  return {"nvrtc",
          [](const std::string& source, const torch::Device& device) -> std::shared_ptr<KernelModule> {
            if (!device.is_cuda()) throw std::logic_error("cuda_modules: tensors on " + device.str());
            return cuda::module_for(source, device.has_index() ? device.index() : 0);
          },
          true,
          [](const std::string& source, const torch::Device& device) {
            cuda::loadable_image(source, cuda::device_properties(device.has_index() ? device.index() : 0).capability);
          },
          [](const torch::Device& device) {
            return cuda::device_properties(device.has_index() ? device.index() : 0).capability;
          }};
}

// Every layer calls this every step: emit and load once per variant.
std::shared_ptr<const KernelLauncher> cuda_launcher(kernels::KernelSpec spec, const torch::Tensor& q,
                                                    const KernelModules& modules) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const KernelLauncher>> known;
  const auto storage = storage_dtype(q);
  spec.f64 = storage == torch::kDouble;
  std::string key = fmt::format("cuda {} storage={} device={} loader={}", spec.describe(), c10::toString(storage),
                                q.device().str(), modules.name);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it == known.end())
    it = known.emplace(key, std::make_shared<CudaLauncher>(spec, storage, modules, q.device(), key)).first;
  return it->second;
}

torch::Tensor cuda_attention(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules) {
  return generated_attention(cuda_launcher(spec, call.q, modules), call);
}

AttentionProbe cuda_probe(const kernels::KernelSpec& spec, const AttentionConfig& cfg, const AttentionCall& call,
                          const KernelModules& modules) {
  return generated_probe(*cuda_launcher(spec, call.q, modules), cfg, call);
}

}  // namespace sink::rt
