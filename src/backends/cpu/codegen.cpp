// Fused elementwise loops as LLVM IR. Each loop walks the output of a group in row-major order:
// dims that every operand walks the same way are merged, the innermost dim becomes a counted
// loop the loop vectorizer handles (unit-stride, invariant or constant-stride loads), and rows
// above it compute their operand offsets with div/mod by constants. Values live in registers as
// float (f16, bf16, f32), double (f64) or i64 (integers and bool), rounded to their dtype after
// every op so results match the reference's per-op rounding. Views are loads and stores at
// their strides (transposed walks go in 64 x 64 tiles); reductions and normalizations are row
// loops (or column loops for a leading/middle dim) over the kept elements; random ops compute
// the counter-based generator of ir/random.h in the loop.
#include "backends/cpu/codegen.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

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

// Sleef entry points, declared without their vector types: we only take their addresses.
#define LAZYX_SLEEF_FN(b)                                                                    \
  X(Sleef_##b##f_u10) X(Sleef_##b##_u10) X(Sleef_##b##f16_u10avx512f) X(Sleef_##b##d8_u10avx512f) \
  X(Sleef_##b##f8_u10avx2) X(Sleef_##b##d4_u10avx2)
#define LAZYX_SLEEF_ALL \
  LAZYX_SLEEF_FN(exp) LAZYX_SLEEF_FN(log) LAZYX_SLEEF_FN(tanh) LAZYX_SLEEF_FN(erf) \
  LAZYX_SLEEF_FN(sin) LAZYX_SLEEF_FN(cos) LAZYX_SLEEF_FN(pow)
extern "C" {
#define X(n) void n();
LAZYX_SLEEF_ALL
#undef X
}

namespace lazyx::cpu {

using backend::Instr;
using backend::LoweredGraph;
using ir::Op;
namespace orc = llvm::orc;

namespace {

[[noreturn]] void llvm_fail(const std::string& what, llvm::Error e) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  os << e;
  throw Error("[cpu] " + what + ": " + os.str());
}

struct Jit {
  std::unique_ptr<orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  bool avx512 = false, avx2 = false, f16c = false;
  std::string cpu, features;
  std::mutex mu;
  std::atomic<int64_t> next_module{0};

  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) llvm_fail("cannot detect the host CPU", jtmb.takeError());
    jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    cpu = jtmb->getCPU();
    features = jtmb->getFeatures().getString();
    avx512 = features.find("+avx512f") != std::string::npos;
    avx2 = features.find("+avx2") != std::string::npos;
    f16c = features.find("+f16c") != std::string::npos;
    auto t = jtmb->createTargetMachine();
    if (!t) llvm_fail("cannot create a target machine", t.takeError());
    tm = std::move(*t);
    auto j = orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
    if (!j) llvm_fail("cannot create the JIT", j.takeError());
    jit = std::move(*j);
    orc::SymbolMap syms;
#define X(n) \
  syms[jit->mangleAndIntern(#n)] = {orc::ExecutorAddr::fromPtr(&n), llvm::JITSymbolFlags::Exported};
    LAZYX_SLEEF_ALL
#undef X
    if (auto e = jit->getMainJITDylib().define(orc::absoluteSymbols(std::move(syms)))) {
      llvm_fail("cannot define the math symbols", std::move(e));
    }
    auto gen = orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit->getDataLayout().getGlobalPrefix());
    if (!gen) llvm_fail("cannot search the process for symbols", gen.takeError());
    jit->getMainJITDylib().addGenerator(std::move(*gen));
  }
};

Jit& the_jit() {
  static Jit* j = new Jit();  // never destroyed: programs may outlive static teardown
  return *j;
}

class ModuleHandle : public CompiledModule {
 public:
  orc::ResourceTrackerSP rt;
  ~ModuleHandle() override {
    if (!rt) return;
    std::lock_guard<std::mutex> lock(the_jit().mu);
    llvm::consumeError(rt->remove());
  }
};

bool is_compare(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge;
}
bool is_logical(Op op) { return op == Op::LogicalAnd || op == Op::LogicalOr || op == Op::LogicalNot; }

Dtype domain_of(const LoweredGraph& g, const Instr& in) {
  if (is_compare(in.op)) return static_cast<Dtype>(in.attrs.i0);
  if (in.op == Op::Cast) return g.instrs[in.inputs[0]].dtype;
  return in.dtype;
}

enum class Math { Exp, Log, Tanh, Erf, Sin, Cos, Pow };
const char* math_base(Math m) {
  switch (m) {
    case Math::Exp: return "exp";
    case Math::Log: return "log";
    case Math::Tanh: return "tanh";
    case Math::Erf: return "erf";
    case Math::Sin: return "sin";
    case Math::Cos: return "cos";
    case Math::Pow: return "pow";
  }
  return "";
}

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
  std::vector<llvm::Value*> arg;              // buffer base pointers
  std::vector<llvm::Value*> scalar_val;       // per input: hoisted scalar value, or null
  std::vector<llvm::Value*> row_off;          // per input: offset of the current row
  std::vector<int64_t> inner_stride;          // per input
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
      case kBool: return llvm::Type::getInt8Ty(C);
      case kInt32: return i32;
      case kInt64: return i64;
      case kFloat16: return llvm::Type::getHalfTy(C);
      case kBFloat16: return llvm::Type::getInt16Ty(C);
      case kFloat32: return f32;
      case kFloat64: return f64;
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
    if (t != i64) {
      v = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, t}, {v});
    }
    if (d == kInt32) v = b.CreateSExt(b.CreateTrunc(v, i32), i64);
    return v;
  }

  // A value in repr converted to compute type ct (float, double or i64) without rounding to a
  // dtype: how the reference loads an operand into double or int64.
  llvm::Value* to_compute(llvm::Value* v, llvm::Type* ct) {
    llvm::Type* t = v->getType();
    if (t == ct) return v;
    if (ct == i64) return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, t}, {v});
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
      case kBool: return b.CreateZExt(b.CreateICmpNE(v, llvm::ConstantInt::get(mt, 0)), i64);
      case kInt32: return b.CreateSExt(v, i64);
      case kFloat16: return b.CreateFPExt(v, f32);
      case kBFloat16: return bits_to_float(b.CreateZExt(v, i32));
      default: return v;
    }
  }

  void store_elem(Dtype d, llvm::Value* base, llvm::Value* idx, llvm::Value* v) {
    llvm::Type* mt = mem_type(d);
    llvm::Value* p = b.CreateInBoundsGEP(mt, base, idx);
    switch (d) {
      case kBool:
      case kInt32: v = b.CreateTrunc(v, mt); break;
      case kFloat16: v = b.CreateFPTrunc(v, mt); break;
      case kBFloat16: v = b.CreateTrunc(bf16_bits(v), mt); break;
      default: break;
    }
    b.CreateStore(v, p);
  }

  llvm::Value* math(Math m, llvm::Value* x, llvm::Value* y = nullptr) {
    bool dbl = x->getType() == f64;
    std::string base = math_base(m);
    std::string scalar = "Sleef_" + base + (dbl ? "" : "f") + "_u10";
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
      variants += "_ZGV_LLVM_N" + std::to_string(vf) + (y ? "vv" : "v") + "_" + scalar + "(" +
                  vname + ")";
    };
    if (jit.avx512) add_variant(dbl ? 8 : 16, "Sleef_" + base + (dbl ? "d8" : "f16") + "_u10avx512f");
    if (jit.avx2) add_variant(dbl ? 4 : 8, "Sleef_" + base + (dbl ? "d4" : "f8") + "_u10avx2");
    llvm::CallInst* call = y ? b.CreateCall(f, {x, y}) : b.CreateCall(f, {x});
    call->setDoesNotThrow();
    call->setDoesNotAccessMemory();
    if (!variants.empty()) {
      call->addFnAttr(llvm::Attribute::get(C, "vector-function-abi-variant", variants));
    }
    return call;
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
      if (op == Op::RandUniform) return to_dtype(uniform(mseed, ctr, in.dtype == kFloat64), in.dtype);
      if (op == Op::RandNormal) {
        llvm::Value* c2 = b.CreateMul(ctr, ci(2));
        llvm::Value* u1 = b.CreateFSub(cf(f64, 1.0), uniform(mseed, c2, true));
        llvm::Value* u2 = uniform(mseed, b.CreateAdd(c2, ci(1)), true);
        llvm::Value* rad = b.CreateUnaryIntrinsic(
            llvm::Intrinsic::sqrt, b.CreateFMul(cf(f64, -2.0), math(Math::Log, u1)));
        llvm::Value* r = b.CreateFMul(rad, math(Math::Cos, b.CreateFMul(cf(f64, 6.283185307179586), u2)));
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
        llvm::Value* r = b.CreateFAdd(to_compute(a[0], f64),
                                      b.CreateFMul(b.CreateSIToFP(lin, f64), to_compute(a[1], f64)));
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
        case Op::Neg: r = b.CreateFNeg(x[0]); break;
        case Op::Abs: r = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x[0]); break;
        case Op::Exp: r = math(Math::Exp, x[0]); break;
        case Op::Log: r = math(Math::Log, x[0]); break;
        case Op::Sqrt: r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x[0]); break;
        case Op::Rsqrt: r = b.CreateFDiv(one, b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x[0])); break;
        case Op::Tanh: r = math(Math::Tanh, x[0]); break;
        case Op::Sigmoid: r = b.CreateFDiv(one, b.CreateFAdd(one, math(Math::Exp, b.CreateFNeg(x[0])))); break;
        case Op::Relu: r = b.CreateSelect(b.CreateFCmpOLE(x[0], cf(ct, 0.0)), cf(ct, 0.0), x[0]); break;
        case Op::Gelu: {
          llvm::Value* e = math(Math::Erf, b.CreateFMul(x[0], cf(ct, 0.70710678118654752440)));
          r = b.CreateFMul(b.CreateFMul(cf(ct, 0.5), x[0]), b.CreateFAdd(one, e));
          break;
        }
        case Op::GeluTanh: {
          llvm::Value* x3 = b.CreateFMul(b.CreateFMul(x[0], x[0]), x[0]);
          llvm::Value* in_ = b.CreateFMul(cf(ct, 0.79788456080286535588),
                                          b.CreateFAdd(x[0], b.CreateFMul(cf(ct, 0.044715), x3)));
          r = b.CreateFMul(b.CreateFMul(cf(ct, 0.5), x[0]), b.CreateFAdd(one, math(Math::Tanh, in_)));
          break;
        }
        case Op::Sin: r = math(Math::Sin, x[0]); break;
        case Op::Cos: r = math(Math::Cos, x[0]); break;
        case Op::Cast: r = x[0]; break;
        case Op::Add: r = x.size() > 2 ? b.CreateFAdd(x[0], b.CreateFMul(x[2], x[1])) : b.CreateFAdd(x[0], x[1]); break;
        case Op::Sub: r = x.size() > 2 ? b.CreateFSub(x[0], b.CreateFMul(x[2], x[1])) : b.CreateFSub(x[0], x[1]); break;
        case Op::Mul: r = b.CreateFMul(x[0], x[1]); break;
        case Op::Div: r = b.CreateFDiv(x[0], x[1]); break;
        case Op::Pow: r = math(Math::Pow, x[0], x[1]); break;
        case Op::Maximum:
          r = b.CreateSelect(b.CreateFCmpUNO(x[0], x[1]), b.CreateFAdd(x[0], x[1]),
                             b.CreateSelect(b.CreateFCmpOLT(x[0], x[1]), x[1], x[0]));
          break;
        case Op::Minimum:
          r = b.CreateSelect(b.CreateFCmpUNO(x[0], x[1]), b.CreateFAdd(x[0], x[1]),
                             b.CreateSelect(b.CreateFCmpOLT(x[1], x[0]), x[1], x[0]));
          break;
        case Op::Eq: r = b.CreateFCmpOEQ(x[0], x[1]); break;
        case Op::Ne: r = b.CreateFCmpUNE(x[0], x[1]); break;
        case Op::Lt: r = b.CreateFCmpOLT(x[0], x[1]); break;
        case Op::Le: r = b.CreateFCmpOLE(x[0], x[1]); break;
        case Op::Gt: r = b.CreateFCmpOGT(x[0], x[1]); break;
        case Op::Ge: r = b.CreateFCmpOGE(x[0], x[1]); break;
        default: unsupported("no floating-point kernel");
      }
    } else {
      switch (op) {
        case Op::Neg: r = b.CreateSub(ci(0), x[0]); break;
        case Op::Abs: r = b.CreateSelect(b.CreateICmpSLT(x[0], ci(0)), b.CreateSub(ci(0), x[0]), x[0]); break;
        case Op::Relu: r = b.CreateSelect(b.CreateICmpSGT(x[0], ci(0)), x[0], ci(0)); break;
        case Op::Cast: r = x[0]; break;
        case Op::Add: r = x.size() > 2 ? b.CreateAdd(x[0], b.CreateMul(x[2], x[1])) : b.CreateAdd(x[0], x[1]); break;
        case Op::Sub: r = x.size() > 2 ? b.CreateSub(x[0], b.CreateMul(x[2], x[1])) : b.CreateSub(x[0], x[1]); break;
        case Op::Mul: r = b.CreateMul(x[0], x[1]); break;
        case Op::Maximum: r = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x[0], x[1]); break;
        case Op::Minimum: r = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x[0], x[1]); break;
        case Op::Eq: r = b.CreateICmpEQ(x[0], x[1]); break;
        case Op::Ne: r = b.CreateICmpNE(x[0], x[1]); break;
        case Op::Lt: r = b.CreateICmpSLT(x[0], x[1]); break;
        case Op::Le: r = b.CreateICmpSLE(x[0], x[1]); break;
        case Op::Gt: r = b.CreateICmpSGT(x[0], x[1]); break;
        case Op::Ge: r = b.CreateICmpSGE(x[0], x[1]); break;
        default: unsupported(std::string("no integer kernel for dtype ") + dtype_name(dom));
      }
    }
    return to_dtype(r, in.dtype);
  }
};

