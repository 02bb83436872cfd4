// What every kernel does with a row's columns, written once over a normaliser's expressions
// (plan/normalizers.h): the online fold, the row's safe divisor, the statistics the backward reads, and each
// column's attention and logit gradient. Every kernel emitter prints these expressions (kernels/cuda/emit_cuda.cpp
// as C device functions, kernels/llvm/ as IR, scalar or per lane); only the control around them (which columns a
// tile holds, when the shift grows, the lanes) is each target's own. Beside them, plan/visibility.h says which
// columns a row has. The reference path (runtime/attention/attention.cpp) stays a plain oracle of its own:
// autograd through the normaliser's term and finish, no fold. See docs/ATTENTION-ALGEBRA.md.
//
// The variables, each a C parameter name in the CUDA kernels:
//   s, x, unit  a column's score, its logit, and what 1 becomes under the online form's shift (the normaliser's)
//   m, m_new    the row's shift before and after a fold (online: its running maximum, never below shift_floor)
//   r           what the shift's growth scales the weights so far by
//   P, Z        the row's sum of terms and its divisor (the backward's: see backward_shift)
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
  // The row's divisor, finish(P) made safe: a zero Z (relu scores all zero, say) normalizes nothing.
  ExprNode safe_divisor;  // over Z
  // What the backward reads of a row, from the forward's Z and its shift m (online) or sum P (direct):
  // online, A and dx are of degree 0 in (s, unit) and Z(c s, c unit) = c Z(s, unit), so the shift m + log Z
  // stands for m with Z = 1 (s is then the weight over Z, and no pair multiplies by 1 / Z). The CUDA kernels read
  // them; the CPU's read Z and m as they are (a log per lane of every block would cost more than it saves).
  ExprNode backward_shift, backward_divisor;  // over Z and m_or_P
  // A = alpha w(s) / Z, and dx = dL/dx = (alpha dw/ds dA - delta dZ/ds) / Z ds/dx.
  ExprNode attention;       // over s, x, unit, inv_Z
  ExprNode logit_gradient;  // over s, x, unit, Z, P, dA, delta, inv_Z, ds, dx_scale
};

// `online`: the normaliser runs in the online form (KernelSpec::online); `alpha`: what the rows sum to.
ColumnAlgebra column_algebra(const NormalizerForm& norm, double alpha, bool online);

}  // namespace sink
