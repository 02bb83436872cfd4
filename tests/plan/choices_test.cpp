// The enums of the run configuration (plan/choices.h) against the schema:
// the same names in the same order, since a RunConfig is read from plans the
// schema checked, and an unknown name an error that says what it was.
#include <cctype>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "plan/choices.h"
#include "plan/schema.h"

namespace {

using sink::Type;

// The names a schema row offers: its choices, its forms, or, for a field
// that also takes a number or an expression, its keywords and then `fixed`
// (the enum's name for the written value).
std::vector<std::string> row_names(const sink::TypeSpec& spec) {
  std::vector<std::string> out;
  switch (spec.type) {
    case Type::Enum: return spec.choices;
    case Type::Variant:
      for (const auto& f : spec.forms) out.push_back(f.name);
      return out;
    case Type::NumberOr:
    case Type::VectorExpr:
      out = spec.choices;
      out.push_back("fixed");
      return out;
    default: ADD_FAILURE() << "no names in a " << sink::type_name(spec.type);
  }
  return out;
}

const sink::TypeSpec& spec_of(const std::string& path) {
  const sink::Field* field = sink::find_field(path);
  if (!field) throw std::logic_error("the schema has no " + path);
  return field->spec;
}

// synthetic(kind = ...) is a parameter of one form of data.corpus.
const sink::TypeSpec& synthetic_kind_spec() {
  const sink::TypeSpec::Form* synthetic = spec_of("data.corpus").form("synthetic");
  if (!synthetic) throw std::logic_error("data.corpus has no synthetic form");
  for (const auto& p : synthetic->params)
    if (p.name == "kind") return p.spec;
  throw std::logic_error("synthetic(...) has no kind");
}

template <class E>
std::string field_of() {
  return std::string(sink::Choices<E>::field);
}

// Every name parses to its own value and back; anything else throws,
// naming the field and the value.
template <class E>
void expect_names_round_trip() {
  const std::string field = field_of<E>();
  SCOPED_TRACE(field);
  const std::vector<std::string>& names = sink::choice_names<E>();
  ASSERT_FALSE(names.empty());
  for (std::size_t k = 0; k < names.size(); ++k) {
    const E e = static_cast<E>(k);
    EXPECT_EQ(sink::name_of(e), names[k]);
    EXPECT_EQ(sink::parse_choice<E>(names[k]), e);
    EXPECT_EQ(sink::find_choice<E>(names[k]), e);
  }
  EXPECT_FALSE(sink::find_choice<E>("no_such_name").has_value());
  EXPECT_FALSE(sink::find_choice<E>("").has_value());
  try {
    sink::parse_choice<E>("no_such_name");
    ADD_FAILURE() << "an unknown name parsed";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(field), std::string::npos) << what;
    EXPECT_NE(what.find("'no_such_name'"), std::string::npos) << what;
    EXPECT_NE(what.find(names.front()), std::string::npos) << what;
  }
  // A name differing only in case is another name.
  std::string upper = names.front();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_THROW(sink::parse_choice<E>(upper), std::invalid_argument);
}

template <class... E>
void expect_all_round_trip() {
  (expect_names_round_trip<E>(), ...);
}

TEST(Choices, EveryEnumHasTheSchemaRowsNamesInOrder) {
  EXPECT_EQ(sink::choice_names<sink::Ffn>(), row_names(spec_of("model.ffn")));
  EXPECT_EQ(sink::choice_names<sink::PosEmbedding>(), row_names(spec_of("model.pe")));
  EXPECT_EQ(sink::choice_names<sink::NormKind>(), row_names(spec_of("model.norm")));
  EXPECT_EQ(sink::choice_names<sink::NormPlacement>(), row_names(spec_of("model.placement")));
  EXPECT_EQ(sink::choice_names<sink::HeadsCombine>(), row_names(spec_of("model.heads_combine")));
  EXPECT_EQ(sink::choice_names<sink::Biases>(), row_names(spec_of("model.biases")));
  EXPECT_EQ(sink::choice_names<sink::VStar>(), row_names(spec_of("model.v_star")));
  EXPECT_EQ(sink::choice_names<sink::AttnKernel>(), row_names(spec_of("attention.kernel")));
  EXPECT_EQ(sink::choice_names<sink::Backend>(), row_names(spec_of("attention.backend")));
  EXPECT_EQ(sink::choice_names<sink::Gate>(), row_names(spec_of("attention.gate")));
  EXPECT_EQ(sink::choice_names<sink::SinkLogit>(), row_names(spec_of("attention.sink_logit")));
  EXPECT_EQ(sink::choice_names<sink::CorpusKind>(), row_names(spec_of("data.corpus")));
  EXPECT_EQ(sink::choice_names<sink::SyntheticKind>(), row_names(synthetic_kind_spec()));
  EXPECT_EQ(sink::choice_names<sink::TokenizerKind>(), row_names(spec_of("data.tokenizer")));
  EXPECT_EQ(sink::choice_names<sink::FirstToken>(), row_names(spec_of("data.first_token")));
  EXPECT_EQ(sink::choice_names<sink::Schedule>(), row_names(spec_of("optim.schedule")));
  EXPECT_EQ(sink::choice_names<sink::DeviceKind>(), row_names(spec_of("train.device")));
  EXPECT_EQ(sink::choice_names<sink::Precision>(), row_names(spec_of("train.precision")));
  EXPECT_EQ(sink::choice_names<sink::MicroBatch>(), row_names(spec_of("train.micro_batch")));
  EXPECT_EQ(sink::choice_names<sink::MeasureInput>(), row_names(spec_of("measure.input")));
  EXPECT_EQ(sink::choice_names<sink::MeasureBos>(), row_names(spec_of("measure.bos")));
}

