// The kernel generator's shared part: what the forward, backward and probe
// emitters (emit_forward.cpp, emit_backward.cpp, emit_llvm.cpp) all use —
// loops over groups of rows, masks, the blocked dot products, the score
// expression and its gradient.
//
// The layout the kernels work on, per (batch, head) slice:
//   q, k, v, o, dout: [T, D] rows;  kt, vt, qt, doutt: the same transposed,
//   [D, Tp] with Tp >= T + kKeyBlock, zero padded;  stats: [2, Tp], Z and,
//   in the online form, the row max m (Z is then of the shifted scores), in
//   the direct form the row's sum of normaliser terms P (plan/normalizers.h);
//   delta: [Tp] scratch for <dO_i, O_i>;  sink: the head's sink logit b
//   (one value), dsink: the slice's sum of its gradient (one value).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/llvm/emit_llvm.h"
#include "kernels/llvm/ir_text.h"
#include "plan/column_algebra.h"

namespace sink::kernels {

// Values of an expression's variables: x (= qk), i and j (1-based; T is the kernel's own), and the
// normaliser's (s, P, Z: plan/normalizers.h) by name, all of one type.
struct ScoreEnv {
  std::string x, i, j;
  std::vector<std::pair<std::string, std::string>> named = {};
};
// Only named variables (a normaliser's expressions).
inline ScoreEnv named_values(std::vector<std::pair<std::string, std::string>> values) {
  ScoreEnv env;
  env.named = std::move(values);
  return env;
}
std::string emit_expr(IrText& b, const Ty& t, const ExprNode& e, const ScoreEnv& env);

// A value carried around a loop: a phi at its head.
struct Carried {
  std::string name;  // "%kb.acc0"; the loop's next value replaces "%kb.acc0.next"
  std::string type;
  std::string init;
};

// acc[r] += sum over a block's columns c of weights[r][c] * rows[c].
struct WeightedSum {
  std::string rows;                  // base of [T, D] rows
  std::vector<std::string> weights;  // per accumulator, a lane vector
  std::vector<std::string> acc;      // per accumulator, a row
};

// target[c] += sum over r of weights[r][c] * vectors[r], for each column c
// of a block: a read-modify-write of row c, once per block, not per pair.
struct Scatter {
  std::string target;                // base of [T, D] rows
  std::vector<std::string> weights;  // per vector, a lane vector
  std::vector<std::string> vectors;  // rows held in registers
};

// What the forward carries per row: the shift m (the online form's running row max) and the sum of terms P.
struct RowState {
  std::string m, P;
};
// Columns folded into a row: its new state, the columns' weights w(s) (A = alpha w / Z at the end), and
// what the weights so far are scaled by as m grows ("" in the direct form).
struct Folded {
  RowState row;
  std::string weights, rescale;
};
// A row's finish: its divisor Z (O is alpha / Z times what it summed) and the statistics it stores, stats[0][i] and
// stats[1][i].
struct FinishedRow {
  std::string Z, divisor, shift_or_sum;
};
// What the backward reads of a row: its divisor, 1 / divisor, and its shift m (online) or sum P.
struct BackwardRow {
  std::string divisor, inv_divisor, shift_or_sum;
};

// R rows handled together: indices clamped to T - 1 (so loads stay in
// bounds; a clamped duplicate recomputes row T - 1) and whether each is real.
struct RowGroup {
  std::vector<std::string> index;  // i64
  std::vector<std::string> real;   // i1
};

class Generator {
 public:
  explicit Generator(const KernelSpec& s);
  std::string module();

 private:
  const KernelSpec& spec;
  ExprNode score_grad;
  NormalizerForm norm;    // the normaliser's expressions, its parameter bound
  ColumnAlgebra columns;  // the fold, the divisor and a column's gradient over them
  std::string declarations_;

  IrText body() const;
  std::string finish(IrText& b);  // the body text; keeps its declarations
  double scale_qk() const;

  std::string forward();
  std::string backward();
  void backward_rows(IrText& b);
  void backward_columns(IrText& b);
  std::string probe();

