#include "results/bisection_record.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "results/run_data.h"

namespace sink::results {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

std::string BisectionChange::text() const {
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : " + ") + fmt::format("{}: {} -> {}", f.path, f.a, f.b);
  return out;
}

namespace {

ojson set_json(const BisectionSet& s) {
  return ojson{{"changes", s.changes}, {"found", s.found}, {"one_minimal", s.one_minimal}};
}

// Reading: a missing or mistyped key is an error that names it.
template <typename T>
T get(const json& j, const char* key, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw ResultsError(fmt::format("{}: '{}' is missing or not what sinkc bisect writes", where, key));
  }
}

double number_or_nan(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

BisectionSet set_from(const json& j, const std::string& where) {
  return {get<std::vector<std::string>>(j, "changes", where), get<bool>(j, "found", where),
          get<bool>(j, "one_minimal", where)};
}

// The fields of the changes applied, for the table.
std::string fields_of(const BisectionRecord& r, const BisectionTrial& t) {
  if (t.given) return "";
  std::string out;
  for (const auto& id : t.applied)
    for (const auto& c : r.changes)
      if (c.id == id)
        for (const auto& f : c.fields) out += (out.empty() ? "" : ", ") + f.path;
  return out;
}

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return out;
}

}  // namespace

ojson to_json(const BisectionRecord& r) {
  ojson j;
  j["a"] = r.a;
  j["b"] = r.b;
  j["metric"] = r.metric_id;
  j["metric_label"] = r.metric_label;
  j["noise_rule"] = r.noise_rule;
  j["changes"] = ojson::array();
  for (const auto& c : r.changes) {
    ojson fields = ojson::array();
    for (const auto& f : c.fields) fields.push_back({{"path", f.path}, {"a", f.a}, {"b", f.b}});
    j["changes"].push_back({{"id", c.id}, {"fields", fields}});
  }
  j["trials"] = ojson::array();
  for (const auto& t : r.trials) {
    ojson row = {{"applied", t.applied}, {"side", t.side}, {"given", t.given}, {"seeds", t.seeds}};
    row["mean"] = t.mean, row["std"] = t.std;  // NaN is written as null
    row["value"] = t.value;
    if (!t.note.empty()) row["note"] = t.note;
    j["trials"].push_back(row);
  }
  j["from_a"] = set_json(r.from_a);
  j["from_b"] = set_json(r.from_b);
  j["no_single_change"] = r.no_single_change;
  j["budget_exhausted"] = r.budget_exhausted;
  j["runs_trained"] = r.runs_trained;
  j["runs_cached"] = r.runs_cached;
  j["attribution"] = r.attribution;
  return j;
}

BisectionRecord bisection_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) throw ResultsError(where + ": not a bisection record");
  BisectionRecord r;
  r.a = get<std::string>(j, "a", where);
  r.b = get<std::string>(j, "b", where);
  r.metric_id = get<std::string>(j, "metric", where);
  r.metric_label = get<std::string>(j, "metric_label", where);
  r.noise_rule = get<std::string>(j, "noise_rule", where);
  for (const auto& c : get<json>(j, "changes", where)) {
    BisectionChange change{get<std::string>(c, "id", where), {}};
    for (const auto& f : get<json>(c, "fields", where))
      change.fields.push_back(
          {get<std::string>(f, "path", where), get<std::string>(f, "a", where), get<std::string>(f, "b", where)});
    r.changes.push_back(std::move(change));
  }
  for (const auto& t : get<json>(j, "trials", where)) {
    BisectionTrial trial;
    trial.applied = get<std::vector<std::string>>(t, "applied", where);
    trial.side = get<std::string>(t, "side", where);
    trial.given = get<bool>(t, "given", where);
    trial.seeds = get<size_t>(t, "seeds", where);
    trial.mean = number_or_nan(t, "mean");
    trial.std = number_or_nan(t, "std");
    trial.value = get<std::string>(t, "value", where);
    trial.note = t.value("note", "");
    r.trials.push_back(std::move(trial));
  }
  r.from_a = set_from(get<json>(j, "from_a", where), where);
  r.from_b = set_from(get<json>(j, "from_b", where), where);
  r.no_single_change = get<bool>(j, "no_single_change", where);
  r.budget_exhausted = get<bool>(j, "budget_exhausted", where);
  r.runs_trained = get<size_t>(j, "runs_trained", where);
  r.runs_cached = get<size_t>(j, "runs_cached", where);
  r.attribution = get<std::string>(j, "attribution", where);
  return r;
}

