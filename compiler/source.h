// Source files, spans and clang-style diagnostics.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
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

// An edit the checker is sure of: the text under `span` becomes `replacement`. The CLI prints it under the caret and
// the language server offers it as a quick fix; neither reads it back out of the hint's prose.
struct FixIt {
  Span span;
  std::string replacement;
};

// A diagnostic's hint. A "did you mean" (did_you_mean) also carries the name the message quotes and the one meant,
// from which Diagnostics makes the FixIt: the part of the meant name that the text under the span stands for.
struct Hint {
  Hint() = default;
  Hint(std::string text) : text(std::move(text)) {}  // NOLINT: a plain hint, as most are
  Hint(const char* text) : text(text) {}             // NOLINT
  std::string text;
  std::string named, meant;
};
// "did you mean 'meant'?" with its fix; `otherwise` (a plain hint, maybe empty) where nothing comes close.
Hint did_you_mean(std::string named, std::string meant, std::string otherwise = "");

struct Diagnostic {
  Severity severity = Severity::Error;
  Span span;
  std::string message;
  std::string hint;  // e.g. "did you mean 'model.d'?"; may be empty
  std::optional<FixIt> fix;
};

class Diagnostics {
 public:
  explicit Diagnostics(const SourceManager& sources) : sources_(sources) {}
  void error(Span span, std::string message, Hint hint = {});
  void warning(Span span, std::string message, Hint hint = {});
  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::vector<Diagnostic>& all() const { return items_; }
  // Sorted by file, line, column; each with its source line and a caret.
  std::string render(bool color = false) const;
  static constexpr int kMaxReported = 200;

 private:
  void add(Severity severity, Span span, std::string message, Hint hint);
  std::optional<FixIt> fix_of(const Span& span, const Hint& hint) const;
  const SourceManager& sources_;
  std::vector<Diagnostic> items_;
  int errors_ = 0;
  int dropped_ = 0;
};

// `text` (the source file `file`) with every fix of `diagnostics` in it applied; fixes that overlap an earlier one
// are left out (fixing one may change what the other meant). `applied` counts those applied.
std::string apply_fixes(const std::string& text, int file, const std::vector<Diagnostic>& diagnostics,
                        int* applied = nullptr);

// Edit distance, for "did you mean" hints.
int edit_distance(const std::string& a, const std::string& b);
// The closest candidate within a distance that scales with the word, or "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace sink