// A one_of row, or a call row, added to the schema gets an enum here too.
// attention.normalize is the exception: its forms are the rows of the
// normaliser table (plan/normalizers.h), which says what each one computes.
TEST(Choices, EveryChoiceRowOfTheSchemaHasAnEnum) {
  using namespace sink;
  const std::set<std::string> with_enum = {
      field_of<Ffn>(),           field_of<PosEmbedding>(), field_of<NormKind>(),     field_of<NormPlacement>(),
      field_of<HeadsCombine>(),  field_of<Biases>(),       field_of<VStar>(),        field_of<AttnKernel>(),
      field_of<Backend>(),       field_of<Gate>(),         field_of<SinkLogit>(),    field_of<CorpusKind>(),
      field_of<TokenizerKind>(), field_of<FirstToken>(),   field_of<Schedule>(),     field_of<DeviceKind>(),
      field_of<Precision>(),     field_of<MicroBatch>(),   field_of<MeasureInput>(), field_of<MeasureBos>()};
  for (const sink::Field& f : sink::schema()) {
    const bool has_names = f.spec.type == Type::Enum || f.spec.type == Type::Variant || f.spec.type == Type::NumberOr ||
                           f.spec.type == Type::VectorExpr;
    if (!has_names || f.path == "attention.normalize") continue;
    EXPECT_TRUE(with_enum.count(f.path)) << f.path << " has choices but no enum in plan/choices.h";
  }
}

TEST(Choices, NamesRoundTripAndAnUnknownNameIsAnError) {
  expect_all_round_trip<sink::Ffn, sink::PosEmbedding, sink::NormKind, sink::NormPlacement, sink::HeadsCombine,
                        sink::Biases, sink::VStar, sink::AttnKernel, sink::Backend, sink::Gate, sink::SinkLogit,
                        sink::CorpusKind, sink::SyntheticKind, sink::TokenizerKind, sink::FirstToken, sink::Schedule,
                        sink::DeviceKind, sink::Precision, sink::MicroBatch, sink::MeasureInput, sink::MeasureBos>();
}

TEST(Choices, AnUnknownNameSaysFieldValueAndChoices) {
  try {
    sink::parse_choice<sink::Ffn>("swiglo");
    FAIL() << "swiglo parsed";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "model.ffn: unknown value 'swiglo' (one of relu|gelu|swish|reglu|geglu|swiglu)");
  }
}

// `auto` is a C++ keyword: the enumerator is auto_, the name the language's.
TEST(Choices, AKeywordIsSpelledWithoutItsUnderscore) {
  EXPECT_EQ(sink::name_of(sink::MeasureBos::auto_), "auto");
  EXPECT_EQ(sink::name_of(sink::VStar::auto_), "auto");
  EXPECT_EQ(sink::parse_choice<sink::MeasureBos>("auto"), sink::MeasureBos::auto_);
  EXPECT_THROW(sink::parse_choice<sink::MeasureBos>("auto_"), std::invalid_argument);
}

// summary.json, config.json and messages hold the names: an enum never
// reaches JSON or fmt as its index.
TEST(Choices, JsonAndMessagesHoldTheName) {
  EXPECT_EQ(fmt::format("{} = {}", "train.precision", sink::Precision::bf16), "train.precision = bf16");
  EXPECT_EQ(fmt::format("[{:>5}]", sink::MeasureBos::auto_), "[ auto]");
  nlohmann::json j = {{"precision", sink::Precision::bf16}, {"bos", sink::MeasureBos::auto_}};
  EXPECT_EQ(j.dump(), R"({"bos":"auto","precision":"bf16"})");
  EXPECT_EQ(j.at("precision").get<sink::Precision>(), sink::Precision::bf16);
  EXPECT_THROW(nlohmann::json("fp64").get<sink::Precision>(), std::invalid_argument);
}

}  // namespace