// Merges dims that every array walks alike. Returns the merged sizes and per-array strides.
void merge_dims(const Shape& shape, std::vector<Shape>& strides, Shape& dims) {
  dims.clear();
  std::vector<Shape> out(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims.empty()) {
      bool ok = true;
      for (size_t a = 0; a < strides.size(); ++a) {
        if (out[a].back() != strides[a][d] * shape[d]) ok = false;
      }
      if (ok) {
        dims.back() *= shape[d];
        for (size_t a = 0; a < strides.size(); ++a) out[a].back() = strides[a][d];
        continue;
      }
    }
    dims.push_back(shape[d]);
    for (size_t a = 0; a < strides.size(); ++a) out[a].push_back(strides[a][d]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& o : out) o.push_back(0);
  }
  strides = std::move(out);
}

std::vector<llvm::Value*> counted_loop(
    llvm::LLVMContext& C, llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi,
    const std::vector<llvm::Value*>& init, bool vectorize_hint,
    const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>& f);

// A kernel's always-inlined body (its buffers noalias, then `extra` parameters) and the
// exported entry point with the common signature that unpacks the buffers and calls it.
static std::pair<llvm::Function*, llvm::Function*> declare_kernel(
    Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const std::string& name, int num_args,
    std::initializer_list<llvm::Type*> extra) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  llvm::Type* voidt = llvm::Type::getVoidTy(C);
  std::vector<llvm::Type*> bp(num_args, ptr);
  bp.insert(bp.end(), extra.begin(), extra.end());
  auto* body = llvm::Function::Create(llvm::FunctionType::get(voidt, bp, false),
                                      llvm::Function::InternalLinkage, name + "_body", M);
  auto* entry = llvm::Function::Create(
      llvm::FunctionType::get(voidt, {ptr, ptr, i64, i64, i64, i64, ptr}, false),
      llvm::Function::ExternalLinkage, name, M);
  for (llvm::Function* f : {body, entry}) {
    f->addFnAttr("target-cpu", jit.cpu);
    f->addFnAttr("target-features", jit.features);
    if (jit.avx512) f->addFnAttr("prefer-vector-width", "512");
    f->setDoesNotThrow();
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (int a = 0; a < num_args; ++a) body->addParamAttr(a, llvm::Attribute::NoAlias);
  return {body, entry};
}

