// Internals of the CPU code generator, shared by its files: the process-wide JIT, the scalar
// emitter of one fused member (Gen) and the kernel builders. The files read in the order
// codegen.cpp (JIT, fusability queries, compile_fused), kernel_elementwise.cpp, kernel_reduce.cpp.
#pragma once

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cpu/codegen.h"
#include "ir/shape_infer.h"
#include "lazyx/error.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace lazyx::cpu::cg {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;
namespace orc = llvm::orc;

// The JITDylib of one object file (one kernel, or a program's quick-tier kernels).
struct KernelLib {
  orc::JITDylib* jd = nullptr;  // holds one object file, removed with the last of its kernels
  ~KernelLib();
};
// One compiled kernel; its code leaves the JIT with the last program that uses it.
struct KernelCode {
  std::shared_ptr<KernelLib> lib;  // shared by the kernels compiled into one object file
  KernelFn fn = nullptr;
  bool full = true;  // compiled at the full tier (else quick: tiered.h)
};

// The host's LLJIT with Sleef's entry points defined, and the host CPU's features.
struct Jit {
  std::unique_ptr<orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::optional<orc::JITTargetMachineBuilder> jtmb;  // makes one TargetMachine per compile thread
  bool avx512 = false, avx2 = false, f16c = false;
  std::string cpu, features;
  std::mutex mu;
  std::atomic<int64_t> next_module{0};
  // Compiled kernels by their unoptimized IR, while some program holds them.
  std::mutex cache_mu;
  std::unordered_map<std::string, std::weak_ptr<KernelCode>> kernel_cache;
  size_t cache_live = 0;

  Jit();
};
Jit& the_jit();

inline bool is_compare(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge;
}
inline bool is_logical(Op op) {
  return op == Op::LogicalAnd || op == Op::LogicalOr || op == Op::LogicalNot;
}

inline Dtype domain_of(const LoweredGraph& g, const Instr& in) {
  if (is_compare(in.op)) return static_cast<Dtype>(in.attrs.i0);
  if (in.op == Op::Cast) return g.instrs[in.inputs[0]].dtype;
  return in.dtype;
}

enum class Math {
  Exp, Log, Tanh, Erf, Erfc, Sin, Cos, Pow,
  // The math ops (codegen_math.cpp).
  Log1p, Expm1, Log2, Log10, Exp2, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Atan2,
  Hypot,
};
const char* math_op_base(Math m);
inline const char* math_base(Math m) {
  switch (m) {
    case Math::Exp:
      return "exp";
    case Math::Log:
      return "log";
    case Math::Tanh:
      return "tanh";
    case Math::Erf:
      return "erf";
    case Math::Erfc:
      return "erfc";
    case Math::Sin:
      return "sin";
    case Math::Cos:
      return "cos";
    case Math::Pow:
      return "pow";
    default:
      return math_op_base(m);
  }
}
// Sleef's accuracy suffix: 3.5 ULP in the fast mode where Sleef has it, else 1 (erfc: 1.5).
bool math_op_has_u35(Math m);
inline const char* math_ulp(Math m, MathMode mode) {
  if (m == Math::Erfc) return "u15";
  if (m == Math::Hypot) return mode == MathMode::Fast ? "u35" : "u05";
  const bool has_u35 = m == Math::Log || m == Math::Tanh || m == Math::Sin || m == Math::Cos ||
                       math_op_has_u35(m);
  return mode == MathMode::Fast && has_u35 ? "u35" : "u10";
}

struct Gen;
// The math ops (ir::is_math_op) in a fused loop: whether the generator handles `in`, and its
// value from the operands converted to `ct`.
bool math_fusable(const LoweredGraph& g, const Instr& in);
llvm::Value* emit_math(Gen& gen, const Instr& in, const std::vector<llvm::Value*>& x,
                       llvm::Type* ct);

