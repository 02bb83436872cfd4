// The version of the numbers a run computes. The run cache is keyed by the
// plan's hash, which says what was asked for, not how this sinklab computes
// it: a run trained before a kernel fix would otherwise stay cached, and be
// compared with runs trained after it, as if nothing had changed.
//
// Bump kNumericsVersion in the same commit as any change that can alter a
// run's numbers: the generated kernels or the reference attention, the
// model's math (norms, RoPE, initialisation), the loss, the optimizer or
// gradient clipping, the learning-rate schedule, the data order or the
// batches, what a measurement reads or how it is computed (precision
// included). A refactoring that leaves every number bit for bit as it was
// does not bump it.
//
// summary.json records the version a run was trained under; a completed run
// with an older one (or none: sinklab before this version existed) is
// stale: `sinkc run` reports it and keeps it, `sinkc run --retrain-stale`
// trains it again (the old results set aside in RUN/stale/), and `sinkc
// table` marks it.
//   1  the first recorded version
//   2  the CPU JIT's forward reads no key past the sequence when a prefix is longer than it
//   3  evaluation and the attention maps under train.precision's autocast (a bf16 run's validation loss
//      and sink metrics as its training steps compute them); gradient norms through _foreach_norm
//   4  AdamW as one multi-tensor update per group (LibTorch's fused kernel on >= 2.4: other float rounding)
//   5  the LM head and its loss a chunk of rows at a time, the gradient formed in the forward (other float
//      rounding of the loss and of the head's and features' gradients)
//   6  the CPU kernels print the column algebra the CUDA kernels print (plan/column_algebra.h): the backward
//      multiplies by 1 / Z where it divided by Z, the p-norm's sum of terms rescales by r^p
//   7  the CPU step's residual add + RMSNorm, SwiGLU's activation and RoPE as fused kernels
//      (runtime/training/cpu_step_operations.h: other float rounding, and SwiGLU's e^x by a polynomial)
#pragma once
#include <cstdint>

namespace sink {

inline constexpr int64_t kNumericsVersion = 7;

// A completed run's numbers may differ from what this sinklab computes.
// `recorded`: summary.json's numerics_version, 0 where it has none.
constexpr bool numerics_are_stale(int64_t recorded) { return recorded < kNumericsVersion; }

}  // namespace sink
