#include "kernels/llvm/emit_llvm.h"

#include <fmt/format.h>

#include "kernels/kernel_abi.h"
#include "kernels/llvm/generator.h"

namespace sink::kernels {
namespace {

// Lines of `text` with repeats dropped (the declarations of three functions).
std::string unique_lines(const std::string& text) {
  std::string out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start + 1);
    if (out.find(line) == std::string::npos) out += line;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string Generator::module() {
  std::string out;
  out += "; sinklab attention kernel " + spec.hash() + "\n";
  out += "; " + spec.describe() + "\n";
  out += "; s(qk, i, j)  = " + to_string(spec.score) + "\n";
  out += "; ds/dqk       = " + to_string(score_grad) + "   (symbolic, plan/symbolic.cpp)\n";
  out += "; normalize = " + spec.norm->name + ": " + spec.norm->formula + "\n";
  out += spec.online ? "; online form: s = exp(qk - m) with the running row max m, rescaled per block\n" : "";
  out += spec.sink_logit ? "; a sink logit b per head: one more column, of no value\n" : "";
  out += "; rows: query i sees keys j in [lo(i), hi(i)] (causal" + std::string(spec.rule.prefix ? ", prefix" : "") +
         (spec.rule.window ? ", window" : "") + ")" + (spec.rule.of_range_alone() ? "" : "; " + spec.rule.describe()) +
         (spec.key_bias ? "; the k* column comes first" : "") + "\n";
  out += fmt::format("; keys in blocks of {} lanes: one vector of logits, one vectorized exp per block and row\n",
                     kKeyBlock);
  out += "; layout: rows [T, D]; kt, vt, qt, doutt transposed [D, Tp] (zero padded); stats [2, Tp]; delta [Tp]\n\n";
  out += forward() + "\n" + backward() + "\n" + probe();
  return out + "\n" + unique_lines(declarations_);
}

// Measurement only: one row, one column at a time.
std::string Generator::probe() {
  IrText b = body();
  const int64_t cols = spec.key_bias ? 1 : 0;
  std::string out = "; probe: row i of the weights w (A = alpha w / Z) the sink metric reads, [T, T + k* column]\n" +
                    abi::host_signature(abi::kProbeSymbol, abi::kProbe) + " {\nentry:\n  %width = add i64 %T, " +
                    std::to_string(cols) + "\n";
  open_loop(b, "i", "0", "entry", "icmp slt i64 %i, %T");
  auto [lo, hi] = key_range(b, "%i");
  std::string qi = b.load_row("%q", "%i");
  std::string pos_i = position(b, "%i");
  std::string shift_or_sum = b.load("%stats", b.op("add i64 %Tp, %i"));
  std::string row0 = b.op("mul i64 %i, %width");
  auto logit = [&](const std::string& key_row) { return b.fmul(b.dot(qi, key_row), b.num(scale_qk())); };
  auto value = [&](const std::string& x, const std::string& pos_j) {
    return column_weight(b, b.scalar, x, pos_i, pos_j, shift_or_sum);
  };
  if (spec.key_bias) b.store(value(logit(b.load_vec("%kstar")), b.num(0)), "%out", row0);
  open_loop(b, "j", lo, "i.body", "icmp sle i64 %j, " + hi);
  std::string x = logit(b.load_row("%k", "%j"));
  if (spec.position_bias) x = b.fadd(x, b.load("%g", dist(b, "%i", "%j")));
  std::string at = b.op("add i64 " + row0 + ", " + b.op("add i64 %j, " + std::to_string(cols)));
  std::string w = value(x, position(b, "%j"));
  if (const Visibility& v = spec.rule; v.checks_pairs()) {  // (a hidden pair inside the range: weight 0)
    const std::string pair = index_expr(b, v.pair, {{"i", "%i"}, {"j", "%j"}, {"T", "%T"}});
    w = b.select(b.op("icmp sgt i64 " + pair + ", 0"), b.scalar, w, b.num(0));
  }
  b.store(w, "%out", at);
  close_loop(b, "j", 1);
  close_loop(b, "i", 1);
  b.line("ret void");
  return out + finish(b) + "}\n";
}

std::string emit_llvm(const KernelSpec& spec) { return Generator(spec).module(); }

}  // namespace sink::kernels
