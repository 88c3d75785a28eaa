// Fused elementwise loops as LLVM IR. Each loop walks the output of a group in row-major order:
// dims that every operand walks the same way are merged, the innermost dim becomes a counted
// loop the loop vectorizer handles (unit-stride, invariant or constant-stride loads), and rows
// above it compute their operand offsets with div/mod by constants. Values live in registers as
// float (f16, bf16, f32), double (f64) or i64 (integers and bool), rounded to their dtype after
// every op so results match the reference's per-op rounding.
#include "backends/cpu/codegen.h"

#include <atomic>
#include <cmath>
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

  llvm::Value* emit(const Instr& in) {
    cur = &in;
    const Op op = in.op;
    std::vector<llvm::Value*> a;
    for (int32_t c : in.inputs) a.push_back(value(c));
    if (op == Op::Full) return to_dtype(a[0], in.dtype);
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

void build_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                  const FusedSpec& s, const std::string& name) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  llvm::Type* voidt = llvm::Type::getVoidTy(C);
  // body(bufs..., scalars, start, end), every buffer noalias; the entry point unpacks bufs.
  std::vector<llvm::Type*> bp(s.num_args, ptr);
  bp.push_back(ptr);
  bp.push_back(i64);
  bp.push_back(i64);
  auto* body = llvm::Function::Create(llvm::FunctionType::get(voidt, bp, false),
                                      llvm::Function::InternalLinkage, name + "_body", M);
  auto* entry = llvm::Function::Create(
      llvm::FunctionType::get(voidt, {ptr, ptr, i64, i64}, false),
      llvm::Function::ExternalLinkage, name, M);
  for (llvm::Function* f : {body, entry}) {
    f->addFnAttr("target-cpu", jit.cpu);
    f->addFnAttr("target-features", jit.features);
    if (jit.avx512) f->addFnAttr("prefer-vector-width", "512");
    f->setDoesNotThrow();
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (int a = 0; a < s.num_args; ++a) body->addParamAttr(a, llvm::Attribute::NoAlias);

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
    const Instr& si = g.instrs[s.inputs[k].instr];
    llvm::Value* base = b.CreateInBoundsGEP(b.getInt8Ty(), scalars, b.getInt64(16 * int64_t{si.slot}));
    llvm::Value* v;
    if (is_floating(si.dtype)) {
      v = b.CreateLoad(b.getDoubleTy(), base);
    } else {
      v = b.CreateLoad(i64, b.CreateInBoundsGEP(b.getInt8Ty(), base, b.getInt64(8)));
    }
    gen.scalar_val[k] = gen.to_dtype(v, si.dtype);
  }

  auto* bb_exit = llvm::BasicBlock::Create(C, "exit", body);
  llvm::BasicBlock* row_latch = nullptr;
  llvm::PHINode* r = nullptr;
  llvm::Value* j0;
  llvm::Value* j1;
  if (rank == 1) {
    gen.row_base = b.getInt64(0);
    for (size_t q = 0; q < array_inputs.size(); ++q) gen.row_off[array_inputs[q]] = b.getInt64(0);
    j0 = start;
    j1 = end;
  } else {
    llvm::Value* r0 = b.CreateUDiv(start, b.getInt64(inner));
    llvm::Value* r1 = b.CreateUDiv(b.CreateAdd(end, b.getInt64(inner - 1)), b.getInt64(inner));
    auto* hdr = llvm::BasicBlock::Create(C, "rows", body);
    auto* rbody = llvm::BasicBlock::Create(C, "row", body);
    row_latch = llvm::BasicBlock::Create(C, "row_next", body);
    b.CreateBr(hdr);
    b.SetInsertPoint(hdr);
    r = b.CreatePHI(i64, 2, "r");
    r->addIncoming(r0, bb_entry);
    b.CreateCondBr(b.CreateICmpULT(r, r1), rbody, bb_exit);
    b.SetInsertPoint(rbody);
    // Offsets of the row for every array: the row's multi-index over dims[0..rank-2].
    std::vector<llvm::Value*> offs(array_inputs.size(), b.getInt64(0));
    llvm::Value* rem = r;
    for (size_t d = rank - 1; d-- > 0;) {
      llvm::Value* idx = d == 0 ? rem : b.CreateURem(rem, b.getInt64(dims[d]));
      if (d != 0) rem = b.CreateUDiv(rem, b.getInt64(dims[d]));
      for (size_t q = 0; q < array_inputs.size(); ++q) {
        int64_t st = strides[q][d];
        if (st != 0) offs[q] = b.CreateAdd(offs[q], b.CreateMul(idx, b.getInt64(st)));
      }
    }
    for (size_t q = 0; q < array_inputs.size(); ++q) gen.row_off[array_inputs[q]] = offs[q];
    gen.row_base = b.CreateMul(r, b.getInt64(inner));
    llvm::Value* lo = b.CreateSub(start, gen.row_base);
    llvm::Value* hi = b.CreateSub(end, gen.row_base);
    j0 = b.CreateSelect(b.CreateICmpSGT(lo, b.getInt64(0)), lo, b.getInt64(0));
    j1 = b.CreateSelect(b.CreateICmpSLT(hi, b.getInt64(inner)), hi, b.getInt64(inner));
  }
  for (size_t q = 0; q < array_inputs.size(); ++q) gen.inner_stride[array_inputs[q]] = strides[q][rank - 1];

  llvm::BasicBlock* after = row_latch ? row_latch : bb_exit;
  auto* pre = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(C, "loop", body);
  b.CreateCondBr(b.CreateICmpSLT(j0, j1), loop, after);
  b.SetInsertPoint(loop);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(j0, pre);
  gen.j = j;
  for (int32_t m : s.members) gen.vals[m] = gen.emit(g.instrs[m]);
  llvm::Value* oidx = b.CreateAdd(gen.row_base, j);
  for (const auto& o : s.outputs) {
    gen.store_elem(g.instrs[o.instr].dtype, gen.arg[o.arg], oidx, gen.vals[o.instr]);
  }
  llvm::Value* jn = b.CreateAdd(j, b.getInt64(1), "", true, true);
  j->addIncoming(jn, b.GetInsertBlock());
  auto* br = b.CreateCondBr(b.CreateICmpSLT(jn, j1), loop, after);
  {
    llvm::MDNode* enable = llvm::MDNode::get(
        C, {llvm::MDString::get(C, "llvm.loop.vectorize.enable"),
            llvm::ConstantAsMetadata::get(b.getTrue())});
    llvm::MDNode* mp = llvm::MDNode::get(C, {llvm::MDString::get(C, "llvm.loop.mustprogress")});
    auto tmp = llvm::MDNode::getTemporary(C, {});
    llvm::MDNode* loopid = llvm::MDNode::get(C, {tmp.get(), enable, mp});
    loopid->replaceOperandWith(0, loopid);
    br->setMetadata(llvm::LLVMContext::MD_loop, loopid);
  }
  if (row_latch) {
    b.SetInsertPoint(row_latch);
    llvm::Value* rn = b.CreateAdd(r, b.getInt64(1));
    r->addIncoming(rn, row_latch);
    b.CreateBr(r->getParent());
  }
  b.SetInsertPoint(bb_exit);
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
  for (int64_t d : red.attrs.ints) is_red[d] = 1;
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

