// Absolute position tables shared by the model and `export --hf`.
#pragma once
#include <torch/torch.h>

namespace sink::rt {

// The fixed sinusoidal position table [T, d] (sin on even channels, cos on
// odd), on the CPU: what pe = sinusoidal adds to the embeddings, and what
// `export --hf` writes as GPT-2's or OPT's position table.
torch::Tensor sinusoidal_positions(int64_t T, int64_t d);

}  // namespace sink::rt
