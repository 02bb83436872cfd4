#include "compiler/source.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <set>
#include <tuple>

namespace sink {

std::string SourceFile::line(int n) const {
  if (n < 1 || n > static_cast<int>(line_starts.size())) return "";
  size_t begin = line_starts[n - 1];
  size_t end = text.find('\n', begin);
  if (end == std::string::npos) end = text.size();
  if (end > begin && text[end - 1] == '\r') --end;
  return text.substr(begin, end - begin);
}

int SourceManager::add(std::string path, std::string text) {
  auto f = std::make_unique<SourceFile>();
  f->path = std::move(path);
  f->text = std::move(text);
  f->line_starts.push_back(0);
  for (size_t i = 0; i < f->text.size(); ++i)
    if (f->text[i] == '\n') f->line_starts.push_back(i + 1);
  files_.push_back(std::move(f));
  return static_cast<int>(files_.size()) - 1;
}

int SourceManager::find(const std::string& path) const {
  for (size_t i = 0; i < files_.size(); ++i)
    if (files_[i]->path == path) return static_cast<int>(i);
  return -1;
}

Hint did_you_mean(std::string named, std::string meant, std::string otherwise) {
  if (meant.empty()) return Hint(std::move(otherwise));
  Hint hint("did you mean '" + meant + "'?");
  hint.named = std::move(named);
  hint.meant = std::move(meant);
  return hint;
}

void Diagnostics::error(Span span, std::string message, Hint hint) {
  add(Severity::Error, span, std::move(message), std::move(hint));
}

void Diagnostics::warning(Span span, std::string message, Hint hint) {
  add(Severity::Warning, span, std::move(message), std::move(hint));
}

// The text under the span is the tail of the quoted name (`dd` of 'model.dd', whose block is around it) or all of it:
// it becomes the same tail of the meant name, where the two agree on the part before it ('model.'). A span that
// begins with the name (a call) has the name replaced. Anything else (a span over other text, a meant name in another
// block than the text's) gets no fix, only the hint.
std::optional<FixIt> Diagnostics::fix_of(const Span& span, const Hint& hint) const {
  if (hint.meant.empty() || !span.valid() || span.file >= sources_.count()) return std::nullopt;
  if (span.col < 1 || span.end_line != span.line || span.end_col <= span.col) return std::nullopt;
  const std::string line = sources_.file(span.file).line(span.line);
  if (static_cast<size_t>(span.end_col - 1) > line.size()) return std::nullopt;
  const std::string written = line.substr(span.col - 1, span.end_col - span.col);
  const std::string& named = hint.named;
  if (written.size() > named.size() && written.compare(0, named.size(), named) == 0) {
    // A span over more than the name (a call: `sigmod(qk)`): the name at its start is what changes.
    Span name_only = span;
    name_only.end_col = span.col + static_cast<int>(named.size());
    return FixIt{name_only, hint.meant};
  }
  if (written.size() > named.size() || named.compare(named.size() - written.size(), written.size(), written) != 0)
    return std::nullopt;
  const size_t around = named.size() - written.size();
  if (hint.meant.size() < around || hint.meant.compare(0, around, named, 0, around) != 0) return std::nullopt;
  std::string replacement = hint.meant.substr(around);
  if (replacement.empty() || replacement == written) return std::nullopt;
  return FixIt{span, std::move(replacement)};
}

void Diagnostics::add(Severity severity, Span span, std::string message, Hint hint) {
  Diagnostic d{severity, span, std::move(message), std::move(hint.text), fix_of(span, hint)};
  // The same contradiction can surface once per run of a sweep; say it once.
  for (const auto& e : items_)
    if (e.message == d.message && e.span.file == d.span.file && e.span.line == d.span.line && e.span.col == d.span.col)
      return;
  if (d.severity == Severity::Error) ++errors_;
  if (static_cast<int>(items_.size()) >= kMaxReported) {
    ++dropped_;
    return;
  }
  items_.push_back(std::move(d));
}

// Printable form of a source line: tabs kept (so the caret lines up), other
// control or non-UTF-8 bytes replaced so garbage input cannot garble a terminal.
static std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c == '\t' || (c >= 0x20 && c < 0x7f)) ? static_cast<char>(c) : '?';
  return out;
}

