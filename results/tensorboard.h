// `sinkc export RUNS --tensorboard DIR`: every run's curves as TensorBoard
// event files, so `tensorboard --logdir DIR` shows them. One folder per run,
// DIR/<run>/events.out.tfevents.<seconds>.<host> (the name TensorBoard looks
// for), holding one scalar series per name of eval_series (results/metrics.h)
// with the training step as its x axis (the format: results/tfevents.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "results/run_data.h"

namespace sink::results {

struct TensorBoardExport {
  struct Written {
    std::string run;    // the folder's name under DIR
    std::string file;   // the event file
    size_t events = 0;  // evaluations written (the file's first record, its version, not counted)
  };
  std::vector<Written> written;
  std::vector<std::string> skipped;  // "too_hot: no evaluation yet"
};

// Writes every run that has evaluations. A run's folder is its name; where
// two runs share a name (an older version of a spec beside the newer one)
// both folders are NAME-hash8. Writing again replaces a run's earlier event
// files rather than adding one, which TensorBoard would show as a second
// copy of every curve. Throws ResultsError when DIR cannot be written.
TensorBoardExport write_tensorboard(const std::vector<RunData>& runs, const std::string& dir);

}  // namespace sink::results
