#include "plan/schema.h"

#include <cmath>
#include <fmt/format.h>

#include "plan/choices.h"
#include "plan/normalizers.h"
#include "plan/score_functions.h"

namespace sink {
namespace {

constexpr double kBig = 1e15;

TypeSpec int_in(double lo, double hi) {
  TypeSpec t;
  t.type = Type::Int;
  t.min = lo;
  t.max = hi;
  return t;
}
TypeSpec count_in(double lo, double hi) {
  TypeSpec t;
  t.type = Type::Count;
  t.min = lo;
  t.max = hi;
  return t;
}
TypeSpec float_in(double lo, double hi, bool open = false) {
  TypeSpec t;
  t.type = Type::Float;
  t.min = lo;
  t.max = hi;
  t.min_open = open;
  return t;
}
TypeSpec boolean() {
  TypeSpec t;
  t.type = Type::Bool;
  return t;
}
TypeSpec text() {
  TypeSpec t;
  t.type = Type::String;
  return t;
}
TypeSpec one_of(std::vector<std::string> c) {
  TypeSpec t;
  t.type = Type::Enum;
  t.choices = std::move(c);
  return t;
}
template <class E>
TypeSpec one_of() {
  return one_of(choice_names<E>());
}
TypeSpec int_list(double lo, double hi, int len = 0) {
  TypeSpec t;
  t.type = Type::IntList;
  t.min = lo;
  t.max = hi;
  t.list_len = len;
  return t;
}
TypeSpec float_list(double lo, double hi, int len = 0) {
  TypeSpec t;
  t.type = Type::FloatList;
  t.min = lo;
  t.max = hi;
  t.list_len = len;
  return t;
}
TypeSpec optional_int(double lo, double hi) {
  TypeSpec t;
  t.type = Type::OptionalInt;
  t.min = lo;
  t.max = hi;
  return t;
}
TypeSpec number_or(std::vector<std::string> keywords, double lo, double hi) {
  TypeSpec t;
  t.type = Type::NumberOr;
  t.choices = std::move(keywords);
  t.min = lo;
  t.max = hi;
  return t;
}
TypeSpec count_or(std::vector<std::string> keywords, double lo, double hi) {
  TypeSpec t = number_or(std::move(keywords), lo, hi);
  t.integral = true;
  return t;
}
TypeSpec variant(std::vector<TypeSpec::Form> forms) {
  TypeSpec t;
  t.type = Type::Variant;
  t.forms = std::move(forms);
  return t;
}
TypeSpec::Form form(std::string name, std::string doc, std::vector<Param> params = {}) {
  return {std::move(name), std::move(params), std::move(doc)};
}
template <class E>
TypeSpec::Form form(E name, std::string doc, std::vector<Param> params = {}) {
  return form(name_of(name), std::move(doc), std::move(params));
}
Param param(std::string name, TypeSpec spec, Value def) { return {std::move(name), std::move(spec), std::move(def)}; }
template <class E>
Value enum_value(E e) {
  return Value::of_enum(name_of(e));
}
// The keywords of a field that also takes a number or an expression, which
// the enum names `fixed`, its last value.
template <class E>
std::vector<std::string> keywords() {
  std::vector<std::string> names = choice_names<E>();
  names.pop_back();
  return names;
}

// One form per row of the normaliser table (plan/normalizers.h).
TypeSpec normalize_forms() {
  std::vector<TypeSpec::Form> forms;
  for (const Normalizer& n : normalizers()) {
    std::vector<Param> params;
    for (const auto& p : n.parameters)
      params.push_back(param(p.name, float_in(p.low, p.high, true), Value::of_float(p.default_value)));
    std::string doc = n.formula + (n.source == "the paper" ? "" : " (" + n.source + ")");
    forms.push_back(form(n.name, doc, std::move(params)));
  }
  return variant(std::move(forms));
}

std::vector<Field> build() {
  TypeSpec score;
  score.type = Type::ScoreExpr;
  TypeSpec vec;
  vec.type = Type::VectorExpr;
  vec.choices = keywords<VStar>();
  TypeSpec fixes;
  fixes.type = Type::FixList;
  fixes.min = 1;
  fixes.max = kBig;

  return {
      // model
      {"model.vocab", int_in(0, 1e7), "vocabulary size; 0 takes it from the tokenizer or synthetic corpus"},
      {"model.d", int_in(1, 65536), "model width d"},
      {"model.layers", int_in(1, 1024), "number of transformer blocks L"},
      {"model.heads", int_in(1, 1024), "attention heads H per block; d_head = d / H"},
      {"model.kv_heads", int_in(0, 1024), "key/value heads (grouped-query attention); 0 = same as heads"},
      {"model.ffn", one_of<Ffn>(), "feed-forward activation (the *glu forms are gated)"},
      {"model.ffn_hidden", int_in(1, 1e6), "feed-forward hidden size"},
      {"model.pe",
       variant({form(PosEmbedding::nope, "no positional embedding"),
                form(PosEmbedding::sinusoidal, "fixed absolute sinusoidal embedding added to the input"),
                form(PosEmbedding::learned, "learned absolute embedding added to the input"),
                form(PosEmbedding::relative, "T5 relative bias: learned per-head bucket table",
                     {param("buckets", int_in(1, 4096), Value::of_int(32)),
                      param("max_distance", int_in(1, 1e7), Value::of_int(128))}),
                form(PosEmbedding::alibi, "ALiBi linear bias, slopes 2^(-8h/H)"),
                form(PosEmbedding::rope, "rotary embedding of q and k",
                     {param("theta", float_in(0, 1e12, true), Value::of_float(10000))})}),
       "positional embedding"},
      {"model.norm", one_of<NormKind>(), "normalization layer"},
      {"model.norm_eps", float_in(0, 1, true), "epsilon of the normalization layer"},
      {"model.placement", one_of<NormPlacement>(), "norm placement: pre-norm (paper eq. 2) or post-norm (eq. 3)"},
      {"model.heads_combine", one_of<HeadsCombine>(), "combine heads by concatenation + projection, or by addition"},
      {"model.sink_token", boolean(), "prepend a learnable sink token x* to every sequence"},
      {"model.biases", one_of<Biases>(),
       "attention biases: kv = learnable k* and v*; k = k* with v* fixed; v = o + v*"},
      {"model.bias_shared", boolean(), "one k*/v* per block shared by all heads instead of one per head"},
      {"model.k_dims", int_in(0, 65536), "learnable dimensions of k* (the rest fixed at 0); 0 = all d_head"},
      {"model.v_star", vec,
       "v* for K biases: auto (learned for kv/v, zero for k), learned, zero, or a fixed vector such as 5 * onehot(0) "
       "or 20 * ones / sqrt(d_head)"},
      {"model.tie_embeddings", boolean(), "share the input embedding with the output projection"},
      {"model.init_std", float_in(0, 10, true), "standard deviation of the normal weight initialization"},
      // attention
      {"attention.score", score,
       "score s(x) of x = qk = <phi(q_i), phi(k_j)>/sqrt(d_head) + g(i-j); i, j: the query's and key's positions, "
       "1-based (the first token is 1); n: the number of keys query i sees (i when causal, fewer with a window); "
       "softmax is exp(qk) with normalize = sum"},
      {"attention.kernel",
       variant({form(AttnKernel::identity, "phi(x) = x"), form(AttnKernel::elu1, "phi(x) = elu(x) + 1"),
                form(AttnKernel::mlp, "phi = a two-layer MLP per head",
                     {param("hidden", int_in(1, 65536), Value::of_int(64))})}),
       "kernel phi applied to q and k before the inner product"},
      {"attention.normalize", normalize_forms(), "row normalizer Z"},
      {"attention.scale", float_in(0, 1e6, true), "alpha: each row of normalized attention sums to alpha"},
      {"attention.backend", one_of<Backend>(), "generated kernels, or the LibTorch reference path (the test oracle)"},
      {"attention.gate", one_of<Gate>(),
       "gated attention (Qiu et al. 2025): each head's output times sigmoid(x W_g), x the attention's input; one gate "
       "per "
       "d_head channel (elementwise, G1) or per head (headwise)",
       enum_value(Gate::none)},
      {"attention.sink_logit", number_or(keywords<SinkLogit>(), -1e4, 1e4),
       "a logit b_h per head added to the softmax denominator, exp(b_h) + sum_j exp(x_ij), its column carrying no "
       "value: "
       "learned (from 0, no weight decay; gpt-oss) or a fixed number (0 is softmax+1)",
       enum_value(SinkLogit::none)},
      {"attention.differential", boolean(),
       "differential attention (Ye et al. 2025): A1 - lambda A2 from the two halves of q and k, each head's output "
       "RMS-normalized and scaled by 1 - lambda_init",
       Value::of_bool(false)},
      {"attention.lambda_init", float_in(0, 1), "lambda_init of differential attention", Value::of_float(0.8)},
      // data
      {"data.corpus",
       variant({form(CorpusKind::builtin, "an embedded corpus assembled by the set-up",
                     {param("name", text(), Value::of_string("default"))}),
                form(CorpusKind::file,
                     "plain text, .jsonl (`text` field), .jsonl.zst, or uint16 .bin tokens; globs allowed",
                     {param("path", text(), Value::of_string(""))}),
                form(CorpusKind::synthetic, "generated sequences",
                     {param("kind", one_of<SyntheticKind>(), enum_value(SyntheticKind::bigram_backcopy)),
                      param("vocab", int_in(2, 1e6), Value::of_int(64)),
                      param("triggers", int_in(0, 1e6), Value::of_int(4)),
                      param("offsets", int_list(1, 4096),
                            Value::of_list({Value::of_int(1), Value::of_int(2), Value::of_int(3), Value::of_int(4)})),
                      param("sparsity", float_in(0, 1e6, true), Value::of_float(0.1)),
                      param("seed", int_in(0, 2147483647), Value::of_int(0))})}),
       "training and validation text"},
      {"data.tokenizer",
       variant({form(TokenizerKind::bytes, "UTF-8 bytes (256 symbols plus BOS/EOS)"),
                form(TokenizerKind::sentencepiece, "BPE trained on the corpus once, ids kept in the token cache",
                     {param("vocab", int_in(64, 1e6), Value::of_int(2048))}),
                form(TokenizerKind::llama2c, "a llama2.c tokenizer file (tok*.bin)",
                     {param("path", text(), Value::of_string(""))})}),
       "tokenizer (ignored by synthetic corpora)"},
      {"data.bos", boolean(), "start every chunk with a BOS token"},
      {"data.amount", count_in(0, 1e15),
       "unique training tokens (e.g. 50M tokens); training cycles through them; 0 = the whole corpus"},
      {"data.first_token", one_of<FirstToken>(),
       "random: x1 of every chunk drawn uniformly from the vocabulary (same as random at [1])"},
      {"data.random", int_list(1, kBig),
       "1-based positions whose token is drawn uniformly from the vocabulary in every chunk"},
      {"data.fix", fixes,
       "fixed tokens: `fix token 17 at 2` puts token 17 at position 2 of every chunk (on a synthetic corpus of vocab "
       "V, token V is its BOS)"},
      {"data.valid_fraction", float_in(0, 0.5, true), "share of the corpus held out for validation and measurement"},
      // loss
      {"loss.prefix", int_in(0, kBig),
       "prefix-LM length p: the first p tokens attend bidirectionally and carry no loss; 0 = none"},
      {"loss.window", optional_int(1, kBig), "sliding window w: query i sees keys i-w < j <= i; none = full causal"},
      {"loss.window_keeps", int_in(0, kBig),
       "under the window, the first k tokens stay in every query's sight (StreamingLLM's attention sinks); 0 = none",
       Value::of_int(0)},
      {"loss.window_dilation", int_in(1, kBig),
       "under the window, every d-th key: query i sees keys i, i-d, ..., i-(w-1)d (a dilated window); 1 = every key",
       Value::of_int(1)},
      // optim
      {"optim.lr", float_in(0, 10, true), "peak learning rate"},
      {"optim.schedule",
       variant({form(Schedule::constant, "constant after linear warm-up",
                     {param("warmup", int_in(0, kBig), Value::of_int(0))}),
                form(Schedule::cosine, "linear warm-up, then cosine decay to min_lr",
                     {param("warmup", int_in(0, kBig), Value::of_int(100)),
                      param("min_lr", float_in(0, 10), Value::of_float(0))})}),
       "learning-rate schedule"},
      {"optim.weight_decay", float_in(0, 100), "AdamW decoupled weight decay gamma"},
      {"optim.betas", float_list(0, 0.999999, 2), "AdamW betas"},
      {"optim.eps", float_in(0, 1, true), "AdamW epsilon"},
      {"optim.clip", float_in(0, 1e6), "gradient clipping by global norm; 0 = off"},
      // train
      {"train.steps", int_in(1, 1e9), "optimizer steps"},
      {"train.batch", int_in(1, 1e6), "sequences per step"},
      {"train.context", int_in(2, 1e6), "sequence length (tokens per chunk)"},
      {"train.seed", int_in(0, 2147483647), "seed of initialization, data order and modifications"},
      {"train.seeds", int_in(1, 1000), "repeat the run with this many seeds (seed, seed+1, ...) for noise bars"},
      {"train.checkpoint_every", int_in(0, 1e9), "steps between checkpoints; 0 = only at the end"},
      {"train.threads", int_in(0, 1024), "CPU threads; 0 = all cores"},
      {"train.device", one_of<DeviceKind>(),
       "where to train; not part of the hash, so a run resumes on another device as the same run; which GPU is "
       "chosen when the run starts (sinkc run --gpu N, torchrun's LOCAL_RANK, one per --jobs place)",
       std::nullopt,
       "device = cuda; the GPU is picked when the run starts, not in the spec: sinkc run --gpu N (or "
       "CUDA_VISIBLE_DEVICES), so the same experiment keeps its hash on any GPU",
       enum_value(DeviceKind::cpu)},
      {"train.micro_batch", count_or(keywords<MicroBatch>(), 0, 1e6),
       "sequences per forward/backward pass (per worker), gradients accumulated over train.batch; 0 = all at once; "
       "auto = the largest divisor of the worker's batch that the GPU's memory holds, estimated from the model's "
       "shapes when the run starts (the whole batch on a CPU); the hash reads auto as written, summary.json the "
       "size used",
       Value::of_int(0)},
      {"train.precision", one_of<Precision>(),
       "bf16: the forward under LibTorch's autocast in bfloat16 (matmuls, generated attention kernels); weights, "
       "optimizer state, the loss and the measurements stay fp32; auto = bf16 on a GPU that has it (compute "
       "capability 8.0 or newer), fp32 elsewhere, chosen when the run starts and recorded in summary.json",
       enum_value(Precision::fp32)},
      {"train.log_every", int_in(1, 1e9),
       "steps between train-loss lines: log.txt, the run's live TensorBoard events, and stderr when it is not a "
       "terminal (a Slurm log); how a run reports, not what it trains: not part of the hash",
       Value::of_int(10), "", Value::of_int(10)},
      // measure
      {"measure.every", int_in(0, 1e9), "steps between evaluations (valid loss, sink metrics); 0 = only at the end"},
      {"measure.eps", float_in(0, 1, true), "threshold eps of Sink_k^eps"},
      {"measure.T", int_in(2, 1e6), "length of the measured sequences"},
      {"measure.sequences", int_in(1, 1e6), "held-out sequences measured"},
      {"measure.positions", int_list(1, kBig), "1-based token positions k for Sink_k"},
      {"measure.input", one_of<MeasureInput>(), "held-out text, uniform random tokens, or one token repeated"},
      {"measure.bos", one_of<MeasureBos>(), "measure with a BOS first: auto = as the training data does"},
      {"measure.massive_activations", boolean(), "record the first-token hidden-state norm ratio per layer"},
      // What a sink costs (runtime/measurement/sink_costs.h). Added after plans were first hashed: each is neutral
      // off, so a plan that turns them off hashes as before they existed.
      {"measure.windowed_loss", boolean(),
       "the validation loss under window attention (StreamingLLM's streaming evaluation): measure.window keys, "
       "the first K tokens kept in sight for each K of measure.window_keeps, on the same sequences as valid_loss",
       Value::of_bool(false)},
      {"measure.window", int_in(0, kBig), "keys in the windowed loss's window; 0 = a quarter of train.context",
       Value::of_int(0)},
      {"measure.window_keeps", int_list(0, kBig),
       "first tokens the windowed loss keeps in sight, one loss each (0 = a plain window)",
       Value::of_list({Value::of_int(0), Value::of_int(1), Value::of_int(4)})},
      {"measure.outliers", boolean(),
       "per layer, the largest absolute value and the excess kurtosis of the residual stream and of the attention "
       "output "
       "over the measured sequences",
       Value::of_bool(false)},
      {"measure.quantized_bits", int_list(2, 16),
       "the validation loss after fake quantization of every linear layer in the blocks, one loss per entry b: "
       "weights and inputs b-bit, per-tensor symmetric round-to-nearest (8 = W8A8); [] = none",
       Value::of_list({})},
      {"measure.longer_contexts", int_list(2, 64),
       "the validation loss on sequences this many times train.context long, positions never trained; [] = none",
       Value::of_list({})},
  };
}

}  // namespace

const TypeSpec::Form* TypeSpec::form(const std::string& name) const {
  for (const auto& f : forms)
    if (f.name == name) return &f;
  return nullptr;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::Count: return "count";
    case Type::Bool: return "bool";
    case Type::Enum: return "enum";
    case Type::String: return "string";
    case Type::Variant: return "call";
    case Type::ScoreExpr: return "expression";
    case Type::VectorExpr: return "vector";
    case Type::IntList: return "list of int";
    case Type::FloatList: return "list of float";
    case Type::FixList: return "fix statements";
    case Type::OptionalInt: return "int or none";
    case Type::NumberOr: return "keyword or float";
  }
  return "?";
}