void build_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                  const FusedSpec& s, const std::string& name) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  // body(bufs..., scalars, start, end), every buffer noalias; the entry point unpacks bufs.
  auto [body, entry] = declare_kernel(jit, C, M, name, s.num_args, {ptr, i64, i64});

  llvm::IRBuilder<> b(C);
  {
    auto* bb = llvm::BasicBlock::Create(C, "entry", entry);
    b.SetInsertPoint(bb);
    std::vector<llvm::Value*> args;
    for (int a = 0; a < s.num_args; ++a) {
      llvm::Value* p = b.CreateInBoundsGEP(ptr, entry->getArg(0), b.getInt64(a));
      args.push_back(b.CreateLoad(ptr, p));
    }
    args.push_back(entry->getArg(1));
    args.push_back(entry->getArg(2));
    args.push_back(entry->getArg(3));
    b.CreateCall(body, args);
    b.CreateRetVoid();
  }

  Gen gen(jit, C, M, b, g, s);
  for (int a = 0; a < s.num_args; ++a) gen.arg.push_back(body->getArg(a));
  llvm::Value* scalars = body->getArg(s.num_args);
  llvm::Value* start = body->getArg(s.num_args + 1);
  llvm::Value* end = body->getArg(s.num_args + 2);

  // Merge dims over the arrays: inputs, then the contiguous output.
  std::vector<int32_t> array_inputs;
  std::vector<Shape> strides;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (s.inputs[k].arg >= 0) {
      array_inputs.push_back(static_cast<int32_t>(k));
      strides.push_back(s.inputs[k].strides);
    }
  }
  strides.push_back(ir::contiguous_strides(s.shape));
  // Scatter outputs (AsStridedScatter): stored at their view's positions.
  std::vector<size_t> scat;
  for (size_t q = 0; q < s.outputs.size(); ++q) {
    if (!s.outputs[q].scatter) continue;
    scat.push_back(q);
    strides.push_back(s.outputs[q].strides);
  }
  const size_t nin = array_inputs.size();
  std::vector<llvm::Value*> sc_off(scat.size());
  std::vector<int64_t> sc_inner(scat.size());
  Shape dims;
  merge_dims(s.shape, strides, dims);
  const size_t rank = dims.size();
  const int64_t inner = dims.back();

  auto* bb_entry = llvm::BasicBlock::Create(C, "entry", body);
  b.SetInsertPoint(bb_entry);
  gen.scalar_val.assign(s.inputs.size(), nullptr);
  gen.row_off.assign(s.inputs.size(), nullptr);
  gen.inner_stride.assign(s.inputs.size(), 0);
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    gen.input_index[s.inputs[k].instr] = static_cast<int32_t>(k);
    if (s.inputs[k].arg >= 0) continue;
    const Instr& si = g.instrs[s.inputs[k].storage()];
    llvm::Value* base = b.CreateInBoundsGEP(b.getInt8Ty(), scalars, b.getInt64(16 * int64_t{si.slot}));
    llvm::Value* v;
    if (is_floating(si.dtype)) {
      v = b.CreateLoad(b.getDoubleTy(), base);
    } else {
      v = b.CreateLoad(i64, b.CreateInBoundsGEP(b.getInt8Ty(), base, b.getInt64(8)));
    }
    gen.scalar_val[k] = gen.to_dtype(v, si.dtype);
  }

  for (size_t q = 0; q < array_inputs.size(); ++q) gen.inner_stride[array_inputs[q]] = strides[q][rank - 1];
  for (size_t k = 0; k < scat.size(); ++k) sc_inner[k] = strides[nin + 1 + k][rank - 1];
  // The innermost loop over j in [lo, hi) of the current row.
  // Vectorization is forced (no cost model) except with scatter stores, where LLVM may fail to
  // prove the stores independent of the loads and would print a remark.
  const bool force_vec = scat.empty();
  auto inner_loop = [&](llvm::Value* lo, llvm::Value* hi) {
    counted_loop(C, b, lo, hi, {}, force_vec, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
      gen.vals.clear();
      gen.j = j;
      for (int32_t m : s.members) gen.vals[m] = gen.member(m);
      llvm::Value* oidx = b.CreateAdd(gen.row_base, j);
      size_t sk = 0;
      for (const auto& o : s.outputs) {
        llvm::Value* idx = oidx;
        if (o.scatter) {
          idx = sc_off[sk];
          if (sc_inner[sk] != 0) idx = b.CreateAdd(idx, b.CreateMul(j, b.getInt64(sc_inner[sk])));
          sk++;
        }
        gen.store_elem(g.instrs[o.instr].dtype, gen.arg[o.arg], idx, gen.vals[o.instr]);
      }
      return std::vector<llvm::Value*>{};
    });
  };
  auto smax = [&](llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSGT(x, y), x, y); };
  auto smin = [&](llvm::Value* x, llvm::Value* y) { return b.CreateSelect(b.CreateICmpSLT(x, y), x, y); };
  if (rank == 1) {
    gen.row_base = b.getInt64(0);
    for (size_t q = 0; q < array_inputs.size(); ++q) {
      gen.row_off[array_inputs[q]] = b.getInt64(s.inputs[array_inputs[q]].offset);
    }
    for (size_t k = 0; k < scat.size(); ++k) sc_off[k] = b.getInt64(s.outputs[scat[k]].offset);
    inner_loop(start, end);
  } else {
    llvm::Value* r0 = b.CreateUDiv(start, b.getInt64(inner));
    llvm::Value* r1 = b.CreateUDiv(b.CreateAdd(end, b.getInt64(inner - 1)), b.getInt64(inner));
    // One row r, columns [cb, ce) of it clipped to [start, end).
    auto row = [&](llvm::Value* r, llvm::Value* cb, llvm::Value* ce) {
      // Offsets of the row for every array: the row's multi-index over dims[0..rank-2].
      // Offset arrays: the array inputs, then the scatter outputs (strides after the output's).
      std::vector<llvm::Value*> offs;
      std::vector<size_t> sidx;
      for (size_t q = 0; q < nin; ++q) {
        offs.push_back(b.getInt64(s.inputs[array_inputs[q]].offset));
        sidx.push_back(q);
      }
      for (size_t k = 0; k < scat.size(); ++k) {
        offs.push_back(b.getInt64(s.outputs[scat[k]].offset));
        sidx.push_back(nin + 1 + k);
      }
      llvm::Value* rem = r;
      for (size_t d = rank - 1; d-- > 0;) {
        llvm::Value* idx = d == 0 ? rem : b.CreateURem(rem, b.getInt64(dims[d]));
        if (d != 0) rem = b.CreateUDiv(rem, b.getInt64(dims[d]));
        for (size_t q = 0; q < offs.size(); ++q) {
          int64_t st = strides[sidx[q]][d];
          if (st != 0) offs[q] = b.CreateAdd(offs[q], b.CreateMul(idx, b.getInt64(st)));
        }
      }
      for (size_t q = 0; q < nin; ++q) gen.row_off[array_inputs[q]] = offs[q];
      for (size_t k = 0; k < scat.size(); ++k) sc_off[k] = offs[nin + k];
      gen.row_base = b.CreateMul(r, b.getInt64(inner));
      inner_loop(smax(b.CreateSub(start, gen.row_base), cb), smin(b.CreateSub(end, gen.row_base), ce));
    };
    // Transposed reads (an input walks the inner dim with a large stride and the row dim with a
    // small one) go tile by tile, so the cache lines and pages of both sides are reused.
    constexpr int64_t kTile = 64;
    bool tiled = inner >= 16 && dims[rank - 2] >= 16 && std::getenv("LAZYX_CPU_NO_TILING") == nullptr;
    bool transposed = false;
    for (size_t q = 0; q < strides.size(); ++q) {
      int64_t si = std::abs(strides[q][rank - 1]), sr = std::abs(strides[q][rank - 2]);
      if (si > 1 && sr != 0 && sr < si) transposed = true;
    }
    tiled = tiled && transposed;
    auto none = std::vector<llvm::Value*>{};
    if (!tiled) {
      counted_loop(C, b, r0, r1, {}, false, [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
        row(r, b.getInt64(0), b.getInt64(inner));
        return none;
      });
    } else {
      llvm::Value* nrt = b.CreateUDiv(b.CreateAdd(b.CreateSub(r1, r0), b.getInt64(kTile - 1)), b.getInt64(kTile));
      const int64_t nct = (inner + kTile - 1) / kTile;
      counted_loop(C, b, b.getInt64(0), nrt, {}, false, [&](llvm::Value* t, const std::vector<llvm::Value*>&) {
        llvm::Value* rb = b.CreateAdd(r0, b.CreateMul(t, b.getInt64(kTile)));
        llvm::Value* re = smin(b.CreateAdd(rb, b.getInt64(kTile)), r1);
        counted_loop(C, b, b.getInt64(0), b.getInt64(nct), {}, false, [&](llvm::Value* c, const std::vector<llvm::Value*>&) {
          llvm::Value* cb = b.CreateMul(c, b.getInt64(kTile));
          llvm::Value* ce = smin(b.CreateAdd(cb, b.getInt64(kTile)), b.getInt64(inner));
          counted_loop(C, b, rb, re, {}, false, [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
            row(r, cb, ce);
            return none;
          });
          return none;
        });
        return none;
      });
    }
  }
  b.CreateRetVoid();
}


