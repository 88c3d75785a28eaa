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

#include <cstdlib>
#include <map>
#include <numeric>

#include "backends/cpu/codegen_internal.h"
#include "ir/math_ops.h"
#include "backends/cpu/persistent_cache.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/tiered.h"
#include "lazyx/diagnostics.h"
#include "lazyx/metrics.h"
#include "runtime/env.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#include <llvm/AsmParser/Parser.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/SourceMgr.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// Sleef entry points, declared without their vector types: we only take their addresses.
// 1-ULP functions (u10), the 3.5-ULP ones of the fast math mode (u35), and erfc (u15).
#define LAZYX_SLEEF_FN(b, u)     \
  X(Sleef_##b##f_##u)            \
  X(Sleef_##b##_##u)             \
  X(Sleef_##b##f16_##u##avx512f) \
  X(Sleef_##b##d8_##u##avx512f) X(Sleef_##b##f8_##u##avx2) X(Sleef_##b##d4_##u##avx2)
// The math ops' functions (codegen_math.cpp).
#define LAZYX_SLEEF_MATH_OPS                                                                 \
  LAZYX_SLEEF_FN(log1p, u10) LAZYX_SLEEF_FN(expm1, u10) LAZYX_SLEEF_FN(log2, u10)            \
  LAZYX_SLEEF_FN(log2, u35) LAZYX_SLEEF_FN(log10, u10) LAZYX_SLEEF_FN(exp2, u10)             \
  LAZYX_SLEEF_FN(exp2, u35) LAZYX_SLEEF_FN(tan, u10) LAZYX_SLEEF_FN(tan, u35)                \
  LAZYX_SLEEF_FN(asin, u10) LAZYX_SLEEF_FN(asin, u35) LAZYX_SLEEF_FN(acos, u10)              \
  LAZYX_SLEEF_FN(acos, u35) LAZYX_SLEEF_FN(atan, u10) LAZYX_SLEEF_FN(atan, u35)              \
  LAZYX_SLEEF_FN(sinh, u10) LAZYX_SLEEF_FN(cosh, u10) LAZYX_SLEEF_FN(asinh, u10)             \
  LAZYX_SLEEF_FN(acosh, u10) LAZYX_SLEEF_FN(atanh, u10) LAZYX_SLEEF_FN(atan2, u10)           \
  LAZYX_SLEEF_FN(atan2, u35) LAZYX_SLEEF_FN(hypot, u05) LAZYX_SLEEF_FN(hypot, u35)
#define LAZYX_SLEEF_ALL                                                           \
  LAZYX_SLEEF_FN(exp, u10)                                                        \
  LAZYX_SLEEF_FN(log, u10)                                                        \
  LAZYX_SLEEF_FN(tanh, u10)                                                       \
  LAZYX_SLEEF_FN(erf, u10)                                                        \
  LAZYX_SLEEF_FN(sin, u10) LAZYX_SLEEF_FN(cos, u10) LAZYX_SLEEF_FN(pow, u10)      \
      LAZYX_SLEEF_FN(log, u35) LAZYX_SLEEF_FN(tanh, u35) LAZYX_SLEEF_FN(sin, u35) \
          LAZYX_SLEEF_FN(cos, u35) LAZYX_SLEEF_FN(erfc, u15) LAZYX_SLEEF_MATH_OPS
extern "C" {
#define X(n) void n();
LAZYX_SLEEF_ALL
#undef X
}

namespace lazyx::cpu {
namespace cg {
namespace {

[[noreturn]] void llvm_fail(const std::string& what, llvm::Error e) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  os << e;
  throw Error("[cpu] " + what + ": " + os.str());
}

}  // namespace

Jit::Jit() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) llvm_fail("cannot detect the host CPU", jtmb.takeError());
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  this->jtmb = *jtmb;
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

Jit& the_jit() {
  // Never destroyed: programs may outlive static teardown.
  static Jit* j = [] {
    ProfileSpan span("llvm jit setup", "compile");
    return new Jit();
  }();
  return *j;
}

}  // namespace cg

using namespace cg;

namespace {
std::atomic<int> g_math_mode{static_cast<int>(MathMode::Fast)};
}  // namespace

MathMode math_mode_from_env() {
  return static_cast<MathMode>(env::choice("LAZYX_CPU_MATH", 0, {"fast", "precise"}));
}

MathMode math_mode() { return static_cast<MathMode>(g_math_mode.load()); }

bool set_math_mode(MathMode m) {
  return g_math_mode.exchange(static_cast<int>(m)) != static_cast<int>(m);
}

const char* math_mode_name(MathMode m) { return m == MathMode::Precise ? "precise" : "fast"; }

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
  if (!splittable(op) && op != Op::LogSumExp && op != Op::Argmax && !is_normalization(op))
    return false;
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
  if (env::flag("LAZYX_CPU_NO_VIEW_FUSION", false)) return false;
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
    if (env::flag("LAZYX_CPU_NO_VIEW_FUSION", false)) return false;
    return f16_ok(in.dtype) && in.inputs.size() == 1 && in.attrs.ints.size() == in.shape.size() &&
           g.instrs[in.inputs[0]].dtype == in.dtype;
  }
  if (ir::op_info(in.op).family != ir::OpFamily::Elementwise) return false;
  if (ir::is_math_op(in.op)) return math_fusable(g, in);
  const bool rand = in.op == Op::RandUniform || in.op == Op::RandNormal || in.op == Op::RandInt;
  if (!f16_ok(in.dtype)) return false;
  for (int32_t c : in.inputs) {
    if (!f16_ok(g.instrs[c].dtype)) return false;
    if (g.instrs[c].shape.size() > in.shape.size()) return false;
  }
  if (rand) return in.inputs.size() == (in.op == Op::RandInt ? 4u : 2u);
  if (in.op == Op::Full || in.op == Op::Arange || is_logical(in.op) || in.op == Op::Where)
    return true;
  Dtype dom = domain_of(g, in);
  if (is_floating(dom)) return true;
  switch (in.op) {
    case Op::Neg:
    case Op::Abs:
    case Op::Relu:
    case Op::Cast:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Maximum:
    case Op::Minimum:
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
      return true;
    default:
      return false;
  }
}

// LLVM's remarks ("loop not vectorized") stay quiet unless LAZYX_DEBUG=2; errors print.
// Runs on pool threads, so it must not throw: the executor validated LAZYX_DEBUG already.
static void quiet_diagnostics(const llvm::DiagnosticInfo* di, void*) {
  if (di->getSeverity() != llvm::DS_Error && env::debug_level_nothrow() < 2) return;
  llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
  llvm::errs() << "[cpu] llvm: ";
  di->print(printer);
  llvm::errs() << "\n";
}

namespace {

// One TargetMachine per thread: its subtarget cache is not safe to share while compiling.
// The quick tier generates code with LLVM's fast instruction selection and register allocation
// (about 3x faster to compile); both tiers optimize the IR alike, so results are bitwise equal.
llvm::TargetMachine& thread_target_machine(Jit& jit, bool full) {
  thread_local std::unique_ptr<llvm::TargetMachine> tms[2];
  std::unique_ptr<llvm::TargetMachine>& tm = tms[full ? 1 : 0];
  if (!tm) {
    ProfileSpan span("llvm target machine", "compile");
    std::lock_guard<std::mutex> lock(jit.mu);
    auto t = jit.jtmb->createTargetMachine();
    if (!t) llvm_fail("cannot create a target machine", t.takeError());
    tm = std::move(*t);
    if (!full) tm->setOptLevel(llvm::CodeGenOptLevel::None);
  }
  return *tm;
}

// One kernel in its own module, built and keyed on the caller and compiled to an object file on
// a pool thread; or a batch: one pool thread's quick-tier kernels linked into one module.
struct Unit {
  std::shared_ptr<llvm::LLVMContext> ctx;  // shared by the kernels one pool thread compiles
  std::unique_ptr<llvm::Module> mod;       // destroyed before ctx
  std::string key;   // the unoptimized IR: the in-process sharing key
  std::string pkey;  // the build context and the IR: the persistent cache key
  std::unique_ptr<llvm::MemoryBuffer> obj;
  std::string error;
  std::string symbol = "lazyx_kernel";  // a lone kernel's object is alike in every program
  int batch = -1;       // the batch whose object file holds it (else obj)
  bool dump_ir = false;  // LAZYX_CPU_DUMP_IR, read on the caller (pool threads must not throw)
  bool loaded = false;  // from the persistent cache
  bool full = true;     // the tier it compiles at
  bool exact = false;   // its results do not depend on the optimizer (order_exact)
  bool small = false;   // too few elements to pay for vectorizing at the quick tier
};

// Everything besides the IR that decides a kernel's machine code: the persistent cache key's
// prefix. Bump the format when the kernel calling convention or the entry layout changes.
const std::string& build_context(Jit& jit) {
  static const std::string ctx = "lazyx-cpu-kernel v1\nllvm " LLVM_VERSION_STRING "\ntriple " +
                                 jit.tm->getTargetTriple().str() + "\ncpu " + jit.cpu +
                                 "\nfeatures " + jit.features +
                                 "\nopt O3 codegen=Aggressive loop-vectorize slp-vectorize\n";
  return ctx;
}

void optimize_and_emit(Jit& jit, Unit& u) {
  llvm::TargetMachine& tm = thread_target_machine(jit, u.full);
  run_ir_pipeline(tm, *u.mod, !u.full && u.exact);
  if (u.dump_ir) {
    std::lock_guard<std::mutex> lock(jit.mu);
    u.mod->print(llvm::errs(), nullptr);
  }
  ProfileSpan span("llvm codegen", "compile");
  auto obj = orc::SimpleCompiler(tm)(*u.mod);
  if (!obj) {
    llvm::raw_string_ostream os(u.error);
    os << obj.takeError();
    return;
  }
  u.obj = std::move(*obj);
}

// A program's kernels, each shared with every other live program that generated the same IR.
class ProgramCode : public CompiledModule {
 public:
  std::vector<std::shared_ptr<KernelCode>> kernels;
  // Quick kernels being recompiled: the slot the background compiler fills, and for each of
  // its items the program's kernels with that IR.
  std::shared_ptr<UpgradeSlot> slot;
  std::vector<std::vector<size_t>> users;
};

// Adds an object file to the JIT in a JITDylib of its own; returns its kernels by symbol.
std::vector<std::shared_ptr<KernelCode>> add_to_jit(Jit& jit,
                                                    std::unique_ptr<llvm::MemoryBuffer> obj,
                                                    const std::vector<std::string>& symbols,
                                                    bool full, const char* op) {
  // Declared before the lock: the library's destructor takes jit.mu.
  auto lib = std::make_shared<KernelLib>();
  std::vector<std::shared_ptr<KernelCode>> code;
  ProfileSpan span("jit link", "compile");
  std::lock_guard<std::mutex> lock(jit.mu);
  const int64_t id = jit.next_module.fetch_add(1);
  auto jd = jit.jit->getExecutionSession().createJITDylib("lazyx_k" + std::to_string(id));
  if (!jd) llvm_fail("cannot create a kernel's JITDylib", jd.takeError());
  jd->addToLinkOrder(jit.jit->getMainJITDylib());  // Sleef and the process's symbols
  lib->jd = &*jd;
  if (auto e = jit.jit->addObjectFile(*lib->jd, std::move(obj))) {
    llvm_fail("cannot add a kernel to the JIT", std::move(e));
  }
  for (const std::string& name : symbols) {
    auto sym = jit.jit->lookup(*lib->jd, name);
    if (!sym) {
      std::string msg;
      llvm::raw_string_ostream os(msg);
      os << sym.takeError();
      ir::fail(op, "the cpu backend failed to compile a fused loop: " + msg);
    }
    code.push_back(std::make_shared<KernelCode>(KernelCode{lib, sym->toPtr<KernelFn>(), full}));
  }
  return code;
}

std::string persistent_key(Jit& jit, const std::string& math, const std::string& ir) {
  return build_context(jit) + "math " + math + "\n" + ir;
}

}  // namespace

KernelLib::~KernelLib() {
  if (!jd) return;
  Jit& jit = the_jit();
  std::lock_guard<std::mutex> lock(jit.mu);
  llvm::consumeError(jit.jit->getExecutionSession().removeJITDylib(*jd));
}

namespace {

// Hands the program's quick kernels (compiled now or shared with another program) to the
// background compiler, one item per distinct IR.
void queue_upgrades(ProgramCode& prog, const std::vector<Unit>& units,
                    const std::vector<int>& same_as) {
  std::vector<UpgradeItem> items;
  std::vector<int> item_of(units.size(), -1);
  const std::string math = math_mode_name(math_mode());
  for (size_t k = 0; k < units.size(); ++k) {
    const size_t first = same_as[k] >= 0 ? static_cast<size_t>(same_as[k]) : k;
    if (prog.kernels[k]->full) continue;
    if (item_of[first] < 0) {
      if (!prog.slot) prog.slot = std::make_shared<UpgradeSlot>();
      item_of[first] = static_cast<int>(items.size());
      items.push_back({prog.slot, items.size(), units[first].key, math});
      prog.users.emplace_back();
    }
    prog.users[static_cast<size_t>(item_of[first])].push_back(k);
  }
  enqueue_upgrades(std::move(items));
}

// Deals the kernels to n compile threads before they are built (each thread's kernels share one
// LLVM context): largest estimate first, each to the least loaded.
std::vector<size_t> deal_kernels(const std::vector<FusedSpec>& specs, size_t n) {
  auto cost = [&](size_t k) {
    const FusedSpec& s = specs[k];
    return s.members.size() + s.inputs.size() + s.outputs.size() + (s.reduce_instr >= 0 ? 8 : 0);
  };
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost(a) > cost(b); });
  std::vector<size_t> share_of(specs.size(), 0), load(n, 0);
  for (size_t k : order) {
    const size_t t = std::min_element(load.begin(), load.end()) - load.begin();
    share_of[k] = t;
    load[t] += cost(k);
  }
  return share_of;
}