static std::string bound(double v) {
  if (v >= 1e15) return "inf";
  if (v == static_cast<long long>(v)) return std::to_string(static_cast<long long>(v));
  return format_number(v);
}

std::string TypeSpec::describe() const {
  auto range = [&] { return fmt::format("{}{}, {}]", min_open ? "(" : "[", bound(min), bound(max)); };
  switch (type) {
    case Type::Int:
    case Type::Count:
    case Type::Float:
    case Type::OptionalInt: return fmt::format("{} in {}", type_name(type), range());
    case Type::NumberOr:
      return fmt::format("{} or {} in {}", fmt::join(choices, "|"), integral ? "an int" : "a float", range());
    case Type::IntList:
    case Type::FloatList:
      return fmt::format("{}{} in {}", type_name(type), list_len ? fmt::format(" of length {}", list_len) : "",
                         range());
    case Type::Enum: return "one of " + fmt::format("{}", fmt::join(choices, "|"));
    case Type::Variant: {
      std::vector<std::string> names;
      for (const auto& f : forms) {
        std::string s = f.name;
        if (!f.params.empty()) {
          s += "(";
          for (size_t k = 0; k < f.params.size(); ++k) s += (k ? ", " : "") + f.params[k].name;
          s += ")";
        }
        names.push_back(s);
      }
      return fmt::format("{}", fmt::join(names, " | "));
    }
    case Type::VectorExpr: return fmt::format("{} or a vector expression", fmt::join(choices, "|"));
    case Type::ScoreExpr: return "expression of qk, i, j, n";
    default: return type_name(type);
  }
}

const std::vector<Field>& schema() {
  static const std::vector<Field> table = build();
  return table;
}

const Field* find_field(const std::string& path) {
  for (const auto& f : schema())
    if (f.path == path) return &f;
  return nullptr;
}

std::vector<std::string> field_paths() {
  std::vector<std::string> out;
  for (const auto& f : schema()) out.push_back(f.path);
  return out;
}

std::vector<std::string> block_names() {
  std::vector<std::string> out;
  for (const auto& f : schema())
    if (out.empty() || out.back() != f.block()) out.push_back(f.block());
  return out;
}

const ExprRules& score_rules() {
  static const ExprRules rules = [] {
    ExprRules r{{"qk", "i", "j", "n"}, {}};
    for (const auto& f : score_functions()) r.functions.push_back({f.name, f.arity});
    return r;
  }();
  return rules;
}

const ExprRules& vector_rules() {
  static const ExprRules rules{{"ones", "d_head"}, {{"onehot", 1}, {"sqrt", 1}}};
  return rules;
}

bool TypeSpec::admits(double v) const {
  if (std::isnan(v)) return false;
  if (min_open ? v <= min : v < min) return false;
  return v <= max;
}

}  // namespace sink
