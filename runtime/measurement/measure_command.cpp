#include "runtime/measurement/measure_command.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>

#include "plan/run_config.h"
#include "plan/run_record.h"
#include "plan/visibility.h"
#include "runtime/attention/attention.h"
#include "runtime/data/corpus.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/tokenizer.h"
#include "runtime/interop/hf_model.h"
#include "runtime/interop/llama2c.h"
#include "runtime/measurement/measure.h"
#include "runtime/measurement/sink_costs.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/train.h"
#include "support/installation.h"

namespace sink::rt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What an external checkpoint (not a run) needs from the input builder.
struct Vocabulary {
  int64_t size = 0;
  int64_t bos = -1;                                       // -1: the checkpoint names no BOS
  std::function<std::unique_ptr<Tokenizer>()> tokenizer;  // for natural input; throws when there is none
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("--text-file {}: cannot read", path));
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<int32_t> read_ids(const std::string& path, int64_t vocab) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("--ids {}: cannot read", path));
  std::vector<int32_t> ids;
  std::string word;
  for (int64_t count = 1; in >> word; ++count) {
    std::replace(word.begin(), word.end(), ',', ' ');
    std::istringstream parts(word);
    for (std::string part; parts >> part;) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(part, &used);
      } catch (const std::exception&) {
      }
      if (used != part.size() || id < 0 || id >= vocab)
        throw std::runtime_error(
            fmt::format("--ids {}: entry {} ('{}') is not a token id in [0, {})", path, count, part, vocab));
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  if (ids.empty()) throw std::runtime_error(fmt::format("--ids {}: no token ids", path));
  return ids;
}

// n sequences of T tokens from a checkpoint's vocabulary. Natural text and
// ids are cut into consecutive windows (repeated when they are too short,
// which the header says); a BOS, when asked for, takes each window's first slot.
torch::Tensor external_inputs(const MeasureOptions& o, const Vocabulary& vocab, bool bos, std::string& note) {
  if (bos && vocab.bos < 0)
    throw std::runtime_error("--bos with: the checkpoint names no BOS token (config.json has no bos_token_id)");
  const int64_t content = o.T - (bos ? 1 : 0);
  auto x = torch::empty({o.n, o.T}, torch::kLong);
  auto acc = x.accessor<int64_t, 2>();
  std::vector<int32_t> stream;
  if (o.input == "ids") {
    stream = read_ids(o.ids_file, vocab.size);
  } else if (parse_choice<MeasureInput>(o.input) == MeasureInput::natural) {
    auto tokenizer = vocab.tokenizer();
    std::vector<std::string> docs;
    if (!o.text.empty())
      docs = {o.text};
    else if (!o.text_file.empty())
      docs = {read_text_file(o.text_file)};
    else {
      // Held-out prose, not text the model was trained on.
      docs = read_documents(builtin_corpus("default").string(), nullptr);
      note = "text: the builtin corpus";
    }
    // Batches of documents: a tokenizer run as a process pays its start-up once per batch.
    constexpr size_t kBatch = 64;
    for (size_t at = 0; at < docs.size() && static_cast<int64_t>(stream.size()) <= o.n * content; at += kBatch) {
      std::vector<std::string> batch;
      for (size_t d = at; d < std::min(docs.size(), at + kBatch); ++d)
        batch.push_back(docs.size() == 1 ? docs[d] : docs[d].substr(0, 4000));
      for (const auto& ids : tokenizer->encode_all(batch)) stream.insert(stream.end(), ids.begin(), ids.end());
    }
    if (stream.empty()) throw std::runtime_error("the text tokenizes to no tokens");
  }
  if (!stream.empty()) {
    if (static_cast<int64_t>(stream.size()) < o.n * content)
      note += fmt::format("{}{} tokens for {} x {}: the windows repeat", note.empty() ? "" : "; ", stream.size(), o.n,
                          content);
    for (int64_t b = 0; b < o.n; ++b) {
      int64_t t = 0;
      if (bos) acc[b][t++] = vocab.bos;
      for (int64_t c = 0; t < o.T; ++t, ++c) acc[b][t] = stream[static_cast<size_t>(b * content + c) % stream.size()];
    }
    return x;
  }
  std::mt19937_64 rng(0);
  std::uniform_int_distribution<int64_t> tok(std::min<int64_t>(3, vocab.size - 1), vocab.size - 1);
  const bool random = parse_choice<MeasureInput>(o.input) == MeasureInput::random;
  for (int64_t b = 0; b < o.n; ++b) {
    int64_t t = 0, repeated = tok(rng);
    if (bos) acc[b][t++] = vocab.bos;
    for (; t < o.T; ++t) acc[b][t] = random ? tok(rng) : repeated;
  }
  return x;
}