// Builds one kernel's module in ctx and keys it by its IR.
void build_unit(Jit& jit, const LoweredGraph& g, const FusedSpec& spec, const char* op,
                std::shared_ptr<llvm::LLVMContext> ctx, Unit& u) {
  ProfileSpan span("kernel ir", "compile");
  u.ctx = std::move(ctx);
  u.mod = std::make_unique<llvm::Module>("lazyx_kernel", *u.ctx);
  u.mod->setDataLayout(jit.tm->createDataLayout());
  u.mod->setTargetTriple(jit.tm->getTargetTriple().str());
  if (spec.reduce_instr >= 0) {
    build_reduce_kernel(jit, *u.ctx, *u.mod, g, spec, u.symbol);
  } else {
    build_kernel(jit, *u.ctx, *u.mod, g, spec, u.symbol);
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*u.mod, &os)) {
    ir::fail(op, "internal: the cpu backend generated invalid code: " + os.str());
  }
  llvm::raw_string_ostream ks(u.key);
  u.mod->print(ks, nullptr);
  u.exact = order_exact(*u.mod);
  u.small = ir::shape_numel(spec.shape) < kQuickVectorMin;
}

// Links quick-tier kernels into one module (so LLVM's per-module work is paid once) and
// compiles it; kernels never call each other, so each compiles as it would alone.
void emit_batch(Jit& jit, std::vector<Unit>& units, const std::vector<size_t>& quick, int index,
                Unit& batch, bool batching) {
  if (quick.size() < 2 || !batching) {  // alone: LAZYX_CPU_NO_BATCHING, a benchmark baseline
    for (size_t k : quick) optimize_and_emit(jit, units[k]);
    return;
  }
  const llvm::Module& first = *units[quick[0]].mod;
  batch.ctx = units[quick[0]].ctx;
  batch.mod = std::make_unique<llvm::Module>("lazyx_kernels", *batch.ctx);
  batch.mod->setDataLayout(first.getDataLayout());
  batch.mod->setTargetTriple(first.getTargetTriple());
  batch.dump_ir = units[quick[0]].dump_ir;
  batch.full = false;
  batch.exact = units[quick[0]].exact;
  llvm::Linker linker(*batch.mod);
  for (size_t i = 0; i < quick.size(); ++i) {
    Unit& u = units[quick[i]];
    u.batch = index;
    const std::string name = u.symbol + "_" + std::to_string(i);
    u.mod->getFunction(u.symbol)->setName(name);
    u.symbol = name;
    if (linker.linkInModule(std::move(u.mod))) {
      batch.error = "cannot link the quick-tier kernels";
      return;
    }
  }
  optimize_and_emit(jit, batch);
}

