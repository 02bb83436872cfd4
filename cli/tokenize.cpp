#include "cli/tokenize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>

#include "plan/plan.h"
#include "plan/run_config.h"
#include "tokens/corpus_tokens.h"

namespace sink::cli {

int fill_token_caches(const std::vector<std::string>& plan_files, const std::string& out, bool quiet) {
  const tokens::SentencePiece& spm =
      tokens::sentencepiece_linked() ? *tokens::sentencepiece_linked() : tokens::sentencepiece_programs();
  const std::string cache = tokens::token_cache_dir(out + "/.cache");
  std::set<std::string> seen;  // a sweep's runs mostly share one corpus: checked once
  int status = 0;
  for (const auto& file : plan_files) {
    try {
      const DataConfig cfg = read_config(read_plan(file)).data;
      if (tokens::text_corpus_files(cfg).empty()) continue;  // synthetic, or token files already
      const std::string what =
          fmt::format("{} {} {} {} {}", name_of(cfg.corpus), cfg.corpus_arg, name_of(cfg.tokenizer),
                      cfg.tokenizer_vocab, cfg.tokenizer_path) +
          (cfg.tokenizer == TokenizerKind::sentencepiece ? fmt::format(" {}", cfg.valid_fraction) : "");
      if (!seen.insert(what).second) continue;
      auto t = tokens::corpus_tokens(cfg, cache, spm, [](const std::string& m) { fmt::print(stderr, "{}\n", m); });
      if (!t.built && !quiet)
        fmt::print(stderr, "tokens: {} documents, {} tokens in {} (already there)\n", t.file.documents,
                   t.file.tokens.size(), t.dir);
    } catch (const std::exception& e) {
      fmt::print(stderr, "sinkc: cannot tokenize the corpus of {}: {}\n", file, e.what());
      status = 1;
    }
  }
  return status;
}

int tokenize(const std::vector<std::string>& targets, const std::vector<std::string>& runs, const std::string& out,
             const CommonOptions& common, bool quiet) {
  std::vector<std::string> plan_files;
  if (int rc = plans_for_runtime(targets, out, common, plan_files); rc != 0) return rc;
  if (!select_plan_files(plan_files, runs, fmt::format("{}", fmt::join(targets, ", ")))) return 2;
  return fill_token_caches(plan_files, out, quiet);
}

}  // namespace sink::cli
