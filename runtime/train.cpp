#include "runtime/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <thread>
#include <unistd.h>

#include "plan/report_names.h"
#include "plan/run_config.h"
#include "runtime/batches.h"
#include "runtime/corpus.h"
#include "runtime/data_parallel.h"
#include "runtime/device.h"
#include "runtime/interrupt.h"
#include "runtime/measure.h"
#include "runtime/model.h"
#include "runtime/optimizer.h"
#include "runtime/pending_losses.h"
#include "runtime/precision.h"
#include "runtime/process.h"
#include "runtime/run_dir.h"
#include "runtime/run_lock.h"

namespace sink::rt {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace run_status = report_names::status;

namespace {

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", int(s) / 60, int(s) % 60);
  return fmt::format("{}h{:02}m", int(s) / 3600, (int(s) % 3600) / 60);
}

// Cross-entropy over the positions that carry loss: prefix-LM excludes the
// targets inside the prefix.
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& cpu_targets, int64_t prefix) {
  auto targets = cpu_targets.to(logits.device());
  auto flat = logits.reshape({-1, logits.size(-1)});
  if (prefix <= 1) return torch::nn::functional::cross_entropy(flat, targets.reshape({-1}));
  // Target t (0-based input index) is token t+2 (1-based): inside the prefix when t + 2 <= prefix.
  auto keep = torch::arange(targets.size(1), targets.options()) + 2 > prefix;
  auto per = torch::nn::functional::cross_entropy(
      flat, targets.reshape({-1}), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  auto mask = keep.unsqueeze(0).expand_as(targets).reshape({-1}).to(per.dtype());
  return (per * mask).sum() / mask.sum().clamp_min(1);
}

json evaluate(Transformer& model, const Batches& batches, const RunConfig& cfg) {
  torch::NoGradGuard no_grad;
  model.eval();
  json m;
  const int64_t n_valid = std::min<int64_t>(cfg.measure.sequences, 64);
  auto [x, y] = batches.valid(n_valid);
  double loss = 0;
  int64_t chunks = 0;
  for (int64_t b = 0; b < n_valid; b += 16, ++chunks) {
    int64_t n = std::min<int64_t>(16, n_valid - b);
    loss += lm_loss(model.forward(x.narrow(0, b, n)).logits, y.narrow(0, b, n), cfg.model.attention.prefix).item<double>();
  }
  m["valid_loss"] = loss / std::max<int64_t>(1, chunks);

  const bool bos = measures_with_bos(cfg.measure.bos, cfg.data);
  auto inputs = batches.measure_inputs(cfg.measure.sequences, cfg.measure.T, cfg.measure.input, bos);
  std::vector<SinkReport> parts;
  for (int64_t b = 0; b < inputs.size(0); b += 25)
    parts.push_back(measure_model(model, inputs.narrow(0, b, std::min<int64_t>(25, inputs.size(0) - b)),
                                  cfg.measure.positions, cfg.measure.eps, cfg.measure.massive_activations));
  auto report = report_json(combine_chunks(parts));
  report.erase("sequences");
  m.update(report);
  model.train();
  return m;
}

// The attention of the heads with the largest alpha_1 on the first measurement
// sequence (at most 32 tokens, 4 heads), for the report's maps.
json attention_maps(Transformer& model, const Batches& batches, const RunConfig& cfg, bool bos) {
  torch::NoGradGuard no_grad;
  const int64_t T = std::min<int64_t>(32, cfg.measure.T);
  auto x = batches.measure_inputs(1, T, cfg.measure.input, bos);
  model.eval();
  ForwardResult f = model.forward(x, /*probe=*/true);
  model.train();
  const bool k_column = cfg.model.key_column();
  std::vector<std::tuple<double, int64_t, int64_t>> heads;  // (alpha_1, layer, head)
  std::vector<torch::Tensor> maps;
  for (size_t l = 0; l < f.attention.size(); ++l) {
    auto A = f.attention[l][0];  // [H, T', S]
    if (cfg.model.sink_token) A = A.narrow(1, 1, A.size(1) - 1).narrow(2, 1, A.size(2) - 1);
    if (k_column) A = A.narrow(2, 1, A.size(2) - 1);
    maps.push_back(A);
    for (int64_t h = 0; h < A.size(0); ++h) heads.emplace_back(A[h].select(1, 0).mean().item<double>(), l, h);
  }
  std::sort(heads.rbegin(), heads.rend());
  json out = {{"tokens", std::vector<int64_t>(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + T)}, {"maps", json::array()}};
  for (size_t k = 0; k < std::min<size_t>(4, heads.size()); ++k) {
    auto [alpha, l, h] = heads[k];
    auto A = maps[l][h].to(torch::kCPU, torch::kDouble).contiguous();
    std::vector<std::vector<double>> rows(A.size(0));
    for (int64_t i = 0; i < A.size(0); ++i) rows[i].assign(A[i].data_ptr<double>(), A[i].data_ptr<double>() + A.size(1));
    out["maps"].push_back({{"layer", l}, {"head", h}, {"A", rows}});
  }
  return out;
}

struct Checkpoint {
  int64_t step = 0;
  double loss_sum = 0;
  int64_t loss_count = 0;
};

std::string error_text(const std::exception& e) {
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

void save_checkpoint(const RunDir& dir, Transformer& model, torch::optim::Optimizer& opt, const Checkpoint& c) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, opt_archive;
  model.save(model_archive);
  opt.save(opt_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", opt_archive);
  archive.write("step", torch::tensor(c.step));
  archive.write("loss_sum", torch::tensor(c.loss_sum, torch::kDouble));
  archive.write("loss_count", torch::tensor(c.loss_count));
  FileWriter out(dir.checkpoint());
  archive.save_to([&](const void* data, size_t n) { return out.write(data, n); });
  dir.commit_checkpoint(out);
}

Checkpoint load_checkpoint(const std::string& path, Transformer& model, torch::optim::Optimizer* opt) {
  Checkpoint c;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, model.device);  // written on any device, read onto the run's
    torch::serialize::InputArchive model_archive, opt_archive;
    archive.read("model", model_archive);
    // InputArchive::read set_()s a defined tensor to whatever the file holds
    // (shape and bytes), so a checkpoint of another model would load silently:
    // compare every parameter and buffer with what the plan's model expects.
    std::vector<std::tuple<std::string, std::vector<int64_t>, c10::ScalarType>> expected;
    for (auto& item : model.named_parameters()) expected.emplace_back(item.key(), item.value().sizes().vec(), item.value().scalar_type());
    for (auto& item : model.named_buffers()) expected.emplace_back(item.key(), item.value().sizes().vec(), item.value().scalar_type());
    model.load(model_archive);
    auto shape = [](const std::vector<int64_t>& v) {
      std::string out;
      for (int64_t n : v) out += (out.empty() ? "" : ", ") + std::to_string(n);
      return "[" + out + "]";
    };
    auto loaded = model.named_parameters();
    auto loaded_buffers = model.named_buffers();
    for (const auto& [name, sizes, type] : expected) {
      const torch::Tensor* now = loaded.find(name);
      if (!now) now = loaded_buffers.find(name);
      if (!now || now->sizes().vec() != sizes || now->scalar_type() != type)
        throw std::runtime_error(fmt::format("checkpoint '{}' is from another model: '{}' is {} there, the plan's model has {}",
                                             path, name, now ? shape(now->sizes().vec()) : "missing", shape(sizes)));
    }
    if (opt) {
      archive.read("optimizer", opt_archive);
      opt->load(opt_archive);
    }
    // A fresh tensor per scalar: reading into a defined tensor of another
    // dtype would reinterpret the bytes (a double read as int64).
    auto scalar = [&](const char* key) {
      torch::Tensor t;
      archive.read(key, t);
      return t;
    };
    c.step = scalar("step").item<int64_t>();
    c.loss_sum = scalar("loss_sum").item<double>();
    c.loss_count = scalar("loss_count").item<int64_t>();
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    throw std::runtime_error(fmt::format("checkpoint '{}' is corrupt or from another model: {}", path,
                                         what.substr(0, what.find('\n'))));
  }
  return c;
}

