#include "compiler/contradictions.h"

#include <fmt/format.h>

#include "plan/normalizers.h"
#include "plan/run_config.h"

namespace sink {
namespace {

class RunView {
 public:
  RunView(const Run& run, Diagnostics& diags) : run_(run), diags_(diags) {}
  const Setting* get(const std::string& path) const {
    auto it = run_.fields.find(path);
    return it == run_.fields.end() ? nullptr : &it->second;
  }
  int64_t i(const std::string& path) const {
    auto* s = get(path);
    return s ? s->value.i : 0;
  }
  double f(const std::string& path) const {
    auto* s = get(path);
    return s ? s->value.number() : 0;
  }
  const Value* v(const std::string& path) const {
    auto* s = get(path);
    return s ? &s->value : nullptr;
  }
  // Nothing when the field is unset or its value not a name of E.
  template <class E>
  std::optional<E> choice(const std::string& path) const {
    auto* s = get(path);
    return s ? find_choice<E>(s->value.s) : std::nullopt;
  }

  // Reports at whichever of the paths was set last in source order within
  // the run's own files, so the caret lands on the line to change.
  void error(std::initializer_list<const char*> paths, const std::string& message, const std::string& hint = "") {
    report(Severity::Error, paths, message, hint);
  }
  void warning(std::initializer_list<const char*> paths, const std::string& message, const std::string& hint = "") {
    report(Severity::Warning, paths, message, hint);
  }

 private:
  void report(Severity severity, std::initializer_list<const char*> paths, const std::string& message,
              const std::string& hint) {
    Span best;
    for (const char* p : paths) {
      const Setting* s = get(p);
      if (!s || !s->origin.valid()) continue;
      if (!best.valid() || prefer(s->origin, best)) best = s->origin;
    }
    if (!best.valid()) best = run_.name_span;
    // Inherited from a preset: say which run of this spec it breaks.
    std::string where = best.file == run_.name_span.file ? "" : fmt::format("in run '{}'", run_.name);
    std::string full_hint = hint.empty() ? where : where.empty() ? hint : where + "; " + hint;
    if (severity == Severity::Error)
      diags_.error(best, message, full_hint);
    else
      diags_.warning(best, message, full_hint);
  }

