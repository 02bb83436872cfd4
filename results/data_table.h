// A table of results as data: columns with a key, a label and a unit, cells
// that carry their numbers beside the text a reader sees. `sinkc table` and
// `sinkc diff` build one and every output format renders it: the reader
// formats (aligned text, markdown, LaTeX, and the report's HTML) through the
// cells' text, the data formats (CSV, JSON) through their numbers, at full
// precision and with nothing but the number in a numeric field, so that
// pandas, R or a spreadsheet read floats.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/metrics.h"
#include "results/text_table.h"

namespace sink::results {

enum class Format { Text, Csv, Json, Markdown, Latex };
// nullopt for a name that is none of kFormatNames.
std::optional<Format> parse_format(const std::string& name);
inline constexpr const char* kFormatNames = "text, csv, json, markdown or latex";

struct Cell {
  enum class Kind { Missing, Text, Number, Flag };
  Kind kind = Kind::Missing;
  std::string text;      // what a reader sees; for Missing, why there is no value ("-", "not run", ...)
  double number = NAN;   // Number
  double spread = NAN;   // Number: the standard deviation over seeds, in the column's `<key>_std` companion
  bool integer = false;  // Number: written without a fraction (a count)
  bool flag = false;     // Flag
  // A Sink value from the paper's proxy scores (unnormalized attention): the reader formats mark it with an
  // asterisk and a footnote (kProxyNote); the data formats leave numbers alone and carry the fact in a boolean
  // column of its own, which the table's builder adds.
  bool proxy = false;

  static Cell missing(std::string why = "-");
  static Cell of_text(std::string text);
  // `shown` empty: the number as the shortest text that reads back to it.
  static Cell of_number(double v, std::string shown = "", bool integer = false);
  static Cell of_flag(bool v, std::string shown);
  // A metric over seeds: "66.00 ± 1.20", with " (step 750)" for unfinished runs when `with_step`; a missing
  // value says why (`a.missing`) when `with_reason`, else "-".
  static Cell of_aggregate(const Aggregate& a, int decimals, bool with_step, bool with_reason);
};

struct Column {
  std::string key;      // the CSV header and JSON key: run, optim.weight_decay, sink_1
  std::string label;    // the reader formats' header: "Sink_1 (%)"
  std::string unit;     // "%", "nats/token", ...; empty for none
  bool right = false;   // right-aligned in the reader formats (numbers)
  bool spread = false;  // the data formats add `<key>_std` after it (means over seeds)
  // Shown by the reader formats only (what the data formats have in other columns), or by the data formats only
  // (what the reader formats show another way: the proxy flag is an asterisk there).
  enum class Shown { Everywhere, ReadersOnly, DataOnly };
  Shown shown = Shown::Everywhere;
};

struct DataTable {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // one cell per column
  std::vector<std::string> notes;       // said under the table by the reader formats

  // The reader formats' view: labels as headers, cells as text, an asterisk on proxy values and then its footnote.
  TextTable reader_table() const;
  std::string csv() const;  // RFC 4180: a header of keys, CRLF line ends, fields quoted where they must be
  // {"columns": [{"key", "label", "unit"}...], "rows": [{key: value}...], "notes": [...]}: numbers as numbers,
  // null where there is none, `<key>_std` beside a mean.
  nlohmann::ordered_json json() const;
  std::string render(Format f) const;
};

// The footnote of a proxy value's asterisk.
inline constexpr const char* kProxyNote = "* proxy scores for unnormalized attention (the paper's asterisk)";

// One CSV field, quoted when it holds a comma, a quote, a line break or a leading or trailing space.
std::string csv_field(const std::string& s);
// A number for a data format: the shortest text that reads back to it; a float keeps a fraction ("66.0") so
// that a column of whole numbers still reads as floats; empty for NaN.
std::string data_number(double v, bool integer = false);

}  // namespace sink::results
