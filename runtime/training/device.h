// The device a run trains on. The plan names the kind (train.device = cpu |
// cuda); which GPU is the process's business, not the experiment's, so it
// stays out of the plan and its hash: a run resumed on another GPU, or on
// another node of the cluster, is the same run in the same run directory.
#pragma once
#include <torch/torch.h>

#include "plan/choices.h"
#include "runtime/training/auto_settings.h"

namespace sink::rt {

// GPUs this process sees (after CUDA_VISIBLE_DEVICES); 0 in a CPU-only LibTorch.
int visible_gpus();

// kind: train.device. gpu: `--gpu N`, or -1 to choose: a data-parallel
// worker takes GPU LOCAL_RANK modulo the GPUs it sees (torchrun
// --nproc_per_node G on a node with G GPUs: one each; more workers than
// GPUs share them), a process alone takes GPU 0. Throws
// std::runtime_error when cuda is asked for and no GPU is visible, or
// --gpu names one past them.
torch::Device training_device(DeviceKind kind, int gpu);

// What the automatic settings read of `device`: a GPU's memory and compute
// capability from the CUDA driver, left unknown (0) where it cannot say.
DeviceFacts device_facts(const torch::Device& device);

// The one way a batch reaches the device: `host` on `device`, into `buffer` where it is given (a step's fixed
// buffers, whose address a captured graph keeps), else a tensor of its own (`host` itself where it is there already).
// To a GPU from page-locked memory, queued behind the work before it rather than waiting for it.
torch::Tensor to_device(const torch::Tensor& host, const torch::Device& device, torch::Tensor buffer = {});

}  // namespace sink::rt