  // A loop with counter %NAME from `start` (entered from block `from_label`)
  // while `condition_rhs` (an icmp on %NAME) holds; blocks NAME.head, .body,
  // .latch, .exit. close_loop ends the body, steps the counter and gives each
  // carried value its next value; code after it is in NAME.exit.
  static void open_loop(IrText& b, const std::string& name, const std::string& start, const std::string& from_label,
                        const std::string& condition_rhs, const std::vector<Carried>& carried = {});
  static void close_loop(IrText& b, const std::string& name, int64_t step,
                         const std::vector<std::pair<std::string, std::string>>& next = {});
  static RowGroup row_group(IrText& b, const std::string& first, int rows);
  // A visibility bound (plan/visibility.h) over i64 values, or over <kKeyBlock x i64> lanes where `lanes`:
  // `values` names the IR value of each variable it reads (i, j, T).
  static std::string index_expr(IrText& b, const ExprNode& e,
                                const std::vector<std::pair<std::string, std::string>>& values, bool lanes = false);
  // The allowed key range [lo, hi] of query row i: scalar i64, or per lane of a <kKeyBlock x i64> `i`.
  std::pair<std::string, std::string> key_range(IrText& b, const std::string& i, bool lanes = false);
  // `valid` (an i1 per lane) and, where the rule checks pairs, whether query i sees key j (i64 lanes).
  std::string and_visible_pairs(IrText& b, const std::string& valid, const std::string& i, const std::string& j);
  // The queries that may see key j: [first, last] (scalar i64).
  std::pair<std::string, std::string> query_range(IrText& b, const std::string& j);
  // Lanes of the block starting at `start`: <W x i64> indices and the same clamped to `last`.
  static std::string lane_indices(IrText& b, const std::string& start);
  static std::vector<std::string> clamped_lanes(IrText& b, const std::string& start, const std::string& last);
  static std::string splat_int(IrText& b, const std::string& v, const std::string& type = "i64");
  static std::string lane_ints(int64_t v0, int64_t step);
  static std::string dist(IrText& b, const std::string& i, const std::string& j);
  static std::string position(IrText& b, const std::string& index);

  // out[r] = <rows[index_r], columns start..start+W-1 of transposed>: each
  // column vector is loaded once for all R rows.
  std::vector<std::string> block_dots(IrText& b, const std::string& rows, const RowGroup& g,
                                      const std::string& transposed, const std::string& start);

  // The weighted sums of a block, columns start..min(start + W - 1, last), as
  // a loop over the columns that reads each row once for every accumulator
  // and broadcasts the weights from a stack buffer (%wbuf, see weights_buffer).
  // Unrolled, LLVM would load all W rows up front and spill them.
  std::vector<std::vector<std::string>> weighted_rows(IrText& b, const std::string& name, const std::string& from_label,
                                                      const std::string& start, const std::string& last,
                                                      const std::vector<WeightedSum>& sums,
                                                      const Scatter* scatter = nullptr);
  static void weights_buffer(IrText& b);

  // The online form's shift for a running max m: m, or 0 while m = -inf (no column seen yet).
  static std::string shift_of(IrText& b, const std::string& m);
  // Columns of logits x (type t: a scalar column, or lanes where `valid`, an i1 vector) folded into `row`.
  Folded fold_columns(IrText& b, const Ty& t, const RowState& row, const std::string& x, const std::string& pos_i,
                      const std::string& pos_j, const std::string& valid = "");
  // A row's finish from its final state: Z, and the two statistics it stores (the column algebra's).
  FinishedRow finish_row(IrText& b, const RowState& row);
  // w(s) of logits x from the row statistic shift_or_sum (the probe's value: A = alpha w / Z).
  std::string column_weight(IrText& b, const Ty& t, const std::string& x, const std::string& pos_i,
                            const std::string& pos_j, const std::string& shift_or_sum);
  // The backward's statistics of a row (or of lanes of rows) from the forward's Z and m_or_P.
  BackwardRow backward_row(IrText& b, const Ty& t, const std::string& Z, const std::string& m_or_P);
  // (A, dx) of scores with logits x; every argument is of type t, D the row's <dO_i, O_i>.
  std::pair<std::string, std::string> column_grad(IrText& b, const Ty& t, const std::string& x,
                                                  const std::string& pos_i, const std::string& pos_j,
                                                  const std::string& dA, const std::string& D, const BackwardRow& row);
};

}  // namespace sink::kernels
