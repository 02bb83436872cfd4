#include "runtime/training/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "plan/run_config.h"
#include "plan/run_record.h"
#include "runtime/data/batches.h"
#include "runtime/data/corpus.h"
#include "runtime/gpu_features.h"
#include "runtime/measurement/measure.h"
#include "runtime/processes/data_parallel.h"
#include "runtime/processes/interrupt.h"
#include "runtime/processes/process.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/device.h"
#include "runtime/training/evaluation.h"
#include "runtime/training/live_events.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "runtime/training/peak_memory.h"
#include "runtime/training/pending_losses.h"
#include "runtime/training/precision.h"
#include "runtime/training/progress.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/run_ledger.h"
#include "runtime/training/step_profile.h"
#include "runtime/training/step_trace.h"
#include "runtime/training/trace_table.h"
#include "runtime/training/training_step.h"

namespace sink::rt {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace eval_key = run_record::eval;
namespace summary_key = run_record::summary;
using run_record::RunStatus;

namespace {

// Everything a run trains with, built from its plan.
struct Training {
  RunConfig cfg;
  torch::Device device = torch::kCPU;
  std::unique_ptr<TokenData> data;  // (Batches reads it in place)
  std::unique_ptr<Batches> batches;
  std::shared_ptr<Transformer> model;
  std::unique_ptr<MultiTensorAdamW> opt;
  std::unique_ptr<SinkCosts> costs;  // what the evaluations' cost measurements compile, kept between them
  int64_t tokens_per_step() const { return cfg.train.batch * cfg.train.context; }
};

Training set_up(const Plan& plan, const RunOptions& options, RunDir& dir, RunRecord& record, bool leader) {
  Training t;
  t.cfg = read_config(plan);
  RunConfig& cfg = t.cfg;
  const int64_t threads = cfg.train.threads > 0      ? cfg.train.threads
                          : options.auto_threads > 0 ? options.auto_threads
                                                     : std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));
  t.device = training_device(cfg.train.device, options.gpu);
  // Before anything reads them: the kernels' storage, the autocast, the passes per step.
  std::string auto_note;
  if (cfg.train.precision == Precision::auto_ || cfg.train.micro_batch_auto) {
    const int64_t rows = cfg.train.batch / (options.workers ? options.workers->size() : 1);
    const ResolvedSettings resolved =
        resolve_auto_settings(cfg, rows, shared_by(device_facts(t.device), options.gpu_share));
    cfg.train.precision = resolved.precision;
    cfg.train.micro_batch = resolved.micro_batch;
    cfg.train.micro_batch_auto = false;
    auto_note = resolved.note;
    if (t.device.is_cuda() && options.gpu_share > 1)
      auto_note += fmt::format(" (this run's 1/{} share of the GPU: {} runs train on it at once)", options.gpu_share,
                               options.gpu_share);
  }

  t.data = std::make_unique<TokenData>(
      load_data(cfg.data, options.data_cache.empty() ? options.out + "/.cache" : options.data_cache));
  if (cfg.model.vocab == 0) cfg.model.vocab = t.data->vocab;
  if (cfg.model.vocab < t.data->vocab)
    throw std::runtime_error(
        fmt::format("model.vocab = {} is smaller than the data's vocabulary ({})", cfg.model.vocab, t.data->vocab));
  for (auto [token, pos] : cfg.data.fixed)
    if (token >= cfg.model.vocab)
      throw std::runtime_error(fmt::format("fixed token {} is outside the vocabulary ({})", token, cfg.model.vocab));
  t.batches = std::make_unique<Batches>(*t.data, cfg.data, cfg.train.context, cfg.train.batch, cfg.train.seed);