void build_reduce_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                         const FusedSpec& s, const std::string& name) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  llvm::Type* voidt = llvm::Type::getVoidTy(C);
  std::vector<llvm::Type*> bp(s.num_args, ptr);
  bp.push_back(ptr);
  bp.push_back(i64);
  bp.push_back(i64);
  auto* body = llvm::Function::Create(llvm::FunctionType::get(voidt, bp, false),
                                      llvm::Function::InternalLinkage, name + "_body", M);
  auto* entry = llvm::Function::Create(llvm::FunctionType::get(voidt, {ptr, ptr, i64, i64}, false),
                                       llvm::Function::ExternalLinkage, name, M);
  for (llvm::Function* f : {body, entry}) {
    f->addFnAttr("target-cpu", jit.cpu);
    f->addFnAttr("target-features", jit.features);
    if (jit.avx512) f->addFnAttr("prefer-vector-width", "512");
    f->setDoesNotThrow();
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (int a = 0; a < s.num_args; ++a) body->addParamAttr(a, llvm::Attribute::NoAlias);
  llvm::IRBuilder<> b(C);
  {
    auto* bb = llvm::BasicBlock::Create(C, "entry", entry);
    b.SetInsertPoint(bb);
    std::vector<llvm::Value*> args;
    for (int a = 0; a < s.num_args; ++a) {
      args.push_back(b.CreateLoad(ptr, b.CreateInBoundsGEP(ptr, entry->getArg(0), b.getInt64(a))));
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

  // Arrays: array inputs, then the group's elementwise outputs (contiguous in the group shape).
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
  Shape kdims, rdim;
  std::vector<Shape> kstr, rstr;
  if (!reduce_dims(g, s, kdims, rdim, kstr, rstr, strides)) {
    ir::fail(ir::op_name(g.instrs[s.reduce_instr].op), "internal: the reduced dims do not merge.");
  }
  const size_t na = strides.size();

  auto* bb_entry = llvm::BasicBlock::Create(C, "entry", body);
  b.SetInsertPoint(bb_entry);
  gen.scalar_val.assign(s.inputs.size(), nullptr);
  gen.row_off.assign(s.inputs.size(), nullptr);
  gen.inner_stride.assign(s.inputs.size(), 0);
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    gen.input_index[s.inputs[k].instr] = static_cast<int32_t>(k);
    if (s.inputs[k].arg >= 0) continue;
    const Instr& si = g.instrs[s.inputs[k].instr];
    llvm::Value* base = b.CreateInBoundsGEP(b.getInt8Ty(), scalars, b.getInt64(16 * int64_t{si.slot}));
    llvm::Value* v = is_floating(si.dtype)
                         ? b.CreateLoad(b.getDoubleTy(), base)
                         : b.CreateLoad(i64, b.CreateInBoundsGEP(b.getInt8Ty(), base, b.getInt64(8)));
    gen.scalar_val[k] = gen.to_dtype(v, si.dtype);
  }
  const Instr& red = g.instrs[s.reduce_instr];
  const Instr& src = g.instrs[red.inputs[0]];
  const bool fl = is_floating(src.dtype) || red.op == Op::Mean;
  llvm::Type* at = fl ? gen.f64 : i64;
  llvm::Value* init;
  if (red.op == Op::Amax) {
    init = fl ? gen.cf(at, -INFINITY) : gen.ci(std::numeric_limits<int64_t>::min());
  } else if (red.op == Op::Amin) {
    init = fl ? gen.cf(at, INFINITY) : gen.ci(std::numeric_limits<int64_t>::max());
  } else {
    init = fl ? gen.cf(at, 0.0) : gen.ci(0);
  }

  auto* bb_exit = llvm::BasicBlock::Create(C, "exit", body);
  auto* hdr = llvm::BasicBlock::Create(C, "outs", body);
  auto* obody = llvm::BasicBlock::Create(C, "out", body);
  auto* loop = llvm::BasicBlock::Create(C, "loop", body);
  auto* fin = llvm::BasicBlock::Create(C, "fin", body);
  b.CreateBr(hdr);
  b.SetInsertPoint(hdr);
  llvm::PHINode* o = b.CreatePHI(i64, 2, "o");
  o->addIncoming(start, bb_entry);
  b.CreateCondBr(b.CreateICmpSLT(o, end), obody, bb_exit);
  b.SetInsertPoint(obody);
  std::vector<llvm::Value*> offs(na, b.getInt64(0));
  llvm::Value* rem = o;
  for (size_t d = kdims.size(); d-- > 0;) {
    llvm::Value* idx = d == 0 ? rem : b.CreateURem(rem, b.getInt64(kdims[d]));
    if (d != 0) rem = b.CreateUDiv(rem, b.getInt64(kdims[d]));
    for (size_t a = 0; a < na; ++a) {
      if (kstr[a][d] != 0) offs[a] = b.CreateAdd(offs[a], b.CreateMul(idx, b.getInt64(kstr[a][d])));
    }
  }
  for (size_t q = 0; q < array_inputs.size(); ++q) {
    gen.row_off[array_inputs[q]] = offs[q];
    gen.inner_stride[array_inputs[q]] = rstr[q][0];
  }
  gen.row_base = b.getInt64(0);
  const int64_t K = rdim[0];
  llvm::BasicBlock* pre = b.GetInsertBlock();
  b.CreateCondBr(b.getInt1(K > 0), loop, fin);
  b.SetInsertPoint(loop);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  llvm::PHINode* acc = b.CreatePHI(at, 2, "acc");
  j->addIncoming(b.getInt64(0), pre);
  acc->addIncoming(init, pre);
  gen.j = j;
  for (int32_t m : s.members) {
    if (m != s.reduce_instr) gen.vals[m] = gen.emit(g.instrs[m]);
  }
  for (size_t q = 0; q < ew_outputs.size(); ++q) {
    size_t a = array_inputs.size() + q;
    llvm::Value* idx = offs[a];
    if (rstr[a][0] != 0) idx = b.CreateAdd(idx, b.CreateMul(j, b.getInt64(rstr[a][0])));
    gen.store_elem(g.instrs[ew_outputs[q]->instr].dtype, gen.arg[ew_outputs[q]->arg], idx,
                   gen.vals[ew_outputs[q]->instr]);
  }
  gen.cur = &red;
  llvm::Value* v = gen.to_compute(gen.value(red.inputs[0]), at);
  llvm::Value* nacc;
  if (red.op == Op::Sum || red.op == Op::Mean) {
    if (fl) {
      nacc = b.CreateFAdd(acc, v);
      if (auto* inst = llvm::dyn_cast<llvm::Instruction>(nacc)) inst->setHasAllowReassoc(true);
    } else {
      nacc = b.CreateAdd(acc, v);
    }
  } else if (fl) {
    llvm::Value* better = red.op == Op::Amax ? b.CreateFCmpOGT(v, acc) : b.CreateFCmpOLT(v, acc);
    nacc = b.CreateSelect(b.CreateFCmpUNO(acc, v), gen.cf(at, NAN), b.CreateSelect(better, v, acc));
  } else {
    nacc = b.CreateBinaryIntrinsic(red.op == Op::Amax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, acc, v);
  }
  llvm::Value* jn = b.CreateAdd(j, b.getInt64(1), "", true, true);
  j->addIncoming(jn, b.GetInsertBlock());
  acc->addIncoming(nacc, b.GetInsertBlock());
  auto* br = b.CreateCondBr(b.CreateICmpSLT(jn, b.getInt64(K)), loop, fin);
  // Forced vectorization only for sums: NaN-propagating min/max chains are not recognized as
  // reductions, and a forced hint that fails prints a remark.
  if (red.op == Op::Sum || red.op == Op::Mean) {
    llvm::MDNode* enable = llvm::MDNode::get(
        C, {llvm::MDString::get(C, "llvm.loop.vectorize.enable"), llvm::ConstantAsMetadata::get(b.getTrue())});
    auto tmp = llvm::MDNode::getTemporary(C, {});
    llvm::MDNode* loopid = llvm::MDNode::get(C, {tmp.get(), enable});
    loopid->replaceOperandWith(0, loopid);
    br->setMetadata(llvm::LLVMContext::MD_loop, loopid);
  }
  b.SetInsertPoint(fin);
  llvm::PHINode* res = b.CreatePHI(at, 2, "res");
  res->addIncoming(init, pre);
  res->addIncoming(nacc, loop);
  llvm::Value* r = res;
  if (red.op == Op::Mean) r = b.CreateFDiv(r, gen.cf(at, static_cast<double>(K)));
  gen.store_elem(red.dtype, gen.arg[s.reduce_arg], o, gen.to_dtype(r, red.dtype));
  llvm::Value* on = b.CreateAdd(o, b.getInt64(1));
  o->addIncoming(on, fin);
  b.CreateBr(hdr);
  b.SetInsertPoint(bb_exit);
  b.CreateRetVoid();
}

}  // namespace

