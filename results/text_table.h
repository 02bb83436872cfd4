// A table of strings printed four ways: aligned terminal text, GitHub
// markdown, HTML, LaTeX. diff, table and report share it so that the columns
// agree; results/data_table.h builds one from a table of numbers.
#pragma once
#include <string>
#include <vector>

namespace sink::results {

struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;         // per column: right-aligned (numbers); missing entries mean left
  std::vector<std::string> notes;  // footnotes, under the table

  std::string text() const;      // columns padded to their widest cell
  std::string markdown() const;  // `|` and `*` in cells escaped
  std::string html() const;      // <table>, cells escaped
  std::string latex() const;     // a tabular with booktabs rules, cells escaped; notes as rows under the rule
};

std::string html_escape(const std::string& s);
// Text for LaTeX's text mode: \ & % $ # _ { } ~ ^ | < > escaped, and ± and × as math.
std::string latex_escape(const std::string& s);

}  // namespace sink::results