// A reduction with its elementwise prologue: for each output element o in [start, end), the
// reduced dims (merged into one) form the inner loop; other group outputs are stored at their
// contiguous positions, so every input element is still visited exactly once.
bool reduce_dims(const LoweredGraph& g, const FusedSpec& s, Shape& kdims, Shape& rdim,
                 std::vector<Shape>& kstr, std::vector<Shape>& rstr,
                 const std::vector<Shape>& strides) {
  const Instr& red = g.instrs[s.reduce_instr];
  const Shape& shape = s.shape;
  std::vector<char> is_red(shape.size(), 0);
  for (int64_t d : reduced_dims(red)) is_red[d] = 1;
  Shape ks, rs;
  std::vector<Shape> kst(strides.size()), rst(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    (is_red[d] ? rs : ks).push_back(shape[d]);
    for (size_t a = 0; a < strides.size(); ++a) (is_red[d] ? rst[a] : kst[a]).push_back(strides[a][d]);
  }
  kstr = kst;
  rstr = rst;
  merge_dims(ks, kstr, kdims);
  merge_dims(rs, rstr, rdim);
  return rdim.size() == 1;
}

// A counted loop j in [lo, hi) carrying accumulators; returns their values after the loop.
std::vector<llvm::Value*> counted_loop(
    llvm::LLVMContext& C, llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi,
    const std::vector<llvm::Value*>& init, bool vectorize_hint,
    const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>& f) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(C, "loop", fn);
  auto* done = llvm::BasicBlock::Create(C, "done", fn);
  b.CreateCondBr(b.CreateICmpSLT(lo, hi), loop, done);
  b.SetInsertPoint(loop);
  llvm::PHINode* j = b.CreatePHI(b.getInt64Ty(), 2, "j");
  j->addIncoming(lo, pre);
  std::vector<llvm::Value*> acc;
  for (llvm::Value* v : init) {
    llvm::PHINode* p = b.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    acc.push_back(p);
  }
  std::vector<llvm::Value*> nv = f(j, acc);
  llvm::BasicBlock* latch = b.GetInsertBlock();
  llvm::Value* jn = b.CreateAdd(j, b.getInt64(1), "", true, true);
  j->addIncoming(jn, latch);
  for (size_t k = 0; k < acc.size(); ++k) llvm::cast<llvm::PHINode>(acc[k])->addIncoming(nv[k], latch);
  auto* br = b.CreateCondBr(b.CreateICmpSLT(jn, hi), loop, done);
  if (vectorize_hint) {
    llvm::MDNode* enable = llvm::MDNode::get(
        C, {llvm::MDString::get(C, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b.getTrue())});
    auto tmp = llvm::MDNode::getTemporary(C, {});
    llvm::MDNode* loopid = llvm::MDNode::get(C, {tmp.get(), enable});
    loopid->replaceOperandWith(0, loopid);
    br->setMetadata(llvm::LLVMContext::MD_loop, loopid);
  }
  b.SetInsertPoint(done);
  std::vector<llvm::Value*> out;
  for (size_t k = 0; k < init.size(); ++k) {
    llvm::PHINode* p = b.CreatePHI(init[k]->getType(), 2);
    p->addIncoming(init[k], pre);
    p->addIncoming(nv[k], latch);
    out.push_back(p);
  }
  return out;
}

