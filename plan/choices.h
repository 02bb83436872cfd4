// The enumerated settings of the run configuration. Each list of names is
// written once, here: the C++ enum (read by plan/run_config.h) and the
// schema's row (plan/schema.cpp) are both made from it, so a name added to
// the language cannot be missing from the runtime, and a comparison with a
// misspelt name cannot compile.
#pragma once
#include <cstddef>
#include <fmt/format.h>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sink {

// The names in schema order; an enum's value is its index. A name that is a
// C++ keyword is listed with a trailing underscore (auto_), which its
// spelling drops.
#define SINK_FFN_CHOICES(X) X(relu) X(gelu) X(swish) X(reglu) X(geglu) X(swiglu)
#define SINK_PE_CHOICES(X) X(nope) X(sinusoidal) X(learned) X(relative) X(alibi) X(rope)
#define SINK_NORM_CHOICES(X) X(rmsnorm) X(layernorm)
#define SINK_PLACEMENT_CHOICES(X) X(pre) X(post)
#define SINK_HEADS_COMBINE_CHOICES(X) X(concat) X(add)
#define SINK_BIASES_CHOICES(X) X(none) X(kv) X(k) X(v)
// The keywords, then `fixed`: a vector expression. auto is resolved by
// lowering (compiler/lower.cpp), so a RunConfig never holds it.
#define SINK_V_STAR_CHOICES(X) X(auto_) X(learned) X(zero) X(fixed)
#define SINK_KERNEL_CHOICES(X) X(identity) X(elu1) X(mlp)
#define SINK_BACKEND_CHOICES(X) X(jit) X(reference)
#define SINK_GATE_CHOICES(X) X(none) X(elementwise) X(headwise)
// The keywords, then `fixed`: a number written in their place.
#define SINK_SINK_LOGIT_CHOICES(X) X(none) X(learned) X(fixed)
#define SINK_CORPUS_CHOICES(X) X(builtin) X(file) X(synthetic)
#define SINK_SYNTHETIC_CHOICES(X) X(random) X(repeat) X(bigram_backcopy)
#define SINK_TOKENIZER_CHOICES(X) X(bytes) X(sentencepiece) X(llama2c)
// Lowering turns random into data.random's position 1: only the compiler reads it.
#define SINK_FIRST_TOKEN_CHOICES(X) X(natural) X(random)
#define SINK_SCHEDULE_CHOICES(X) X(constant) X(cosine)
#define SINK_DEVICE_CHOICES(X) X(cpu) X(cuda)
// auto: bf16 on a GPU that has it, else fp32; resolved when a run starts
// (runtime/training/auto_settings.h), so a RunConfig may hold it.
#define SINK_PRECISION_CHOICES(X) X(fp32) X(bf16) X(auto_)
// The keyword, then `fixed`: a number of sequences written in its place.
#define SINK_MICRO_BATCH_CHOICES(X) X(auto_) X(fixed)
#define SINK_MEASURE_INPUT_CHOICES(X) X(natural) X(random) X(repeat)
#define SINK_MEASURE_BOS_CHOICES(X) X(auto_) X(with) X(without)

// Specialised for each enum below: `field` (what an error names) and
// `names`, the spellings in order.
template <class E>
struct Choices;

constexpr std::string_view choice_spelling(std::string_view id) {
  return id.ends_with('_') ? id.substr(0, id.size() - 1) : id;
}

// As std::string: the names are written into JSON, messages and paths.
template <class E>
const std::vector<std::string>& choice_names() {
  static const std::vector<std::string> names(std::begin(Choices<E>::names), std::end(Choices<E>::names));
  return names;
}

template <class E>
const std::string& name_of(E e) {
  return choice_names<E>().at(static_cast<std::size_t>(e));
}

// Nothing for a name that is not one of E's: the checker reads values that
// may be missing or wrong, and reports them itself.
template <class E>
std::optional<E> find_choice(std::string_view name) {
  const std::vector<std::string>& names = choice_names<E>();
  for (std::size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) return static_cast<E>(k);
  return std::nullopt;
}

[[noreturn]] void throw_unknown_choice(std::string_view field, std::string_view value,
                                       const std::vector<std::string>& names);

