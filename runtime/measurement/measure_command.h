// `sinkc measure TARGET`: the sink metrics of a trained run, a llama2.c
// checkpoint, or a Hugging Face model folder (config.json + *.safetensors),
// and what a sink costs on the same inputs: the next-token loss in full, under
// a window keeping K first tokens, after fake quantization, and on inputs
// F times as long (positions past T: with --T the trained context, past it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sink::rt {

struct MeasureOptions {
  std::string target;
  std::string input;            // natural | random | repeat | ids; empty: the run's measure.input, else random
  std::string text;             // natural input: this text, or
  std::string text_file;        //   this file's text (else the builtin corpus's prose)
  std::string ids_file;         // pre-tokenized ids (whitespace-separated integers), for byte-level BPE tokenizers
  std::string tokenizer;        // llama2.c tok*.bin; Hugging Face folders use their tokenizer.model
  std::string bos;              // with | without | auto; empty: the run's measure.bos, else without
  std::string format = "text";  // text | json
  double eps = 0.3;
  int64_t T = 64, n = 100;
  std::vector<int64_t> positions;
  // What a sink costs on the same inputs (runtime/measurement/sink_costs.h): the loss under a window of `window`
  // keys (0: a quarter of T) keeping each count of first tokens, after WbAb fake quantization for each b, and on
  // inputs of the same kind F x T long for each F (as many tokens, in max(1, n / F) sequences).
  int64_t window = 0;
  std::vector<int64_t> window_keeps = {0, 1, 4}, quantized_bits = {8, 6}, longer_contexts = {2, 4};
};

// Prints the report; returns the process exit code. Throws
// std::runtime_error for a target it cannot read.
int measure_command(MeasureOptions options);

}  // namespace sink::rt