  // Origins in the run's own file beat origins in presets; later beats earlier.
  bool prefer(const Span& a, const Span& b) const {
    bool a_own = a.file == run_.name_span.file, b_own = b.file == run_.name_span.file;
    if (a_own != b_own) return a_own;
    return std::tie(a.file, a.line, a.col) > std::tie(b.file, b.line, b.col);
  }
  const Run& run_;
  Diagnostics& diags_;
};

// exp(...) overflows without a normalizer to divide it away; polynomial and
// bounded scores train (the paper's identity and sigmoid rows).
bool grows_without_bound(const ExprNode& e) { return mentions_call(e, "exp"); }

void check_run(const Run& run, Diagnostics& diags) {
  RunView r(run, diags);
  const int64_t d = r.i("model.d"), heads = r.i("model.heads"), kv = r.i("model.kv_heads");
  const int64_t context = r.i("train.context");
  if (heads > 0 && d % heads != 0)
    r.error({"model.heads", "model.d"}, fmt::format("heads = {} does not divide d = {}", heads, d));
  const int64_t d_head = heads > 0 ? d / heads : d;
  if (kv > heads)
    r.error({"model.kv_heads", "model.heads"}, fmt::format("kv_heads = {} exceeds heads = {}", kv, heads));
  else if (kv > 0 && heads % kv != 0)
    r.error({"model.kv_heads", "model.heads"}, fmt::format("kv_heads = {} does not divide heads = {}", kv, heads));
  // With heads not dividing d, d_head is meaningless: say the one error.
  const bool d_head_ok = heads > 0 && d % heads == 0;
  if (d_head_ok && r.i("model.k_dims") > d_head)
    r.error({"model.k_dims", "model.d", "model.heads"},
            fmt::format("k_dims = {} exceeds d_head = {}", r.i("model.k_dims"), d_head));
  if (r.choice<PosEmbedding>("model.pe") == PosEmbedding::rope && d_head_ok && d_head % 2 != 0)
    r.error({"model.pe", "model.d", "model.heads"},
            fmt::format("RoPE rotates pairs of dimensions: d_head = {} is odd", d_head));
  if (r.choice<PosEmbedding>("model.pe") == PosEmbedding::learned && r.i("measure.T") > context)
    r.error({"measure.T", "train.context", "model.pe"},
            fmt::format("learned positions stop at context = {}: measure.T = {} cannot be measured", context,
                        r.i("measure.T")));
  const std::optional<Biases> biases = r.choice<Biases>("model.biases");
  const bool key_biases = biases == Biases::k || biases == Biases::kv;
  const Value* vstar = r.v("model.v_star");
  if (vstar && vstar->kind == Value::Kind::Expr && biases != Biases::k)
    r.error({"model.v_star", "model.biases"}, "a fixed v* vector needs biases = k");
  if (vstar && vstar->kind == Value::Kind::Enum && find_choice<VStar>(vstar->s) == VStar::learned &&
      biases == Biases::none)
    r.error({"model.v_star", "model.biases"}, fmt::format("v_star = {} has no effect with biases = none", vstar->s));
  if (r.i("model.k_dims") > 0 && !key_biases)
    r.error({"model.k_dims", "model.biases"}, "k_dims needs key biases (biases = k or kv)");

  // Attention operation.
  const Value* score = r.v("attention.score");
  const Value* norm = r.v("attention.normalize");
  const Normalizer* normalizer = norm ? find_normalizer(norm->s) : nullptr;
  if (score && score->expr && normalizer && !normalizer->bounds_scores && grows_without_bound(*score->expr))
    r.error({"attention.normalize", "attention.score"},
            fmt::format("score {} {} grows without bound and diverges", score->str(),
                        norm->s == "none" ? "without normalization"
                                          : "under normalize = " + norm->s + " (" + normalizer->formula + ")"),
            "use normalize = sum (softmax), or a bounded score such as sigmoid(qk)");
  if (score && score->expr && !mentions_var(*score->expr, "qk"))
    r.error({"attention.score"},
            fmt::format("score {} does not depend on qk: attention would ignore the content", score->str()));

  // The designs beyond the paper, and what they presuppose.
  const bool exp_qk = score && score->expr && is_softmax(*score->expr, "sum");
  const bool softmax = exp_qk && norm && norm->s == "sum";
  // A number there is a fixed logit, and so a sink logit.
  const Value* sink_logit = r.v("attention.sink_logit");
  const bool has_sink_logit = sink_logit && !(sink_logit->kind == Value::Kind::Enum &&
                                              find_choice<SinkLogit>(sink_logit->s) == SinkLogit::none);
  if (has_sink_logit) {
    if (!softmax)
      r.error(
          {"attention.sink_logit", "attention.normalize", "attention.score"},
          fmt::format("sink_logit adds exp(b) to a softmax denominator: it needs score = exp(qk) and normalize = sum, "
                      "not score = {} with normalize = {}",
                      score ? score->str() : "?", norm ? norm->str() : "?"),
          exp_qk ? "" : "for sigmoid attention, a bias inside the score does the same: score = sigmoid(qk - log(64))");
  }
  if (norm && norm->s == "softpick" && !exp_qk)
    r.error({"attention.normalize", "attention.score"},
            fmt::format("softpick rectifies e^x - 1 of the logits x itself: it needs score = exp(qk), not {}",
                        score ? score->str() : "?"));
  if (const Value* diff = r.v("attention.differential"); diff && diff->b) {
    if (!softmax)
      r.error({"attention.differential", "attention.normalize", "attention.score"},
              "differential attention subtracts two softmax maps: it needs score = exp(qk) and normalize = sum");
    if (d_head_ok && d_head % 4 != 0)
      r.error({"attention.differential", "model.d", "model.heads"},
              fmt::format("differential attention splits q and k into two halves of d_head / 2, rotated in pairs: "
                          "d_head = {} is not a multiple of 4",
                          d_head));
    if (key_biases)
      r.error({"attention.differential", "model.biases"},
              fmt::format("biases = {} adds one key k* per head, but differential attention splits every key in two",
                          name_of(*biases)));
    if (has_sink_logit)
      r.error({"attention.differential", "attention.sink_logit"},
              "sink_logit with differential attention is not supported: they are two designs for the same sink; "
              "compare them "
              "as separate runs");
    if (r.choice<AttnKernel>("attention.kernel") == AttnKernel::mlp)
      r.error({"attention.differential", "attention.kernel"},
              "kernel = mlp maps whole queries and keys; differential attention splits them in two");
  }

  // Masks and positions.
  const int64_t prefix = r.i("loss.prefix");
  if (prefix >= context)
    r.error({"loss.prefix", "train.context"}, fmt::format("prefix = {} must be below context = {}", prefix, context));
  if (const Value* w = r.v("loss.window"); w && w->kind == Value::Kind::Int && w->i >= context)
    r.error({"loss.window", "train.context"},
            fmt::format("window = {} covers the whole context = {}: use window = none", w->i, context));
  auto check_positions = [&](const char* path, const Value* list, int64_t limit, const char* limit_name) {
    if (!list) return;
    for (const auto& p : list->items) {
      int64_t pos = p.kind == Value::Kind::List ? p.items[1].i : p.i;
      if (pos > limit) r.error({path, limit_name}, fmt::format("position {} is past {} = {}", pos, limit_name, limit));
    }
  };
  check_positions("data.random", r.v("data.random"), context, "train.context");
  check_positions("data.fix", r.v("data.fix"), context, "train.context");
  check_positions("measure.positions", r.v("measure.positions"), r.i("measure.T"), "measure.T");
  // vocab = 0 takes the size from the data; a synthetic corpus states it,
  // and its BOS is the id after the ordinary tokens (a valid fixed token:
  // specs/sec5_constant_token_tiny.sink moves it to position 2).
  int64_t vocab = r.i("model.vocab");
  std::string vocab_name = "vocab";
  const Value* corpus = r.v("data.corpus");
  const std::optional<CorpusKind> corpus_kind = r.choice<CorpusKind>("data.corpus");
  if (vocab == 0 && corpus_kind == CorpusKind::synthetic && corpus->arg("vocab"))
    vocab = corpus->arg("vocab")->i + 1, vocab_name = "synthetic vocab + BOS";
  if (const Value* fix = r.v("data.fix"); fix && vocab > 0) {
    for (const auto& p : fix->items)
      if (p.items[0].i >= vocab)
        r.error({"data.fix", "model.vocab"},
                fmt::format("token {} is outside the vocabulary ({} = {})", p.items[0].i, vocab_name, vocab));
  }
  if (const Value* fix = r.v("data.fix")) {
    std::map<int64_t, int64_t> at;
    for (const auto& p : fix->items) {
      auto [it, fresh] = at.emplace(p.items[1].i, p.items[0].i);
      if (!fresh && it->second != p.items[0].i)
        r.error({"data.fix"}, fmt::format("position {} is fixed to two different tokens", p.items[1].i));
    }
    if (const Value* rnd = r.v("data.random"))
      for (const auto& q : rnd->items)
        if (at.count(q.i))
          r.error({"data.random", "data.fix"}, fmt::format("position {} is both fixed and random", q.i));
  }
  // Positions count the BOS: with bos = true, position 1 is the BOS itself.
  if (const Value* bos = r.v("data.bos"); bos && bos->b) {
    auto at_one = [](const Value* list) {
      if (!list) return false;
      for (const auto& p : list->items)
        if ((p.kind == Value::Kind::List ? p.items[1].i : p.i) == 1) return true;
      return false;
    };
    if (r.choice<FirstToken>("data.first_token") == FirstToken::random)
      r.warning({"data.first_token", "data.bos"}, "first_token = random replaces the BOS (positions count the BOS)",
                "random at [2] randomizes the first token after the BOS");
    else if (at_one(r.v("data.random")))
      r.warning({"data.random", "data.bos"}, "a random token at position 1 replaces the BOS (positions count the BOS)",
                "the first token after the BOS is position 2");
    if (at_one(r.v("data.fix")))
      r.warning({"data.fix", "data.bos"}, "a fixed token at position 1 replaces the BOS (positions count the BOS)",
                "the first token after the BOS is position 2");
  }
  if (corpus_kind == CorpusKind::synthetic) {
    const Value* offsets = corpus->arg("offsets");
    const Value* triggers = corpus->arg("triggers");
    const Value* voc = corpus->arg("vocab");
    if (offsets && triggers && offsets->items.size() != 1 && static_cast<int64_t>(offsets->items.size()) != triggers->i)
      r.error({"data.corpus"}, fmt::format("synthetic: give one offset or one per trigger ({} triggers, {} offsets)",
                                           triggers->i, offsets->items.size()));
    if (voc && triggers && triggers->i >= voc->i)
      r.error({"data.corpus"},
              fmt::format("synthetic: triggers = {} leaves no ordinary tokens in vocab = {}", triggers->i, voc->i));
  }
  if (corpus_kind == CorpusKind::file && corpus->arg("path")->s.empty())
    r.error({"data.corpus"}, "file(...) needs a path, e.g. file(\"data/*.jsonl.zst\")");
  if (const Value* tok = r.v("data.tokenizer");
      r.choice<TokenizerKind>("data.tokenizer") == TokenizerKind::llama2c && tok->arg("path")->s.empty())
    r.error({"data.tokenizer"}, "llama2c(...) needs the path of a tok*.bin file");
  if (const int64_t micro = r.i("train.micro_batch"); micro > 0 && r.i("train.batch") % micro != 0)
    r.error(
        {"train.micro_batch", "train.batch"},
        fmt::format("micro_batch = {} does not divide batch = {}: every pass must hold the same number of sequences",
                    micro, r.i("train.batch")));
  if (const Value* window = r.v("loss.window");
      r.i("loss.window_keeps") > 0 && (!window || window->kind != Value::Kind::Int))
    r.warning({"loss.window_keeps", "loss.window"},
              fmt::format("window_keeps = {} changes nothing without a window: every query already sees the first "
                          "tokens",
                          r.i("loss.window_keeps")),
              "loss.window = w keeps only the last w keys in sight, and window_keeps the first tokens beside them");
  if (const int64_t dilation = r.i("loss.window_dilation"); dilation > 1) {
    const Value* window = r.v("loss.window");
    if (!window || window->kind != Value::Kind::Int)
      r.warning({"loss.window_dilation", "loss.window"},
                fmt::format("window_dilation = {} changes nothing without a window", dilation),
                "loss.window = w: query i then sees keys i, i-d, ..., i-(w-1)d");
    else if (r.i("loss.prefix") > 0 || r.i("loss.window_keeps") > 0)
      r.error({"loss.window_dilation", "loss.prefix", "loss.window_keeps"},
              "a dilated window is defined alone: not beside a prefix or kept first tokens",
              "window_dilation = 1 to keep the prefix or the kept tokens");
  }
  if (r.i("measure.every") > 0 && r.i("measure.every") > r.i("train.steps"))
    r.warning({"measure.every", "train.steps"},
              fmt::format("measure.every = {} is past train.steps = {}: only the final measurement runs",
                          r.i("measure.every"), r.i("train.steps")));
}

}  // namespace

void check_contradictions(const Program& program, Diagnostics& diags) {
  for (const auto& run : program.runs) check_run(run, diags);
}

std::vector<std::string> plan_contradictions(const Plan& plan) {
  Run run;
  run.name = plan.name;
  for (const auto& [path, value] : plan.fields) run.fields[path] = Setting{value, Span{}};
  SourceManager no_sources;
  Diagnostics diags(no_sources);
  check_run(run, diags);
  std::vector<std::string> errors;
  for (const auto& d : diags.all())
    if (d.severity == Severity::Error) errors.push_back(d.message);
  return errors;
}

}  // namespace sink