struct Gen {
  Jit& jit;
  llvm::LLVMContext& C;
  llvm::Module& M;
  llvm::IRBuilder<>& b;
  const LoweredGraph& g;
  const FusedSpec& s;
  llvm::Type* f32;
  llvm::Type* f64;
  llvm::Type* i64;
  llvm::Type* i32;
  std::vector<llvm::Value*> arg;         // buffer base pointers
  std::vector<llvm::Value*> scalar_val;  // per input: hoisted scalar value, or null
  std::vector<llvm::Value*> row_off;     // per input: offset of the current row
  std::vector<int64_t> inner_stride;     // per input
  std::unordered_map<int32_t, int32_t> input_index;
  std::unordered_map<int32_t, llvm::Value*> vals;
  llvm::Value* j = nullptr;
  llvm::Value* row_base = nullptr;
  const Instr* cur = nullptr;

  Gen(Jit& jt, llvm::LLVMContext& c, llvm::Module& m, llvm::IRBuilder<>& bb, const LoweredGraph& gg,
      const FusedSpec& ss)
      : jit(jt), C(c), M(m), b(bb), g(gg), s(ss) {
    f32 = llvm::Type::getFloatTy(C);
    f64 = llvm::Type::getDoubleTy(C);
    i64 = llvm::Type::getInt64Ty(C);
    i32 = llvm::Type::getInt32Ty(C);
  }

