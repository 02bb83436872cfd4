// Writing LLVM IR as text: fresh SSA names, typed arithmetic and the math
// functions, for one element type (float or double) and two shapes — a
// scalar, or a block of `lanes` key columns processed together. The kernels
// in emit_llvm.cpp are written with it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sink::kernels {

// A value's IR type: a scalar, or a vector of key-block lanes.
struct Ty {
  std::string ir;      // "float", "<8 x float>"
  std::string suffix;  // intrinsic overload: "f32", "v8f32"
  int lanes = 1;
  bool vector() const { return lanes > 1; }
};

class IrText {
 public:
  // d_head: the row width; lanes: the key block; f64: double precision (for
  // finite-difference checks).
  IrText(int64_t d_head, int lanes, bool f64);

  const int64_t D;
  const bool f64;
  const std::string F;  // "float" or "double"
  const std::string V;  // one row: "<D x F>"
  const Ty scalar, lane;
  std::string text;

  std::string fresh(const std::string& hint = "t");
  std::string op(const std::string& rhs, const std::string& hint = "t");
  void line(const std::string& s) { text += "  " + s + "\n"; }
  void label(const std::string& l) { text += l + ":\n"; }
  void comment(const std::string& c) { text += "  ; " + c + "\n"; }

  // Constants: a scalar in LLVM's hex spelling, or the same in every lane.
  std::string num(double v, const Ty& t) const;
  std::string num(double v) const { return num(v, scalar); }
  std::string zero(const Ty& t) const { return t.vector() ? "zeroinitializer" : num(0); }

  std::string bin(const std::string& opcode, const Ty& t, const std::string& a, const std::string& b);
  std::string fadd(const std::string& a, const std::string& b) { return bin("fadd", scalar, a, b); }
  std::string fsub(const std::string& a, const std::string& b) { return bin("fsub", scalar, a, b); }
  std::string fmul(const std::string& a, const std::string& b) { return bin("fmul", scalar, a, b); }
  std::string fdiv(const std::string& a, const std::string& b) { return bin("fdiv", scalar, a, b); }
  std::string fneg(const Ty& t, const std::string& a) { return op("fneg " + t.ir + " " + a); }
  // llvm.NAME.<overload>(args) with every argument of type t.
  std::string intrinsic(const std::string& name, const Ty& t, const std::string& a, const std::string& b = "");
  std::string fmuladd(const Ty& t, const std::string& a, const std::string& b, const std::string& c);  // a * b + c
  std::string min(const Ty& t, const std::string& a, const std::string& b) { return intrinsic("minnum", t, a, b); }
  std::string max(const Ty& t, const std::string& a, const std::string& b) { return intrinsic("maxnum", t, a, b); }
  std::string abs(const Ty& t, const std::string& a) { return intrinsic("fabs", t, a); }
  std::string select(const std::string& cond, const Ty& t, const std::string& yes, const std::string& no);
  std::string fcmp(const std::string& pred, const Ty& t, const std::string& a, const std::string& b);
  std::string select_gt0(const Ty& t, const std::string& x, const std::string& yes, const std::string& no);

  std::string exp(const Ty& t, const std::string& a);
  std::string log(const Ty& t, const std::string& a);
  std::string pow(const Ty& t, const std::string& a, const std::string& e);
  std::string tanh(const Ty& t, const std::string& a);
  std::string log1p(const Ty& t, const std::string& a);

  // Lanes of a block: build from scalars, read one, splat a scalar, reduce.
  std::string insert(const std::string& vec, const std::string& scalar_value, int lane_index);
  std::string extract(const std::string& vec, int lane_index);
  std::string load_lanes(const std::string& ptr);
  std::string splat(const Ty& t, const std::string& scalar_value);
  std::string reduce_add(const Ty& t, const std::string& vec);
  std::string reduce_max(const Ty& t, const std::string& vec);

  // Rows of D elements.
  std::string row_ptr(const std::string& base, const std::string& index);
  std::string load_row(const std::string& base, const std::string& index);
  std::string load_vec(const std::string& ptr);
  void store_row(const std::string& value, const std::string& base, const std::string& index);
  std::string dot(const std::string& a, const std::string& b);
  std::string vfma(const std::string& acc, const std::string& s, const std::string& row);  // acc + s * row
  std::string vscale(const std::string& row, const std::string& s);
  void accumulate_vec(const std::string& ptr, const std::string& s, const std::string& row);
  // Single elements.
  std::string element_ptr(const std::string& base, const std::string& index);
  std::string load(const std::string& base, const std::string& index);
  void store(const std::string& value, const std::string& base, const std::string& index);
  void accumulate(const std::string& base, const std::string& index, const std::string& value);

  // A "declare" line per call written (repeats included).
  std::string declarations() const;

 private:
  int counter_ = 0;
  std::string align() const { return f64 ? "8" : "4"; }
  std::string call(const std::string& fn, const Ty& t, const std::vector<std::string>& args);
  // Applies a scalar function to every lane (functions with no vector form).
  std::string per_lane(const Ty& t, const std::string& a, const std::function<std::string(const std::string&)>& f);
  // exp as 2^n * p(r): vectorizes, where libm's expf is one call per lane.
  std::string exp_polynomial(const Ty& t, const std::string& a);
  std::string declared_;
};

}  // namespace sink::kernels
