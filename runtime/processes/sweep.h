// `sinkc run --jobs N`: up to N runs at once, each in its own sinkc-runtime
// process. LibTorch's thread pool belongs to a process, so only separate
// processes give each run threads of its own; a run that fails, diverges or
// crashes ends only its process.
#pragma once
#include <string>
#include <vector>

namespace sink::rt {

struct SweepRun {
  std::string plan_file;  // what the child process reads
  std::string dir;        // OUT/<run>-<hash8>, for the progress line
  int64_t steps = 0;
};

struct SweepOptions {
  int jobs = 2;
  int64_t threads_per_run = 1;     // for runs whose plan says train.threads = 0
  std::vector<std::string> flags;  // passed to every child: --out OUT, --resume, --wait
  // GPUs to spread the runs over: the k-th of the runs training at once gets
  // --gpu k mod gpus, so `--jobs G` on a node with G GPUs trains one run per
  // GPU. 0: no --gpu (a CPU-only machine, or --gpu in flags).
  int gpus = 0;
  // Runs that train on one GPU at once, passed as --gpu-share (runs_per_gpu below): 1 leaves it out.
  int gpu_share = 1;
};

// How many of `jobs` runs at once share a GPU, with `runs` runs to train over `gpus` GPUs (0: all on one, the
// one --gpu names): the most any GPU gets when the k-th run at once goes to GPU k mod gpus.
int runs_per_gpu(int jobs, size_t runs, int gpus);

// Exit status as `sinkc run`: 0 all completed or cached, 1 a run failed, 130 interrupted.
int run_sweep(const std::vector<SweepRun>& runs, const SweepOptions& options);

}  // namespace sink::rt
