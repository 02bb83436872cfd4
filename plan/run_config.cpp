#include "plan/run_config.h"

#include <algorithm>

#include "plan/normalizers.h"

namespace sink {
namespace {

const ExprNode& exp_of_qk() {
  static const ExprNode e{ExprNode::Op::Call, 0, "exp", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
  return e;
}

std::vector<int64_t> ints(const Value& list) {
  std::vector<int64_t> out;
  for (const auto& v : list.items) out.push_back(v.i);
  return out;
}

}  // namespace

bool is_softmax(const ExprNode& score, const std::string& normalize) {
  return normalize == "sum" && score == exp_of_qk();
}
bool is_shifted_exp(const ExprNode& score, const std::string& normalize) {
  const Normalizer* n = find_normalizer(normalize);
  return n && n->scale_free && score == exp_of_qk();
}

bool measures_with_bos(MeasureBos mode, const DataConfig& data) {
  return mode == MeasureBos::with || (mode == MeasureBos::auto_ && data.bos);
}

// Plans are lowered (compiler/lower.cpp): kv_heads, v_star, k_dims and the
// random first token are already resolved, so they are read, not re-derived.
RunConfig read_config(const Plan& p) {
  RunConfig c;
  c.name = p.name;
  c.hash = p.hash();

  ModelConfig& m = c.model;
  m.vocab = p.integer("model.vocab");
  m.d = p.integer("model.d");
  m.layers = p.integer("model.layers");
  m.heads = p.integer("model.heads");
  m.kv_heads = p.integer("model.kv_heads");
  if (m.kv_heads < 1 || m.heads % m.kv_heads != 0)
    throw PlanError(p.name + ": model.kv_heads must divide model.heads in a lowered plan");
  m.d_head = m.d / m.heads;
  m.ffn = parse_choice<Ffn>(p.choice("model.ffn"));
  m.ffn_hidden = p.integer("model.ffn_hidden");
  const Value& pe = p.at("model.pe");
  m.pe = parse_choice<PosEmbedding>(pe.s);
  if (m.pe == PosEmbedding::relative)
    m.rel_buckets = pe.arg("buckets")->i, m.rel_max_distance = pe.arg("max_distance")->i;
  if (m.pe == PosEmbedding::rope) m.rope_theta = pe.arg("theta")->number();
  m.norm = parse_choice<NormKind>(p.choice("model.norm"));
  m.norm_eps = p.number("model.norm_eps");
  m.placement = parse_choice<NormPlacement>(p.choice("model.placement"));
  m.heads_combine = parse_choice<HeadsCombine>(p.choice("model.heads_combine"));
  m.sink_token = p.flag("model.sink_token");
  m.biases = parse_choice<Biases>(p.choice("model.biases"));
  m.bias_shared = p.flag("model.bias_shared");
  m.k_dims = p.integer("model.k_dims");
  const Value& vstar = p.at("model.v_star");
  if (vstar.kind == Value::Kind::Expr) {
    m.v_star = VStar::fixed;
    m.v_star_expr = *vstar.expr;
  } else {
    m.v_star = parse_choice<VStar>(vstar.s);
  }
  m.tie_embeddings = p.flag("model.tie_embeddings");
  m.init_std = p.number("model.init_std");

  AttentionConfig& a = m.attention;
  a.score = *p.at("attention.score").expr;
  const Value& kernel = p.at("attention.kernel");
  a.kernel = parse_choice<AttnKernel>(kernel.s);
  if (a.kernel == AttnKernel::mlp) a.kernel_hidden = kernel.arg("hidden")->i;
  const Value& norm = p.at("attention.normalize");
  a.normalize = norm.s;
  if (const Value* p_arg = norm.arg("p")) a.pnorm_p = p_arg->number();
  a.scale = p.number("attention.scale");
  a.shifted_exp = is_shifted_exp(a.score, a.normalize);
  a.rule = visibility(p);
  a.backend = parse_choice<Backend>(p.choice("attention.backend"));
  a.gate = parse_choice<Gate>(p.choice("attention.gate"));
  const Value& sink_logit = p.at("attention.sink_logit");
  a.sink_logit = sink_logit.kind == Value::Kind::Enum ? parse_choice<SinkLogit>(sink_logit.s) : SinkLogit::fixed;
  if (a.sink_logit == SinkLogit::fixed) a.sink_logit_value = sink_logit.number();
  a.differential = p.flag("attention.differential");
  a.lambda_init = p.number("attention.lambda_init");

  DataConfig& d = c.data;
  const Value& corpus = p.at("data.corpus");
  d.corpus = parse_choice<CorpusKind>(corpus.s);
  if (d.corpus == CorpusKind::builtin) d.corpus_arg = corpus.arg("name")->s;
  if (d.corpus == CorpusKind::file) d.corpus_arg = corpus.arg("path")->s;
  if (d.corpus == CorpusKind::synthetic) {
    d.synthetic_kind = parse_choice<SyntheticKind>(corpus.arg("kind")->s);
    d.synthetic_vocab = corpus.arg("vocab")->i;
    d.triggers = corpus.arg("triggers")->i;
    d.offsets = ints(*corpus.arg("offsets"));
    d.sparsity = corpus.arg("sparsity")->number();
    d.synthetic_seed = corpus.arg("seed")->i;
  }
  const Value& tok = p.at("data.tokenizer");
  d.tokenizer = parse_choice<TokenizerKind>(tok.s);
  if (d.tokenizer == TokenizerKind::sentencepiece) d.tokenizer_vocab = tok.arg("vocab")->i;
  if (d.tokenizer == TokenizerKind::llama2c) d.tokenizer_path = tok.arg("path")->s;
  d.bos = p.flag("data.bos");
  d.amount = p.integer("data.amount");
  d.random_positions = ints(p.at("data.random"));
  for (const auto& f : p.at("data.fix").items) d.fixed.emplace_back(f.items[0].i, f.items[1].i);
  d.valid_fraction = p.number("data.valid_fraction");

  TrainConfig& t = c.train;
  t.lr = p.number("optim.lr");
  const Value& schedule = p.at("optim.schedule");
  t.schedule = parse_choice<Schedule>(schedule.s);
  t.warmup = schedule.arg("warmup")->i;
  t.min_lr = t.schedule == Schedule::cosine ? schedule.arg("min_lr")->number() : t.lr;
  t.weight_decay = p.number("optim.weight_decay");
  t.beta1 = p.at("optim.betas").items[0].number();
  t.beta2 = p.at("optim.betas").items[1].number();
  t.eps = p.number("optim.eps");
  t.clip = p.number("optim.clip");
  t.steps = p.integer("train.steps");
  t.batch = p.integer("train.batch");
  t.context = p.integer("train.context");
  t.seed = p.integer("train.seed");
  t.checkpoint_every = p.integer("train.checkpoint_every");
  t.threads = p.integer("train.threads");
  t.device = parse_choice<DeviceKind>(p.choice("train.device"));
  const Value& micro_batch = p.at("train.micro_batch");
  t.micro_batch_auto = micro_batch.kind == Value::Kind::Enum;
  t.micro_batch = t.micro_batch_auto ? 0 : micro_batch.i;
  t.log_every = p.integer("train.log_every");
  t.precision = parse_choice<Precision>(p.choice("train.precision"));
  m.max_positions = std::max(t.context, p.integer("measure.T")) + (m.sink_token ? 1 : 0);

  MeasureConfig& ms = c.measure;
  ms.every = p.integer("measure.every");
  ms.eps = p.number("measure.eps");
  ms.T = p.integer("measure.T");
  ms.sequences = p.integer("measure.sequences");
  ms.positions = ints(p.at("measure.positions"));
  ms.input = parse_choice<MeasureInput>(p.choice("measure.input"));
  ms.bos = parse_choice<MeasureBos>(p.choice("measure.bos"));
  ms.massive_activations = p.flag("measure.massive_activations");
  ms.windowed_loss = p.flag("measure.windowed_loss");
  ms.window = p.integer("measure.window");
  ms.window_keeps = ints(p.at("measure.window_keeps"));
  ms.outliers = p.flag("measure.outliers");
  ms.quantized_bits = ints(p.at("measure.quantized_bits"));
  ms.longer_contexts = ints(p.at("measure.longer_contexts"));
  return c;
}

}  // namespace sink