// Compiles one thread's share of the new kernels: full-tier ones alone (the persistent cache
// keeps one object file per kernel), quick-tier ones in two batches, batch[0] through the O3
// pipeline and batch[1] (order-exact kernels) through the quick one.
void compile_share(Jit& jit, std::vector<Unit>& units, const std::vector<size_t>& share, int index,
                   Unit* batch, const std::string& cache_dir, bool batching) {
  std::vector<size_t> quick[2];
  for (size_t k : share) {
    if (!units[k].full) {
      if (units[k].exact && units[k].small) scalar_loops(*units[k].mod);
      quick[units[k].exact ? 1 : 0].push_back(k);
      continue;
    }
    optimize_and_emit(jit, units[k]);
    if (units[k].obj && !cache_dir.empty()) {
      std::string_view bytes(units[k].obj->getBufferStart(), units[k].obj->getBufferSize());
      persistent_cache_store(cache_dir, units[k].pkey, bytes);
    }
  }
  for (int g = 0; g < 2; ++g) emit_batch(jit, units, quick[g], 2 * index + g, batch[g], batching);
}

// Adds the new kernels' object files to the JIT: each batch's, then each lone kernel's.
void add_new_code(Jit& jit, std::vector<Unit>& units, std::vector<Unit>& batches,
                  const std::vector<size_t>& todo, const std::function<const char*(size_t)>& op_of,
                  std::vector<std::shared_ptr<KernelCode>>& code) {
  for (size_t k : todo) {
    const Unit& from = units[k].batch >= 0 ? batches[units[k].batch] : units[k];
    if (!from.obj) {
      ir::fail(op_of(k), "the cpu backend failed to compile a fused loop: " + from.error);
    }
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    if (!batches[b].obj) continue;
    std::vector<size_t> ks;
    std::vector<std::string> symbols;
    for (size_t k : todo) {
      if (units[k].batch != static_cast<int>(b)) continue;
      ks.push_back(k);
      symbols.push_back(units[k].symbol);
    }
    auto c = add_to_jit(jit, std::move(batches[b].obj), symbols, false, op_of(ks[0]));
    for (size_t i = 0; i < ks.size(); ++i) code[ks[i]] = c[i];
  }
  for (size_t k : todo) {
    if (units[k].batch >= 0) continue;
    Unit& u = units[k];
    code[k] = add_to_jit(jit, std::move(u.obj), {u.symbol}, u.full, op_of(k))[0];
  }
}

}  // namespace