  torch::manual_seed(static_cast<uint64_t>(cfg.train.seed));
  t.model = std::make_shared<Transformer>(cfg.model, t.device);
  t.opt = make_optimizer(*t.model, cfg.train);
  int64_t params = 0;
  for (auto& p : t.model->parameters()) params += p.numel();
  const std::string backend = t.model->backend->name();
  // The kernel the run executes, from the same kernels::kernel_spec that `sinkc compile` uses.
  if (const std::string source = t.model->backend->kernel_source(cfg.train.precision); leader && !source.empty())
    write_atomically(dir.file(t.model->backend->kernel_file_name()), source);
  dir.log(fmt::format("run {} ({}), {} parameters, data {}", plan.name, plan.hash8(), params, t.data->description));
  dir.log(fmt::format("attention backend: {}", backend));
  if (t.device.is_cuda()) {
    std::istringstream features(gpu_features_report(gpu_capability(t.device.index())));
    for (std::string line; std::getline(features, line);) dir.log("GPU feature " + line);
  }
  json& summary = record.summary();
  summary[summary_key::kParameters] = params;
  summary[summary_key::kAttentionBackend] = backend;
  summary[summary_key::kThreads] = threads;
  summary[summary_key::kDevice] = t.device.str();
  record.record_provenance(t.device, t.model->backend);
  summary[summary_key::kPrecision] = name_of(cfg.train.precision);
  if (cfg.train.micro_batch > 0) summary[summary_key::kMicroBatch] = cfg.train.micro_batch;
  if (!auto_note.empty()) {
    summary[summary_key::kAutoSettings] = auto_note;
    dir.log(auto_note);
  }
  if (options.workers) {
    summary[summary_key::kWorkers] = options.workers->size();
    dir.log(fmt::format("data parallel: {} workers, {} sequences each per step", options.workers->size(),
                        cfg.train.batch / options.workers->size()));
  }
  summary[summary_key::kTrainTokensUnique] = t.batches->train_tokens();
  return t;
}

// The run's checkpoints: where --resume continues from, and the ones it writes.
class Checkpoints {
 public:
  Checkpoints(RunDir& dir, Training& t, const RunOptions& options, bool leader)
      : dir_(dir), t_(t), options_(options), leader_(leader) {}

  // Rank 0 first (it may set a bad latest checkpoint aside), then the others
  // from the same files; the broadcast is the barrier between them.
  Checkpoint restore() {
    Checkpoint state;
    DataParallel* workers = options_.workers;
    if (leader_) state = restore_here();
    if (workers) {
      const int64_t leader_step = workers->broadcast({state.step})[0];
      if (!leader_) state = restore_here();
      if (state.step != leader_step)
        throw std::runtime_error(
            fmt::format("worker {} resumed at step {}, rank 0 at step {}: the checkpoint changed "
                        "under them",
                        workers->rank(), state.step, leader_step));
      workers->broadcast_parameters(t_.model->parameters());
    }
    saved_step_ = options_.resume ? state.step : -1;
    return state;
  }

  // A checkpoint that cannot be written (a full disk) fails the run, and
  // the ones already on disk stay as they were for --resume.
  void write(const Checkpoint& state, RunRecord& record) {
    if (state.step == saved_step_) return;
    try {
      if (leader_) save_checkpoint(dir_, *t_.model, *t_.opt, state);
    } catch (const std::exception& e) {
      record.record_progress(state.step, t_.tokens_per_step());
      throw std::runtime_error(fmt::format(
          "checkpoint of step {} not written: {}; {}", state.step, error_text(e),
          saved_step_ > 0 ? fmt::format("the checkpoint of step {} is intact, continue with --resume", saved_step_)
                          : std::string("there is no earlier checkpoint")));
    }
    saved_step_ = state.step;
  }

 private:
  Checkpoint restore_here() {
    std::error_code ec;
    if (!options_.resume || !(fs::exists(dir_.checkpoint(), ec) || fs::exists(dir_.previous_checkpoint(), ec))) {
      dir_.clear_lines();
      return {};
    }
    auto resumed = load_latest_checkpoint(dir_.checkpoint(), dir_.previous_checkpoint(), *t_.model, t_.opt.get());
    if (!resumed.warning.empty()) {
      dir_.log("warning: " + resumed.warning);
      fmt::print(stderr, "sinkc: warning: {}\n", resumed.warning);
      // Else the next checkpoint would rotate the bad file into the
      // previous slot, leaving one good checkpoint instead of two.
      dir_.set_aside_latest_checkpoint();
    }
    dir_.truncate_lines(resumed.state.step);
    dir_.log(fmt::format("resumed at step {}", resumed.state.step));
    return resumed.state;
  }