  // Indexes the spec's inputs and loads every scalar input once, at the current insert point.
  // `scalars` holds the spec's own scalar inputs in order (16-byte ScalarValues: a double at 0,
  // an int64 at 8), not the program's slots, so equal loops in other programs share the code.
  void bind_inputs(llvm::Value* scalars) {
    scalar_val.assign(s.inputs.size(), nullptr);
    row_off.assign(s.inputs.size(), nullptr);
    inner_stride.assign(s.inputs.size(), 0);
    int64_t j = 0;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      input_index[s.inputs[k].instr] = static_cast<int32_t>(k);
      if (s.inputs[k].arg >= 0) continue;
      const Instr& si = g.instrs[s.inputs[k].storage()];
      llvm::Value* base = b.CreateInBoundsGEP(b.getInt8Ty(), scalars, b.getInt64(16 * j++));
      llvm::Value* v =
          is_floating(si.dtype)
              ? b.CreateLoad(b.getDoubleTy(), base)
              : b.CreateLoad(i64, b.CreateInBoundsGEP(b.getInt8Ty(), base, b.getInt64(8)));
      scalar_val[k] = to_dtype(v, si.dtype);
    }
  }

  [[noreturn]] void unsupported(const std::string& why) {
    ir::fail(cur ? ir::op_name(cur->op) : "cpu", "the cpu backend cannot compile this op: " + why);
  }

  llvm::Type* repr(Dtype d) {
    if (d == kFloat64) return f64;
    if (is_floating(d)) return f32;
    return i64;
  }
  llvm::Type* mem_type(Dtype d) {
    switch (d) {
      case kBool:
      case kUInt8:
      case kInt8:
        return llvm::Type::getInt8Ty(C);
      case kInt16:
        return llvm::Type::getInt16Ty(C);
      case kInt32:
        return i32;
      case kInt64:
        return i64;
      case kFloat16:
        return llvm::Type::getHalfTy(C);
      case kBFloat16:
        return llvm::Type::getInt16Ty(C);
      case kFloat32:
        return f32;
      case kFloat64:
        return f64;
    }
    return i64;
  }
  llvm::Value* cf(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Value* ci(int64_t v) { return llvm::ConstantInt::get(i64, v, true); }

  llvm::Value* bf16_bits(llvm::Value* f) {  // float -> bf16 bits in i32, as float_to_bf16
    llvm::Value* x = b.CreateBitCast(f, i32);
    llvm::Value* absx = b.CreateAnd(x, llvm::ConstantInt::get(i32, 0x7fffffff));
    llvm::Value* nan = b.CreateICmpUGT(absx, llvm::ConstantInt::get(i32, 0x7f800000));
    llvm::Value* qn = b.CreateOr(b.CreateLShr(x, 16), llvm::ConstantInt::get(i32, 0x40));
    llvm::Value* lsb = b.CreateAnd(b.CreateLShr(x, 16), llvm::ConstantInt::get(i32, 1));
    llvm::Value* r = b.CreateAdd(b.CreateAdd(x, llvm::ConstantInt::get(i32, 0x7fff)), lsb);
    llvm::Value* rs = b.CreateLShr(r, 16);
    return b.CreateAnd(b.CreateSelect(nan, qn, rs), llvm::ConstantInt::get(i32, 0xffff));
  }
  llvm::Value* bits_to_float(llvm::Value* bits32) {
    return b.CreateBitCast(b.CreateShl(bits32, 16), f32);
  }

  // A computed value of any repr (float, double, i64 or i1) converted to dtype d's repr with
  // d's rounding, as the reference's set_f/set_i followed by get_f/get_i.
  llvm::Value* to_dtype(llvm::Value* v, Dtype d) {
    llvm::Type* t = v->getType();
    if (t->isIntegerTy(1)) v = b.CreateZExt(v, i64), t = i64;
    if (t->isIntegerTy() && t != i64) v = b.CreateSExt(v, i64), t = i64;
    if (is_floating(d)) {
      if (t == i64) v = b.CreateSIToFP(v, f64), t = f64;
      if (d == kFloat64) return t == f64 ? v : b.CreateFPExt(v, f64);
      if (t == f64) v = b.CreateFPTrunc(v, f32);
      if (d == kFloat16) {
        return b.CreateFPExt(b.CreateFPTrunc(v, llvm::Type::getHalfTy(C)), f32);
      }
      if (d == kBFloat16) return bits_to_float(bf16_bits(v));
      return v;
    }
    if (d == kBool) {
      llvm::Value* nz = t == i64 ? b.CreateICmpNE(v, ci(0)) : b.CreateFCmpUNE(v, cf(t, 0.0));
      return b.CreateZExt(nz, i64);
    }
    if (t != i64) v = float_to_int(v, d == kInt64 ? 64 : 32);
    if (d == kInt32) v = b.CreateSExt(b.CreateTrunc(v, i32), i64);
    if (d == kInt8 || d == kInt16) v = b.CreateSExt(b.CreateTrunc(v, mem_type(d)), i64);
    if (d == kUInt8) v = b.CreateZExt(b.CreateTrunc(v, mem_type(d)), i64);
    return v;
  }

  // Float to a `bits`-wide integer (in i64) as PyTorch on x86 CPUs: NaN and out-of-range values
  // give the integer's minimum, others truncate toward zero (the reference's f2i).
  llvm::Value* float_to_int(llvm::Value* v, int bits) {
    llvm::Type* t = v->getType();
    const double lim = bits == 32 ? 2147483648.0 : 9.2233720368547758e18;
    const double lo = bits == 32 ? -2147483649.0 : -9.2233720368547758e18;
    llvm::Value* s = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, t}, {v});
    llvm::Value* w = t == f64 ? v : b.CreateFPExt(v, f64);  // both limits are exact doubles
    llvm::Value* ok = b.CreateAnd(
        bits == 32 ? b.CreateFCmpOGT(w, cf(f64, lo)) : b.CreateFCmpOGE(w, cf(f64, lo)),
        b.CreateFCmpOLT(w, cf(f64, lim)));
    return b.CreateSelect(ok, s, ci(bits == 32 ? INT32_MIN : INT64_MIN));
  }

  // A value in repr converted to compute type ct (float, double or i64) without rounding to a
  // dtype: how the reference loads an operand into double or int64.
  llvm::Value* to_compute(llvm::Value* v, llvm::Type* ct) {
    llvm::Type* t = v->getType();
    if (t == ct) return v;
    if (ct == i64) return float_to_int(v, 64);
    if (t == i64) return b.CreateSIToFP(v, ct);
    if (ct == f64) return b.CreateFPExt(v, f64);
    return b.CreateFPTrunc(v, f32);
  }

  llvm::Value* truth(llvm::Value* v) {
    if (v->getType() == i64) return b.CreateICmpNE(v, ci(0));
    return b.CreateFCmpUNE(v, cf(v->getType(), 0.0));
  }

  llvm::Value* load_elem(Dtype d, llvm::Value* base, llvm::Value* idx) {
    llvm::Type* mt = mem_type(d);
    llvm::Value* p = b.CreateInBoundsGEP(mt, base, idx);
    llvm::Value* v = b.CreateLoad(mt, p);
    switch (d) {
      case kBool:
        return b.CreateZExt(b.CreateICmpNE(v, llvm::ConstantInt::get(mt, 0)), i64);
      case kUInt8:
        return b.CreateZExt(v, i64);
      case kInt8:
      case kInt16:
      case kInt32:
        return b.CreateSExt(v, i64);
      case kFloat16:
        return b.CreateFPExt(v, f32);
      case kBFloat16:
        return bits_to_float(b.CreateZExt(v, i32));
      default:
        return v;
    }
  }

  void store_elem(Dtype d, llvm::Value* base, llvm::Value* idx, llvm::Value* v) {
    llvm::Type* mt = mem_type(d);
    llvm::Value* p = b.CreateInBoundsGEP(mt, base, idx);
    switch (d) {
      case kBool:
      case kUInt8:
      case kInt8:
      case kInt16:
      case kInt32:
        v = b.CreateTrunc(v, mt);
        break;
      case kFloat16:
        v = b.CreateFPTrunc(v, mt);
        break;
      case kBFloat16:
        v = b.CreateTrunc(bf16_bits(v), mt);
        break;
      default:
        break;
    }
    b.CreateStore(v, p);
  }

  llvm::Value* math(Math m, llvm::Value* x, llvm::Value* y = nullptr) {
    bool dbl = x->getType() == f64;
    std::string base = math_base(m);
    const std::string u = math_ulp(m, math_mode());
    std::string scalar = "Sleef_" + base + (dbl ? "" : "f") + "_" + u;
    int nargs = y ? 2 : 1;
    std::vector<llvm::Type*> params(nargs, x->getType());
    llvm::FunctionType* ft = llvm::FunctionType::get(x->getType(), params, false);
    llvm::Function* f = M.getFunction(scalar);
    if (!f) {
      f = llvm::Function::Create(ft, llvm::Function::ExternalLinkage, scalar, M);
      f->setDoesNotThrow();
      f->setDoesNotAccessMemory();
      f->addFnAttr(llvm::Attribute::WillReturn);
      f->addFnAttr(llvm::Attribute::NoFree);
      f->addFnAttr(llvm::Attribute::NoSync);
    }
    std::string variants;
    auto add_variant = [&](int vf, const std::string& vname) {
      llvm::Type* vt = llvm::FixedVectorType::get(x->getType(), vf);
      if (!M.getFunction(vname)) {
        std::vector<llvm::Type*> vp(nargs, vt);
        llvm::Function* vfn = llvm::Function::Create(llvm::FunctionType::get(vt, vp, false),
                                                     llvm::Function::ExternalLinkage, vname, M);
        vfn->setDoesNotThrow();
        vfn->setDoesNotAccessMemory();
        llvm::appendToCompilerUsed(M, {vfn});
      }
      if (!variants.empty()) variants += ",";
      variants +=
          "_ZGV_LLVM_N" + std::to_string(vf) + (y ? "vv" : "v") + "_" + scalar + "(" + vname + ")";
    };
    if (jit.avx512)
      add_variant(dbl ? 8 : 16, "Sleef_" + base + (dbl ? "d8" : "f16") + "_" + u + "avx512f");
    if (jit.avx2)
      add_variant(dbl ? 4 : 8, "Sleef_" + base + (dbl ? "d4" : "f8") + "_" + u + "avx2");
    llvm::CallInst* call = y ? b.CreateCall(f, {x, y}) : b.CreateCall(f, {x});
    call->setDoesNotThrow();
    call->setDoesNotAccessMemory();
    if (!variants.empty()) {
      call->addFnAttr(llvm::Attribute::get(C, "vector-function-abi-variant", variants));
    }
    return call;
  }

  // x/2 * erfc(-x/sqrt(2)): no cancellation for negative x, unlike x/2 * (1 + erf(x/sqrt(2))).
  // erfc's relative slope there is about 2z, so the rounding error dz of z = -x/sqrt(2)
  // (exact by fma) is taken out: erfc(z + dz) ~ erfc(z) (1 - 2 z dz) for z > 0.
  llvm::Value* gelu(llvm::Value* x) {
    llvm::Type* t = x->getType();
    const long double c = 0.70710678118654752440084436210484904L;
    const double chi =
        t == f64 ? static_cast<double>(c) : static_cast<double>(static_cast<float>(c));
    const double clo = static_cast<double>(c - static_cast<long double>(chi));
    llvm::Value* nx = b.CreateFNeg(x);
    llvm::Value* z = b.CreateFMul(nx, cf(t, chi));
    llvm::Value* dz = b.CreateFAdd(
        b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {nx, cf(t, chi), b.CreateFNeg(z)}),
        b.CreateFMul(nx, cf(t, clo)));
    llvm::Value* k =
        b.CreateSelect(b.CreateFCmpOGT(z, cf(t, 0.0)), b.CreateFMul(cf(t, 2.0), z), cf(t, 0.0));
    llvm::Value* kdz = b.CreateFMul(k, dz);  // NaN at x = +-inf: no correction there
    llvm::Value* e = math(Math::Erfc, z);
    e = b.CreateSelect(b.CreateFCmpORD(kdz, kdz), b.CreateFSub(e, b.CreateFMul(e, kdz)), e);
    return b.CreateFMul(b.CreateFMul(cf(t, 0.5), x), e);
  }

  llvm::Value* value(int32_t c) {
    auto it = vals.find(c);
    if (it != vals.end()) return it->second;
    auto ii = input_index.find(c);
    if (ii == input_index.end()) unsupported("internal: operand not available in the fused loop");
    int32_t k = ii->second;
    llvm::Value* v;
    if (scalar_val[k]) {
      v = scalar_val[k];
    } else {
      const auto& inp = s.inputs[k];
      llvm::Value* idx = row_off[k];
      if (inner_stride[k] != 0) idx = b.CreateAdd(idx, b.CreateMul(j, ci(inner_stride[k])));
      v = load_elem(g.instrs[c].dtype, arg[inp.arg], idx);
    }
    vals[c] = v;
    return v;
  }

  // A member's value: AsStrided members are loads through their view (an input).
  llvm::Value* member(int32_t m) {
    if (g.instrs[m].op == Op::AsStridedScatter) return value(g.instrs[m].inputs[1]);
    if (g.instrs[m].op == Op::AsStrided) {
      vals.erase(m);
      return value(m);
    }
    return emit(g.instrs[m]);
  }

  llvm::Value* mix64(llvm::Value* x) {
    auto c = [&](uint64_t v) { return llvm::ConstantInt::get(i64, v); };
    x = b.CreateAdd(x, c(0x9e3779b97f4a7c15ull));
    x = b.CreateMul(b.CreateXor(x, b.CreateLShr(x, c(30))), c(0xbf58476d1ce4e5b9ull));
    x = b.CreateMul(b.CreateXor(x, b.CreateLShr(x, c(27))), c(0x94d049bb133111ebull));
    return b.CreateXor(x, b.CreateLShr(x, c(31)));
  }
  // ir::random_uniform for the counter: 53 or 24 bits as a double in [0, 1).
  llvm::Value* uniform(llvm::Value* mseed, llvm::Value* ctr, bool wide) {
    llvm::Value* bits = mix64(b.CreateXor(mseed, ctr));
    bits = b.CreateLShr(bits, ci(wide ? 11 : 40));
    return b.CreateFMul(b.CreateUIToFP(bits, f64), cf(f64, wide ? 0x1.0p-53 : 0x1.0p-24));
  }

  llvm::Value* emit(const Instr& in) {
    cur = &in;
    const Op op = in.op;
    std::vector<llvm::Value*> a;
    for (int32_t c : in.inputs) a.push_back(value(c));
    if (op == Op::Full) return to_dtype(a[0], in.dtype);
    if (op == Op::RandUniform || op == Op::RandNormal || op == Op::RandInt) {
      // Counter-based (ir/random.h): element k of the output draws counter offset + k.
      llvm::Value* lin = b.CreateAdd(row_base, j);
      llvm::Value* mseed = mix64(to_compute(a[0], i64));
      llvm::Value* ctr = b.CreateAdd(to_compute(a[1], i64), lin);
      if (op == Op::RandUniform)
        return to_dtype(uniform(mseed, ctr, in.dtype == kFloat64), in.dtype);
      if (op == Op::RandNormal) {
        llvm::Value* c2 = b.CreateMul(ctr, ci(2));
        llvm::Value* u1 = b.CreateFSub(cf(f64, 1.0), uniform(mseed, c2, true));
        llvm::Value* u2 = uniform(mseed, b.CreateAdd(c2, ci(1)), true);
        llvm::Value* rad = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt,
                                                  b.CreateFMul(cf(f64, -2.0), math(Math::Log, u1)));
        llvm::Value* r =
            b.CreateFMul(rad, math(Math::Cos, b.CreateFMul(cf(f64, 6.283185307179586), u2)));
        return to_dtype(r, in.dtype);
      }
      llvm::Value* lo = to_compute(a[2], i64);
      llvm::Value* range = b.CreateSub(to_compute(a[3], i64), lo);
      llvm::Value* zero = b.CreateICmpEQ(range, ci(0));
      llvm::Value* bits = mix64(b.CreateXor(mseed, ctr));
      llvm::Value* q = b.CreateURem(bits, b.CreateSelect(zero, ci(1), range));
      return to_dtype(b.CreateAdd(lo, b.CreateSelect(zero, ci(0), q)), in.dtype);
    }
    if (op == Op::Arange) {
      llvm::Value* lin = b.CreateAdd(row_base, j);
      if (is_floating(in.dtype)) {
        llvm::Value* r = b.CreateFAdd(
            to_compute(a[0], f64), b.CreateFMul(b.CreateSIToFP(lin, f64), to_compute(a[1], f64)));
        return to_dtype(r, in.dtype);
      }
      return to_dtype(b.CreateAdd(to_compute(a[0], i64), b.CreateMul(lin, to_compute(a[1], i64))),
                      in.dtype);
    }
    if (is_logical(op)) {
      llvm::Value* r;
      if (op == Op::LogicalNot) {
        r = b.CreateNot(truth(a[0]));
        // LogicalNot of NaN: NaN == 0 is false, so not(NaN) is false; truth(NaN) is true: agrees.
      } else if (op == Op::LogicalAnd) {
        r = b.CreateAnd(truth(a[0]), truth(a[1]));
      } else {
        r = b.CreateOr(truth(a[0]), truth(a[1]));
      }
      return to_dtype(r, in.dtype);
    }
    Dtype dom = domain_of(g, in);
    const bool fdom = is_floating(dom);
    llvm::Type* ct = fdom ? (dom == kFloat64 ? f64 : f32) : i64;
    if (fdom && is_compare(op)) {
      for (int32_t c : in.inputs) {
        Dtype d = g.instrs[c].dtype;
        if (d == kInt32 || d == kInt64 || d == kFloat64) ct = f64;
      }
    }
    if (op == Op::Where) {
      llvm::Value* cond = truth(a[0]);
      return to_dtype(b.CreateSelect(cond, to_compute(a[1], ct), to_compute(a[2], ct)), in.dtype);
    }
    std::vector<llvm::Value*> x;
    for (llvm::Value* v : a) x.push_back(to_compute(v, ct));
    llvm::Value* r = nullptr;
    if (fdom) {
      llvm::Value* one = cf(ct, 1.0);
      switch (op) {
        case Op::Neg:
          r = b.CreateFNeg(x[0]);
          break;
        case Op::Abs:
          r = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x[0]);
          break;
        case Op::Exp:
          r = math(Math::Exp, x[0]);
          break;
        case Op::Log:
          r = math(Math::Log, x[0]);
          break;
        case Op::Sqrt:
          r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x[0]);
          break;
        case Op::Rsqrt:
          r = b.CreateFDiv(one, b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x[0]));
          break;
        case Op::Tanh:
          r = math(Math::Tanh, x[0]);
          break;
        case Op::Sigmoid:
          r = b.CreateFDiv(one, b.CreateFAdd(one, math(Math::Exp, b.CreateFNeg(x[0]))));
          break;
        case Op::Relu:
          // Only values below zero become 0: -0 and NaN pass, as in eager's relu.
          r = b.CreateSelect(b.CreateFCmpOLT(x[0], cf(ct, 0.0)), cf(ct, 0.0), x[0]);
          break;
        case Op::Gelu:
          r = gelu(x[0]);
          break;
        case Op::GeluTanh: {
          llvm::Value* x3 = b.CreateFMul(b.CreateFMul(x[0], x[0]), x[0]);
          llvm::Value* in_ = b.CreateFMul(cf(ct, 0.79788456080286535588),
                                          b.CreateFAdd(x[0], b.CreateFMul(cf(ct, 0.044715), x3)));
          r = b.CreateFMul(b.CreateFMul(cf(ct, 0.5), x[0]),
                           b.CreateFAdd(one, math(Math::Tanh, in_)));
          break;
        }
        case Op::Sin:
          r = math(Math::Sin, x[0]);
          break;
        case Op::Cos:
          r = math(Math::Cos, x[0]);
          break;
        case Op::Cast:
          r = x[0];
          break;
        // a + alpha * b rounds once (fused), as torch's CPU kernels and the reference do: a
        // product rounded first can flip a later comparison on a value near zero.
        case Op::Add:
          r = x.size() > 2
                  ? b.CreateIntrinsic(llvm::Intrinsic::fma, {x[0]->getType()}, {x[2], x[1], x[0]})
                  : b.CreateFAdd(x[0], x[1]);
          break;
        case Op::Sub:
          r = x.size() > 2
                  ? b.CreateIntrinsic(llvm::Intrinsic::fma, {x[0]->getType()},
                                      {b.CreateFNeg(x[2]), x[1], x[0]})
                  : b.CreateFSub(x[0], x[1]);
          break;
        case Op::Mul:
          r = b.CreateFMul(x[0], x[1]);
          break;
        case Op::Div:
          r = b.CreateFDiv(x[0], x[1]);
          break;
        case Op::Pow:
          r = math(Math::Pow, x[0], x[1]);
          break;
        case Op::Maximum:
          r = b.CreateSelect(b.CreateFCmpUNO(x[0], x[1]), b.CreateFAdd(x[0], x[1]),
                             b.CreateSelect(b.CreateFCmpOLT(x[0], x[1]), x[1], x[0]));
          break;
        case Op::Minimum:
          r = b.CreateSelect(b.CreateFCmpUNO(x[0], x[1]), b.CreateFAdd(x[0], x[1]),
                             b.CreateSelect(b.CreateFCmpOLT(x[1], x[0]), x[1], x[0]));
          break;
        case Op::Eq:
          r = b.CreateFCmpOEQ(x[0], x[1]);
          break;
        case Op::Ne:
          r = b.CreateFCmpUNE(x[0], x[1]);
          break;
        case Op::Lt:
          r = b.CreateFCmpOLT(x[0], x[1]);
          break;
        case Op::Le:
          r = b.CreateFCmpOLE(x[0], x[1]);
          break;
        case Op::Gt:
          r = b.CreateFCmpOGT(x[0], x[1]);
          break;
        case Op::Ge:
          r = b.CreateFCmpOGE(x[0], x[1]);
          break;
        default:
          r = emit_math(*this, in, x, ct);
          if (!r) unsupported("no floating-point kernel");
      }
    } else {
      switch (op) {
        case Op::Neg:
          r = b.CreateSub(ci(0), x[0]);
          break;
        case Op::Abs:
          r = b.CreateSelect(b.CreateICmpSLT(x[0], ci(0)), b.CreateSub(ci(0), x[0]), x[0]);
          break;
        case Op::Relu:
          r = b.CreateSelect(b.CreateICmpSGT(x[0], ci(0)), x[0], ci(0));
          break;
        case Op::Cast:
          r = x[0];
          break;
        case Op::Add:
          r = x.size() > 2 ? b.CreateAdd(x[0], b.CreateMul(x[2], x[1])) : b.CreateAdd(x[0], x[1]);
          break;
        case Op::Sub:
          r = x.size() > 2 ? b.CreateSub(x[0], b.CreateMul(x[2], x[1])) : b.CreateSub(x[0], x[1]);
          break;
        case Op::Mul:
          r = b.CreateMul(x[0], x[1]);
          break;
        case Op::Maximum:
          r = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x[0], x[1]);
          break;
        case Op::Minimum:
          r = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x[0], x[1]);
          break;
        case Op::Eq:
          r = b.CreateICmpEQ(x[0], x[1]);
          break;
        case Op::Ne:
          r = b.CreateICmpNE(x[0], x[1]);
          break;
        case Op::Lt:
          r = b.CreateICmpSLT(x[0], x[1]);
          break;
        case Op::Le:
          r = b.CreateICmpSLE(x[0], x[1]);
          break;
        case Op::Gt:
          r = b.CreateICmpSGT(x[0], x[1]);
          break;
        case Op::Ge:
          r = b.CreateICmpSGE(x[0], x[1]);
          break;
        default:
          r = emit_math(*this, in, x, ct);
          if (!r) unsupported(std::string("no integer kernel for dtype ") + dtype_name(dom));
      }
    }
    return to_dtype(r, in.dtype);
  }
};

