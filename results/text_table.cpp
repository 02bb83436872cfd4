#include "results/text_table.h"

#include <algorithm>

namespace sink::results {
namespace {

// Terminal width of UTF-8 text: count code points, not bytes (±, Δ, ×).
size_t width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(const std::string& s, size_t w, bool right) {
  std::string fill(w > width(s) ? w - width(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string latex_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '&':
      case '%':
      case '$':
      case '#':
      case '_':
      case '{':
      case '}': out.append(1, '\\').append(1, c); break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      // Set as other glyphs in the default (OT1) font: an em dash, inverted marks.
      case '|': out += "\\textbar{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      default:
        // The two signs the tables use, as math: a document without a UTF-8 font still sets them.
        if (s.compare(i, 2, "\u00b1") == 0) {
          out += "$\\pm$", ++i;
        } else if (s.compare(i, 2, "\u00d7") == 0) {
          out += "$\\times$", ++i;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string TextTable::text() const {
  std::vector<size_t> w(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) w[c] = width(header[c]);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], width(r[c]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < w.size(); ++c) {
      bool right_aligned = c < right.size() && right[c];
      out += pad(c < cells.size() ? cells[c] : "", w[c], right_aligned) + (c + 1 < w.size() ? "  " : "");
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  std::string rule;
  for (size_t c = 0; c < w.size(); ++c) rule += std::string(w[c], '-') + (c + 1 < w.size() ? "  " : "");
  out += rule + "\n";
  for (const auto& r : rows) out += line(r);
  for (const auto& n : notes) out += n + "\n";
  return out;
}

std::string TextTable::markdown() const {
  // `*` too: a note's leading one would start a list, a pair in a row emphasis.
  auto cell = [](std::string s) {
    for (size_t pos = 0; (pos = s.find_first_of("|*", pos)) != std::string::npos; pos += 2) s.insert(pos, 1, '\\');
    return s.empty() ? std::string(" ") : s;
  };
  std::string out = "|";
  // (Appended piece by piece, not " " + ...: GCC 12 warns of a false -Wrestrict on a literal plus a string.)
  for (const auto& h : header) out.append(" ").append(cell(h)).append(" |");
  out += "\n|";
  for (size_t c = 0; c < header.size(); ++c) out += (c < right.size() && right[c]) ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& r : rows) {
    out += "|";
    for (size_t c = 0; c < header.size(); ++c) out.append(" ").append(cell(c < r.size() ? r[c] : "")).append(" |");
    out += "\n";
  }
  // After a blank line: a line right under the rows would be read as one more row.
  if (!notes.empty()) out += "\n";
  for (const auto& n : notes) out += cell(n) + "\n";
  return out;
}

std::string TextTable::html() const {
  std::string out = "<table>\n<thead><tr>";
  for (const auto& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& r : rows) {
    out += "<tr>";
    for (size_t c = 0; c < header.size(); ++c)
      out += std::string(c < right.size() && right[c] ? "<td class=\"num\">" : "<td>") +
             html_escape(c < r.size() ? r[c] : "") + "</td>";
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  for (const auto& n : notes) out += "<p class=\"note\">" + html_escape(n) + "</p>\n";
  return out;
}

std::string TextTable::latex() const {
  std::string spec;
  for (size_t c = 0; c < header.size(); ++c) spec += c < right.size() && right[c] ? 'r' : 'l';
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < header.size(); ++c)
      out.append(c ? " & " : "").append(latex_escape(c < cells.size() ? cells[c] : ""));
    return out + " \\\\\n";
  };
  std::string out = "\\begin{tabular}{" + spec + "}\n\\toprule\n" + line(header) + "\\midrule\n";
  for (const auto& r : rows) out += line(r);
  out += "\\bottomrule\n";
  for (const auto& n : notes)
    out += "\\multicolumn{" + std::to_string(header.size()) + "}{l}{\\footnotesize " + latex_escape(n) + "} \\\\\n";
  return out + "\\end{tabular}\n";
}

}  // namespace sink::results