void print_text(const std::string& header, const SinkReport& r, double eps) {
  fmt::print("{}\n", header);
  fmt::print("alpha_1 per layer (rows) and head (columns), eps = {}\n", eps);
  for (size_t l = 0; l < r.alpha.size(); ++l) {
    fmt::print("  L{:<3}", l);
    for (double a : r.alpha[l]) fmt::print(" {:7.4f}", a);
    fmt::print("\n");
  }
  for (auto& [k, v] : r.sink) fmt::print("Sink_{}^{} = {:.3f} %\n", k, eps, v);
  if (r.sink_star >= 0) fmt::print("Sink_*^{} = {:.3f} %\n", eps, r.sink_star);
  if (r.sink_logit >= 0) fmt::print("Sink_logit^{} = {:.3f} %\n", eps, r.sink_logit);
  auto per_layer = [](const char* what, const std::vector<double>& values) {
    if (values.empty()) return;
    fmt::print("{} per layer:", what);
    for (double v : values) fmt::print(" {:.3f}", v);
    fmt::print("\n");
  };
  per_layer("massive-activation ratio |h_1| / mean |h_t>1|", r.massive);
  per_layer("max |activation|", r.max_activation);
  per_layer("mean gate", r.gate);
  per_layer("excess kurtosis of the residual stream", excess_kurtosis(r.residual));
  per_layer("max |attention output|", max_abs(r.attention_output));
  per_layer("excess kurtosis of the attention output", excess_kurtosis(r.attention_output));
  auto per_head = [](const char* what, const std::vector<std::vector<double>>& table) {
    if (table.empty()) return;
    fmt::print("{} per layer (rows) and head (columns)\n", what);
    for (size_t l = 0; l < table.size(); ++l) {
      fmt::print("  L{:<3}", l);
      for (double v : table[l]) fmt::print(" {:7.4f}", v);
      fmt::print("\n");
    }
  };
  per_head("sink-logit share of each row", r.sink_logit_share);
  per_head("token 1: |k_1| / mean |k_t>1|", r.key_norm_ratio);
  per_head("token 1: |v_1| / mean |v_t>1|", r.value_norm_ratio);
  per_head("token 1: mean cos(q_t, k_1)", r.query_key_cos);
}

// The next-token loss on the measured inputs: in full (no keep, bits 0), under the window keeping `keep` first
// tokens, or with the linear layers fake-quantized to `bits`.
using CostLoss = std::function<double(std::optional<int64_t> keep, int64_t bits)>;

// The loss on inputs of the measured kind `factor` times as long (a number), or why there is none (a string).
using LongerLoss = std::function<json(int64_t factor)>;

// What a sink costs on inputs whose loss reads `length` positions, under the keys of plan/run_record.h (valid_loss:
// the full loss on these inputs).
json sink_costs_json(const MeasureOptions& o, int64_t length, const CostLoss& loss, const LongerLoss& longer) {
  namespace key = run_record::eval;
  json m;
  m[key::kValidLoss] = loss(std::nullopt, 0);
  if (!o.window_keeps.empty()) {
    json losses = json::object();
    for (int64_t keep : o.window_keeps) losses[std::to_string(keep)] = loss(keep, 0);
    MeasureConfig window;
    window.window = o.window;
    m[key::kWindowedLoss] = {{"window", window.window_size(length)}, {"loss", losses}};
  }
  if (!o.quantized_bits.empty()) {
    json losses = json::object();
    for (int64_t bits : o.quantized_bits) losses[fmt::format("w{}a{}", bits, bits)] = loss(std::nullopt, bits);
    m[key::kQuantizedLoss] = losses;
  }
  if (!o.longer_contexts.empty()) {
    json losses = json::object();
    for (int64_t factor : o.longer_contexts) losses[std::to_string(factor)] = longer(factor);
    m[key::kLongerContextLoss] = losses;
  }
  return m;
}