// Reductions and normalizations with their elementwise prologue. Row mode: for each kept
// element o in [start, end), the reduced dim (merged into one) is the inner loop. Column mode
// (Sum/Mean/Amax/Amin whose reduced dim is not contiguous but whose kept inner dim is): for a
// block of up to 256 contiguous kept elements, the reduced dim is the outer loop and the block
// the inner one, with accumulators in a stack array. Other group outputs are stored at their
// contiguous positions, so every input element is still visited exactly once (LogSumExp,
// Softmax and LogSoftmax recompute the prologue in their later passes without storing).
void build_reduce_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                         const FusedSpec& s, const std::string& name) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  auto [body, entry] = declare_kernel(jit, C, M, name, s.num_args, {ptr, i64, i64, i64, i64, ptr});
  llvm::IRBuilder<> b(C);
  {
    auto* bb = llvm::BasicBlock::Create(C, "entry", entry);
    b.SetInsertPoint(bb);
    std::vector<llvm::Value*> args;
    for (int a = 0; a < s.num_args; ++a) {
      args.push_back(b.CreateLoad(ptr, b.CreateInBoundsGEP(ptr, entry->getArg(0), b.getInt64(a))));
    }
    for (unsigned a = 1; a < 7; ++a) args.push_back(entry->getArg(a));
    b.CreateCall(body, args);
    b.CreateRetVoid();
  }
  Gen gen(jit, C, M, b, g, s);
  for (int a = 0; a < s.num_args; ++a) gen.arg.push_back(body->getArg(a));
  llvm::Value* scalars = body->getArg(s.num_args);
  llvm::Value* start = body->getArg(s.num_args + 1);
  llvm::Value* end = body->getArg(s.num_args + 2);
  llvm::Value* j0 = body->getArg(s.num_args + 3);
  llvm::Value* j1 = body->getArg(s.num_args + 4);
  llvm::Value* partial = body->getArg(s.num_args + 5);

  const Instr& red = g.instrs[s.reduce_instr];
  const Op rop = red.op;
  const bool norm = is_normalization(rop);
  // Arrays: array inputs, the group's elementwise outputs (contiguous in the group shape), and
  // a normalization's own output (also contiguous in the group shape).
  std::vector<int32_t> array_inputs;
  std::vector<Shape> strides;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (s.inputs[k].arg >= 0) {
      array_inputs.push_back(static_cast<int32_t>(k));
      strides.push_back(s.inputs[k].strides);
    }
  }
  std::vector<const FusedSpec::Output*> ew_outputs;
  for (const auto& o : s.outputs) {
    if (o.instr == s.reduce_instr) continue;
    ew_outputs.push_back(&o);
    strides.push_back(ir::contiguous_strides(s.shape));
  }
  if (norm) strides.push_back(ir::contiguous_strides(s.shape));
  Shape kdims, rdim;
  std::vector<Shape> kstr, rstr;
  if (!reduce_dims(g, s, kdims, rdim, kstr, rstr, strides)) {
    ir::fail(ir::op_name(rop), "internal: the reduced dims do not merge.");
  }
  const size_t na = strides.size();
  const size_t nin = array_inputs.size();
  const int64_t K = rdim[0];

  auto* bb_entry = llvm::BasicBlock::Create(C, "entry", body);
  b.SetInsertPoint(bb_entry);
  gen.scalar_val.assign(s.inputs.size(), nullptr);
  gen.row_off.assign(s.inputs.size(), nullptr);
  gen.inner_stride.assign(s.inputs.size(), 0);
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    gen.input_index[s.inputs[k].instr] = static_cast<int32_t>(k);
    if (s.inputs[k].arg >= 0) continue;
    const Instr& si = g.instrs[s.inputs[k].storage()];
    llvm::Value* base = b.CreateInBoundsGEP(b.getInt8Ty(), scalars, b.getInt64(16 * int64_t{si.slot}));
    llvm::Value* v = is_floating(si.dtype)
                         ? b.CreateLoad(b.getDoubleTy(), base)
                         : b.CreateLoad(i64, b.CreateInBoundsGEP(b.getInt8Ty(), base, b.getInt64(8)));
    gen.scalar_val[k] = gen.to_dtype(v, si.dtype);
  }
  const Instr& src = g.instrs[red.inputs[0]];
  const bool fl = is_floating(src.dtype) || rop == Op::Mean || rop == Op::LogSumExp || norm ||
                  rop == Op::Argmax;
  llvm::Type* at = fl ? gen.f64 : i64;
  const bool sum_like = rop == Op::Sum || rop == Op::Mean;
  llvm::Value* init;
  if (rop == Op::Amax) {
    init = fl ? gen.cf(at, -INFINITY) : gen.ci(std::numeric_limits<int64_t>::min());
  } else if (rop == Op::Amin) {
    init = fl ? gen.cf(at, INFINITY) : gen.ci(std::numeric_limits<int64_t>::max());
  } else {
    init = fl ? gen.cf(at, 0.0) : gen.ci(0);
  }
  // Column mode: the reduced dim is strided for every array, the kept inner dim contiguous for
  // one of them.
  bool column = splittable(rop) && kdims.back() > 1 && nin > 0;
  if (column) {
    bool any_unit = false;
    for (size_t a = 0; a < na; ++a) {
      if (rstr[a][0] == 1) column = false;
      if (a < nin && kstr[a].back() == 1) any_unit = true;
    }
    column = column && any_unit;
  }
  constexpr int64_t kBlock = 256;
  llvm::Value* acc_arr = column ? b.CreateAlloca(at, b.getInt64(kBlock)) : nullptr;

  auto combine = [&](llvm::Value* acc, llvm::Value* v) -> llvm::Value* {
    if (sum_like) {
      if (!fl) return b.CreateAdd(acc, v);
      llvm::Value* r = b.CreateFAdd(acc, v);
      if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setHasAllowReassoc(true);
      return r;
    }
    if (fl) {
      llvm::Value* better = rop == Op::Amax ? b.CreateFCmpOGT(v, acc) : b.CreateFCmpOLT(v, acc);
      return b.CreateSelect(b.CreateFCmpUNO(acc, v), gen.cf(at, NAN), b.CreateSelect(better, v, acc));
    }
    return b.CreateBinaryIntrinsic(rop == Op::Amax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, acc, v);
  };
  // max(acc, v) ignoring a NaN v, as a vectorizable recurrence: NaN becomes -inf, so neither
  // operand is ever NaN and the nnan/nsz flags hold (the sign of a zero max is not observable:
  // it is only compared and subtracted).
  auto max_ignoring_nan = [&](llvm::Value* acc, llvm::Value* v) -> llvm::Value* {
    llvm::Value* vv = b.CreateSelect(b.CreateFCmpUNO(v, v), gen.cf(v->getType(), -INFINITY), v);
    llvm::FastMathFlags fmf;
    fmf.setNoNaNs();
    fmf.setNoSignedZeros();
    llvm::Value* c = b.CreateFCmpOGT(vv, acc);
    if (auto* i = llvm::dyn_cast<llvm::Instruction>(c)) i->setFastMathFlags(fmf);
    llvm::Value* r = b.CreateSelect(c, vv, acc);
    if (auto* i = llvm::dyn_cast<llvm::Instruction>(r)) i->setFastMathFlags(fmf);
    return r;
  };
  // The reduced value of one element: offsets of the arrays are `base[a] + jv * jst[a]`.
  auto element = [&](const std::vector<llvm::Value*>& base, llvm::Value* jv,
                     const std::vector<int64_t>& jst, bool store_ew) -> llvm::Value* {
    gen.vals.clear();
    for (size_t q = 0; q < nin; ++q) {
      gen.row_off[array_inputs[q]] = base[q];
      gen.inner_stride[array_inputs[q]] = jst[q];
    }
    gen.j = jv;
    gen.row_base = b.getInt64(0);
    for (int32_t m : s.members) {
      if (m != s.reduce_instr) gen.vals[m] = gen.member(m);
    }
    if (store_ew) {
      for (size_t q = 0; q < ew_outputs.size(); ++q) {
        size_t a = nin + q;
        llvm::Value* idx = base[a];
        if (jst[a] != 0) idx = b.CreateAdd(idx, b.CreateMul(jv, b.getInt64(jst[a])));
        gen.store_elem(g.instrs[ew_outputs[q]->instr].dtype, gen.arg[ew_outputs[q]->arg], idx,
                       gen.vals[ew_outputs[q]->instr]);
      }
    }
    gen.cur = &red;
    return gen.to_compute(gen.value(red.inputs[0]), at);
  };
  // Stores the accumulator of kept element o: raw into `partial`, or finalized.
  auto store_result = [&](llvm::Value* o, llvm::Value* acc) {
    if (splittable(rop)) {
      llvm::Function* fn = b.GetInsertBlock()->getParent();
      auto* bp_ = llvm::BasicBlock::Create(C, "partial", fn);
      auto* bf = llvm::BasicBlock::Create(C, "final", fn);
      auto* bj = llvm::BasicBlock::Create(C, "stored", fn);
      b.CreateCondBr(b.CreateIsNotNull(partial), bp_, bf);
      b.SetInsertPoint(bp_);
      b.CreateStore(acc, b.CreateInBoundsGEP(at, partial, b.CreateSub(o, start)));
      b.CreateBr(bj);
      b.SetInsertPoint(bf);
      llvm::Value* r = acc;
      if (rop == Op::Mean) r = b.CreateFDiv(r, gen.cf(at, static_cast<double>(K)));
      gen.store_elem(red.dtype, gen.arg[s.reduce_arg], o, gen.to_dtype(r, red.dtype));
      b.CreateBr(bj);
      b.SetInsertPoint(bj);
      return;
    }
    gen.store_elem(red.dtype, gen.arg[s.reduce_arg], o, gen.to_dtype(acc, red.dtype));
  };
  // Offsets of every array at kept element o.
  auto kept_offsets = [&](llvm::Value* o) {
    std::vector<llvm::Value*> offs;
    for (size_t a = 0; a < na; ++a) offs.push_back(b.getInt64(a < nin ? s.inputs[array_inputs[a]].offset : 0));
    llvm::Value* rem = o;
    for (size_t d = kdims.size(); d-- > 0;) {
      llvm::Value* idx = d == 0 ? rem : b.CreateURem(rem, b.getInt64(kdims[d]));
      if (d != 0) rem = b.CreateUDiv(rem, b.getInt64(kdims[d]));
      for (size_t a = 0; a < na; ++a) {
        if (kstr[a][d] != 0) offs[a] = b.CreateAdd(offs[a], b.CreateMul(idx, b.getInt64(kstr[a][d])));
      }
    }
    return offs;
  };
  std::vector<int64_t> rj(na), kj(na);
  for (size_t a = 0; a < na; ++a) {
    rj[a] = rstr[a][0];
    kj[a] = kstr[a].back();
  }

  auto* bb_exit = llvm::BasicBlock::Create(C, "exit", body);
  auto* hdr = llvm::BasicBlock::Create(C, "outs", body);
  auto* obody = llvm::BasicBlock::Create(C, "out", body);
  b.CreateBr(hdr);
  b.SetInsertPoint(hdr);
  llvm::PHINode* o = b.CreatePHI(i64, 2, "o");
  o->addIncoming(start, bb_entry);
  b.CreateCondBr(b.CreateICmpSLT(o, end), obody, bb_exit);
  b.SetInsertPoint(obody);
  std::vector<llvm::Value*> offs = kept_offsets(o);
  llvm::Value* onext;
  if (column) {
    const int64_t kin = kdims.back();
    llvm::Value* rowend = b.CreateMul(b.CreateAdd(b.CreateUDiv(o, b.getInt64(kin)), b.getInt64(1)), b.getInt64(kin));
    llvm::Value* oe = b.CreateAdd(o, b.getInt64(kBlock));
    oe = b.CreateSelect(b.CreateICmpSLT(rowend, oe), rowend, oe);
    oe = b.CreateSelect(b.CreateICmpSLT(end, oe), end, oe);
    llvm::Value* nblk = b.CreateSub(oe, o);
    counted_loop(C, b, b.getInt64(0), nblk, {}, false, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
      b.CreateStore(init, b.CreateInBoundsGEP(at, acc_arr, i));
      return std::vector<llvm::Value*>{};
    });
    counted_loop(C, b, j0, j1, {}, false, [&](llvm::Value* jr, const std::vector<llvm::Value*>&) {
      std::vector<llvm::Value*> base(na);
      for (size_t a = 0; a < na; ++a) {
        base[a] = rj[a] == 0 ? offs[a] : b.CreateAdd(offs[a], b.CreateMul(jr, b.getInt64(rj[a])));
      }
      counted_loop(C, b, b.getInt64(0), nblk, {}, sum_like, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
        llvm::Value* v = element(base, i, kj, true);
        llvm::Value* p = b.CreateInBoundsGEP(at, acc_arr, i);
        b.CreateStore(combine(b.CreateLoad(at, p), v), p);
        return std::vector<llvm::Value*>{};
      });
      return std::vector<llvm::Value*>{};
    });
    counted_loop(C, b, b.getInt64(0), nblk, {}, false, [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
      store_result(b.CreateAdd(o, i), b.CreateLoad(at, b.CreateInBoundsGEP(at, acc_arr, i)));
      return std::vector<llvm::Value*>{};
    });
    onext = oe;
  } else if (splittable(rop)) {
    auto r = counted_loop(C, b, j0, j1, {init}, sum_like, [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
      return std::vector<llvm::Value*>{combine(acc[0], element(offs, jv, rj, true))};
    });
    store_result(o, r[0]);
    onext = b.CreateAdd(o, b.getInt64(1));
  } else if (rop == Op::Argmax) {
    // Two vectorizable passes: the max ignoring NaN and whether there is a NaN; then the first
    // index holding it (the first NaN if any), as the reference's strict-greater scan.
    auto st = counted_loop(C, b, j0, j1, {gen.cf(gen.f64, -INFINITY), b.getInt8(0)}, false,
                           [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
      llvm::Value* v = element(offs, jv, rj, true);
      llvm::Value* isn = b.CreateZExt(b.CreateFCmpUNO(v, v), b.getInt8Ty());
      return std::vector<llvm::Value*>{max_ignoring_nan(acc[0], v), b.CreateOr(acc[1], isn)};
    });
    llvm::Value* has_nan = b.CreateICmpNE(st[1], b.getInt8(0));
    const int64_t none = std::numeric_limits<int64_t>::max();
    auto first = counted_loop(C, b, j0, j1, {gen.ci(none)}, false,
                              [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
      llvm::Value* v = element(offs, jv, rj, false);
      llvm::Value* hit = b.CreateSelect(has_nan, b.CreateFCmpUNO(v, v), b.CreateFCmpOEQ(v, st[0]));
      return std::vector<llvm::Value*>{b.CreateBinaryIntrinsic(
          llvm::Intrinsic::smin, acc[0], b.CreateSelect(hit, jv, gen.ci(none)))};
    });
    llvm::Value* arg = b.CreateSelect(b.CreateICmpEQ(first[0], gen.ci(none)), gen.ci(-1), first[0]);
    gen.store_elem(red.dtype, gen.arg[s.reduce_arg], o, gen.to_dtype(arg, red.dtype));
    onext = b.CreateAdd(o, b.getInt64(1));
  } else {
    // LogSumExp, Softmax, LogSoftmax: the max (NaN ignored, as std::max), then the sum of
    // exp(v - max) in double, then the result.
    auto mx = counted_loop(C, b, j0, j1, {gen.cf(gen.f64, -INFINITY)}, false,
                           [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
      llvm::Value* v = element(offs, jv, rj, true);
      return std::vector<llvm::Value*>{max_ignoring_nan(acc[0], v)};
    });
    llvm::Value* isinf = b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, mx[0]),
                                         gen.cf(gen.f64, INFINITY));
    llvm::Value* shift = b.CreateSelect(isinf, gen.cf(gen.f64, 0.0), mx[0]);
    // exp(v - shift): in float for float32 and narrower sources (16 lanes; the sum stays in
    // double), in double for float64 and integers.
    const bool narrow = is_floating(src.dtype) && src.dtype != kFloat64;
    llvm::Value* shift_f = narrow ? b.CreateFPTrunc(shift, gen.f32) : nullptr;
    auto exp_shifted = [&](llvm::Value* v) -> llvm::Value* {
      if (!narrow) return gen.math(Math::Exp, b.CreateFSub(v, shift));
      llvm::Value* vf = b.CreateFPTrunc(v, gen.f32);  // exact: v came from a narrow dtype
      return b.CreateFPExt(gen.math(Math::Exp, b.CreateFSub(vf, shift_f)), gen.f64);
    };
    auto sum = counted_loop(C, b, j0, j1, {gen.cf(gen.f64, 0.0)}, true,
                            [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
      llvm::Value* v = element(offs, jv, rj, false);
      llvm::Value* r = b.CreateFAdd(acc[0], exp_shifted(v));
      if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setHasAllowReassoc(true);
      return std::vector<llvm::Value*>{r};
    });
    llvm::Value* lsum = gen.math(Math::Log, sum[0]);
    if (rop == Op::LogSumExp) {
      gen.store_elem(red.dtype, gen.arg[s.reduce_arg], o,
                     gen.to_dtype(b.CreateFAdd(lsum, shift), red.dtype));
    } else {
      const size_t oa = na - 1;
      llvm::Value* inv = b.CreateFDiv(gen.cf(gen.f64, 1.0), sum[0]);
      counted_loop(C, b, j0, j1, {}, true, [&](llvm::Value* jv, const std::vector<llvm::Value*>&) {
        llvm::Value* v = element(offs, jv, rj, false);
        llvm::Value* r = rop == Op::Softmax ? b.CreateFMul(exp_shifted(v), inv)
                                            : b.CreateFSub(b.CreateFSub(v, shift), lsum);
        llvm::Value* idx = offs[oa];
        if (rj[oa] != 0) idx = b.CreateAdd(idx, b.CreateMul(jv, b.getInt64(rj[oa])));
        gen.store_elem(red.dtype, gen.arg[s.reduce_arg], idx, gen.to_dtype(r, red.dtype));
        return std::vector<llvm::Value*>{};
      });
    }
    onext = b.CreateAdd(o, b.getInt64(1));
  }
  o->addIncoming(onext, b.GetInsertBlock());
  b.CreateBr(hdr);
  b.SetInsertPoint(bb_exit);
  b.CreateRetVoid();
}

}  // namespace