// Merges dims that every array walks alike: the merged sizes and per-array strides.
void merge_dims(const Shape& shape, std::vector<Shape>& strides, Shape& dims);
// A counted loop j in [lo, hi) carrying accumulators; returns their values after the loop.
// pin_width > 0 asks the vectorizer for exactly that many lanes and forbids unrolling.
std::vector<llvm::Value*> counted_loop(
    llvm::LLVMContext& C, llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi,
    const std::vector<llvm::Value*>& init, bool vectorize_hint,
    const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>&
        f,
    int pin_width = 0);
// A kernel's always-inlined body (its buffers noalias, then `extra` parameters) and the
// exported entry point with the common signature, already emitted: it unpacks the buffers and
// calls the body.
std::pair<llvm::Function*, llvm::Function*> declare_kernel(
    Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const std::string& name, int num_args,
    std::initializer_list<llvm::Type*> extra);
// The kept and reduced dims of a reduction spec, merged; false if the reduced ones do not merge
// into one.
bool reduce_dims(const LoweredGraph& g, const FusedSpec& s, Shape& kdims, Shape& rdim,
                 std::vector<Shape>& kstr, std::vector<Shape>& rstr,
                 const std::vector<Shape>& strides);
// The kernel of an elementwise spec, and of a spec with a reduction or normalization.
void build_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                  const FusedSpec& s, const std::string& name);
void build_reduce_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                         const FusedSpec& s, const std::string& name);

// pipelines.cpp: the IR pipelines of the two tiers.
// Below this many elements a kernel's quick-tier code stays scalar: vectorizing costs about as
// much compile time (~2 ms a kernel) as its first few runs win back.
constexpr int64_t kQuickVectorMin = int64_t{1} << 17;
// Whether the optimizer cannot change any result of the module (no fast-math flags or library
// calls): then the quick tier may run its short pipeline and still match the full tier bitwise.
bool order_exact(const llvm::Module& m);
// Marks every loop of a quick-tier kernel not to be vectorized.
void scalar_loops(llvm::Module& m);
// Runs the O3 pipeline, or the quick tier's short one (order-exact kernels only).
void run_ir_pipeline(llvm::TargetMachine& tm, llvm::Module& m, bool quick);

}  // namespace lazyx::cpu::cg
