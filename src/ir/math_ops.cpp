#include "ir/math_ops.h"

namespace lazyx::ir {

const std::vector<std::pair<Op, const char*>>& math_op_names() {
  static const std::vector<std::pair<Op, const char*>> names = {
      {Op::Floor, "floor"},
      {Op::Ceil, "ceil"},
      {Op::Round, "round"},
      {Op::Trunc, "trunc"},
      {Op::Log1p, "log1p"},
      {Op::Expm1, "expm1"},
      {Op::Log2, "log2"},
      {Op::Log10, "log10"},
      {Op::Exp2, "exp2"},
      {Op::Erf, "erf"},
      {Op::Erfc, "erfc"},
      {Op::Erfinv, "erfinv"},
      {Op::Tan, "tan"},
      {Op::Asin, "asin"},
      {Op::Acos, "acos"},
      {Op::Atan, "atan"},
      {Op::Sinh, "sinh"},
      {Op::Cosh, "cosh"},
      {Op::Asinh, "asinh"},
      {Op::Acosh, "acosh"},
      {Op::Atanh, "atanh"},
      {Op::BitwiseNot, "bitwise_not"},
      {Op::SpecialFn, "special_fn"},
      {Op::Atan2, "atan2"},
      {Op::Hypot, "hypot"},
      {Op::Copysign, "copysign"},
      {Op::Fmod, "fmod"},
      {Op::Remainder, "remainder"},
      {Op::FloorDiv, "floor_divide"},
      {Op::TruncDiv, "trunc_divide"},
      {Op::BitwiseAnd, "bitwise_and"},
      {Op::BitwiseOr, "bitwise_or"},
      {Op::BitwiseXor, "bitwise_xor"},
      {Op::Nextafter, "nextafter"},
      {Op::SpecialFn2, "special_fn2"},
  };
  return names;
}

}  // namespace lazyx::ir
