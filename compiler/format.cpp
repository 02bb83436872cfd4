#include "compiler/format.h"

#include <algorithm>
#include <climits>
#include <fmt/format.h>

#include "compiler/parse.h"

namespace sink {
namespace {

constexpr size_t kWidth = 120;

struct Comment {
  int line = 0, col = 0;  // 1-based, bytes
  int end_line = 0;
  std::string text;
};

// Every comment of a file that lexes: outside strings, `//` to the end of the line and `/*` to `*/`.
std::vector<Comment> comments_of(const std::string& text) {
  std::vector<Comment> out;
  int line = 1, col = 1;
  auto advance = [&](size_t& i) {
    if (text[i] == '\n')
      ++line, col = 1;
    else
      ++col;
    ++i;
  };
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '"') {
      advance(i);
      while (i < text.size() && text[i] != '"' && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < text.size()) advance(i);
        advance(i);
      }
      if (i < text.size()) advance(i);
    } else if (text.compare(i, 2, "//") == 0 || text.compare(i, 2, "/*") == 0) {
      Comment c{line, col, line, ""};
      const bool block = text[i + 1] == '*';
      const size_t start = i;
      if (block) {
        const size_t close = text.find("*/", i + 2);
        const size_t stop = close == std::string::npos ? text.size() : close + 2;
        while (i < stop) advance(i);
      } else {
        while (i < text.size() && text[i] != '\n') advance(i);
      }
      c.text = text.substr(start, i - start);
      while (!c.text.empty() && (c.text.back() == ' ' || c.text.back() == '\t' || c.text.back() == '\r'))
        c.text.pop_back();
      c.end_line = line;
      out.push_back(std::move(c));
    } else {
      advance(i);
    }
  }
  return out;
}

bool before(int line, int col, int other_line, int other_col) {
  return line < other_line || (line == other_line && col < other_col);
}

// Binding strength, loosest first; atoms bind tightest.
int precedence(const ast::Expr& e) {
  if (e.kind == ast::Expr::Kind::Binary) return e.text == "^" ? 4 : (e.text == "*" || e.text == "/") ? 2 : 1;
  if (e.kind == ast::Expr::Kind::Neg) return 3;
  return 5;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out + "\"";
}

std::string expr(const ast::Expr& e) {
  using Kind = ast::Expr::Kind;
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string&& (bug 105329).
  auto wrapped = [](const ast::Expr& x, bool paren) {
    if (!paren) return expr(x);
    std::string out = "(";
    out += expr(x);
    return out += ")";
  };
  switch (e.kind) {
    case Kind::Number: return e.tokens_unit ? e.text + " tokens" : e.text;
    case Kind::String: return quoted(e.text);
    case Kind::Name: return e.text;
    case Kind::Call: {
      std::string out = e.text + "(";
      for (size_t k = 0; k < e.children.size(); ++k) {
        if (k) out += ", ";
        if (k < e.arg_names.size() && !e.arg_names[k].empty()) out += e.arg_names[k] + " = ";
        out += expr(e.children[k]);
      }
      return out + ")";
    }
    case Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < e.children.size(); ++k) {
        if (k) out += ", ";
        out += expr(e.children[k]);
      }
      return out + "]";
    }
    case Kind::Neg: {
      std::string out = "-";
      return out += wrapped(e.children[0], precedence(e.children[0]) <= 3);
    }
    case Kind::Binary: {
      const int p = precedence(e);
      const bool right_assoc = e.text == "^";
      const int lp = precedence(e.children[0]), rp = precedence(e.children[1]);
      const std::string op = right_assoc ? "^" : " " + e.text + " ";
      return wrapped(e.children[0], right_assoc ? lp <= p : lp < p) + op +
             wrapped(e.children[1], right_assoc ? rp < p : rp <= p);
    }
  }
  return e.text;
}

bool braced(const LayoutNode& n) {
  return n.kind == LayoutNode::Kind::Experiment || n.kind == LayoutNode::Kind::Sweep ||
         n.kind == LayoutNode::Kind::Block;
}

// A node's text before its block, or the whole of a statement; `width` pads the name (alignment).
std::string head(const LayoutNode& n, size_t width = 0) {
  using Kind = LayoutNode::Kind;
  const std::string name = n.name + std::string(width > n.name.size() ? width - n.name.size() : 0, ' ');
  switch (n.kind) {
    case Kind::Import: return "import " + n.name;
    case Kind::Experiment: return "experiment " + name + (n.base.empty() ? "" : " extends " + n.base);
    case Kind::Sweep: return "sweep " + n.name + " over " + n.base;
    case Kind::Block: return n.name;
    case Kind::Assign: return name + " = " + expr(n.values[0]);
    case Kind::Axis: return n.name + " in " + expr(n.values[0]);
    case Kind::Fix: return "fix token " + expr(n.values[0]) + " at " + expr(n.values[1]);
    case Kind::Random: return "random at " + expr(n.values[0]);
  }
  return "";
}

