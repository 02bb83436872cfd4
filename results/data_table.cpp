#include "results/data_table.h"

#include <cmath>
#include <fmt/format.h>

namespace sink::results {

std::optional<Format> parse_format(const std::string& name) {
  if (name == "text") return Format::Text;
  if (name == "csv") return Format::Csv;
  if (name == "json") return Format::Json;
  if (name == "markdown") return Format::Markdown;
  if (name == "latex") return Format::Latex;
  return std::nullopt;
}

Cell Cell::missing(std::string why) {
  Cell c;
  c.text = std::move(why);
  return c;
}

Cell Cell::of_text(std::string text) {
  Cell c;
  c.kind = Kind::Text;
  c.text = std::move(text);
  return c;
}

Cell Cell::of_number(double v, std::string shown, bool integer) {
  if (std::isnan(v)) return missing(shown.empty() ? "-" : shown);
  Cell c;
  c.kind = Kind::Number;
  c.number = v;
  c.integer = integer;
  c.text = shown.empty() ? data_number(v, integer) : std::move(shown);
  return c;
}

Cell Cell::of_flag(bool v, std::string shown) {
  Cell c;
  c.kind = Kind::Flag;
  c.flag = v;
  c.text = std::move(shown);
  return c;
}

Cell Cell::of_aggregate(const Aggregate& a, int decimals, bool with_step, bool with_reason) {
  if (a.values.empty()) return missing(with_reason ? a.missing : "-");
  Aggregate shown = a;
  shown.partial = a.partial && with_step;
  Cell c = of_number(a.mean, format_aggregate(shown, decimals));
  c.spread = a.std;
  c.proxy = a.proxy;
  return c;
}

std::string data_number(double v, bool integer) {
  if (std::isnan(v)) return "";
  if (integer && std::fabs(v) < 9e15) return fmt::format("{}", static_cast<int64_t>(v));
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // not 1e+20, inf or nan
  return s;
}

std::string csv_field(const std::string& s) {
  const bool quote =
      s.find_first_of(",\"\r\n") != std::string::npos || (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

bool for_readers(const Column& c) { return c.shown != Column::Shown::DataOnly; }
bool for_data(const Column& c) { return c.shown != Column::Shown::ReadersOnly; }

// A cell as a data format writes it: a string, a number, a boolean, or null.
nlohmann::ordered_json data_value(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::Missing: return nullptr;
    case Cell::Kind::Text: return c.text;
    case Cell::Kind::Flag: return c.flag;
    case Cell::Kind::Number:
      if (!std::isfinite(c.number)) return nullptr;  // JSON has no infinity
      if (c.integer && std::fabs(c.number) < 9e15) return static_cast<int64_t>(c.number);
      return c.number;
  }
  return nullptr;
}

std::string csv_value(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::Missing: return "";
    case Cell::Kind::Text: return csv_field(c.text);
    case Cell::Kind::Flag: return c.flag ? "true" : "false";
    case Cell::Kind::Number: return data_number(c.number, c.integer);
  }
  return "";
}

}  // namespace

TextTable DataTable::reader_table() const {
  TextTable t;
  for (const auto& c : columns)
    if (for_readers(c)) t.header.push_back(c.label), t.right.push_back(c.right);
  bool proxy = false;
  for (const auto& r : rows) {
    std::vector<std::string> cells;
    for (size_t k = 0; k < columns.size(); ++k) {
      if (!for_readers(columns[k])) continue;
      const bool starred = k < r.size() && r[k].proxy && r[k].kind == Cell::Kind::Number;
      cells.push_back(k < r.size() ? r[k].text + (starred ? "*" : "") : "");
      proxy = proxy || starred;
    }
    t.rows.push_back(std::move(cells));
  }
  t.notes = notes;
  if (proxy) t.notes.push_back(kProxyNote);
  return t;
}

std::string DataTable::csv() const {
  std::string out;
  auto end_line = [&] {
    if (!out.empty() && out.back() == ',') out.pop_back();
    out += "\r\n";
  };
  for (const auto& c : columns) {
    if (!for_data(c)) continue;
    out += csv_field(c.key) + ",";
    if (c.spread) out += csv_field(c.key + "_std") + ",";
  }
  end_line();
  for (const auto& r : rows) {
    for (size_t k = 0; k < columns.size(); ++k) {
      if (!for_data(columns[k])) continue;
      const Cell cell = k < r.size() ? r[k] : Cell::missing();
      out += csv_value(cell) + ",";
      if (columns[k].spread) out += data_number(cell.kind == Cell::Kind::Number ? cell.spread : NAN) + ",";
    }
    end_line();
  }
  return out;
}

nlohmann::ordered_json DataTable::json() const {
  nlohmann::ordered_json j;
  j["columns"] = nlohmann::ordered_json::array();
  for (const auto& c : columns) {
    if (!for_data(c)) continue;
    j["columns"].push_back({{"key", c.key}, {"label", c.label}, {"unit", c.unit}});
    if (c.spread) j["columns"].push_back({{"key", c.key + "_std"}, {"label", "std of " + c.label}, {"unit", c.unit}});
  }
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json row = nlohmann::ordered_json::object();
    for (size_t k = 0; k < columns.size(); ++k) {
      if (!for_data(columns[k])) continue;
      const Cell cell = k < r.size() ? r[k] : Cell::missing();
      row[columns[k].key] = data_value(cell);
      if (columns[k].spread)
        row[columns[k].key + "_std"] = cell.kind == Cell::Kind::Number && std::isfinite(cell.spread)
                                           ? nlohmann::ordered_json(cell.spread)
                                           : nlohmann::ordered_json(nullptr);
    }
    j["rows"].push_back(std::move(row));
  }
  j["notes"] = notes;
  return j;
}

std::string DataTable::render(Format f) const {
  switch (f) {
    case Format::Text: return reader_table().text();
    case Format::Csv: return csv();
    case Format::Json: return json().dump(2) + "\n";
    case Format::Markdown: return reader_table().markdown();
    case Format::Latex: return reader_table().latex();
  }
  return "";
}

}  // namespace sink::results