std::vector<KernelFn> compile_fused(const LoweredGraph& g, const std::vector<FusedSpec>& specs,
                                    std::unique_ptr<CompiledModule>& keep) {
  std::vector<KernelFn> fns;
  if (specs.empty()) return fns;
  Jit& jit = the_jit();
  std::function<const char*(size_t)> op_of = [&](size_t k) {
    return specs[k].members.empty() ? "cpu" : ir::op_name(g.instrs[specs[k].members[0]].op);
  };

  // Build every kernel and key it by its IR. A training step's programs (the first step, the
  // steady step, evaluation) and same-shaped parameters share most kernels: each distinct one
  // is compiled once while some program uses it. Each compile thread's kernels share a context.
  const bool sharing = !env::flag("LAZYX_CPU_NO_KERNEL_SHARING", false);  // a benchmark baseline
  const bool dump_ir = env::flag("LAZYX_CPU_DUMP_IR", false);
  const bool batching = !env::flag("LAZYX_CPU_NO_BATCHING", false);  // a benchmark baseline
  const bool tiered = tiered_compile();
  ThreadPool& pool = ThreadPool::get();
  const size_t nshare = std::min<size_t>(specs.size(), static_cast<size_t>(pool.size()));
  const std::vector<size_t> share_of = deal_kernels(specs, nshare);
  std::vector<std::shared_ptr<llvm::LLVMContext>> ctxs(nshare);
  for (auto& c : ctxs) {
    c = std::make_shared<llvm::LLVMContext>();
    c->setDiagnosticHandlerCallBack(quiet_diagnostics, nullptr);
  }
  std::vector<Unit> units(specs.size());
  std::vector<Unit> batches(2 * nshare);  // each thread's quick-tier kernels, linked
  std::vector<std::shared_ptr<KernelCode>> code(specs.size());
  std::vector<int> same_as(specs.size(), -1);  // an earlier kernel of this program with this IR
  {
    std::unordered_map<std::string, int> seen;
    for (size_t k = 0; k < specs.size(); ++k) {
      units[k].dump_ir = dump_ir;
      build_unit(jit, g, specs[k], op_of(k), ctxs[share_of[k]], units[k]);
      if (sharing) {
        auto [it, fresh] = seen.emplace(units[k].key, static_cast<int>(k));
        if (!fresh) same_as[k] = it->second;
      }
    }
  }
  std::vector<size_t> todo;
  {
    std::lock_guard<std::mutex> lock(jit.cache_mu);
    for (size_t k = 0; k < specs.size(); ++k) {
      if (same_as[k] >= 0) continue;
      auto it = sharing ? jit.kernel_cache.find(units[k].key) : jit.kernel_cache.end();
      if (it != jit.kernel_cache.end()) code[k] = it->second.lock();
      if (!code[k]) todo.push_back(k);
    }
  }

  // Kernels an earlier process compiled are loaded from the persistent cache (not while
  // LAZYX_CPU_DUMP_IR asks to see the optimized IR).
  const std::string cache_dir = dump_ir ? std::string() : persistent_cache_dir();
  std::vector<std::vector<size_t>> share(std::max<size_t>(nshare, 1));  // kernels LLVM compiles
  int64_t hits = 0, misses = 0;
  for (size_t k : todo) {
    if (!cache_dir.empty()) {
      ProfileSpan span("persistent cache lookup", "compile", op_of(k));
      units[k].pkey = persistent_key(jit, math_mode_name(math_mode()), units[k].key);
      if (auto obj = persistent_cache_load(cache_dir, units[k].pkey)) {
        units[k].obj = llvm::MemoryBuffer::getMemBufferCopy(*obj, "lazyx_kernel");
        units[k].loaded = true;
        ++hits;
        continue;
      }
    }
    share[share_of[k]].push_back(k);
    ++misses;
    units[k].full = !tiered;  // only full-tier objects are stored
  }
  if (!cache_dir.empty()) {
    metrics::add_counter("PersistentCacheHit", hits);
    metrics::add_counter("PersistentCacheMiss", misses);
  }

  // Optimization and code generation take most of a compile: each thread compiles its share.
  pool.parallel_for(static_cast<int64_t>(share.size()), 1, 2, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (share[t].empty()) continue;
      ProfileSpan span("llvm compile", "compile", op_of(share[t][0]));  // per thread
      compile_share(jit, units, share[t], static_cast<int>(t), &batches[2 * t], cache_dir,
                    batching);
    }
  });
  add_new_code(jit, units, batches, todo, op_of, code);
  {
    std::vector<std::shared_ptr<KernelCode>> expired;  // released after the lock
    std::lock_guard<std::mutex> lock(jit.cache_mu);
    for (size_t k : todo) jit.kernel_cache[units[k].key] = code[k];
    if (jit.kernel_cache.size() > 2 * jit.cache_live + 64) {  // drop entries of freed kernels
      for (auto it = jit.kernel_cache.begin(); it != jit.kernel_cache.end();) {
        it = it->second.expired() ? jit.kernel_cache.erase(it) : std::next(it);
      }
      jit.cache_live = jit.kernel_cache.size();
    }
  }
  metrics::add_counter("CpuKernelCompiled", misses);
  int64_t exact = 0;
  for (size_t k : todo) exact += !units[k].loaded && !units[k].full && units[k].exact;
  metrics::add_counter("CpuKernelQuickPipeline", exact);
  metrics::add_counter("CpuKernelReused", static_cast<int64_t>(specs.size() - todo.size()));
  auto prog = std::make_unique<ProgramCode>();
  for (size_t k = 0; k < specs.size(); ++k) {
    if (same_as[k] >= 0) code[k] = code[same_as[k]];
    fns.push_back(code[k]->fn);
    prog->kernels.push_back(code[k]);
  }
  queue_upgrades(*prog, units, same_as);
  keep = std::move(prog);
  return fns;
}