// A node on one line: statements two spaces apart inside `{ }`.
std::string one_line(const LayoutNode& n, size_t width = 0) {
  if (!braced(n)) return head(n, width);
  if (n.children.empty()) return head(n, width) + " {}";
  std::string out = head(n, width) + " { ";
  for (size_t k = 0; k < n.children.size(); ++k) out += (k ? "  " : "") + one_line(n.children[k]);
  return out + " }";
}

// Names the source aligned stay aligned: in a run of lines on consecutive lines, each one statement `name = value`
// or one experiment `experiment name extends base { ... }`, whose `=` (or `extends`) the source put in one column
// past at least one name's end, every name is padded to the longest. Elsewhere one space. The width per sibling.
std::vector<size_t> aligned_widths(const std::vector<LayoutNode>& siblings, const std::string& text,
                                   const std::vector<size_t>& line_starts) {
  std::vector<size_t> width(siblings.size(), 0);
  // The pivot's offset from the node's first column, or -1 when the node cannot take part.
  auto pivot = [&](size_t k) -> long {
    const LayoutNode& n = siblings[k];
    const bool alone = (k == 0 || siblings[k - 1].span.end_line != n.span.line) &&
                       (k + 1 == siblings.size() || siblings[k + 1].span.line != n.span.end_line);
    const bool kind_ok =
        n.kind == LayoutNode::Kind::Assign || (n.kind == LayoutNode::Kind::Experiment && !n.base.empty());
    if (!alone || !kind_ok || n.span.line != n.span.end_line || n.span.line < 1 ||
        static_cast<size_t>(n.span.line) > line_starts.size())
      return -1;
    const size_t start = line_starts[n.span.line - 1] + static_cast<size_t>(n.span.col - 1);
    const size_t after_name = text.find(n.name, n.kind == LayoutNode::Kind::Assign ? start : start + 10);
    if (after_name == std::string::npos) return -1;
    const size_t at = text.find_first_not_of(" \t", after_name + n.name.size());
    return at == std::string::npos ? -1 : static_cast<long>(at - start);
  };
  for (size_t k = 0; k < siblings.size();) {
    size_t end = k;
    const long col = pivot(k);
    while (col >= 0 && end + 1 < siblings.size() && siblings[end + 1].kind == siblings[k].kind &&
           siblings[end + 1].span.line == siblings[end].span.end_line + 1 && pivot(end + 1) == col)
      ++end;
    if (end > k) {
      size_t longest = 0;
      bool padded = false;
      for (size_t j = k; j <= end; ++j) {
        longest = std::max(longest, siblings[j].name.size());
        const size_t name_start = siblings[j].kind == LayoutNode::Kind::Assign ? 0 : 11;  // "experiment "
        padded |= static_cast<size_t>(col) > name_start + siblings[j].name.size() + 1;
      }
      if (padded)
        for (size_t j = k; j <= end; ++j) width[j] = longest;
    }
    k = end + 1;
  }
  return width;
}

class Formatter {
 public:
  Formatter(const SourceFile& source, std::vector<Comment> comments)
      : source_(source), comments_(std::move(comments)) {}

  void nodes(const std::vector<LayoutNode>& list) {
    const std::vector<size_t> widths = aligned_widths(list, source_.text, source_.line_starts);
    for (size_t k = 0; k < list.size(); ++k) node(list[k], widths[k]);
  }

  void node(const LayoutNode& n, size_t width) {
    comments_before(n.span.line, n.span.col);
    start_line(n.span.line, true);
    if (!braced(n)) {
      write(head(n, width));
      last_line_ = n.span.end_line;
      return;
    }
    const std::string flat = one_line(n, width);
    const bool on_one_line = (n.open.line == n.close.line || n.children.empty()) && !comment_between(n.open, n.close) &&
                             indent_ * 2 + flat.size() <= kWidth;
    if (on_one_line) {
      write(flat);
      last_line_ = n.close.end_line;
      return;
    }
    write(head(n, width) + " {");
    last_line_ = n.open.line;  // a comment after `{` stays there
    ++indent_;
    block_start_ = true;
    const std::vector<size_t> widths = aligned_widths(n.children, source_.text, source_.line_starts);
    for (size_t k = 0; k < n.children.size(); ++k) {
      // Statements the source put on one line stay on one line, two spaces apart.
      const LayoutNode& child = n.children[k];
      if (k > 0 && line_open_ && child.span.line == last_line_ && child.span.line == child.span.end_line &&
          !comment_before(child.span) && column() + 2 + one_line(child).size() <= kWidth) {
        write("  " + one_line(child));
        last_line_ = child.span.end_line;
      } else {
        node(child, widths[k]);
      }
    }
    comments_before(n.close.line, n.close.col);
    --indent_;
    start_line(n.close.line, false);
    write("}");
    last_line_ = n.close.end_line;
  }

