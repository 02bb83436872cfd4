// The one table representation and its five formats: CSV quoting (RFC 4180), numbers that stay numbers,
// LaTeX escaping, and the same cells in every format.
#include <gtest/gtest.h>

#include <cmath>

#include "results/data_table.h"

using namespace sink::results;

namespace {

// RFC 4180 read by hand, independent of the writer: fields split at commas outside quotes, "" inside quotes is
// one quote, records end at CRLF outside quotes.
std::vector<std::vector<std::string>> read_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        records.back().back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        records.back().back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      records.back().emplace_back();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      records.emplace_back(1), ++i;
    } else {
      records.back().back() += c;
    }
  }
  if (records.back() == std::vector<std::string>(1)) records.pop_back();  // after the last CRLF
  return records;
}

// Two runs: a name with every character CSV must quote, a mean over seeds, a missing value, a flag.
DataTable sample() {
  DataTable t;
  t.columns = {{"run", "run", "", false, false},
               {"optim.lr", "optim.lr", "", true, false},
               {"sink_1", "Sink_1 (%)", "%", true, true},
               {"done", "done", "", false, false, Column::Shown::DataOnly}};
  Aggregate two;
  two.values = {10, 12};
  two.mean = 11, two.std = std::sqrt(2.0);
  t.rows.push_back({Cell::of_text("a, \"quoted\"\nname"), Cell::of_number(0.001, "1e-3"),
                    Cell::of_aggregate(two, 2, false, false), Cell::of_flag(true, "yes")});
  t.rows.push_back({Cell::of_text("b_50%"), Cell::of_number(0.01), Cell::missing(), Cell::of_flag(false, "no")});
  t.notes = {"a note"};
  return t;
}

}  // namespace

TEST(DataTable, CsvQuotesWhatRfc4180Requires) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");  // readers that trim would lose it
  EXPECT_EQ(csv_field(""), "");
}

TEST(DataTable, NumbersForDataFormatsReadBackExactlyAndAsFloats) {
  EXPECT_EQ(data_number(66.0), "66.0");  // a float column of whole numbers still reads as floats
  EXPECT_EQ(data_number(0.1), "0.1");
  EXPECT_EQ(data_number(1e-5), "1e-05");
  EXPECT_EQ(data_number(2, true), "2");
  EXPECT_EQ(data_number(NAN), "");
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::stod(data_number(third)), third);  // every digit it takes to read back the same double
}

TEST(DataTable, LatexEscapesItsSpecialCharacters) {
  EXPECT_EQ(latex_escape("a_b 50% & #1 $5 {x}"), "a\\_b 50\\% \\& \\#1 \\$5 \\{x\\}");
  EXPECT_EQ(latex_escape("~^\\"), "\\textasciitilde{}\\textasciicircum{}\\textbackslash{}");
  EXPECT_EQ(latex_escape("|k_1| < 2"), "\\textbar{}k\\_1\\textbar{} \\textless{} 2");
  EXPECT_EQ(latex_escape("2.00 \u00b1 0.10"), "2.00 $\\pm$ 0.10");
  EXPECT_EQ(latex_escape("layers \u00d7 heads"), "layers $\\times$ heads");
}

TEST(DataTable, CsvHoldsTheCellsNumbersAndQuotedText) {
  const std::string csv = sample().render(Format::Csv);
  auto records = read_csv(csv);
  ASSERT_EQ(records.size(), 3u) << csv;
  EXPECT_EQ(records[0], (std::vector<std::string>{"run", "optim.lr", "sink_1", "sink_1_std", "done"}));
  EXPECT_EQ(records[1][0], "a, \"quoted\"\nname");
  EXPECT_EQ(records[1][1], "0.001");  // the number, not the text a reader sees (1e-3)
  EXPECT_EQ(std::stod(records[1][2]), 11.0);
  EXPECT_EQ(std::stod(records[1][3]), std::sqrt(2.0));
  EXPECT_EQ(records[1][4], "true");
  EXPECT_EQ(records[2], (std::vector<std::string>{"b_50%", "0.01", "", "", "false"}));
  EXPECT_EQ(csv.find("a note"), std::string::npos);  // notes are for readers
}

TEST(DataTable, JsonHasNumbersAsNumbersAndNullForMissing) {
  auto j = nlohmann::json::parse(sample().render(Format::Json));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["run"], "a, \"quoted\"\nname");
  EXPECT_EQ(j["rows"][0]["optim.lr"], 0.001);
  EXPECT_EQ(j["rows"][0]["sink_1"], 11.0);
  EXPECT_EQ(j["rows"][0]["done"], true);
  EXPECT_TRUE(j["rows"][1]["sink_1"].is_null());
  EXPECT_TRUE(j["rows"][1]["sink_1_std"].is_null());
  EXPECT_EQ(j["columns"][2]["unit"], "%");
  EXPECT_EQ(j["notes"][0], "a note");
}

TEST(DataTable, ReaderFormatsShowTheCellsText) {
  const DataTable t = sample();
  const std::string text = t.render(Format::Text);
  EXPECT_NE(text.find("11.00 \u00b1 1.41"), std::string::npos) << text;
  EXPECT_NE(text.find("1e-3"), std::string::npos) << text;
  EXPECT_EQ(text.find("yes"), std::string::npos) << "a data-only column: " << text;
  EXPECT_NE(text.find("\na note\n"), std::string::npos) << text;

  const std::string md = t.render(Format::Markdown);
  EXPECT_NE(md.find("| Sink_1 (%) |"), std::string::npos) << md;
  EXPECT_NE(md.find("|\n\na note\n"), std::string::npos) << "a note after a blank line: " << md;

  const std::string latex = t.render(Format::Latex);
  EXPECT_EQ(latex.rfind("\\begin{tabular}{lrr}\n\\toprule\nrun & optim.lr & Sink\\_1 (\\%) \\\\\n\\midrule\n", 0), 0u)
      << latex;
  EXPECT_NE(latex.find("b\\_50\\% & 0.01 & - \\\\\n\\bottomrule\n"), std::string::npos) << latex;
  EXPECT_NE(latex.find("11.00 $\\pm$ 1.41"), std::string::npos) << latex;
  EXPECT_NE(latex.find("\\multicolumn{3}{l}{\\footnotesize a note} \\\\\n\\end{tabular}\n"), std::string::npos)
      << latex;
}

TEST(DataTable, FormatNames) {
  for (const char* name : {"text", "csv", "json", "markdown", "latex"})
    EXPECT_TRUE(parse_format(name).has_value()) << name;
  EXPECT_FALSE(parse_format("yaml"));
  EXPECT_FALSE(parse_format("CSV"));
}
