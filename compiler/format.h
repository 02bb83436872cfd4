// `sinkc fmt`: one canonical layout of a spec. Two-space indents, one
// statement per line in a block written over several lines, a block written
// on one line kept on one line (statements two spaces apart) while it fits
// 120 columns, one blank line where the source had one or more, no
// semicolons, operators spaced, expressions with the parentheses their
// precedence needs. Comments are kept where they were: on their own line,
// or after the code of their line. Idempotent, and the plans (their
// hashes) of a formatted file are the plans of the original.
#pragma once
#include <optional>
#include <string>

namespace sink {

// The formatted text; nullopt, with the diagnostics rendered into `errors`, for a file that does not parse.
std::optional<std::string> format_spec(const std::string& path, const std::string& text, std::string& errors);

}  // namespace sink
