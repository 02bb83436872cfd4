// The token cache filled where the front end runs (tokens/corpus_tokens.h): `sinkc tokenize`, and before
// `sinkc run`, `submit` and `bisect` hand their plans on, so that the runtime, on this machine or a GPU node
// that has no SentencePiece, maps the tokens and never encodes them.
#pragma once
#include <string>
#include <vector>

#include "cli/commands.h"

namespace sink::cli {

// Every plan's text corpus, tokenized into the token cache of `out` (OUT/.cache/tokens, or
// $SINKLAB_TOKEN_CACHE) unless it is there. SentencePiece linked when sinkc is built with it, else the spm
// programs. `quiet`: nothing said about entries already there. 0, or 1 when a corpus could not be tokenized
// (said on stderr).
int fill_token_caches(const std::vector<std::string>& plan_files, const std::string& out, bool quiet);

// `sinkc tokenize TARGETS`: compiles the specs (as `sinkc run` does, into OUT/.plans) and fills the cache.
// Exit status as plans_for_runtime's, or fill_token_caches's.
int tokenize(const std::vector<std::string>& targets, const std::vector<std::string>& runs, const std::string& out,
             const CommonOptions& common, bool quiet);

}  // namespace sink::cli