std::vector<int64_t> reduced_dims(const Instr& in) {
  if (is_normalization(in.op)) return {in.attrs.i0};
  return in.attrs.ints;
}

bool is_normalization(Op op) { return op == Op::Softmax || op == Op::LogSoftmax; }

bool splittable(Op op) {
  return op == Op::Sum || op == Op::Mean || op == Op::Amax || op == Op::Amin;
}

void reduce_extent(const LoweredGraph& g, const FusedSpec& s, int64_t& kept, int64_t& reduced) {
  const Instr& red = g.instrs[s.reduce_instr];
  std::vector<int64_t> dims = reduced_dims(red);
  kept = 1;
  reduced = 1;
  for (size_t d = 0; d < s.shape.size(); ++d) {
    bool r = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    (r ? reduced : kept) *= s.shape[d];
  }
}

bool reduction_fusable(const LoweredGraph& g, int32_t i) {
  const Instr& in = g.instrs[i];
  const Op op = in.op;
  if (!splittable(op) && op != Op::LogSumExp && op != Op::Argmax && !is_normalization(op)) return false;
  const Instr& src = g.instrs[in.inputs[0]];
  if (src.dtype == kFloat16 && !the_jit().f16c) return false;
  if (in.dtype == kFloat16 && !the_jit().f16c) return false;
  if (op == Op::Argmax && in.attrs.ints.size() != 1) return false;
  if (is_normalization(op) && src.shape.empty()) return false;
  if (op == Op::LogSumExp || is_normalization(op)) {
    if (!is_floating(in.dtype)) return false;
  }
  for (int64_t d : reduced_dims(in)) {
    if (d < 0 || d >= static_cast<int64_t>(src.shape.size())) return false;
  }
  // The reduced dims must merge into one loop in the input's layout.
  FusedSpec s;
  s.shape = src.shape;
  s.reduce_instr = i;
  Shape kd, rd;
  std::vector<Shape> ks, rs;
  std::vector<Shape> strides = {ir::contiguous_strides(src.shape)};
  if (!reduce_dims(g, s, kd, rd, ks, rs, strides)) return false;
  if (is_normalization(op)) return true;
  return ir::shape_numel(in.shape) == ir::shape_numel(kd) || ir::shape_numel(src.shape) == 0;
}