  std::string finish() {
    comments_before(INT_MAX, INT_MAX);
    if (line_open_) write('\n');
    align_trailing_comments();
    return out_;
  }

 private:
  // The comments before (line, col): after the code of the current line when they are on its source line, each on
  // its own line otherwise.
  void comments_before(int line, int col) {
    while (next_ < comments_.size() && before(comments_[next_].line, comments_[next_].col, line, col)) {
      const Comment& c = comments_[next_++];
      if (line_open_ && c.line == last_line_) {
        trails_.push_back({newlines_, column(), c.col, c.col > code_end_col(c)});
        write("  " + c.text);
      } else {
        start_line(c.line, true);
        write(c.text);
      }
      last_line_ = c.end_line;
    }
  }

  void write(const std::string& text) {
    out_ += text;
    newlines_ += static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  void write(char c) { write(std::string(1, c)); }

  // Where the code before a trailing comment ends in the source, plus the two spaces it needs.
  int code_end_col(const Comment& c) const {
    const std::string line = source_.line(c.line).substr(0, static_cast<size_t>(c.col - 1));
    const size_t end = line.find_last_not_of(" \t");
    return end == std::string::npos ? 1 : static_cast<int>(end) + 1 + 1 + 2;
  }

  // Trailing comments the source aligned in one column on consecutive lines stay aligned, two spaces past the
  // longest line of code among them.
  void align_trailing_comments() {
    std::vector<std::string> lines;
    for (size_t start = 0; start < out_.size();) {
      const size_t end = out_.find('\n', start);
      lines.push_back(out_.substr(start, end - start));
      start = end == std::string::npos ? out_.size() : end + 1;
    }
    for (size_t k = 0; k < trails_.size();) {
      size_t end = k;
      while (end + 1 < trails_.size() && trails_[end + 1].line == trails_[end].line + 1 &&
             trails_[end + 1].source_col == trails_[k].source_col)
        ++end;
      bool padded = false;
      size_t longest = 0;
      for (size_t j = k; j <= end; ++j) padded |= trails_[j].padded, longest = std::max(longest, trails_[j].code);
      if (end > k && padded)
        for (size_t j = k; j <= end; ++j) {
          std::string& line = lines[trails_[j].line];
          line.insert(trails_[j].code, longest - trails_[j].code, ' ');
        }
      k = end + 1;
    }
    out_.clear();
    for (const auto& line : lines) out_ += line + '\n';
  }

  // A comment not yet written that comes before `span`.
  bool comment_before(const Span& span) const {
    return next_ < comments_.size() && before(comments_[next_].line, comments_[next_].col, span.line, span.col);
  }

  size_t column() const {
    const size_t newline = out_.rfind('\n');
    return newline == std::string::npos ? out_.size() : out_.size() - newline - 1;
  }

  bool comment_between(const Span& open, const Span& close) const {
    for (size_t k = next_; k < comments_.size(); ++k)
      if (before(open.line, open.col, comments_[k].line, comments_[k].col) &&
          before(comments_[k].line, comments_[k].col, close.line, close.col))
        return true;
    return false;
  }

  // A new output line at the current indent; one blank line first where the source had one (not at the start of
  // a block, nor before its `}`).
  void start_line(int source_line, bool blank_allowed) {
    if (line_open_) write('\n');
    if (blank_allowed && !block_start_ && !out_.empty() && source_line > last_line_ + 1) write('\n');
    write(std::string(static_cast<size_t>(indent_) * 2, ' '));
    line_open_ = true;
    block_start_ = false;
  }

  struct Trail {
    size_t line;     // of the output
    size_t code;     // the output line's length before the comment
    int source_col;  // the comment's column in the source
    bool padded;     // the source put more than two spaces before it
  };
  const SourceFile& source_;
  std::vector<Trail> trails_;
  size_t newlines_ = 0;
  std::vector<Comment> comments_;
  size_t next_ = 0;
  std::string out_;
  int indent_ = 0;
  int last_line_ = 0;  // the source line where what was written last ends
  bool line_open_ = false;
  bool block_start_ = false;
};

}  // namespace

std::optional<std::string> format_spec(const std::string& path, const std::string& text, std::string& errors) {
  SourceManager sources;
  const int file = sources.add(path, text);
  Diagnostics diags(sources);
  auto layout = parse_layout(file, sources, diags);
  if (!layout || diags.has_errors()) {
    errors = diags.render();
    if (errors.empty()) errors = path + ": does not parse\n";
    return std::nullopt;
  }
  Formatter f(sources.file(file), comments_of(text));
  f.nodes(*layout);
  return f.finish();
}

}  // namespace sink
