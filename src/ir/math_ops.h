// The elementwise math ops beyond the basics: their names, and the ids of SpecialFn and
// SpecialFn2.
#pragma once

#include <utility>
#include <vector>

#include "ir/op.h"

namespace lazyx::ir {

// The math ops form one contiguous range of the enum, from Floor to SpecialFn2.
inline bool is_math_op(Op op) { return op >= Op::Floor && op <= Op::SpecialFn2; }
inline bool is_math_binary(Op op) { return op >= Op::Atan2 && op <= Op::SpecialFn2; }
inline bool is_bitwise(Op op) {
  return op == Op::BitwiseNot || op == Op::BitwiseAnd || op == Op::BitwiseOr ||
         op == Op::BitwiseXor;
}

const std::vector<std::pair<Op, const char*>>& math_op_names();

// SpecialFn's functions (attrs.i0), computed per element in double by scalar code.
enum class Special : int64_t {
  Lgamma,
  Digamma,
  Polygamma,
  I0,
  I0e,
  I1,
  I1e,
  Ndtri,
  LogNdtr,
  Erfcx,
  BesselJ0,
  BesselJ1,
  BesselY0,
  BesselY1,
  ModBesselI0,
  ModBesselI1,
  ModBesselK0,
  ModBesselK1,
  ScaledModBesselK0,
  ScaledModBesselK1,
  SphericalBesselJ0,
  AiryAi,
  FrexpMantissa,  // frexp's mantissa (x for 0, inf and NaN)
  FrexpExponent,  // frexp's exponent as a float (0 for 0, inf and NaN)
  kNum,
};

// SpecialFn2's functions (attrs.i0) of operands (x, n), (x, q) or (a, x), in double. The
// polynomials take the degree n as a float and truncate it to an integer, as PyTorch does.
enum class Special2 : int64_t {
  ChebyshevT,
  ChebyshevU,
  ChebyshevV,
  ChebyshevW,
  ShiftedChebyshevT,
  ShiftedChebyshevU,
  ShiftedChebyshevV,
  ShiftedChebyshevW,
  HermiteH,
  HermiteHe,
  LaguerreL,
  LegendreP,
  Zeta,     // Hurwitz zeta(x, q)
  Igamma,   // regularized lower incomplete gamma P(a, x)
  Igammac,  // regularized upper incomplete gamma Q(a, x)
  kNum,
};

}  // namespace lazyx::ir