  RunDir& dir_;
  Training& t_;
  const RunOptions& options_;
  bool leader_;
  int64_t saved_step_ = -1;
};

// The step's batch, this worker's share of it, on the host (TrainingStep::run moves it to the device).
std::pair<torch::Tensor, torch::Tensor> step_batch(Training& t, int64_t step, DataParallel* workers,
                                                   StepProfile& profile) {
  auto timed = profile.time(StepProfile::Data);
  auto [x, y] = t.batches->train(step);
  if (workers) x = workers->shard(x), y = workers->shard(y);
  return {x, y};
}

// The run's step in the mode it asks for (runtime/gpu_features.h's cuda_graph) where its plan allows it, else
// eager, with why in `refused`.
std::unique_ptr<TrainingStep> make_step(Training& t, DataParallel* workers, StepProfile& profile,
                                        std::string& refused) {
  StepMode mode = requested_step_mode(t.device);
  if (mode == StepMode::captured) {
    const bool reference_on_gpu = t.device.is_cuda() && t.model->backend->name() == "reference";
    const std::string why = TrainingStep::capture_unsupported(*t.opt, profile.enabled(), reference_on_gpu);
    if (!why.empty()) refused = "eager, not captured: " + why, mode = StepMode::eager;
  }
  return std::make_unique<TrainingStep>(*t.model, *t.opt, t.cfg, workers, profile, mode);
}

// The losses pending since they were last read, into the state's running
// sum. Workers agree on the loss and on stopping: a signal one of them
// missed would leave the others waiting in the next all-reduce. Returns the
// step whose loss was not finite, if one was.
std::optional<int64_t> read_losses(PendingLosses& pending, DataParallel* workers, int64_t step, bool& stop,
                                   Checkpoint& state, double& last_loss) {
  auto losses = pending.read();
  std::optional<int64_t> diverged_at = losses.first_non_finite;
  if (workers) {
    // Every worker read the same steps, so the counts agree and the sums average. A non-finite loss on any
    // worker makes every worker's sum non-finite; the step named is the first one seen here, else this one.
    const double size = workers->size();
    auto agreed = workers->sum({diverged_at ? NAN : losses.sum, diverged_at ? NAN : losses.last, stop ? 1.0 : 0.0});
    losses.sum = agreed[0] / size;
    losses.last = agreed[1] / size;
    stop = agreed[2] > 0;
    if (!diverged_at && !(std::isfinite(losses.sum) && std::isfinite(losses.last))) diverged_at = step;
  }
  if (diverged_at) return diverged_at;
  state.loss_sum += losses.sum;
  state.loss_count += losses.count;
  last_loss = losses.last;
  return std::nullopt;
}

// A line of metrics.jsonl: the validation loss and the sink metrics now, and
// the training loss since the last one (which it resets). `elapsed` is the
// loop's time so far, `train_s` the part of it not spent measuring or
// writing checkpoints.
json measurement(Training& t, Checkpoint& state, double lr, double elapsed, double train_s, double tokens_per_s) {
  if (!t.costs) t.costs = std::make_unique<SinkCosts>(t.cfg);
  json m = evaluate(*t.model, *t.batches, t.cfg, t.costs.get());
  m[eval_key::kStep] = state.step;
  m[eval_key::kTokens] = state.step * t.tokens_per_step();
  m[eval_key::kLr] = lr;
  m[eval_key::kTrainLoss] = state.loss_sum / std::max<int64_t>(1, state.loss_count);
  m[eval_key::kElapsedS] = elapsed;
  m[eval_key::kTrainS] = train_s;
  m[eval_key::kTokensPerS] = tokens_per_s;
  state.loss_sum = 0;
  state.loss_count = 0;
  return m;
}

