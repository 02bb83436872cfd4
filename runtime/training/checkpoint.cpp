#include "runtime/training/checkpoint.h"

#include <filesystem>
#include <fmt/format.h>
#include <tuple>

#include "plan/run_config.h"
#include "plan/run_record.h"
#include "runtime/training/model.h"
#include "runtime/training/run_dir.h"

namespace sink::rt {
namespace fs = std::filesystem;

std::string error_text(const std::exception& e) {
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

namespace {

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
    for (auto& item : model.named_parameters())
      expected.emplace_back(item.key(), item.value().sizes().vec(), item.value().scalar_type());
    for (auto& item : model.named_buffers())
      expected.emplace_back(item.key(), item.value().sizes().vec(), item.value().scalar_type());
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
        throw std::runtime_error(
            fmt::format("checkpoint '{}' is from another model: '{}' is {} there, the plan's model has {}", path, name,
                        now ? shape(now->sizes().vec()) : "missing", shape(sizes)));
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
    throw std::runtime_error(
        fmt::format("checkpoint '{}' is corrupt or from another model: {}", path, what.substr(0, what.find('\n'))));
  }
  return c;
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

TrainedModel load_trained_model(const std::string& run_dir) {
  const std::string plan_file = (fs::path(run_dir) / "plan.toml").string();
  std::error_code ec;
  if (!fs::is_regular_file(plan_file, ec))
    throw std::runtime_error(fmt::format("'{}' is not a run directory: it has no plan.toml", run_dir));
  RunConfig cfg = read_config(read_plan(plan_file));
  const std::string latest = (fs::path(run_dir) / "checkpoint" / "state.pt").string();
  const std::string previous = (fs::path(run_dir) / "checkpoint" / "state.prev.pt").string();
  if (!fs::exists(latest, ec) && !fs::exists(previous, ec))
    throw std::runtime_error(
        fmt::format("run '{}' has no checkpoint ({} is missing): train it first", run_dir, latest));
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
  if (auto s = RunDir::read_summary(run_dir))
    t.status = run_record::parse_status(s->value(run_record::summary::kStatus, ""));
  return t;
}

}  // namespace sink::rt