// The measured inputs' options for inputs `factor` times as long: as many tokens, in fewer sequences.
MeasureOptions longer_inputs(const MeasureOptions& o, int64_t factor) {
  MeasureOptions longer = o;
  longer.T = factor * o.T;
  longer.n = std::max<int64_t>(1, o.n / factor);
  return longer;
}

// A sinklab model's loss on `inputs(factor)` [n, factor T], or why its positions cannot reach them.
LongerLoss transformer_longer_loss(Transformer& model, const std::function<torch::Tensor(int64_t)>& inputs) {
  return [&model, inputs](int64_t factor) -> json {
    const torch::Tensor x = inputs(factor);
    const int64_t length = x.size(1) - 1;
    if (std::string why = longer_context_obstacle(model.cfg, length); !why.empty()) return why;
    torch::NoGradGuard no_grad;
    model.eval();
    return chunked_loss(model, x.narrow(1, 0, length), x.narrow(1, 1, length), 0, 16);
  };
}

// A sinklab model's loss (a run's or a llama2.c checkpoint's) on x [n, T], as a run's evaluation computes it.
CostLoss transformer_loss(Transformer& model, const torch::Tensor& x, const MeasureOptions& o) {
  RunConfig cfg;
  cfg.model = model.cfg;
  cfg.train.context = x.size(1) - 1;
  cfg.measure.window = o.window;
  auto costs = std::make_shared<SinkCosts>(cfg);
  const auto inputs = x.narrow(1, 0, x.size(1) - 1), targets = x.narrow(1, 1, x.size(1) - 1);
  return [&model, costs, inputs, targets](std::optional<int64_t> keep, int64_t bits) {
    torch::NoGradGuard no_grad;
    model.eval();
    if (keep) return costs->windowed_loss(model, inputs, targets, 16, *keep);
    return bits ? quantized_loss(model, inputs, targets, 0, 16, bits) : chunked_loss(model, inputs, targets, 0, 16);
  };
}

// A Hugging Face checkpoint's loss on x [n, T], its attention limited by the window's mask.
CostLoss hf_loss(const HfModel& model, const torch::Tensor& x, const MeasureOptions& o) {
  const int64_t length = x.size(1) - 1;
  const auto inputs = x.narrow(1, 0, length), targets = x.narrow(1, 1, length);
  MeasureConfig window;
  window.window = o.window;
  const int64_t keys = window.window_size(length);
  return [&model, inputs, targets, keys, length](std::optional<int64_t> keep, int64_t bits) {
    torch::Tensor allowed;
    if (keep) {
      AttentionConfig a;
      a.rule = streaming_window(keys, *keep);
      allowed = allowed_pairs(a, length);
    }
    return model.loss(inputs, targets, allowed, bits);
  };
}

void print_costs(const json& m) {
  namespace key = run_record::eval;
  if (!m.contains(key::kValidLoss)) return;
  const double full = m[key::kValidLoss];
  fmt::print("next-token loss on these inputs: {:.4f}\n", full);
  if (m.contains(key::kWindowedLoss))
    for (const auto& [keep, loss] : m[key::kWindowedLoss]["loss"].items())
      fmt::print("  window of {} keys keeping {} first: {:.4f} ({:+.4f})\n",
                 m[key::kWindowedLoss]["window"].get<int64_t>(), keep, loss.get<double>(), loss.get<double>() - full);
  if (m.contains(key::kQuantizedLoss))
    for (const auto& [setting, loss] : m[key::kQuantizedLoss].items())
      fmt::print("  {} fake quantization: {:.4f} ({:+.4f})\n", setting, loss.get<double>(), loss.get<double>() - full);
  if (m.contains(key::kLongerContextLoss))
    for (const auto& [factor, loss] : m[key::kLongerContextLoss].items()) {
      if (loss.is_string())
        fmt::print("  inputs {}x as long: no loss ({})\n", factor, loss.get<std::string>());
      else
        fmt::print("  inputs {}x as long: {:.4f} ({:+.4f})\n", factor, loss.get<double>(), loss.get<double>() - full);
    }
}