struct Resumed {
  Checkpoint state;
  std::string warning;  // non-empty when the previous checkpoint was used
};

// The latest checkpoint, or the previous one when the latest is missing or
// unreadable (a copy cut short, a disk that lost a write): one bad file
// costs the steps since the checkpoint before it, not the run.
Resumed load_latest_checkpoint(const std::string& latest, const std::string& previous, Transformer& model,
                               torch::optim::Optimizer* opt) {
  std::error_code ec;
  std::string latest_error = fmt::format("checkpoint '{}' is missing", latest);
  if (fs::exists(latest, ec)) {
    try {
      return {load_checkpoint(latest, model, opt), ""};
    } catch (const std::exception& e) {
      latest_error = error_text(e);
    }
  }
  if (!fs::exists(previous, ec)) throw std::runtime_error(latest_error);
  // A failed load may have replaced some tensors already; a successful one
  // replaces every parameter, buffer and optimizer state, so nothing of the
  // bad file survives.
  try {
    Resumed r{load_checkpoint(previous, model, opt), ""};
    r.warning = fmt::format("{}; using the previous checkpoint '{}' (step {})", latest_error, previous, r.state.step);
    return r;
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("no usable checkpoint: {}; and {}", latest_error, error_text(e)));
  }
}

// The vocabulary a checkpoint's embedding has (a plan may leave model.vocab
// to the data); 0 when the file cannot say.
int64_t checkpoint_vocab(const std::string& path) {
  try {
    torch::serialize::InputArchive archive, model_archive, embed_archive;
    archive.load_from(path, torch::kCPU);
    archive.read("model", model_archive);
    model_archive.read("embed", embed_archive);
    torch::Tensor weight;
    embed_archive.read("weight", weight);
    return weight.dim() == 2 ? weight.size(0) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

TrainedModel load_trained_model(const std::string& run_dir) {
  const std::string plan_file = (fs::path(run_dir) / "plan.toml").string();
  std::error_code ec;
  if (!fs::is_regular_file(plan_file, ec))
    throw std::runtime_error(fmt::format("'{}' is not a run directory: it has no plan.toml", run_dir));
  RunConfig cfg = read_config(read_plan(plan_file));
  const std::string latest = (fs::path(run_dir) / "checkpoint" / "state.pt").string();
  const std::string previous = (fs::path(run_dir) / "checkpoint" / "state.prev.pt").string();
  if (!fs::exists(latest, ec) && !fs::exists(previous, ec))
    throw std::runtime_error(fmt::format("run '{}' has no checkpoint ({} is missing): train it first", run_dir, latest));
  if (cfg.model.vocab == 0) cfg.model.vocab = checkpoint_vocab(latest);
  if (cfg.model.vocab == 0) cfg.model.vocab = checkpoint_vocab(previous);
  if (cfg.model.vocab == 0) cfg.model.vocab = 1;  // the load below says what is wrong with the files
  TrainedModel t;
  t.model = std::make_shared<Transformer>(cfg.model);
  auto r = load_latest_checkpoint(latest, previous, *t.model, nullptr);
  t.model->eval();
  t.step = r.state.step;
  t.context = cfg.train.context;
  t.warning = r.warning;
  if (auto s = RunDir::read_summary(run_dir)) t.status = s->value("status", "");
  return t;
}

RunResult run_plan(const Plan& plan, const RunOptions& options) {
  RunResult result;
  // The cache is by content: the same plan under another name (a sweep point
  // equal to a named experiment) reuses the completed run through a link.
  const std::string own = fmt::format("{}/{}", options.out, plan.dir_name());
  DataParallel* workers = options.workers;
  const bool leader = !workers || workers->leader();  // rank 0 alone writes the run directory
  std::error_code ec;
  if (leader && !fs::exists(own, ec) && fs::is_directory(options.out, ec)) {
    for (const auto& e : fs::directory_iterator(options.out, ec)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory(ec) || name.size() < 9 || name.substr(name.size() - 9) != "-" + plan.hash8()) continue;
      RunDir other(e.path().string());
      if (auto s = other.summary(); s && s->value("status", "") == run_status::kCompleted && s->value("hash", "") == plan.hash()) {
        fs::create_directory_symlink(e.path().filename(), own, ec);
        break;
      }
    }
  }
  // One owner per run directory: a second process skips it (or waits). With
  // data-parallel workers rank 0 decides, and every worker follows.
  enum Decision : int64_t { kTrain, kElsewhere, kCached };
  std::optional<RunLock> lock;
  int64_t decision = kTrain;
  if (leader) {
    fs::create_directories(own, ec);
    lock = RunLock::acquire(own, options.wait);
    if (!lock) decision = kElsewhere;
    else if (auto s = RunDir::read_summary(own); s && s->value("status", "") == run_status::kCompleted && s->value("hash", "") == plan.hash())
      decision = kCached;
  }
  if (workers) decision = workers->broadcast({decision})[0];
  result.dir = own;
  if (decision == kElsewhere) {
    result.status = "running elsewhere";
    result.summary = {{"reason", leader ? RunLock::holder(own) : std::string("rank 0 skipped it")}};
    return result;
  }
  if (decision == kCached) {
    result.status = "cached";
    if (leader) result.summary = *RunDir::read_summary(own);
    return result;
  }
  RunDir dir(own, leader);
  // Writes only rank 0 makes; every worker learns whether they failed, so all stop together.
  auto leader_writes = [&](const std::function<void()>& write) {
    std::string failure;
    if (leader) {
      try {
        write();
      } catch (const std::exception& e) {
        failure = error_text(e);
      }
    }
    if (workers && workers->broadcast({failure.empty() ? 0 : 1})[0] && failure.empty())
      failure = "rank 0 could not write the run directory";
    if (!failure.empty()) throw std::runtime_error(failure);
  };
  if (leader) write_atomically(dir.file("plan.toml"), to_toml(plan));
  const auto started = Clock::now();
  json summary = {{"name", plan.name}, {"hash", plan.hash()}, {"status", run_status::kRunning}};
  // Who is running it: a reader on this host can then tell a run in
  // progress from one whose process was killed (SIGKILL, power loss).
  summary["process"] = {{"host", host_name()}, {"pid", static_cast<int64_t>(getpid())}};
  dir.write_summary(summary);
  auto finish = [&](const std::string& status, const std::string& reason) {
    summary.erase("process");
    summary["status"] = status;
    if (!reason.empty()) summary["reason"] = reason;
    summary["wall_s"] = std::chrono::duration<double>(Clock::now() - started).count();
    try {
      dir.write_summary(summary);
    } catch (const std::exception& e) {  // the disk that failed the run may refuse this too
      fmt::print(stderr, "sinkc: {}: status {} not recorded: {}\n", dir.path(), status, e.what());
    }
    dir.log(fmt::format("status: {}{}", status, reason.empty() ? "" : " (" + reason + ")"));
    result.status = status;
    result.summary = summary;
    return result;
  };

  try {
    RunConfig cfg = read_config(plan);
    const int64_t threads = cfg.train.threads > 0    ? cfg.train.threads
                            : options.auto_threads > 0 ? options.auto_threads
                                                       : std::max(1u, std::thread::hardware_concurrency());
    at::set_num_threads(static_cast<int>(threads));
    const torch::Device device = training_device(cfg.train.device, options.gpu);

    TokenData data = load_data(cfg.data, options.data_cache.empty() ? options.out + "/.cache" : options.data_cache);
    if (cfg.model.vocab == 0) cfg.model.vocab = data.vocab;
    if (cfg.model.vocab < data.vocab)
      throw std::runtime_error(fmt::format("model.vocab = {} is smaller than the data's vocabulary ({})", cfg.model.vocab, data.vocab));
    for (auto [token, pos] : cfg.data.fixed)
      if (token >= cfg.model.vocab) throw std::runtime_error(fmt::format("fixed token {} is outside the vocabulary ({})", token, cfg.model.vocab));
    Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, cfg.train.seed);

    torch::manual_seed(static_cast<uint64_t>(cfg.train.seed));
    Transformer model(cfg.model, device);
    auto opt = make_optimizer(model, cfg.train);
    int64_t params = 0;
    for (auto& p : model.parameters()) params += p.numel();
    const std::string backend = model.backend->name();
    // The kernel the run executes, from the same kernels::kernel_spec that `sinkc compile` uses.
    if (const std::string source = model.backend->kernel_source(cfg.train.precision); leader && !source.empty())
      write_atomically(dir.file(model.backend->kernel_file_name()), source);
    dir.log(fmt::format("run {} ({}), {} parameters, data {}", plan.name, plan.hash8(), params, data.description));
    dir.log(fmt::format("attention backend: {}", backend));
    summary["parameters"] = params;
    summary["attention_backend"] = backend;
    summary["threads"] = threads;
    summary["device"] = device.str();
    summary["precision"] = cfg.train.precision;
    if (cfg.train.micro_batch > 0) summary["micro_batch"] = cfg.train.micro_batch;
    if (workers) {
      summary["workers"] = workers->size();
      dir.log(fmt::format("data parallel: {} workers, {} sequences each per step", workers->size(),
                          cfg.train.batch / workers->size()));
    }
    summary["train_tokens_unique"] = batches.train_tokens();

    Checkpoint state;
    auto restore = [&] {
      if (options.resume && (fs::exists(dir.checkpoint(), ec) || fs::exists(dir.previous_checkpoint(), ec))) {
        auto resumed = load_latest_checkpoint(dir.checkpoint(), dir.previous_checkpoint(), model, opt.get());
        state = resumed.state;
        if (!resumed.warning.empty()) {
          dir.log("warning: " + resumed.warning);
          fmt::print(stderr, "sinkc: warning: {}\n", resumed.warning);
          // Else the next checkpoint would rotate the bad file into the
          // previous slot, leaving one good checkpoint instead of two.
          dir.set_aside_latest_checkpoint();
        }
        dir.truncate_metrics(state.step);
        dir.log(fmt::format("resumed at step {}", state.step));
      } else {
        dir.clear_metrics();
      }
    };
    // Rank 0 first (it may set a bad latest checkpoint aside), then the others
    // from the same files; the broadcast is the barrier between them.
    if (leader) restore();
    if (workers) {
      const int64_t leader_step = workers->broadcast({state.step})[0];
      if (!leader) restore();
      if (state.step != leader_step)
        throw std::runtime_error(fmt::format("worker {} resumed at step {}, rank 0 at step {}: the checkpoint changed "
                                             "under them", workers->rank(), state.step, leader_step));
      workers->broadcast_parameters(model.parameters());
    }
    // A checkpoint that cannot be written (a full disk) fails the run, and
    // the ones already on disk stay as they were for --resume.
    int64_t saved_step = options.resume ? state.step : -1;
    auto write_checkpoint = [&] {
      if (state.step == saved_step) return;
      try {
        if (leader) save_checkpoint(dir, model, *opt, state);
      } catch (const std::exception& e) {
        summary["steps_done"] = state.step;
        summary["tokens"] = state.step * cfg.train.batch * cfg.train.context;
        throw std::runtime_error(fmt::format(
            "checkpoint of step {} not written: {}; {}", state.step, error_text(e),
            saved_step > 0 ? fmt::format("the checkpoint of step {} is intact, continue with --resume", saved_step)
                           : std::string("there is no earlier checkpoint")));
      }
      saved_step = state.step;
    };

    const int64_t steps = cfg.train.steps;
    const int64_t tokens_per_step = cfg.train.batch * cfg.train.context;
    const bool tty = options.progress && isatty(2);
    auto loop_start = Clock::now();
    const int64_t first_step = state.step;
    double last_loss = NAN;
    PendingLosses pending;
    auto last_progress = Clock::now();
    for (int64_t step = state.step; step < steps; ++step) {
      if (options.stop_after >= 0 && step - first_step >= options.stop_after) {
        return finish(run_status::kStopped, fmt::format("stopped after step {}", step));
      }
      const double lr = learning_rate(cfg.train, step);
      set_learning_rate(*opt, lr);
      auto [x, y] = batches.train(step);
      if (workers) x = workers->shard(x), y = workers->shard(y);
      // From page-locked memory the copy is queued; from pageable memory the
      // host would first wait for the GPU to finish the previous step.
      if (device.is_cuda()) x = x.pin_memory().to(device, true), y = y.pin_memory().to(device, true);
      // Micro-batches of equal size, each loss weighted by its share: the
      // accumulated gradient is the whole batch's (every sequence carries the
      // same number of loss positions).
      opt->zero_grad();
      const int64_t rows = x.size(0), micro = cfg.train.micro_batch > 0 ? std::min(cfg.train.micro_batch, rows) : rows;
      torch::Tensor step_loss;
      for (int64_t at = 0; at < rows; at += micro) {
        const int64_t n = std::min(micro, rows - at);
        torch::Tensor loss;
        {
          AutocastScope autocast(cfg.train.precision, device);
          loss = lm_loss(model.forward(x.narrow(0, at, n)).logits, y.narrow(0, at, n), cfg.model.attention.prefix);
        }
        loss = loss.to(torch::kFloat) * (static_cast<double>(n) / rows);
        loss.backward();
        step_loss = step_loss.defined() ? step_loss + loss.detach() : loss.detach();
      }
      pending.add(step, step_loss);
      bool stop = interrupt_requested();
      const bool final_step = step + 1 == steps;
      const bool measure_due = final_step || (cfg.measure.every > 0 && (step + 1) % cfg.measure.every == 0);
      const bool checkpoint_due = final_step || (cfg.train.checkpoint_every > 0 && (step + 1) % cfg.train.checkpoint_every == 0);
      const bool log_due = (step + 1) % std::max<int64_t>(1, steps / 10) == 0;
      const bool progress_due = tty && Clock::now() - last_progress > std::chrono::milliseconds(250);
      // Workers agree every step on the loss and on stopping: a signal one of
      // them missed would leave the others waiting in the next all-reduce.
      // Alone, the losses are read when something shows or keeps them, and a
      // non-finite one is found there, before anything is written.
      if (workers || stop || measure_due || checkpoint_due || log_due || progress_due) {
        auto losses = pending.read();
        std::optional<int64_t> diverged_at = losses.first_non_finite;
        if (workers) {
          auto agreed = workers->sum({diverged_at ? NAN : losses.last, stop ? 1.0 : 0.0});
          losses.last = losses.sum = agreed[0] / workers->size();
          losses.count = 1;
          stop = agreed[1] > 0;
          if (!std::isfinite(losses.last)) diverged_at = step;
        }
        if (diverged_at) {
          summary["steps_done"] = *diverged_at;
          summary["tokens"] = *diverged_at * tokens_per_step;
          return finish(run_status::kDiverged, fmt::format("non-finite loss at step {}", *diverged_at + 1));
        }
        state.loss_sum += losses.sum;
        state.loss_count += losses.count;
        last_loss = losses.last;
        last_progress = Clock::now();
      }
      if (workers) workers->average_gradients(model.parameters());
      if (cfg.train.clip > 0) clip_gradient_norm(model.parameters(), cfg.train.clip);
      opt->step();
      state.step = step + 1;

      const double elapsed = std::chrono::duration<double>(Clock::now() - loop_start).count();
      const double tps = (state.step - first_step) * tokens_per_step / std::max(elapsed, 1e-9);
      const double eta = (steps - state.step) * tokens_per_step / std::max(tps, 1e-9);
      std::string line = fmt::format("{} step {}/{} loss {:.4f} lr {:.2e} {:.1f}k tok/s ETA {}", plan.name, state.step, steps,
                                     last_loss, lr, tps / 1000, duration(eta));
      if (progress_due) fmt::print(stderr, "\r{:<100}", line);
      if (log_due) dir.log(line);

      if (measure_due) {
        json m = evaluate(model, batches, cfg);
        m["step"] = state.step;
        m["tokens"] = state.step * tokens_per_step;
        m["lr"] = lr;
        m["train_loss"] = state.loss_sum / std::max<int64_t>(1, state.loss_count);
        m["elapsed_s"] = elapsed;
        m["tokens_per_s"] = tps;
        state.loss_sum = 0;
        state.loss_count = 0;
        leader_writes([&] { dir.append_metrics(m); });
        summary["final"] = m;
        if (!std::isfinite(m["valid_loss"].get<double>())) {
          summary["steps_done"] = state.step;
          return finish(run_status::kDiverged, fmt::format("non-finite validation loss at step {}", state.step));
        }
      }
      if (checkpoint_due) leader_writes(write_checkpoint);
      if (stop && !final_step) {
        leader_writes(write_checkpoint);
        if (tty) fmt::print(stderr, "\n");
        summary["steps_done"] = state.step;
        summary["tokens"] = state.step * tokens_per_step;
        return finish(run_status::kInterrupted, fmt::format("interrupted after step {}; continue with --resume", state.step));
      }
    }
    if (tty) fmt::print(stderr, "\n");
    const bool bos = measures_with_bos(cfg.measure.bos, cfg.data);
    leader_writes([&] { write_atomically(dir.file("attention_maps.json"), attention_maps(model, batches, cfg, bos).dump() + "\n"); });
    const double elapsed = std::chrono::duration<double>(Clock::now() - loop_start).count();
    summary["steps_done"] = steps;
    summary["tokens"] = steps * tokens_per_step;
    summary["train_wall_s"] = elapsed;
    summary["tokens_per_s"] = (steps - first_step) * tokens_per_step / std::max(elapsed, 1e-9);
    return finish(run_status::kCompleted, "");
  } catch (const std::exception& e) {
    return finish(run_status::kFailed, error_text(e).substr(0, 2000));
  }
}

}  // namespace sink::rt
