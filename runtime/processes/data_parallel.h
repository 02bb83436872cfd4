// Data-parallel training on LibTorch's c10d. A run trains on W workers
// started by torchrun (`torchrun --nproc_per_node W --no_python
// sinkc-runtime run ...`, or `sinkc run --workers W`), each a process that
// reads torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT, and the agent-hosted store when TORCHELASTIC_USE_AGENT_STORE
// says so). Every worker trains its rows of each global batch (batches are a
// pure function of seed and step), gradients are averaged across workers, so
// the loss curve does not depend on W; rank 0 alone writes the run directory.
#pragma once
#include <memory>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

class DataParallel {
 public:
  // nullptr when this process is alone (no WORLD_SIZE, or WORLD_SIZE = 1).
  // Throws std::runtime_error for a malformed environment, or W > 1 in a
  // runtime built without c10d.
  static std::unique_ptr<DataParallel> from_environment();
  virtual ~DataParallel() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }
  std::string describe() const;  // "worker 1 of 2 (gloo)", "worker 1 of 2 (gloo, nccl)" once a GPU run used NCCL

  // This worker's rows [rank B / W, (rank + 1) B / W) of a global batch;
  // throws unless W divides B.
  torch::Tensor shard(const torch::Tensor& global) const;
  // Every parameter's gradient replaced by the mean over workers, in buckets.
  virtual void average_gradients(const std::vector<torch::Tensor>& parameters) = 0;
  // Sum over workers of a few numbers (the step's loss, an interrupt flag).
  virtual std::vector<double> sum(std::vector<double> values) = 0;
  // Rank 0's values, on every worker.
  virtual std::vector<int64_t> broadcast(std::vector<int64_t> values) = 0;
  // Rank 0's parameters, on every worker (a resumed or freshly seeded model
  // is already equal everywhere; this makes it so by construction).
  virtual void broadcast_parameters(const std::vector<torch::Tensor>& parameters) = 0;

 protected:
  DataParallel(int rank, int size) : rank_(rank), size_(size) {}
  int rank_, size_;
  std::string backends_ = "gloo";
};

}  // namespace sink::rt
