// What a syntax error says: ANTLR's reports as located diagnostics in words, one per top-level declaration.
#pragma once
#include <antlr4-runtime.h>
#include <string>
#include <vector>

#include "compiler/source.h"
#include "compiler/source_text.h"

namespace sink {

// Thrown out of the parse when a file has so many errors that more would not help.
struct TooManyErrors {};

class ErrorCollector : public antlr4::BaseErrorListener {
 public:
  ErrorCollector(int file, const Columns& columns, Diagnostics& diags)
      : file_(file), columns_(columns), diags_(diags) {}
  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line, size_t col,
                   const std::string& msg, std::exception_ptr) override;

  int count() const { return count_; }
  const Columns& columns() const { return columns_; }
  std::string eof_hint;             // said with errors at the end of the file (an unclosed bracket)
  std::vector<size_t> decl_starts;  // token indexes where top-level declarations start

 private:
  // ANTLR's messages name every token of the expected set, keyword by keyword
  // ("expecting {'import', 'experiment', ..., IDENT}"); say it in words.
  static std::string rephrase(antlr4::Parser* parser, antlr4::Token* offending, const std::string& msg);
  static std::string expected_text(const std::vector<ssize_t>& types, const antlr4::dfa::Vocabulary& vocabulary);
  // Makes the unprintable readable and keeps messages short.
  static std::string tidy(const std::string& msg);
  int file_;
  const Columns& columns_;
  Diagnostics& diags_;
  int count_ = 0;
  long last_decl_ = -1;
  int suppressed_ = 0;
};

}  // namespace sink
