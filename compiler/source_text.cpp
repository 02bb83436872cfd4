#include "compiler/source_text.h"

#include <algorithm>

namespace sink {

int Columns::at(int line, size_t cp) const {
  size_t byte = byte_of_cp.empty() ? 0 : byte_of_cp[std::min(cp, byte_of_cp.size() - 1)];
  size_t start = line >= 1 && line <= static_cast<int>(f_.line_starts.size()) ? f_.line_starts[line - 1] : 0;
  return byte >= start ? static_cast<int>(byte - start) + 1 : 1;
}

Span Columns::tokens(antlr4::Token* a, antlr4::Token* b) const {
  Span s;
  s.file = file_;
  s.line = static_cast<int>(a->getLine());
  s.col = at(s.line, a->getStartIndex());
  s.end_line = static_cast<int>(b->getLine());
  s.end_col = at(s.end_line, b->getStopIndex() + 1);
  if (s.end_line == s.line && s.end_col <= s.col) s.end_col = s.col + 1;
  return s;
}

namespace {

// Length of the well-formed UTF-8 sequence at in[i] (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0. ANTLR's decoder throws
// on anything else.
size_t utf8_length(const std::string& in, size_t i) {
  auto byte = [&](size_t k) { return i + k < in.size() ? static_cast<unsigned char>(in[i + k]) : 0; };
  auto cont = [&](size_t k) { return (byte(k) & 0xC0) == 0x80; };
  unsigned char c = byte(0);
  if (c == 0) return 0;  // NUL (or the end): not text
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return byte(1) >= lo && byte(1) <= hi && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return byte(1) >= lo && byte(1) <= hi && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

// Replaces bytes that are not valid UTF-8 and reports the first one; records
// where each code point of the result is in the file.
std::string sanitized_utf8(int file, const SourceManager& sources, Diagnostics& diags, Columns& columns) {
  const std::string& in = sources.file(file).text;
  std::string out;
  out.reserve(in.size());
  columns.byte_of_cp.reserve(in.size() + 1);
  bool reported = false;
  int line = 1, col = 1;
  size_t start = 0;
  if (in.rfind("\xEF\xBB\xBF", 0) == 0) {  // a byte-order mark: one code point, like the space
    out += ' ', start = 3, col = 4;
    columns.byte_of_cp.push_back(0);
  }
  for (size_t i = start; i < in.size();) {
    unsigned char c = in[i];
    size_t len = utf8_length(in, i);
    bool ok = len > 0;
    columns.byte_of_cp.push_back(static_cast<uint32_t>(i));
    if (!ok) {
      if (!reported) {
        diags.error({file, line, col, line, col + 1}, "invalid byte in source (not UTF-8 text)");
        reported = true;
      }
      out += ' ';  // reported once above; a stand-in token would only add errors
      ++i, ++col;
      continue;
    }
    out.append(in, i, len);
    if (c == '\n')
      ++line, col = 1;
    else
      col += static_cast<int>(len);
    i += len;
  }
  columns.byte_of_cp.push_back(static_cast<uint32_t>(in.size()));
  return out;
}

}  // namespace sink
