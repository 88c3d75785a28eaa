// The math ops in fused loops: LLVM intrinsics for rounding and copysign, Sleef vector functions
// for the transcendental ones, integer ops for the bitwise ones. The rest (erfinv, SpecialFn,
// floor and truncating division, nextafter, integer fmod/remainder) run through the reference
// kernel: correctness over speed for rarely hot functions.
#include "backends/cpu/codegen_internal.h"
#include "ir/math_ops.h"

namespace lazyx::cpu::cg {

namespace {

std::optional<Math> sleef_of(Op op) {
  switch (op) {
    case Op::Log1p:
      return Math::Log1p;
    case Op::Expm1:
      return Math::Expm1;
    case Op::Log2:
      return Math::Log2;
    case Op::Log10:
      return Math::Log10;
    case Op::Exp2:
      return Math::Exp2;
    case Op::Erf:
      return Math::Erf;
    case Op::Erfc:
      return Math::Erfc;
    case Op::Tan:
      return Math::Tan;
    case Op::Asin:
      return Math::Asin;
    case Op::Acos:
      return Math::Acos;
    case Op::Atan:
      return Math::Atan;
    case Op::Sinh:
      return Math::Sinh;
    case Op::Cosh:
      return Math::Cosh;
    case Op::Asinh:
      return Math::Asinh;
    case Op::Acosh:
      return Math::Acosh;
    case Op::Atanh:
      return Math::Atanh;
    case Op::Atan2:
      return Math::Atan2;
    case Op::Hypot:
      return Math::Hypot;
    default:
      return std::nullopt;
  }
}

std::optional<llvm::Intrinsic::ID> intrinsic_of(Op op) {
  switch (op) {
    case Op::Floor:
      return llvm::Intrinsic::floor;
    case Op::Ceil:
      return llvm::Intrinsic::ceil;
    case Op::Trunc:
      return llvm::Intrinsic::trunc;
    case Op::Round:
      return llvm::Intrinsic::roundeven;
    case Op::Copysign:
      return llvm::Intrinsic::copysign;
    default:
      return std::nullopt;
  }
}

}  // namespace

const char* math_op_base(Math m) {
  switch (m) {
    case Math::Log1p:
      return "log1p";
    case Math::Expm1:
      return "expm1";
    case Math::Log2:
      return "log2";
    case Math::Log10:
      return "log10";
    case Math::Exp2:
      return "exp2";
    case Math::Tan:
      return "tan";
    case Math::Asin:
      return "asin";
    case Math::Acos:
      return "acos";
    case Math::Atan:
      return "atan";
    case Math::Sinh:
      return "sinh";
    case Math::Cosh:
      return "cosh";
    case Math::Asinh:
      return "asinh";
    case Math::Acosh:
      return "acosh";
    case Math::Atanh:
      return "atanh";
    case Math::Atan2:
      return "atan2";
    case Math::Hypot:
      return "hypot";
    default:
      return "";
  }
}

// Sleef's 3.5-ULP variants; sinh and cosh keep u10 (Sleef's u35 ones have a smaller range).
bool math_op_has_u35(Math m) {
  return m == Math::Log2 || m == Math::Exp2 || m == Math::Tan || m == Math::Asin ||
         m == Math::Acos || m == Math::Atan || m == Math::Atan2;
}

bool math_fusable(const LoweredGraph&, const Instr& in) {
  const Op op = in.op;
  if (!is_floating(in.dtype)) {
    return ir::is_bitwise(op) || op == Op::Floor || op == Op::Ceil || op == Op::Round ||
           op == Op::Trunc;
  }
  return sleef_of(op).has_value() || intrinsic_of(op).has_value() || op == Op::Fmod ||
         op == Op::Remainder;
}

llvm::Value* emit_math(Gen& gen, const Instr& in, const std::vector<llvm::Value*>& x,
                       llvm::Type* ct) {
  llvm::IRBuilder<>& b = gen.b;
  const Op op = in.op;
  if (ct->isIntegerTy()) {
    switch (op) {
      case Op::Floor:
      case Op::Ceil:
      case Op::Round:
      case Op::Trunc:
        return x[0];
      case Op::BitwiseNot:
        return b.CreateXor(x[0], gen.ci(in.dtype == kBool ? 1 : -1));
      case Op::BitwiseAnd:
        return b.CreateAnd(x[0], x[1]);
      case Op::BitwiseOr:
        return b.CreateOr(x[0], x[1]);
      case Op::BitwiseXor:
        return b.CreateXor(x[0], x[1]);
      default:
        return nullptr;
    }
  }
  if (auto m = sleef_of(op)) return x.size() > 1 ? gen.math(*m, x[0], x[1]) : gen.math(*m, x[0]);
  if (auto id = intrinsic_of(op)) {
    return x.size() > 1 ? b.CreateBinaryIntrinsic(*id, x[0], x[1])
                        : b.CreateUnaryIntrinsic(*id, x[0]);
  }
  if (op == Op::Fmod) return b.CreateFRem(x[0], x[1]);
  if (op == Op::Remainder) {  // fmod, moved to the divisor's sign
    llvm::Value* mod = b.CreateFRem(x[0], x[1]);
    llvm::Value* zero = gen.cf(ct, 0.0);
    llvm::Value* fix =
        b.CreateAnd(b.CreateFCmpUNE(mod, zero),
                    b.CreateXor(b.CreateFCmpOLT(x[1], zero), b.CreateFCmpOLT(mod, zero)));
    return b.CreateSelect(fix, b.CreateFAdd(mod, x[1]), mod);
  }
  return nullptr;
}

}  // namespace lazyx::cpu::cg
