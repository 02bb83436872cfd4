#include "kernels/llvm/ir_text.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>

namespace sink::kernels {
namespace {

Ty make_ty(const std::string& element, int lanes) {
  const std::string bits = element == "double" ? "f64" : "f32";
  if (lanes == 1) return {element, bits, 1};
  return {fmt::format("<{} x {}>", lanes, element), fmt::format("v{}{}", lanes, bits), lanes};
}

}  // namespace

IrText::IrText(int64_t d_head, int lanes, bool use_f64)
    : D(d_head),
      f64(use_f64),
      F(use_f64 ? "double" : "float"),
      V(fmt::format("<{} x {}>", d_head, use_f64 ? "double" : "float")),
      scalar(make_ty(F, 1)),
      lane(make_ty(F, lanes)) {}

std::string IrText::fresh(const std::string& hint) { return fmt::format("%{}{}", hint, counter_++); }

std::string IrText::op(const std::string& rhs, const std::string& hint) {
  std::string r = fresh(hint);
  text += "  " + r + " = " + rhs + "\n";
  return r;
}

std::string IrText::num(double v, const Ty& t) const {
  // LLVM spells float constants as the hex of the double holding the float.
  double d = f64 ? v : static_cast<double>(static_cast<float>(v));
  std::string s;
  if (std::isinf(d)) {
    s = d > 0 ? "0x7FF0000000000000" : "0xFFF0000000000000";
  } else {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    s = fmt::format("0x{:016X}", bits);
  }
  if (!t.vector()) return s;
  std::string out = "<";
  for (int k = 0; k < t.lanes; ++k) out += (k ? ", " : "") + F + " " + s;
  return out + ">";
}

std::string IrText::bin(const std::string& opcode, const Ty& t, const std::string& a, const std::string& b) {
  return op(opcode + " " + t.ir + " " + a + ", " + b);
}

std::string IrText::call(const std::string& fn, const Ty& t, const std::vector<std::string>& args) {
  std::string params, values;
  for (size_t k = 0; k < args.size(); ++k) {
    params += (k ? ", " : "") + t.ir;
    values += (k ? ", " : "") + t.ir + " " + args[k];
  }
  declared_ += "declare " + t.ir + " @" + fn + "(" + params + ")\n";
  return op("call " + t.ir + " @" + fn + "(" + values + ")");
}

std::string IrText::intrinsic(const std::string& name, const Ty& t, const std::string& a, const std::string& b) {
  std::vector<std::string> args{a};
  if (!b.empty()) args.push_back(b);
  return call("llvm." + name + "." + t.suffix, t, args);
}

std::string IrText::fmuladd(const Ty& t, const std::string& a, const std::string& b, const std::string& c) {
  return call("llvm.fmuladd." + t.suffix, t, {a, b, c});
}

std::string IrText::fcmp(const std::string& pred, const Ty& t, const std::string& a, const std::string& b) {
  return op("fcmp " + pred + " " + t.ir + " " + a + ", " + b);
}

std::string IrText::select(const std::string& cond, const Ty& t, const std::string& yes, const std::string& no) {
  std::string cond_ty = t.vector() ? fmt::format("<{} x i1>", t.lanes) : "i1";
  return op("select " + cond_ty + " " + cond + ", " + t.ir + " " + yes + ", " + t.ir + " " + no);
}

std::string IrText::select_gt0(const Ty& t, const std::string& x, const std::string& yes, const std::string& no) {
  return select(fcmp("ogt", t, x, zero(t)), t, yes, no);
}

std::string IrText::per_lane(const Ty& t, const std::string& a,
                             const std::function<std::string(const std::string&)>& f) {
  if (!t.vector()) return f(a);
  std::string out = "poison";
  for (int k = 0; k < t.lanes; ++k) out = insert(out, f(extract(a, k)), k);
  return out;
}

std::string IrText::exp_polynomial(const Ty& t, const std::string& a) {
  // exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 (Cody-Waite split),
  // e^r by its Taylor series to r^7 (|r| <= ln2/2: error below 1e-8).
  std::string x = min(t, a, num(88.0, t));
  std::string underflow = fcmp("olt", t, x, num(-87.0, t));
  x = max(t, x, num(-87.0, t));
  std::string n = intrinsic("roundeven", t, bin("fmul", t, x, num(1.4426950408889634, t)));
  std::string r = bin("fsub", t, x, bin("fmul", t, n, num(0.693145751953125, t)));
  r = bin("fsub", t, r, bin("fmul", t, n, num(1.4286067653302e-06, t)));
  std::string p = num(1.0 / 5040, t);
  for (double c : {1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0})
    p = bin("fadd", t, bin("fmul", t, p, r), num(c, t));
  const std::string ints = t.vector() ? fmt::format("<{} x i32>", t.lanes) : "i32";
  std::string ni = op("fptosi " + t.ir + " " + n + " to " + ints);
  auto int_const = [&](int v) {
    if (!t.vector()) return std::to_string(v);
    std::string out = "<";
    for (int k = 0; k < t.lanes; ++k) out += fmt::format("{}i32 {}", k ? ", " : "", v);
    return out + ">";
  };
  std::string biased = op("add " + ints + " " + ni + ", " + int_const(127));
  std::string bits = op("shl " + ints + " " + biased + ", " + int_const(23));
  std::string two_n = op("bitcast " + ints + " " + bits + " to " + t.ir);
  return select(underflow, t, zero(t), bin("fmul", t, p, two_n));
}

std::string IrText::exp(const Ty& t, const std::string& a) {
  if (!f64 && t.vector()) return exp_polynomial(t, a);
  return intrinsic("exp", t, a);
}

std::string IrText::log(const Ty& t, const std::string& a) { return intrinsic("log", t, a); }

std::string IrText::pow(const Ty& t, const std::string& a, const std::string& e) { return intrinsic("pow", t, a, e); }

std::string IrText::tanh(const Ty& t, const std::string& a) {
  return per_lane(t, a, [&](const std::string& s) { return call(f64 ? "tanh" : "tanhf", scalar, {s}); });
}

std::string IrText::log1p(const Ty& t, const std::string& a) {
  return per_lane(t, a, [&](const std::string& s) { return call(f64 ? "log1p" : "log1pf", scalar, {s}); });
}

std::string IrText::insert(const std::string& vec, const std::string& scalar_value, int lane_index) {
  return op(fmt::format("insertelement {} {}, {} {}, i32 {}", lane.ir, vec, F, scalar_value, lane_index));
}

std::string IrText::extract(const std::string& vec, int lane_index) {
  return op(fmt::format("extractelement {} {}, i32 {}", lane.ir, vec, lane_index));
}

std::string IrText::load_lanes(const std::string& ptr) {
  return op("load " + lane.ir + ", ptr " + ptr + ", align " + align(), "lanes");
}

std::string IrText::splat(const Ty& t, const std::string& scalar_value) {
  std::string ins = op("insertelement " + t.ir + " poison, " + F + " " + scalar_value + ", i64 0");
  return op(fmt::format("shufflevector {0} {1}, {0} poison, <{2} x i32> zeroinitializer", t.ir, ins, t.lanes), "splat");
}

// Reassociation lets LLVM reduce in a tree: the only fast-math flag we use.
std::string IrText::reduce_add(const Ty& t, const std::string& vec) {
  declared_ += "declare " + F + " @llvm.vector.reduce.fadd." + t.suffix + "(" + F + ", " + t.ir + ")\n";
  return op("call reassoc " + F + " @llvm.vector.reduce.fadd." + t.suffix + "(" + F + " " + num(0) + ", " + t.ir + " " +
            vec + ")");
}

std::string IrText::reduce_max(const Ty& t, const std::string& vec) {
  declared_ += "declare " + F + " @llvm.vector.reduce.fmax." + t.suffix + "(" + t.ir + ")\n";
  // nnan: a tree of vector max instead of a NaN-checking chain (a NaN loss ends the run anyway).
  return op("call nnan " + F + " @llvm.vector.reduce.fmax." + t.suffix + "(" + t.ir + " " + vec + ")");
}

std::string IrText::row_ptr(const std::string& base, const std::string& index) {
  std::string off = op("mul i64 " + index + ", " + std::to_string(D));
  return op("getelementptr inbounds " + F + ", ptr " + base + ", i64 " + off, "p");
}

std::string IrText::load_row(const std::string& base, const std::string& index) {
  return load_vec(row_ptr(base, index));
}

std::string IrText::load_vec(const std::string& ptr) {
  return op("load " + V + ", ptr " + ptr + ", align " + align(), "row");
}

void IrText::store_row(const std::string& value, const std::string& base, const std::string& index) {
  line("store " + V + " " + value + ", ptr " + row_ptr(base, index) + ", align " + align());
}

std::string IrText::dot(const std::string& a, const std::string& b) {
  Ty row{V, fmt::format("v{}{}", D, f64 ? "f64" : "f32"), static_cast<int>(D)};
  return reduce_add(row, op("fmul " + V + " " + a + ", " + b));
}

// fmuladd lets the backend fuse (one FMA per vector register, not a multiply and an add).
std::string IrText::vfma(const std::string& acc, const std::string& s, const std::string& row) {
  Ty row_t{V, fmt::format("v{}{}", D, f64 ? "f64" : "f32"), static_cast<int>(D)};
  return fmuladd(row_t, splat(row_t, s), row, acc);
}

std::string IrText::vscale(const std::string& row, const std::string& s) {
  Ty row_t{V, "", static_cast<int>(D)};
  return op("fmul " + V + " " + row + ", " + splat(row_t, s));
}

void IrText::accumulate_vec(const std::string& ptr, const std::string& s, const std::string& row) {
  std::string old = load_vec(ptr);
  line("store " + V + " " + vfma(old, s, row) + ", ptr " + ptr + ", align " + align());
}

std::string IrText::element_ptr(const std::string& base, const std::string& index) {
  return op("getelementptr inbounds " + F + ", ptr " + base + ", i64 " + index, "p");
}

std::string IrText::load(const std::string& base, const std::string& index) {
  return op("load " + F + ", ptr " + element_ptr(base, index) + ", align " + align());
}

void IrText::store(const std::string& value, const std::string& base, const std::string& index) {
  line("store " + F + " " + value + ", ptr " + element_ptr(base, index) + ", align " + align());
}

void IrText::accumulate(const std::string& base, const std::string& index, const std::string& value) {
  std::string p = element_ptr(base, index);
  std::string old = op("load " + F + ", ptr " + p + ", align " + align());
  line("store " + F + " " + fadd(old, value) + ", ptr " + p + ", align " + align());
}

std::string IrText::declarations() const { return declared_; }

}  // namespace sink::kernels