int64_t take_upgrades(CompiledModule& code, std::vector<KernelFn>& fns) {
  auto& pc = static_cast<ProgramCode&>(code);
  if (!pc.slot || !pc.slot->any.load(std::memory_order_acquire)) return 0;
  std::vector<std::pair<size_t, std::shared_ptr<KernelCode>>> ready;
  {
    std::lock_guard<std::mutex> lock(pc.slot->mu);
    ready.swap(pc.slot->ready);
    pc.slot->any.store(false, std::memory_order_relaxed);
  }
  for (auto& [item, c] : ready) {
    for (size_t k : pc.users[item]) {
      fns[k] = c->fn;
      pc.kernels[k] = c;
    }
  }
  metrics::add_counter("CpuKernelUpgraded", static_cast<int64_t>(ready.size()));
  return static_cast<int64_t>(ready.size());
}

namespace cg {

std::shared_ptr<KernelCode> compile_full_kernel(const std::string& ir, const std::string& math) {
  try {
    Jit& jit = the_jit();
    {
      std::lock_guard<std::mutex> lock(jit.cache_mu);
      auto it = jit.kernel_cache.find(ir);
      if (it != jit.kernel_cache.end()) {
        if (auto c = it->second.lock(); c && c->full) return c;
      }
    }
    Unit u;
    u.key = ir;
    u.pkey = persistent_key(jit, math, ir);
    const std::string dir = persistent_cache_dir();
    if (!dir.empty()) {
      if (auto obj = persistent_cache_load(dir, u.pkey)) {
        u.obj = llvm::MemoryBuffer::getMemBufferCopy(*obj, "lazyx_kernel");
      }
    }
    if (!u.obj) {
      u.ctx = std::make_shared<llvm::LLVMContext>();
      u.ctx->setDiagnosticHandlerCallBack(quiet_diagnostics, nullptr);
      llvm::SMDiagnostic err;
      u.mod = llvm::parseAssemblyString(ir, err, *u.ctx);
      if (!u.mod) return nullptr;
      optimize_and_emit(jit, u);
      if (!u.obj) return nullptr;
      if (!dir.empty()) {
        persistent_cache_store(dir, u.pkey,
                               std::string_view(u.obj->getBufferStart(), u.obj->getBufferSize()));
      }
    }
    auto c = add_to_jit(jit, std::move(u.obj), {u.symbol}, true, "cpu")[0];
    std::lock_guard<std::mutex> lock(jit.cache_mu);
    jit.kernel_cache[ir] = c;
    return c;
  } catch (const std::exception&) {
    return nullptr;  // the quick kernel stays
  }
}

}  // namespace cg

}  // namespace lazyx::cpu
