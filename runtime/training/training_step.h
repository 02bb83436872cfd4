// The training step: the micro-batches' forward and backward, then the gradients' clipping and AdamW's update.
// train.cpp runs it eagerly, LibTorch launching each operation as the host reaches it. A CapturedStep runs it on
// fixed buffers instead, and on a GPU captures it once as a CUDA graph that every later step replays: one launch
// for the whole step in place of a few thousand, the host free to prepare the next batch.
//
// What a graph needs, and how the step gives it:
// - the batch in buffers of fixed address: the data loader's batch is copied into them each step;
// - no value read back to the host, and the schedule's learning rate and step count as device tensors: the fused
//   AdamW takes both (MultiTensorAdamW::update_on_device), so the schedule never forces a second capture;
// - every lazy set-up done before the capture: the generated kernels compiled and tuned, AdamW's moments made,
//   the GPU's libraries warmed, by a few eager steps on the stream the capture uses; then the memory those steps
//   freed handed back, since the capture allocates from a pool of its own;
// - autocast's cache of cast weights off while capturing (a cached copy would outlive the capture's memory).
// Measurements and checkpoints run outside the graph, between steps. A step that cannot be captured (a plan
// whose attention reads values back, data-parallel workers) runs eagerly on the same buffers and says why, once.
//
// The captured step is opt-in (SINKLAB_CUDA_GRAPH=1) until a GPU has shown its losses bit-identical to the eager
// step's. On the CPU the same variable runs the step on the fixed buffers, uncaptured: what the tests compare.
#pragma once
#include <memory>
#include <string>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "runtime/training/step_profile.h"

namespace sink::rt {

// The micro-batches of (x, y) forward and backward, each loss weighted by its share of the rows, so the gradients
// accumulated are the whole batch's (every sequence carries as many loss positions). Returns the step's loss on the
// device, unread. `x` and `y` may be on the host or the model's device.
torch::Tensor forward_backward(Transformer& model, const RunConfig& cfg, const torch::Tensor& x, const torch::Tensor& y,
                               StepProfile& profile);

// The step a run asked for: SINKLAB_CUDA_GRAPH=1 the captured step; =buffers the same on fixed buffers but never
// captured (what a GPU check compares the captured step with, bit for bit); unset or anything else the eager step.
enum class StepKind { eager, fixed_buffers, captured };
StepKind requested_step();

class CapturedStep {
 public:
  // Why this run's step cannot run on fixed buffers (empty where it can): the optimizer lacks the fused update
  // with device-side rate and counts, the gradients are averaged across workers, --profile times the step's parts
  // apart, or the attention runs on the reference path on a GPU (it copies its mask there at every call).
  static std::string unsupported(MultiTensorAdamW& opt, bool data_parallel, bool profiling,
                                 bool reference_attention_on_gpu);

  // `capture`: capture the step once warmed up, where the model is on a GPU and LibTorch has CUDA graphs.
  CapturedStep(Transformer& model, MultiTensorAdamW& opt, const RunConfig& cfg, int64_t rows, bool capture);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // One whole step on the batch (x, y) (host tensors of `rows` sequences) at learning rate `lr`: its loss, on the
  // device and unread, in a tensor of its own (the next step does not overwrite it).
  torch::Tensor step(const torch::Tensor& x, const torch::Tensor& y, double lr);

  // How the steps ran, for the run's log and summary: "captured as a CUDA graph after 3 eager steps on fixed
  // buffers", "eager on fixed buffers (...)", or why a capture failed. Changes at most once, at the capture.
  const std::string& how() const { return how_; }

 private:
  void run_on_buffers();  // the step's work on x_, y_ and lr_
  void capture_and_replay();

  Transformer& model_;
  MultiTensorAdamW& opt_;
  const RunConfig& cfg_;
  StepProfile unprofiled_;
  torch::Tensor x_, y_, lr_, loss_;
  int64_t steps_ = 0;
  bool capture_ = false;  // a GPU with LibTorch's CUDA graphs: capture after the warm-up
  std::string how_;
  struct Graph;  // LibTorch's CUDA graph and the stream it is captured on, where LibTorch has CUDA
  std::unique_ptr<Graph> graph_;
};

}  // namespace sink::rt
