// A table of strings printed three ways: aligned terminal text, GitHub
// markdown, HTML. diff, table and report share it so that the columns agree.
#pragma once
#include <string>
#include <vector>

namespace sink::results {

struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> right;  // per column: right-aligned (numbers); missing entries mean left

  std::string text() const;      // columns padded to their widest cell
  std::string markdown() const;  // `|` in cells escaped
  std::string html() const;      // <table>, cells escaped
};

std::string html_escape(const std::string& s);

}  // namespace sink::results
