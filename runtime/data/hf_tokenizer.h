// Hugging Face's own tokenizers library for a checkpoint's tokenizer.json
// (byte-level BPE: GPT-2, Pythia, OPT, LLaMA 3). The library is Rust with
// Python bindings and no C++ API, so the runtime runs a Python that has it:
// $SINKLAB_PYTHON when set, else python3 on PATH. A hand-written BPE would be
// a second implementation to keep in step with it; this is the reference one.
#pragma once
#include <memory>
#include <string>

#include "runtime/data/tokenizer.h"

namespace sink::rt {

// The Python the tokenizer runs and how it was found ("SINKLAB_PYTHON" or
// "python3 on PATH"); path is empty, with `how` saying why, when there is none.
struct PythonFound {
  std::string path, how;
};
PythonFound find_python();

// Encodes without special tokens (`--bos with` adds the checkpoint's BOS).
// Throws std::runtime_error naming `tokenizer_json`, the Python, and --ids as
// the way out when no Python with tokenizers can be run; ids outside [0, vocab)
// are an error too.
std::unique_ptr<Tokenizer> hf_tokenizer(const std::string& tokenizer_json, int64_t vocab);

}  // namespace sink::rt