bool reduction_fusable(const LoweredGraph& g, int32_t i) {
  const Instr& in = g.instrs[i];
  if (in.op != Op::Sum && in.op != Op::Mean && in.op != Op::Amax && in.op != Op::Amin) return false;
  const Instr& src = g.instrs[in.inputs[0]];
  if (src.dtype == kFloat16 && !the_jit().f16c) return false;
  if (in.dtype == kFloat16 && !the_jit().f16c) return false;
  // The reduced dims must merge into one loop in the input's layout.
  FusedSpec s;
  s.shape = src.shape;
  s.reduce_instr = i;
  Shape kd, rd;
  std::vector<Shape> ks, rs;
  std::vector<Shape> strides = {ir::contiguous_strides(src.shape)};
  if (!reduce_dims(g, s, kd, rd, ks, rs, strides)) return false;
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

bool fusable(const LoweredGraph& g, int32_t i) {
  const Instr& in = g.instrs[i];
  if (ir::op_info(in.op).family != ir::OpFamily::Elementwise) return false;
  switch (in.op) {
    case Op::RandUniform:
    case Op::RandNormal:
    case Op::RandInt: return false;
    default: break;
  }
  Jit& jit = the_jit();
  auto f16_ok = [&](Dtype d) { return d != kFloat16 || jit.f16c; };
  if (!f16_ok(in.dtype)) return false;
  for (int32_t c : in.inputs) {
    if (!f16_ok(g.instrs[c].dtype)) return false;
    if (g.instrs[c].shape.size() > in.shape.size()) return false;
  }
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

std::vector<KernelFn> compile_fused(const LoweredGraph& g, const std::vector<FusedSpec>& specs,
                                    std::unique_ptr<CompiledModule>& keep) {
  std::vector<KernelFn> fns;
  if (specs.empty()) return fns;
  Jit& jit = the_jit();
  auto ctx = std::make_unique<llvm::LLVMContext>();
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
