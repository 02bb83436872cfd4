// What every kernel does with a row's columns, written once over a normaliser's expressions
// (plan/normalizers.h): the online fold, the row's finish, the statistics a row stores and the backward reads, and each
// column's attention and logit gradient. Every kernel emitter prints these expressions (kernels/cuda/emit_cuda.cpp
// as C device functions, kernels/llvm/ as IR, scalar or per lane); only the control around them (which columns a
// tile holds, the lanes) is each target's own, and the fold's (when the shift grows) is one function per target:
// grow_shift in kernels/cuda/columns.cuh, Generator::fold_columns in kernels/llvm/. Beside them, plan/visibility.h says
// which columns a row has. The reference path (runtime/attention/attention.cpp) stays a plain oracle of its own:
// autograd through the normaliser's term and finish, no fold. See docs/ATTENTION-ALGEBRA.md.
//
// The variables, each a C parameter name in the CUDA kernels:
//   s, x, unit  a column's score, its logit, and what 1 becomes under the online form's shift (the normaliser's)
//   m, m_new    the row's shift before and after a fold (online: its running maximum, never below shift_floor)
//   shift       the row's shift at its finish: m, or 0 while no column was seen (m = -inf)
//   r           what the shift's growth scales the weights so far by
//   P, Z        the row's sum of terms and its divisor
//   m_or_P      the second statistic a row stores (stored_shift_or_sum), Z the first (stored_divisor)
//   inv_Z       1 / Z, which a caller computes once per row: a division per pair costs a GPU ten instructions
//   dA, delta   dL/dA of the column, <dO_i, v_j>, and the row's sum over its columns of dA A, <dO_i, O_i>
//   ds          ds/dx, the score's derivative at the column
//   dx_scale    what the caller wants dx times (and gives delta times): the tensor-core kernels take the
//               gradient of q.k, so that its scaling costs no multiply per pair
#pragma once

#include "plan/normalizers.h"

namespace sink {

struct ColumnAlgebra {
  // The fold (online): when the row's shift grows from m to m_new, the weights and O so far scale by
  // rescale(m, m_new), and the sum of terms by term_rescale(r) of it (r^p under the p-norm).
  ExprNode rescale, term_rescale;
  // The row's finish: Z = finish(P) at the row's shift, then made safe: a zero Z (relu scores all zero, say)
  // normalizes nothing. (Two expressions: a target computes Z once, and p-norm's is a power.)
  ExprNode row_finish;    // over P and shift
  ExprNode safe_divisor;  // over Z
  // The row's statistics, the two numbers per row the forward stores (stats[0][i] and stats[1][i]) for the backward
  // and the probes: a divisor and a shift (online) or sum (direct) for which A = alpha weight(s(x - shift)) / divisor.
  // Z and m apart, not m + log Z with 1: with large logits the sum would lose log Z's digits. Changing what a row
  // stores is this pair and the backward's reading of it below: every kernel prints them.
  ExprNode stored_divisor, stored_shift_or_sum;  // over Z, m and P
  // What the backward reads of a row, from the stored Z and m_or_P: online, A and dx are of degree 0 in (s, unit)
  // and Z(c s, c unit) = c Z(s, unit), so the shift m + log Z stands for m with Z = 1 (s is then the weight over Z,
  // and no pair multiplies by 1 / Z). The CUDA kernels read them; the CPU's read the stored pair as it is (any pair
  // of the invariant above serves; a log per lane of every block would cost more than it saves).
  ExprNode backward_shift, backward_divisor;  // over Z and m_or_P
  // A = alpha w(s) / Z, and dx = dL/dx = (alpha dw/ds dA - delta dZ/ds) / Z ds/dx.
  ExprNode attention;       // over s, x, unit, inv_Z
  ExprNode logit_gradient;  // over s, x, unit, Z, P, dA, delta, inv_Z, ds, dx_scale
};

// `online`: the normaliser runs in the online form (KernelSpec::online); `alpha`: what the rows sum to.
ColumnAlgebra column_algebra(const NormalizerForm& norm, double alpha, bool online);

}  // namespace sink
