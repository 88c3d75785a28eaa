// Elementwise kernels: each walks a group's output in row-major order. Dims every operand walks
// alike merge; the innermost becomes a counted loop the vectorizer handles, and the rows above
// it compute operand offsets with div/mod by constants. Transposed walks go in 64 x 64 tiles.
#include "backends/cpu/codegen_internal.h"
#include "runtime/env.h"

namespace lazyx::cpu::cg {

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

std::pair<llvm::Function*, llvm::Function*> declare_kernel(
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
    // Vector spills across Sleef calls are aligned, else each reload stalls (2x on Zen 4).
    f->addFnAttr("stackrealign");
    f->setDoesNotThrow();
  }
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  for (int a = 0; a < num_args; ++a) body->addParamAttr(a, llvm::Attribute::NoAlias);
  // entry(bufs, scalars, start, end, j0, j1, partial) loads the buffers and passes on as many of
  // the rest as the body takes.
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(C, "entry", entry));
  std::vector<llvm::Value*> args;
  for (int a = 0; a < num_args; ++a) {
    args.push_back(b.CreateLoad(ptr, b.CreateInBoundsGEP(ptr, entry->getArg(0), b.getInt64(a))));
  }
  for (unsigned a = 1; a <= extra.size(); ++a) args.push_back(entry->getArg(a));
  b.CreateCall(body, args);
  b.CreateRetVoid();
  return {body, entry};
}

void build_kernel(Jit& jit, llvm::LLVMContext& C, llvm::Module& M, const LoweredGraph& g,
                  const FusedSpec& s, const std::string& name) {
  llvm::Type* ptr = llvm::PointerType::getUnqual(C);
  llvm::Type* i64 = llvm::Type::getInt64Ty(C);
  // body(bufs..., scalars, start, end), every buffer noalias; the entry point unpacks bufs.
  auto [body, entry] = declare_kernel(jit, C, M, name, s.num_args, {ptr, i64, i64});

  llvm::IRBuilder<> b(C);

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
  gen.bind_inputs(scalars);

  for (size_t q = 0; q < array_inputs.size(); ++q)
    gen.inner_stride[array_inputs[q]] = strides[q][rank - 1];
  for (size_t k = 0; k < scat.size(); ++k) sc_inner[k] = strides[nin + 1 + k][rank - 1];
  // The innermost loop over j in [lo, hi) of the current row.
  // Vectorization is forced (no cost model) except with scatter stores, where LLVM may fail to
  // prove the stores independent of the loads and would print a remark.
  const bool force_vec = scat.empty();
  auto inner_loop = [&](llvm::Value* lo, llvm::Value* hi) {
    counted_loop(
        C, b, lo, hi, {}, force_vec, [&](llvm::Value* j, const std::vector<llvm::Value*>&) {
          gen.vals.clear();
          gen.j = j;
          for (int32_t m : s.members) gen.vals[m] = gen.member(m);
          llvm::Value* oidx = b.CreateAdd(gen.row_base, j);
          size_t sk = 0;
          for (const auto& o : s.outputs) {
            llvm::Value* idx = oidx;
            if (o.scatter) {
              idx = sc_off[sk];
              if (sc_inner[sk] != 0)
                idx = b.CreateAdd(idx, b.CreateMul(j, b.getInt64(sc_inner[sk])));
              sk++;
            }
            gen.store_elem(g.instrs[o.instr].dtype, gen.arg[o.arg], idx, gen.vals[o.instr]);
          }
          return std::vector<llvm::Value*>{};
        });
  };
  auto smax = [&](llvm::Value* x, llvm::Value* y) {
    return b.CreateSelect(b.CreateICmpSGT(x, y), x, y);
  };
  auto smin = [&](llvm::Value* x, llvm::Value* y) {
    return b.CreateSelect(b.CreateICmpSLT(x, y), x, y);
  };
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
      inner_loop(smax(b.CreateSub(start, gen.row_base), cb),
                 smin(b.CreateSub(end, gen.row_base), ce));
    };
    // Transposed reads (an input walks the inner dim with a large stride and the row dim with a
    // small one) go tile by tile, so the cache lines and pages of both sides are reused.
    constexpr int64_t kTile = 64;
    bool tiled =
        inner >= 16 && dims[rank - 2] >= 16 && !env::flag("LAZYX_CPU_NO_TILING", false);
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
      llvm::Value* nrt =
          b.CreateUDiv(b.CreateAdd(b.CreateSub(r1, r0), b.getInt64(kTile - 1)), b.getInt64(kTile));
      const int64_t nct = (inner + kTile - 1) / kTile;
      counted_loop(C, b, b.getInt64(0), nrt, {}, false,
                   [&](llvm::Value* t, const std::vector<llvm::Value*>&) {
                     llvm::Value* rb = b.CreateAdd(r0, b.CreateMul(t, b.getInt64(kTile)));
                     llvm::Value* re = smin(b.CreateAdd(rb, b.getInt64(kTile)), r1);
                     counted_loop(C, b, b.getInt64(0), b.getInt64(nct), {}, false,
                                  [&](llvm::Value* c, const std::vector<llvm::Value*>&) {
                                    llvm::Value* cb = b.CreateMul(c, b.getInt64(kTile));
                                    llvm::Value* ce =
                                        smin(b.CreateAdd(cb, b.getInt64(kTile)), b.getInt64(inner));
                                    counted_loop(
                                        C, b, rb, re, {}, false,
                                        [&](llvm::Value* r, const std::vector<llvm::Value*>&) {
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

}  // namespace lazyx::cpu::cg
