// The LLVM IR pipelines of the two tiers (tiered.h): the full tier's O3, and the quick tier's
// short pipeline for kernels whose results the optimizer cannot change.
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Operator.h>

#include <string>

#include "backends/cpu/codegen_internal.h"
#include "lazyx/diagnostics.h"
#include "lazyx/error.h"

namespace lazyx::cpu::cg {

namespace {

// The quick tier's pipeline for order-exact kernels: inline the body, promote, simplify,
// vectorize (loops of small kernels are marked not to: scalar_loops). No unroller or other loop
// passes: the full tier, compiled in the background, brings those.
constexpr const char* kQuickPipeline =
    "always-inline,function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-simplify,lcssa,loop-vectorize,instcombine<no-verify-fixpoint>,simplifycfg,sroa)";

}  // namespace

// Whether every result of a kernel is fixed by its IR alone, whatever the optimizer does: no
// fast-math flag lets a pass reassociate or approximate, and it calls only intrinsics whose
// result IEEE or LLVM pins down (no library math: a vectorized loop calls other variants).
bool order_exact(const llvm::Module& m) {
  for (const llvm::Function& f : m) {
    for (const llvm::Instruction& i : llvm::instructions(f)) {
      if (auto* fp = llvm::dyn_cast<llvm::FPMathOperator>(&i); fp && fp->getFastMathFlags().any())
        return false;
      auto* call = llvm::dyn_cast<llvm::CallBase>(&i);
      if (!call) continue;
      const llvm::Function* callee = call->getCalledFunction();
      if (!callee) return false;
      if (!callee->isIntrinsic()) {
        if (callee->isDeclaration()) return false;  // a library function
        continue;                                   // the kernel's own body
      }
      switch (callee->getIntrinsicID()) {
        case llvm::Intrinsic::fma:  // fused by definition (fmuladd is not: it may or may not be)
        case llvm::Intrinsic::sqrt:
        case llvm::Intrinsic::fabs:
        case llvm::Intrinsic::copysign:
        case llvm::Intrinsic::minimum:  // minnum/maxnum may return either zero: not listed
        case llvm::Intrinsic::maximum:
        case llvm::Intrinsic::floor:
        case llvm::Intrinsic::ceil:
        case llvm::Intrinsic::trunc:
        case llvm::Intrinsic::rint:
        case llvm::Intrinsic::nearbyint:
        case llvm::Intrinsic::round:
        case llvm::Intrinsic::roundeven:
        case llvm::Intrinsic::smax:
        case llvm::Intrinsic::smin:
        case llvm::Intrinsic::umax:
        case llvm::Intrinsic::umin:
        case llvm::Intrinsic::abs:
        case llvm::Intrinsic::ctpop:
        case llvm::Intrinsic::fptosi_sat:
        case llvm::Intrinsic::fptoui_sat:
        case llvm::Intrinsic::lifetime_start:
        case llvm::Intrinsic::lifetime_end:
          continue;
        default:
          return false;
      }
    }
  }
  return true;
}

// Marks every loop of a quick-tier kernel not to be vectorized (its unoptimized IR, the key the
// full tier compiles from, keeps its hints).
void scalar_loops(llvm::Module& m) {
  llvm::LLVMContext& C = m.getContext();
  for (llvm::Function& f : m) {
    for (llvm::Instruction& i : llvm::instructions(f)) {
      if (!i.getMetadata(llvm::LLVMContext::MD_loop)) continue;
      auto tmp = llvm::MDNode::getTemporary(C, {});
      llvm::Metadata* off[] = {llvm::MDString::get(C, "llvm.loop.vectorize.enable"),
                               llvm::ConstantAsMetadata::get(llvm::ConstantInt::getFalse(C))};
      llvm::MDNode* id = llvm::MDNode::get(C, {tmp.get(), llvm::MDNode::get(C, off)});
      id->replaceOperandWith(0, id);
      i.setMetadata(llvm::LLVMContext::MD_loop, id);
    }
  }
}

// Runs the O3 pipeline, or the quick one (kQuickPipeline).
void run_ir_pipeline(llvm::TargetMachine& tm, llvm::Module& m, bool quick) {
  ProfileSpan span(quick ? "llvm quick ir pipeline" : "llvm ir pipeline", "compile");
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (quick) {
    if (auto e = pb.parsePassPipeline(mpm, kQuickPipeline)) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      os << e;
      throw Error("[cpu] internal: cannot build the quick pipeline: " + os.str());
    }
  } else {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  }
  mpm.run(m, mam);
}

}  // namespace lazyx::cpu::cg