bool reduction_mergeable(const LoweredGraph& g, int32_t i, const Shape& shape,
                         const std::vector<Shape>& strides) {
  FusedSpec s;
  s.shape = shape;
  s.reduce_instr = i;
  Shape kd, rd;
  std::vector<Shape> ks, rs;
  return reduce_dims(g, s, kd, rd, ks, rs, strides);
}

bool scatter_fusable(const LoweredGraph& g, int32_t i) {
  const Instr& in = g.instrs[i];
  if (in.op != Op::AsStridedScatter || in.inputs.size() != 2) return false;
  if (std::getenv("LAZYX_CPU_NO_VIEW_FUSION")) return false;
  const Instr& base = g.instrs[in.inputs[0]];
  const Instr& src = g.instrs[in.inputs[1]];
  if (base.dtype != in.dtype || src.dtype != in.dtype || base.shape != in.shape) return false;
  if (in.attrs.ints.size() != src.shape.size()) return false;
  if (in.dtype == kFloat16 && !the_jit().f16c) return false;
  // Injective: dims sorted by stride, each stride beyond the extent of the smaller ones.
  std::vector<std::pair<int64_t, int64_t>> d;  // (stride, size)
  for (size_t k = 0; k < src.shape.size(); ++k) {
    if (src.shape[k] == 0) return true;  // writes nothing
    if (src.shape[k] > 1) d.push_back({in.attrs.ints[k], src.shape[k]});
  }
  std::sort(d.begin(), d.end());
  int64_t extent = 0;
  for (const auto& [st, sz] : d) {
    if (st <= extent) return false;
    extent += st * (sz - 1);
  }
  return in.attrs.i0 >= 0 && in.attrs.i0 + extent < std::max<int64_t>(ir::shape_numel(in.shape), 1);
}