// profile.json in the run directory (the parts, and the traced steps' table under "trace"), and the same on
// stderr. A profile that cannot be written fails nothing.
void write_profile(RunDir& dir, const StepProfile& profile, const StepTrace& trace, const std::string& run,
                   int64_t steps) {
  json written = profile.to_json(steps);
  if (!trace.table().is_null()) written["trace"] = trace.table();
  if (!trace.error().empty()) written["trace_error"] = trace.error(), dir.log("warning: " + trace.error());
  try {
    write_atomically(dir.file("profile.json"), written.dump(2) + "\n");
  } catch (const std::exception& e) {
    dir.log(fmt::format("warning: profile.json not written: {}", e.what()));
  }
  fmt::print(stderr, "{}", profile.text(run, steps));
  if (!trace.table().is_null())
    fmt::print(stderr, "{}(the trace: {})\n", trace_table_text(trace.table()), dir.file("trace.json"));
  if (!trace.error().empty()) fmt::print(stderr, "sinkc: warning: {}\n", trace.error());
}

}  // namespace

// Claim the run, build what it trains with, restore its checkpoint, then
// step: read the losses when something shows or keeps them, measure and
// checkpoint when due, and end with a status that says how it ended.
RunResult run_plan(const Plan& plan, const RunOptions& options) {
  RunClaim claim = claim_run(plan, options);
  if (claim.skipped) return *claim.skipped;
  DataParallel* workers = options.workers;
  RunDir dir(claim.dir, claim.leader);
  RunRecord record(dir, plan, workers);
  if (!claim.note.empty()) record.add_note(claim.note);
  try {
    Training t = set_up(plan, options, dir, record, claim.leader);
    Checkpoints checkpoints(dir, t, options, claim.leader);
    Checkpoint state = checkpoints.restore();
    if (state.step > 0) record.record_resumed();
    const int64_t steps = t.cfg.train.steps, first_step = state.step, tokens_per_step = t.tokens_per_step();
    const TrainingProgress progress(plan.name, first_step, steps, tokens_per_step);
    ProgressDisplay display(options.progress);
    StepProfile profile(options.profile, t.device);
    StepTrace trace(options.profile && claim.leader, t.device, first_step, steps);
    const PeakMemory peak_memory(t.device);
    profile.start();
    const auto loop_start = Clock::now();
    double last_loss = NAN;
    // Measurements and checkpoints, timed always (two clock reads, no synchronisation): train_s leaves them out.
    double outside_training_s = 0;
    auto outside_training = [&](StepProfile::Part part, const std::function<void()>& work) {
      const auto began = Clock::now();
      {
        auto timed = profile.time(part);
        work();
      }
      outside_training_s += std::chrono::duration<double>(Clock::now() - began).count();
    };
    std::string step_how;  // how the captured step ran, where the run asked for it
    auto finish = [&](RunStatus status, const std::string& reason = "") {
      if (profile.enabled() && claim.leader) write_profile(dir, profile, trace, plan.name, state.step - first_step);
      if (auto peak = peak_memory.read(); !peak.is_null()) record.summary()[summary_key::kPeakMemory] = peak;
      if (!step_how.empty()) record.summary()[summary_key::kStep] = step_how;
      return record.finish(status, reason);
    };
    PendingLosses pending;
    LiveEvents events(dir, claim.leader);
    std::unique_ptr<TrainingStep> train_step = make_step(t, workers, profile, step_how);
    if (step_how.empty()) step_how = train_step->how();
    if (!step_how.empty()) dir.log("step: " + step_how);
    if (const std::string fused = t.model->fused_operations(); !fused.empty()) {
      record.summary()[summary_key::kStepKernels] = fused;
      dir.log("step kernels: " + fused);
    }
    for (int64_t step = state.step; step < steps; ++step) {
      if (options.stop_after >= 0 && step - first_step >= options.stop_after)
        return finish(RunStatus::Stopped, fmt::format("stopped after step {}", step));
      trace.step_begins(step);
      const double lr = learning_rate(t.cfg.train, step);
      auto [x, y] = step_batch(t, step, workers, profile);
      pending.add(step, train_step->run(x, y, lr));
      if (!train_step->how().empty() && train_step->how() != step_how)
        step_how = train_step->how(), dir.log("step: " + step_how);
      bool stop = interrupt_requested();
      const bool final_step = step + 1 == steps;
      const int64_t every = t.cfg.measure.every, checkpoint_every = t.cfg.train.checkpoint_every;
      const bool measure_due = final_step || (every > 0 && (step + 1) % every == 0);
      const bool checkpoint_due = final_step || (checkpoint_every > 0 && (step + 1) % checkpoint_every == 0);
      const bool log_due = final_step || (step + 1) % std::max<int64_t>(1, t.cfg.train.log_every) == 0;
      const bool progress_due = display.redraw_due();
      // The losses are read when something shows or keeps them, and a
      // non-finite one is found there, before anything is written; between
      // those steps nothing waits for the GPU. Workers read (and agree) only
      // at the steps every one of them reaches alike, so a signal stops them
      // together at the next logged step.
      const bool read_due = measure_due || checkpoint_due || log_due;
      if (workers && !read_due) stop = false;
      if (workers ? read_due : read_due || stop || progress_due) {
        if (auto diverged_at = read_losses(pending, workers, step, stop, state, last_loss)) {
          record.record_progress(*diverged_at, tokens_per_step);
          return finish(RunStatus::Diverged, fmt::format("non-finite loss at step {}", *diverged_at + 1));
        }
      }
      trace.step_ended(step, dir.file("trace.json"));
      state.step = step + 1;

      const double elapsed = std::chrono::duration<double>(Clock::now() - loop_start).count();
      // Training speed: the steps' own time, without the measurements and checkpoints.
      const double train_s = elapsed - outside_training_s;
      const double tps = progress.tokens_per_second(state.step, train_s);
      const std::string line = progress.line(state.step, last_loss, lr, train_s);
      if (progress_due) display.redraw(line);
      if (log_due) {
        dir.log(line);
        dir.append_loss(state.step, last_loss);
        events.step(state.step, last_loss);
        display.logged(line);
      }
      if (measure_due) {
        json m;
        outside_training(StepProfile::Measurement, [&] { m = measurement(t, state, lr, elapsed, train_s, tps); });
        record.leader_writes([&] { dir.append_metrics(m); });
        record.summary()[summary_key::kFinal] = m;
        events.measurement(state.step, m);
        if (!std::isfinite(m[eval_key::kValidLoss].get<double>())) {
          record.summary()[summary_key::kStepsDone] = state.step;
          return finish(RunStatus::Diverged, fmt::format("non-finite validation loss at step {}", state.step));
        }
      }
      auto write_checkpoint = [&] {
        outside_training(StepProfile::Checkpoints,
                         [&] { record.leader_writes([&] { checkpoints.write(state, record); }); });
      };
      if (checkpoint_due) write_checkpoint();
      if (stop && !final_step) {
        write_checkpoint();
        display.finish_line();
        record.record_progress(state.step, tokens_per_step);
        return finish(RunStatus::Interrupted,
                      fmt::format("interrupted after step {}; continue with --resume", state.step));
      }
    }
    display.finish_line();
    const bool bos = measures_with_bos(t.cfg.measure.bos, t.cfg.data);
    outside_training(StepProfile::Measurement, [&] {
      record.leader_writes([&] {
        write_atomically(dir.file("attention_maps.json"),
                         attention_maps(*t.model, *t.batches, t.cfg, bos).dump() + "\n");
      });
    });
    const double elapsed = std::chrono::duration<double>(Clock::now() - loop_start).count();
    record.record_progress(steps, tokens_per_step);
    record.summary()[summary_key::kTrainWallS] = elapsed;
    record.summary()[summary_key::kTokensPerS] =
        (steps - first_step) * tokens_per_step / std::max(elapsed - outside_training_s, 1e-9);
    return finish(RunStatus::Completed);
  } catch (const std::exception& e) {
    return record.finish(RunStatus::Failed, error_text(e).substr(0, 2000));
  }
}

}  // namespace sink::rt
