// The source text as ANTLR reads it: valid UTF-8 only (bad bytes become
// spaces and one located error), and the map from ANTLR's code-point columns
// back to the byte columns our diagnostics point at.
#pragma once
#include <antlr4-runtime.h>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/source.h"

namespace sink {

// ANTLR counts code points; our carets count bytes. The map from one to the
// other is built once per file (by sanitized_utf8), so that a lookup costs the
// same on a 1 MB line as on a short one.
class Columns {
 public:
  Columns(int file, const SourceFile& f) : file_(file), f_(f) {}
  std::vector<uint32_t> byte_of_cp;  // file byte offset of each code point ANTLR reads, then the end

  // 1-based byte column of the code point at index `cp` of the input, on `line`.
  int at(int line, size_t cp) const;
  // From the start of `a` to the end of `b` (tokens on one line or several).
  Span tokens(antlr4::Token* a, antlr4::Token* b) const;
  Span token(antlr4::Token* t) const { return tokens(t, t); }

 private:
  int file_;
  const SourceFile& f_;
};

// Replaces bytes that are not valid UTF-8 and reports the first one; records
// where each code point of the result is in the file.
std::string sanitized_utf8(int file, const SourceManager& sources, Diagnostics& diags, Columns& columns);

}  // namespace sink
