// The Language Server Protocol's wire format (base protocol, LSP 3.17):
// `Content-Length: N` headers, a blank line, N bytes of JSON-RPC. And the
// document positions it speaks in: 0-based lines, characters counted in
// UTF-16 code units unless the client agreed to UTF-8.
#pragma once
#include <cstddef>
#include <istream>
#include <optional>
#include <ostream>
#include <string>

namespace sink::lsp {

// Messages larger than this are read and dropped (a broken or hostile client).
constexpr size_t kMaxMessageBytes = 64u << 20;

// The next message's body; nullopt at the end of the input. A message with
// bad headers yields "" (the caller answers a parse error), never a hang.
std::optional<std::string> read_message(std::istream& in);
void write_message(std::ostream& out, const std::string& body);

enum class Encoding { Utf16, Utf8 };

// Byte offset in `text` of an LSP position, clamped to the text (a position
// past a line's end is that line's end; past the last line, the text's end).
size_t offset_of(const std::string& text, long line, long character, Encoding encoding);

struct Position {
  long line = 0, character = 0;
};
// The LSP position of a byte offset.
Position position_of(const std::string& text, size_t offset, Encoding encoding);
// The byte offset where 1-based `line` starts, or the text's size.
size_t line_start(const std::string& text, int line);

// file:///a%20b.sink <-> /a b.sink; anything else maps to itself.
std::string path_of_uri(const std::string& uri);
std::string uri_of_path(const std::string& path);

}  // namespace sink::lsp