TextTable trials_table(const BisectionRecord& r) {
  TextTable t;
  t.header = {"#", "changes applied to A", "fields", r.metric_label, "side"};
  t.right = {false, false, false, true, false};
  size_t n = 0;
  for (const auto& trial : r.trials) {
    std::string changes;
    for (const auto& id : trial.applied) changes += (changes.empty() ? "" : " ") + id;
    const std::string id = trial.given ? (trial.applied.empty() ? "A" : "B") : std::to_string(++n);
    const std::string side = trial.note.empty() ? trial.side : trial.side + ": " + trial.note;
    t.rows.push_back({id, changes.empty() ? "-" : changes, fields_of(r, trial), trial.value, side});
  }
  return t;
}

std::string render_text(const BisectionRecord& r, bool markdown) {
  const char* item = markdown ? "- " : "  ";
  std::string out = fmt::format("{}A: {}\n{}B: {}\n\n", markdown ? "- " : "", r.a, markdown ? "- " : "", r.b);
  out += fmt::format("{} difference{} between them:\n\n", r.changes.size(), r.changes.size() == 1 ? "" : "s");
  for (const auto& c : r.changes) out += fmt::format("{}{}  {}\n", item, c.id, c.text());
  const TextTable t = trials_table(r);
  out += '\n';
  out += markdown ? t.markdown() : t.text();
  out += fmt::format("\n{}\n\n{} run{} trained, {} cached; {}\n", r.attribution, r.runs_trained,
                     r.runs_trained == 1 ? "" : "s", r.runs_cached, r.noise_rule);
  return out;
}

std::string render_html(const BisectionRecord& r) {
  std::string out = fmt::format("<h3>{} vs {}: {}</h3>\n<p><strong>{}</strong></p>\n<ul>\n", html_escape(r.a),
                                html_escape(r.b), html_escape(r.metric_label), html_escape(r.attribution));
  for (const auto& c : r.changes)
    out += fmt::format("<li><code>{}</code> {}</li>\n", html_escape(c.id), html_escape(c.text()));
  out += "</ul>\n" + trials_table(r).html();
  out += fmt::format("<p class=\"note\">{} runs trained, {} cached; {}</p>\n", r.runs_trained, r.runs_cached,
                     html_escape(r.noise_rule));
  return out;
}

std::string save_bisection(const BisectionRecord& r, const std::string& folder, const std::string& name) {
  const fs::path dir = fs::path(folder) / "bisections";
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / fmt::format("{}.{}.json", file_stem(name), r.metric_id);
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << to_json(r).dump(2) << "\n";
    if (!f) throw ResultsError(fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, file, ec);
  if (ec) throw ResultsError(fmt::format("cannot write {}: {}", file.string(), ec.message()));
  return file.string();
}

std::vector<BisectionRecord> load_bisections(const std::string& folder, std::vector<std::string>* skipped) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(folder) / "bisections", ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<BisectionRecord> out;
  for (const auto& f : files) {
    try {
      std::ifstream in(f);
      out.push_back(bisection_from_json(json::parse(in, nullptr, false), f));
    } catch (const ResultsError& e) {
      if (skipped) skipped->push_back(fmt::format("skipped {}: {}", f, e.what()));
    }
  }
  return out;
}

}  // namespace sink::results
