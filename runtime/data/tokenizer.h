// The tokenizers live in the torch-free tokens library (tokens/tokenizer.h), which the front end shares.
#pragma once
#include "tokens/tokenizer.h"

namespace sink::rt {
using tokens::byte_tokenizer;
using tokens::llama2c_tokenizer;
using tokens::sentencepiece_model_tokenizer;
using tokens::sentencepiece_tokenizer;
using tokens::Tokenizer;
}  // namespace sink::rt