void print(const MeasureOptions& o, json about, const std::string& header, const SinkReport& r, bool bos,
           const std::string& note, const json& costs) {
  if (o.format == "json") {
    about["target"] = o.target;
    about["input"] = o.input;
    about["T"] = o.T;
    about["n"] = o.n;
    about["bos"] = bos;
    about["eps"] = o.eps;
    about["positions"] = o.positions;
    if (!note.empty()) about["note"] = note;
    about.update(report_json(r));
    about.update(costs);
    fmt::print("{}\n", about.dump(2));
    return;
  }
  print_text(fmt::format("{}, input {}, T = {}, {} sequences, {} BOS{}", header, o.input, o.T, o.n,
                         bos ? "with" : "without", note.empty() ? "" : " (" + note + ")"),
             r, o.eps);
  print_costs(costs);
}

int measure_run(MeasureOptions& o) {
  Plan plan = read_plan((fs::path(o.target) / "plan.toml").string());
  auto cfg = read_config(plan);
  auto data = load_data(cfg.data, (fs::path(o.target).parent_path() / ".cache").string());
  // The latest usable checkpoint: a corrupt latest falls back to the previous, as --resume does.
  TrainedModel trained = load_trained_model(o.target);
  if (!trained.warning.empty()) fmt::print(stderr, "sinkc: {}\n", trained.warning);
  Batches batches(data, cfg.data, cfg.train.context, 1, cfg.train.seed);
  if (o.input.empty()) o.input = name_of(cfg.measure.input);
  const bool bos = measures_with_bos(o.bos.empty() ? cfg.measure.bos : parse_choice<MeasureBos>(o.bos), cfg.data);
  auto x = batches.measure_inputs(o.n, o.T, parse_choice<MeasureInput>(o.input), bos);
  std::vector<SinkReport> parts;
  for (int64_t b = 0; b < o.n; b += 25)
    parts.push_back(
        measure_model(*trained.model, x.narrow(0, b, std::min<int64_t>(25, o.n - b)), o.positions, o.eps, true, true));
  json about = {{"kind", "run"}, {"run", plan.name}, {"hash", plan.hash8()}, {"step", trained.step}};
  const MeasureInput input = parse_choice<MeasureInput>(o.input);
  const auto longer = [&](int64_t factor) {
    const MeasureOptions l = longer_inputs(o, factor);
    return batches.measure_inputs(l.n, l.T, input, bos);
  };
  print(o, about, fmt::format("{} ({}), step {}", plan.name, plan.hash8(), trained.step), combine_chunks(parts), bos,
        "",
        sink_costs_json(o, o.T - 1, transformer_loss(*trained.model, x, o),
                        transformer_longer_loss(*trained.model, longer)));
  return 0;
}

// A checkpoint has no training data for `auto` to follow: it measures without.
bool checkpoint_bos(const MeasureOptions& o) {
  return !o.bos.empty() && parse_choice<MeasureBos>(o.bos) == MeasureBos::with;
}

int measure_llama2c(MeasureOptions& o) {
  auto loaded = load_llama2c(o.target);
  const auto& c = loaded.config;
  Vocabulary vocab{c.vocab, 1, [&] {
                     std::string path =
                         o.tokenizer.empty() ? (fs::path(o.target).parent_path() / "tok512.bin").string() : o.tokenizer;
                     return llama2c_tokenizer(path, c.vocab);
                   }};
  const bool bos = checkpoint_bos(o);
  std::string note;
  auto x = external_inputs(o, vocab, bos, note);
  json about = {
      {"kind", "llama2c"},
      {"model", {{"d", c.d}, {"layers", c.layers}, {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"vocab", c.vocab}}}};
  auto header = fmt::format("{} (llama2.c: d {}, {} layers, {} heads, {} kv heads)", o.target, c.d, c.layers, c.heads,
                            c.kv_heads);
  const auto longer = [&](int64_t factor) {
    std::string unused;
    return external_inputs(longer_inputs(o, factor), vocab, bos, unused);
  };
  print(o, about, header, measure_model(*loaded.model, x, o.positions, o.eps, true, true), bos, note,
        sink_costs_json(o, o.T - 1, transformer_loss(*loaded.model, x, o),
                        transformer_longer_loss(*loaded.model, longer)));
  return 0;
}

