#include "lsp/protocol.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace sink::lsp {

std::optional<std::string> read_message(std::istream& in) {
  long long length = -1;
  bool bad = false;
  std::string line;
  bool any = false;
  while (std::getline(in, line)) {
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      bad = true;
      continue;
    }
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name == "content-length") {
      try {
        length = std::stoll(line.substr(colon + 1));
      } catch (const std::exception&) {
        bad = true;
      }
    }
  }
  if (!any || (!in && length < 0)) return std::nullopt;
  if (bad || length < 0) return std::string();
  std::string body;
  if (static_cast<unsigned long long>(length) > kMaxMessageBytes) {
    in.ignore(length);
    return std::string();
  }
  body.resize(static_cast<size_t>(length));
  in.read(body.data(), length);
  if (in.gcount() != length) return std::nullopt;
  return body;
}

void write_message(std::ostream& out, const std::string& body) {
  out << "Content-Length: " << body.size() << "\r\n\r\n" << body;
  out.flush();
}

namespace {

// The code units a UTF-8 sequence starting with `lead` takes, and its length in bytes.
size_t sequence_bytes(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 1;
}

}  // namespace

size_t line_start(const std::string& text, int line) {
  size_t at = 0;
  for (int k = 1; k < line; ++k) {
    const size_t newline = text.find('\n', at);
    if (newline == std::string::npos) return text.size();
    at = newline + 1;
  }
  return at;
}

size_t offset_of(const std::string& text, long line, long character, Encoding encoding) {
  if (line < 0) return 0;
  if (line > static_cast<long>(std::count(text.begin(), text.end(), '\n'))) return text.size();
  size_t at = line_start(text, static_cast<int>(line) + 1);
  long units = 0;
  while (at < text.size() && text[at] != '\n' && units < character) {
    const size_t n = std::min(sequence_bytes(static_cast<unsigned char>(text[at])), text.size() - at);
    units += encoding == Encoding::Utf8 ? static_cast<long>(n) : n == 4 ? 2 : 1;
    at += n;
  }
  return at;
}

Position position_of(const std::string& text, size_t offset, Encoding encoding) {
  offset = std::min(offset, text.size());
  Position p;
  size_t start = 0;
  for (size_t k = 0; k < offset; ++k)
    if (text[k] == '\n') ++p.line, start = k + 1;
  for (size_t at = start; at < offset;) {
    const size_t n = std::min(sequence_bytes(static_cast<unsigned char>(text[at])), offset - at);
    p.character += encoding == Encoding::Utf8 ? static_cast<long>(n) : n == 4 ? 2 : 1;
    at += n;
  }
  return p;
}

std::string path_of_uri(const std::string& uri) {
  if (uri.rfind("file://", 0) != 0) return uri;
  std::string out;
  for (size_t k = 7; k < uri.size(); ++k) {
    if (uri[k] == '%' && k + 2 < uri.size() && std::isxdigit(static_cast<unsigned char>(uri[k + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[k + 2]))) {
      out += static_cast<char>(std::stoi(uri.substr(k + 1, 2), nullptr, 16));
      k += 2;
    } else {
      out += uri[k];
    }
  }
  return out;
}

std::string uri_of_path(const std::string& path) {
  std::string out = "file://";
  for (unsigned char c : path) {
    const bool plain = std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~';
    out += plain ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
  }
  return out;
}

}  // namespace sink::lsp