std::string Diagnostics::render(bool color) const {
  std::vector<const Diagnostic*> sorted;
  for (const auto& d : items_) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic* a, const Diagnostic* b) {
    return std::tie(a->span.file, a->span.line, a->span.col) < std::tie(b->span.file, b->span.line, b->span.col);
  });
  const char* bold = color ? "\033[1m" : "";
  const char* red = color ? "\033[1;31m" : "";
  const char* magenta = color ? "\033[1;35m" : "";
  const char* green = color ? "\033[1;32m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string out;
  for (const Diagnostic* d : sorted) {
    const bool is_error = d->severity == Severity::Error;
    const char* kind = is_error ? "error" : "warning";
    const char* kind_color = is_error ? red : magenta;
    if (!d->span.valid()) {
      std::string where = d->span.file >= 0 ? sources_.file(d->span.file).path + ": " : "sinkc: ";
      out += fmt::format("{}{}{}{}: {}{}\n", bold, where, kind_color, kind, reset, d->message);
    } else {
      const SourceFile& f = sources_.file(d->span.file);
      out += fmt::format("{}{}:{}:{}: {}{}:{}{} {}{}\n", bold, f.path, d->span.line, d->span.col, kind_color, kind,
                         reset, bold, d->message, reset);
      std::string line = printable(f.line(d->span.line));
      if (line.size() > 240) line = line.substr(0, 240) + "...";
      out += "  " + line + "\n";
      std::string caret = "  ";
      int col = std::max(1, d->span.col);
      for (int i = 1; i < col && i - 1 < static_cast<int>(line.size()); ++i) caret += line[i - 1] == '\t' ? '\t' : ' ';
      int width = 1;
      if (d->span.end_line == d->span.line && d->span.end_col > d->span.col) width = d->span.end_col - d->span.col;
      width = std::min(width, 120);
      out += std::string(green) + caret + "^" + std::string(width - 1, '~') + reset + "\n";
      // The fix under the caret, as clang prints one: what the marked text becomes.
      if (d->fix) out += std::string(green) + caret + printable(d->fix->replacement) + reset + "\n";
    }
    if (!d->hint.empty()) out += fmt::format("  {}hint:{} {}\n", green, reset, d->hint);
  }
  if (dropped_ > 0) out += fmt::format("sinkc: note: {} more diagnostics not shown\n", dropped_);
  if (errors_ > 0) out += fmt::format("{} error{} generated.\n", errors_, errors_ == 1 ? "" : "s");
  return out;
}

std::string apply_fixes(const std::string& text, int file, const std::vector<Diagnostic>& diagnostics, int* applied) {
  std::vector<size_t> line_starts{0};
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts.push_back(i + 1);
  struct Edit {
    size_t begin, end;
    const std::string* replacement;
  };
  std::vector<Edit> edits;
  for (const Diagnostic& d : diagnostics) {
    if (!d.fix || d.fix->span.file != file || d.fix->span.line < 1) continue;
    const Span& s = d.fix->span;
    if (s.line > static_cast<int>(line_starts.size()) || s.end_line != s.line) continue;
    const size_t begin = line_starts[s.line - 1] + s.col - 1, end = line_starts[s.line - 1] + s.end_col - 1;
    if (end > text.size() || end <= begin) continue;
    edits.push_back({begin, end, &d.fix->replacement});
  }
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
  std::string out;
  size_t at = 0;
  int count = 0;
  for (const Edit& e : edits) {
    if (e.begin < at) continue;  // overlaps the one before
    out += text.substr(at, e.begin - at) + *e.replacement;
    at = e.end;
    ++count;
  }
  if (applied) *applied = count;
  return out + text.substr(at);
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 1 << 30;
  int limit = std::max(1, static_cast<int>(word.size()) / 3 + 1);
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: a candidate that
    // far off cannot be the hint, and the quadratic distance is not worth
    // computing (on fuzzed input it was most of the front end's time).
    if (std::abs(static_cast<int>(c.size()) - static_cast<int>(word.size())) > limit) continue;
    int d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // Replacing every letter of the word is no hint ('x' -> 'a').
  return best_d <= limit && best_d < static_cast<int>(word.size()) ? best : "";
}

}  // namespace sink
