// LLVM IR (text) for one attention variant: forward, backward and probe,
// specialized on the score expression, normalizer, masks, bias columns and
// d_head. Text keeps the compiler free of the LLVM libraries (sinkc starts in
// milliseconds); the runtime parses, optimizes (O3, host CPU) and JITs it.
//
// Every function works on one (batch, head) slice; rows of q, k, v, o are
// d_head elements apart. The C signatures are in runtime/attention/jit_attention.cpp.
#pragma once
#include <string>

#include "kernels/kernel_spec.h"

namespace sink::kernels {

// Keys are processed in blocks of this many columns: one vector of logits,
// one vectorized exp and (softmax) one rescale of the running sums per block.
// The kernels read k (and v in backward) transposed, [d_head, Tp] with
// Tp >= T + kKeyBlock and zero padding, so a block's logits are D vector FMAs.
constexpr int kKeyBlock = 16;

// A whole module: the three functions plus comments that show the variant.
std::string emit_llvm(const KernelSpec& spec);

}  // namespace sink::kernels
