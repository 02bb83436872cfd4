// The training step, written once: one whole optimizer step on a batch, which every run calls, on the CPU and on
// a GPU, alone and as a data-parallel worker, eager, on fixed buffers and captured.
//
//   zero the gradients, then each micro-batch's forward and backward      (the gradients half)
//   average the gradients across the workers                               (data parallelism's hook)
//   clip them, AdamW's update                                               (the update half)
//
// The step's modes differ only in where its batch lives and who launches its two halves:
// - eager: the batch copied to the device as it comes, each half's operations launched as the host reaches them;
// - on fixed buffers: the batch copied into buffers of fixed address, the halves launched the same way (what a GPU
//   check compares the captured step with, bit for bit, and what the CPU's tests run);
// - captured: on fixed buffers, and on a GPU each half captured once as a CUDA graph that every later step replays:
//   two launches for the whole step in place of a few thousand, the host free to prepare the next batch. The
//   gradients' average runs between the two replays, eagerly: the workers' all-reduce is not part of a graph.
//
// What a graph needs, and how the step gives it:
// - the batch in buffers of fixed address: the data loader's batch is copied into them each step;
// - no value read back to the host, and the schedule's learning rate and step count as device tensors: the fused
//   AdamW reads both there (MultiTensorAdamW), so the schedule never forces a second capture;
// - every lazy set-up done before the capture: the generated kernels compiled and tuned, AdamW's moments made,
//   the GPU's libraries warmed, by a few steps on the stream the capture uses; then the memory those steps freed
//   handed back, since the capture allocates from a pool of its own;
// - autocast's cache of cast weights off while capturing (a cached copy would outlive the capture's memory).
// Measurements and checkpoints run outside the step. The captured step is opt-in until a GPU has run it (the row
// cuda_graph of runtime/gpu_features.h); a run that asks for it where it cannot be captured runs eagerly and says why.
#pragma once
#include <memory>
#include <string>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/processes/data_parallel.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "runtime/training/step_profile.h"

namespace sink::rt {

enum class StepMode { eager, fixed_buffers, captured };

// The mode a run on `device` asks for, from the row cuda_graph (runtime/gpu_features.h): off, eager; on, captured
// (on the CPU, which has no graphs, on fixed buffers); buffers, on fixed buffers.
StepMode requested_step_mode(const torch::Device& device);

class TrainingStep {
 public:
  // Why this run's step cannot be captured (empty where it can): the optimizer's update reads numbers from the
  // host, --profile times the step's parts apart, or the attention runs on the reference path on a GPU (it copies
  // its mask there at every call).
  static std::string capture_unsupported(MultiTensorAdamW& opt, bool profiling, bool reference_attention_on_gpu);

  // `workers`: the data-parallel workers whose gradients the step averages, or none. `profile` times the parts of
  // a step that is not captured.
  TrainingStep(Transformer& model, MultiTensorAdamW& opt, const RunConfig& cfg, DataParallel* workers,
               StepProfile& profile, StepMode mode);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // One whole step on the batch (x, y) (this worker's rows, on the host) at learning rate `lr`: its loss, on the
  // device and unread, in a tensor of its own (the next step does not overwrite it).
  torch::Tensor run(const torch::Tensor& x, const torch::Tensor& y, double lr);

  // How the steps run, for the run's log and summary: "" for the eager step, else "eager on fixed buffers (...)",
  // "captured as two CUDA graphs after 3 steps on fixed buffers", or why a capture failed. Changes at most once, at
  // the capture.
  const std::string& how() const { return how_; }

 private:
  enum Half { gradients, update };
  void run_half(Half half);      // on the step's tensors, as the mode launches it
  void launch_half(Half half);   // its operations, launched now
  void capture_half(Half half);  // captured as a graph, then replayed

  Transformer& model_;
  MultiTensorAdamW& opt_;
  const RunConfig& cfg_;
  DataParallel* workers_;
  StepProfile& profile_;
  StepMode mode_;
  torch::Tensor x_, y_, loss_;  // fixed buffers in the fixed modes
  int64_t steps_ = 0;
  bool capture_ = false;  // a GPU with LibTorch's CUDA graphs: capture after the warm-up
  std::string how_;
  struct Graphs;  // LibTorch's CUDA graphs and the stream they are captured on, where LibTorch has CUDA
  std::unique_ptr<Graphs> graphs_;
};

}  // namespace sink::rt