// std::invalid_argument, naming the field, the value and the choices, for a
// name that is not one of E's.
template <class E>
E parse_choice(std::string_view name) {
  if (const std::optional<E> e = find_choice<E>(name)) return *e;
  throw_unknown_choice(Choices<E>::field, name, choice_names<E>());
}

#define SINK_CHOICE_ENUMERATOR(id) id,
#define SINK_CHOICE_SPELLING(id) ::sink::choice_spelling(#id),

// The JSON hooks because nlohmann would otherwise write an enum as its
// index: on-disk names (summary.json, config.json) stay the names.
#define SINK_CHOICE_ENUM(Enum, path, LIST)                                    \
  enum class Enum { LIST(SINK_CHOICE_ENUMERATOR) };                           \
  template <>                                                                 \
  struct Choices<Enum> {                                                      \
    static constexpr std::string_view field = path;                           \
    static constexpr std::string_view names[] = {LIST(SINK_CHOICE_SPELLING)}; \
  };                                                                          \
  template <class Json>                                                       \
  void to_json(Json& j, Enum e) {                                             \
    j = name_of(e);                                                           \
  }                                                                           \
  template <class Json>                                                       \
  void from_json(const Json& j, Enum& e) {                                    \
    e = parse_choice<Enum>(j.template get<std::string>());                    \
  }

SINK_CHOICE_ENUM(Ffn, "model.ffn", SINK_FFN_CHOICES)
SINK_CHOICE_ENUM(PosEmbedding, "model.pe", SINK_PE_CHOICES)
SINK_CHOICE_ENUM(NormKind, "model.norm", SINK_NORM_CHOICES)
SINK_CHOICE_ENUM(NormPlacement, "model.placement", SINK_PLACEMENT_CHOICES)
SINK_CHOICE_ENUM(HeadsCombine, "model.heads_combine", SINK_HEADS_COMBINE_CHOICES)
SINK_CHOICE_ENUM(Biases, "model.biases", SINK_BIASES_CHOICES)
SINK_CHOICE_ENUM(VStar, "model.v_star", SINK_V_STAR_CHOICES)
SINK_CHOICE_ENUM(AttnKernel, "attention.kernel", SINK_KERNEL_CHOICES)
SINK_CHOICE_ENUM(Backend, "attention.backend", SINK_BACKEND_CHOICES)
SINK_CHOICE_ENUM(Gate, "attention.gate", SINK_GATE_CHOICES)
SINK_CHOICE_ENUM(SinkLogit, "attention.sink_logit", SINK_SINK_LOGIT_CHOICES)
SINK_CHOICE_ENUM(CorpusKind, "data.corpus", SINK_CORPUS_CHOICES)
SINK_CHOICE_ENUM(SyntheticKind, "data.corpus = synthetic(kind)", SINK_SYNTHETIC_CHOICES)
SINK_CHOICE_ENUM(TokenizerKind, "data.tokenizer", SINK_TOKENIZER_CHOICES)
SINK_CHOICE_ENUM(FirstToken, "data.first_token", SINK_FIRST_TOKEN_CHOICES)
SINK_CHOICE_ENUM(Schedule, "optim.schedule", SINK_SCHEDULE_CHOICES)
SINK_CHOICE_ENUM(DeviceKind, "train.device", SINK_DEVICE_CHOICES)
SINK_CHOICE_ENUM(Precision, "train.precision", SINK_PRECISION_CHOICES)
SINK_CHOICE_ENUM(MicroBatch, "train.micro_batch", SINK_MICRO_BATCH_CHOICES)
SINK_CHOICE_ENUM(MeasureInput, "measure.input", SINK_MEASURE_INPUT_CHOICES)
SINK_CHOICE_ENUM(MeasureBos, "measure.bos", SINK_MEASURE_BOS_CHOICES)

template <class E>
concept ChoiceEnum = requires { Choices<E>::names; };

}  // namespace sink

// fmt 9 would print an enum as its index: messages say the name.
template <sink::ChoiceEnum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  auto format(E e, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(sink::name_of(e), ctx);
  }
};
