// Source files, spans and clang-style diagnostics.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sink {

// A half-open range in one source file; lines and columns are 1-based.
struct Span {
  int file = -1;
  int line = 0, col = 0;
  int end_line = 0, end_col = 0;
  bool valid() const { return file >= 0 && line > 0; }
};

struct SourceFile {
  std::string path;  // as given (or as resolved for imports)
  std::string text;
  std::vector<size_t> line_starts;
  std::string line(int n) const;  // 1-based, without the newline
};

class SourceManager {
 public:
  int add(std::string path, std::string text);
  const SourceFile& file(int id) const { return *files_[id]; }
  int count() const { return static_cast<int>(files_.size()); }
  int find(const std::string& path) const;  // -1 when not loaded
 private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

enum class Severity { Error, Warning };

struct Diagnostic {
  Severity severity = Severity::Error;
  Span span;
  std::string message;
  std::string hint;  // e.g. "did you mean 'model.d'?"; may be empty
};

class Diagnostics {
 public:
  explicit Diagnostics(const SourceManager& sources) : sources_(sources) {}
  void error(Span span, std::string message, std::string hint = "");
  void warning(Span span, std::string message, std::string hint = "");
  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return items_; }
  // Sorted by file, line, column; each with its source line and a caret.
  std::string render(bool color = false) const;
  static constexpr int kMaxReported = 200;

 private:
  void add(Diagnostic d);
  const SourceManager& sources_;
  std::vector<Diagnostic> items_;
  int errors_ = 0;
  int dropped_ = 0;
};

// Edit distance, for "did you mean" hints.
int edit_distance(const std::string& a, const std::string& b);
// The closest candidate within a distance that scales with the word, or "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sink
