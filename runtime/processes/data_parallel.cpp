#include "runtime/processes/data_parallel.h"

#include <cstdlib>
#include <fmt/format.h>

#if SINKLAB_HAVE_C10D
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#if SINKLAB_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace sink::rt {

namespace {

std::string env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

int env_int(const char* name, int fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(v, &used);
  } catch (const std::exception&) {
  }
  if (used != v.size() || value < 0)
    throw std::runtime_error(fmt::format("{}={} is not a non-negative integer (torchrun sets it)", name, v));
  return value;
}

// Gradients travel in buckets of about this many bytes: one all-reduce per
// bucket instead of one per tensor, without copying a whole large model at once.
constexpr int64_t kBucketBytes = 25 << 20;

#if SINKLAB_HAVE_C10D
// PyTorch 2.0 split the process group into a front and one Backend per device type; the collectives sinklab
// calls are the same on both.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// Gloo carries the control values (losses, flags, step numbers) and CPU runs' gradients. A GPU run's
// gradients and parameters go through NCCL where this LibTorch has it (device to device, no copy through
// host memory), else through Gloo, which stages CUDA tensors in host memory.
class C10dDataParallel : public DataParallel {
 public:
  C10dDataParallel(int rank, int size, const std::string& host, int port) : DataParallel(rank, size) {
    // Under torchrun's agent the store is the agent's (all workers are
    // clients, keys under /worker/attempt_N); run by hand, rank 0 hosts it.
    const bool agent_store = env("TORCHELASTIC_USE_AGENT_STORE") == "True";
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = !agent_store && rank == 0;
    options.numWorkers = size;
    options.waitWorkers = !agent_store;
    options.timeout = std::chrono::seconds(env_int("SINKLAB_DIST_TIMEOUT_S", 600));
    timeout_ = options.timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(host, options);
    prefix_ =
        agent_store ? fmt::format("/worker/attempt_{}/sinklab", env("TORCHELASTIC_RESTART_COUNT", "0")) : "/sinklab";
    auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
    const std::string interface = env("GLOO_SOCKET_IFNAME");
    gloo->devices.push_back(interface.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                              : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    gloo_ = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix_, store_), rank,
                                                        size, gloo);
  }

#if SINKLAB_HAVE_NCCL
  ~C10dDataParallel() override {
    if (nccl_) nccl_->shutdown();  // PyTorch 2.x warns about, and aborts, a group dropped without it
  }
#endif

  void average_gradients(const std::vector<torch::Tensor>& parameters) override {
    std::vector<std::vector<torch::Tensor>> buckets(1);
    int64_t bytes = 0;
    for (auto p : parameters) {
      if (!p.requires_grad()) continue;
      // Every worker must send the same tensors: an unused parameter sends zeros.
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      const int64_t b = p.numel() * static_cast<int64_t>(p.element_size());
      if (bytes > 0 && (bytes + b > kBucketBytes || buckets.back()[0].scalar_type() != p.scalar_type() ||
                        buckets.back()[0].device() != p.device())) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(p.grad());
      bytes += b;
    }
    std::vector<torch::Tensor> flat;
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    for (const auto& bucket : buckets) {
      if (bucket.empty()) continue;
      std::vector<torch::Tensor> views;
      for (const auto& g : bucket) views.push_back(g.reshape({-1}));
      flat.push_back(torch::cat(views));
      std::vector<torch::Tensor> one = {flat.back()};
      pending.push_back(group_for(flat.back()).allreduce(one));  // all buckets in flight at once
    }
    size_t k = 0;
    for (const auto& bucket : buckets) {
      if (bucket.empty()) continue;
      pending[k]->wait();
      flat[k].div_(size_);
      int64_t at = 0;
      for (const auto& g : bucket) {
        g.copy_(flat[k].narrow(0, at, g.numel()).view_as(g));
        at += g.numel();
      }
      ++k;
    }
  }

  std::vector<double> sum(std::vector<double> values) override {
    auto t = torch::tensor(values, torch::kDouble);
    std::vector<torch::Tensor> one = {t};
    gloo_->allreduce(one)->wait();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }

  std::vector<int64_t> broadcast(std::vector<int64_t> values) override {
    auto t = torch::tensor(values, torch::kLong);
    std::vector<torch::Tensor> one = {t};
    gloo_->broadcast(one)->wait();
    return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }

  void broadcast_parameters(const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    for (auto p : parameters) {
      std::vector<torch::Tensor> one = {p.data()};
      group_for(p).broadcast(one)->wait();
    }
  }

 private:
  CollectiveGroup& group_for(const torch::Tensor& t) {
#if SINKLAB_HAVE_NCCL
    if (t.is_cuda()) {
      if (!nccl_) {
        // Created at the first GPU tensor, so a CPU run never initialises CUDA; its keys apart from Gloo's.
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout_;
        nccl_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            c10::make_intrusive<c10d::PrefixStore>(prefix_ + "/nccl", store_), rank_, size_, options);
        backends_ = "gloo, nccl";
      }
      return *nccl_;
    }
#endif
    return *gloo_;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_{};
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
#if SINKLAB_HAVE_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl_;
#endif
};
#endif

}  // namespace

std::unique_ptr<DataParallel> DataParallel::from_environment() {
  const int size = env_int("WORLD_SIZE", 1);
  if (size <= 1) return nullptr;
  const int rank = env_int("RANK", -1);
  if (rank < 0 || rank >= size)
    throw std::runtime_error(fmt::format("WORLD_SIZE={} needs RANK in [0, {}) (torchrun sets both)", size, size));
  const std::string host = env("MASTER_ADDR");
  const int port = env_int("MASTER_PORT", -1);
  if (host.empty() || port <= 0 || port > 65535)
    throw std::runtime_error("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (torchrun sets them)");
#if SINKLAB_HAVE_C10D
  return std::make_unique<C10dDataParallel>(rank, size, host, port);
#else
  throw std::runtime_error(
      "WORLD_SIZE > 1, but this sinkc-runtime was built without c10d (its LibTorch lacks the "
      "distributed headers, or gloo's)");
#endif
}

std::string DataParallel::describe() const { return fmt::format("worker {} of {} ({})", rank_, size_, backends_); }

torch::Tensor DataParallel::shard(const torch::Tensor& global) const {
  const int64_t rows = global.size(0);
  if (rows % size_ != 0)
    throw std::runtime_error(fmt::format("train.batch = {} is not divisible by the {} workers", rows, size_));
  return global.narrow(0, rows / size_ * rank_, rows / size_);
}

}  // namespace sink::rt