bool fusable(const LoweredGraph& g, int32_t i) {
  const Instr& in = g.instrs[i];
  Jit& jit = the_jit();
  auto f16_ok = [&](Dtype d) { return d != kFloat16 || jit.f16c; };
  if (in.op == Op::AsStrided) {
    // A strided read of the operand viewed as a flat array (the planner keeps the operand
    // outside the group).
    if (std::getenv("LAZYX_CPU_NO_VIEW_FUSION")) return false;
    return f16_ok(in.dtype) && in.inputs.size() == 1 && in.attrs.ints.size() == in.shape.size() &&
           g.instrs[in.inputs[0]].dtype == in.dtype;
  }
  if (ir::op_info(in.op).family != ir::OpFamily::Elementwise) return false;
  const bool rand = in.op == Op::RandUniform || in.op == Op::RandNormal || in.op == Op::RandInt;
  if (!f16_ok(in.dtype)) return false;
  for (int32_t c : in.inputs) {
    if (!f16_ok(g.instrs[c].dtype)) return false;
    if (g.instrs[c].shape.size() > in.shape.size()) return false;
  }
  if (rand) return in.inputs.size() == (in.op == Op::RandInt ? 4u : 2u);
  if (in.op == Op::Full || in.op == Op::Arange || is_logical(in.op) || in.op == Op::Where) return true;
  Dtype dom = domain_of(g, in);
  if (is_floating(dom)) return true;
  switch (in.op) {
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Cast: case Op::Add: case Op::Sub:
    case Op::Mul: case Op::Maximum: case Op::Minimum: case Op::Eq: case Op::Ne: case Op::Lt:
    case Op::Le: case Op::Gt: case Op::Ge:
      return true;
    default: return false;
  }
}

// LLVM's remarks ("loop not vectorized") stay quiet unless LAZYX_DEBUG is set; errors print.
static void quiet_diagnostics(const llvm::DiagnosticInfo* di, void*) {
  static const bool debug = [] {
    const char* v = std::getenv("LAZYX_DEBUG");
    return v && *v && std::string(v) != "0";
  }();
  if (di->getSeverity() != llvm::DS_Error && !debug) return;
  llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
  llvm::errs() << "[cpu] llvm: ";
  di->print(printer);
  llvm::errs() << "\n";
}

std::vector<KernelFn> compile_fused(const LoweredGraph& g, const std::vector<FusedSpec>& specs,
                                    std::unique_ptr<CompiledModule>& keep) {
  std::vector<KernelFn> fns;
  if (specs.empty()) return fns;
  Jit& jit = the_jit();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  ctx->setDiagnosticHandlerCallBack(quiet_diagnostics, nullptr);
  int64_t id = jit.next_module.fetch_add(1);
  std::string prefix = "lazyx_m" + std::to_string(id) + "_k";
  auto mod = std::make_unique<llvm::Module>(prefix, *ctx);
  mod->setDataLayout(jit.tm->createDataLayout());
  mod->setTargetTriple(jit.tm->getTargetTriple().str());
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].reduce_instr >= 0) {
      build_reduce_kernel(jit, *ctx, *mod, g, specs[k], prefix + std::to_string(k));
    } else {
      build_kernel(jit, *ctx, *mod, g, specs[k], prefix + std::to_string(k));
    }
  }
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*mod, &os)) {
      const char* op = specs[0].members.empty() ? "cpu" : ir::op_name(g.instrs[specs[0].members[0]].op);
      ir::fail(op, "internal: the cpu backend generated invalid code: " + os.str());
    }
  }
  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(jit.tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*mod, mam);
  }
  if (const char* dump = std::getenv("LAZYX_CPU_DUMP_IR"); dump && *dump == '1') {
    mod->print(llvm::errs(), nullptr);
  }
  std::lock_guard<std::mutex> lock(jit.mu);
  auto handle = std::make_unique<ModuleHandle>();
  handle->rt = jit.jit->getMainJITDylib().createResourceTracker();
  if (auto e = jit.jit->addIRModule(handle->rt, orc::ThreadSafeModule(std::move(mod), std::move(ctx)))) {
    llvm_fail("cannot add a module to the JIT", std::move(e));
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    auto sym = jit.jit->lookup(prefix + std::to_string(k));
    if (!sym) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      os << sym.takeError();
      const char* op = specs[k].members.empty() ? "cpu" : ir::op_name(g.instrs[specs[k].members[0]].op);
      ir::fail(op, "the cpu backend failed to compile a fused loop: " + os.str());
    }
    fns.push_back(sym->toPtr<KernelFn>());
  }
  keep = std::move(handle);
  return fns;
}

}  // namespace lazyx::cpu
