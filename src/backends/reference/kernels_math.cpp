// The math ops' element functions for run_elementwise (float domain in double, integer domain
// in int64 with wrapping arithmetic). An integer division by zero gives 0 (eager raises).
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/reference/kernels.h"
#include "backends/reference/special_functions.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

using ir::Op;

namespace {

// Python's floor division of floats, as PyTorch computes it: exact for representable quotients.
double floor_div(double a, double b) {
  if (b == 0) return a / b;
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}

double remainder_f(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

}  // namespace

double math_f(const backend::Instr& in, double x, double y) {
  switch (in.op) {
    case Op::Floor:
      return std::floor(x);
    case Op::Ceil:
      return std::ceil(x);
    case Op::Round:
      return std::nearbyint(x);  // half to even in the default rounding mode
    case Op::Trunc:
      return std::trunc(x);
    case Op::Log1p:
      return std::log1p(x);
    case Op::Expm1:
      return std::expm1(x);
    case Op::Log2:
      return std::log2(x);
    case Op::Log10:
      return std::log10(x);
    case Op::Exp2:
      return std::exp2(x);
    case Op::Erf:
      return std::erf(x);
    case Op::Erfc:
      return std::erfc(x);
    case Op::Erfinv:
      return special::erfinv(x);
    case Op::Tan:
      return std::tan(x);
    case Op::Asin:
      return std::asin(x);
    case Op::Acos:
      return std::acos(x);
    case Op::Atan:
      return std::atan(x);
    case Op::Sinh:
      return std::sinh(x);
    case Op::Cosh:
      return std::cosh(x);
    case Op::Asinh:
      return std::asinh(x);
    case Op::Acosh:
      return std::acosh(x);
    case Op::Atanh:
      return std::atanh(x);
    case Op::SpecialFn:
      return special::eval(static_cast<ir::Special>(in.attrs.i0),
                           in.attrs.ints.empty() ? 0 : in.attrs.ints[0], x,
                           in.dtype != kFloat64);
    case Op::Atan2:
      return std::atan2(x, y);
    case Op::Hypot:
      return std::hypot(x, y);
    case Op::Copysign:
      return std::copysign(x, y);
    case Op::Fmod:
      return std::fmod(x, y);
    case Op::Remainder:
      return remainder_f(x, y);
    case Op::FloorDiv:
      return floor_div(x, y);
    case Op::TruncDiv:
      return std::trunc(x / y);
    case Op::Nextafter:
      // In the output's precision: float32 steps are float32 ulps.
      if (in.dtype == kFloat32) {
        return std::nextafter(static_cast<float>(x), static_cast<float>(y));
      }
      return std::nextafter(x, y);
    case Op::SpecialFn2:
      return special::eval2(static_cast<ir::Special2>(in.attrs.i0), x, y);
    default:
      break;
  }
  ir::fail(ir::op_name(in.op), std::string("internal: no floating-point kernel for dtype ") +
                                   dtype_name(in.dtype) + ".");
}
// Integer division by zero raises, as in eager (the step fails before any donated write).
[[noreturn]] void zero_divisor(const backend::Instr& in) {
  ir::fail(ir::op_name(in.op), "integer division by zero: an element of the divisor is 0 (nothing "
                               "was changed); divide floating-point tensors to get inf or NaN.");
}


int64_t math_i(const backend::Instr& in, int64_t x, int64_t y) {
  switch (in.op) {
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc:
      return x;
    case Op::BitwiseNot:
      return in.dtype == kBool ? !x : ~x;
    case Op::BitwiseAnd:
      return x & y;
    case Op::BitwiseOr:
      return x | y;
    case Op::BitwiseXor:
      return x ^ y;
    case Op::Fmod:
      if (y == 0) zero_divisor(in);
      return y == -1 ? 0 : x % y;
    case Op::Remainder: {
      if (y == 0) zero_divisor(in);
      if (y == -1) return 0;
      int64_t r = x % y;
      return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    }
    case Op::TruncDiv:
    case Op::FloorDiv: {
      if (y == 0) zero_divisor(in);
      if (y == -1) return x == kMin ? kMin : -x;
      int64_t q = x / y;
      if (in.op == Op::FloorDiv && x % y != 0 && ((x < 0) != (y < 0))) q -= 1;
      return q;
    }
    default:
      break;
  }
  ir::fail(ir::op_name(in.op),
           std::string("internal: no integer kernel for dtype ") + dtype_name(in.dtype) + ".");
}

}  // namespace lazyx::reference