int measure_hf(MeasureOptions& o) {
  HfModel model(o.target);
  const auto& c = model.config();
  // SentencePiece's tokenizer.model when there is one (LLaMA 1/2, Mistral), else Hugging Face's tokenizer.json
  // through its own library (byte-level BPE: GPT-2, Pythia, OPT).
  Vocabulary vocab{c.vocab, c.bos_id, [&]() -> std::unique_ptr<Tokenizer> {
                     const fs::path spm = fs::path(o.target) / "tokenizer.model";
                     const fs::path hf = fs::path(o.target) / "tokenizer.json";
                     if (fs::exists(spm)) return sentencepiece_model_tokenizer(spm.string(), c.vocab);
                     if (fs::exists(hf)) return hf_tokenizer(hf.string(), c.vocab);
                     throw std::runtime_error(fmt::format(
                         "{} has no SentencePiece tokenizer.model and no Hugging Face tokenizer.json: tokenize the "
                         "text with the model's tokenizer and pass the ids with --ids FILE",
                         o.target));
                   }};
  const bool bos = checkpoint_bos(o);
  std::string note;
  auto x = external_inputs(o, vocab, bos, note);
  json about = {{"kind", "huggingface"},
                {"model",
                 {{"model_type", c.model_type},
                  {"d", c.d},
                  {"layers", c.layers},
                  {"heads", c.heads},
                  {"kv_heads", c.kv_heads},
                  {"head_dim", c.head_dim},
                  {"vocab", c.vocab}}}};
  auto header = fmt::format("{} (Hugging Face {}: d {}, {} layers, {} heads, {} kv heads)", o.target, c.model_type, c.d,
                            c.layers, c.heads, c.kv_heads);
  // A folder of the decoder layers alone (no final norm or LM head) is measured without its losses.
  json costs = json::object();
  try {
    // Past a model's learned positions, its own error says how many it has.
    const auto longer = [&](int64_t factor) -> json {
      std::string unused;
      const torch::Tensor lx = external_inputs(longer_inputs(o, factor), vocab, bos, unused);
      const int64_t length = lx.size(1) - 1;
      try {
        return model.loss(lx.narrow(1, 0, length), lx.narrow(1, 1, length), {}, 0);
      } catch (const std::runtime_error& e) {
        return e.what();
      }
    };
    costs = sink_costs_json(o, o.T - 1, hf_loss(model, x, o), longer);
  } catch (const std::runtime_error& e) {
    note += fmt::format("{}no losses: {}", note.empty() ? "" : "; ", e.what());
  }
  print(o, about, header, measure_hf_model(model, x, o.positions, o.eps), bos, note, costs);
  return 0;
}

}  // namespace

int measure_command(MeasureOptions o) {
  if (o.positions.empty()) o.positions = {1};
  if (!o.ids_file.empty()) {
    if (!o.input.empty() && o.input != "ids")
      throw std::runtime_error("--ids FILE is an input: leave out --input " + o.input);
    o.input = "ids";
  }
  if (o.input == "ids" && o.ids_file.empty()) throw std::runtime_error("--input ids needs --ids FILE");
  if (!o.text.empty() || !o.text_file.empty()) {
    if (!o.text.empty() && !o.text_file.empty()) throw std::runtime_error("give --text or --text-file, not both");
    if (!o.input.empty() && o.input != name_of(MeasureInput::natural))
      throw std::runtime_error("--text is natural input: leave out --input " + o.input);
    o.input = name_of(MeasureInput::natural);
  }
  torch::manual_seed(0);
  const fs::path target(o.target);
  if (fs::is_directory(target) && fs::exists(target / "plan.toml")) {
    if (!o.text.empty() || !o.text_file.empty() || o.input == "ids")
      throw std::runtime_error("--text and --ids are for checkpoints: a run measures inputs from its own data");
    return measure_run(o);
  }
  if (o.input.empty()) o.input = name_of(MeasureInput::random);
  if (fs::is_directory(target) && fs::exists(target / "config.json")) return measure_hf(o);
  if (fs::is_directory(target))
    throw std::runtime_error(
        fmt::format("{}: neither a run directory (plan.toml) nor a Hugging Face model folder "
                    "(config.json + *.safetensors)",
                    o.target));
  return measure_llama2c(o);
}

}  // namespace sink::rt
