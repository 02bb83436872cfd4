// Corpus files and the documents in them: .txt (one document per file), .jsonl (a "text" field per line),
// .jsonl.zst (the same, zstd-compressed: the Pile's own shards), and .bin (uint16 token ids). Torch-free:
// the front end reads corpora to tokenize them, the runtime to train on them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sink::tokens {

// The files `pattern` (a shell glob) matches, sorted; throws naming the pattern when there are none.
std::vector<std::string> corpus_files(const std::string& pattern);

// One file's documents; throws std::runtime_error naming the file (and line) for a malformed one.
std::vector<std::string> file_documents(const std::string& path);
// The same, one at a time as they are read: a Pile shard (15 GB of zstd) is never whole in memory.
void for_each_document(const std::string& path, const std::function<void(std::string&&)>& each);

// Every document of every file `pattern` matches, and a .bin's tokens (returned via tokens_out).
std::vector<std::string> read_documents(const std::string& pattern, std::vector<int32_t>* tokens_out);

bool is_token_file(const std::string& path);  // .bin: token ids, not text

}  // namespace sink::tokens
