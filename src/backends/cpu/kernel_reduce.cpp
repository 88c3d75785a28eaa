// Reduction and normalization kernels with their elementwise prologue (row loops over the
// kept elements, or column loops for a leading or middle reduced dim).
#include "backends/cpu/codegen_internal.h"

namespace lazyx::cpu::cg {

constexpr int64_t kLanes = 16;  // partial sums of a row's floating sum: two 512-bit vectors

// Splits the group's dims (and every array's strides) into kept and reduced ones and merges each.
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
    for (size_t a = 0; a < strides.size(); ++a)
      (is_red[d] ? rst[a] : kst[a]).push_back(strides[a][d]);
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
    const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>&
        f,
    int pin_width) {
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
  for (size_t k = 0; k < acc.size(); ++k)
    llvm::cast<llvm::PHINode>(acc[k])->addIncoming(nv[k], latch);
  auto* br = b.CreateCondBr(b.CreateICmpSLT(jn, hi), loop, done);
  if (vectorize_hint) {
    auto md = [&](const char* name, llvm::Constant* v) -> llvm::Metadata* {
      return llvm::MDNode::get(C, {llvm::MDString::get(C, name), llvm::ConstantAsMetadata::get(v)});
    };
    auto tmp = llvm::MDNode::getTemporary(C, {});
    std::vector<llvm::Metadata*> ops = {tmp.get(), md("llvm.loop.vectorize.enable", b.getTrue())};
    if (pin_width > 0) {
      ops.push_back(md("llvm.loop.vectorize.width", b.getInt32(pin_width)));
      ops.push_back(md("llvm.loop.interleave.count", b.getInt32(1)));
      ops.push_back(llvm::MDNode::get(C, {llvm::MDString::get(C, "llvm.loop.unroll.disable")}));
    }
    llvm::MDNode* loopid = llvm::MDNode::get(C, ops);
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

// The sum of f(j) for j in [j0, j1) in a fixed association: element j adds into lane
// (j - j0) % kLanes, the lanes are summed pairwise, then the tail (j1 - j0) % kLanes adds in
// order. The lane loop has a constant trip count, so the optimizer vectorizes it across lanes.
llvm::Value* laned_sum(llvm::LLVMContext& C, llvm::IRBuilder<>& b, llvm::Value* j0, llvm::Value* j1,
                       llvm::Value* lanes, llvm::Value* init,
                       const std::function<llvm::Value*(llvm::Value*)>& f) {
  llvm::Type* at = init->getType();
  for (int64_t i = 0; i < kLanes; ++i)
    b.CreateStore(init, b.CreateConstInBoundsGEP1_64(at, lanes, i));
  llvm::Value* nblocks = b.CreateSDiv(b.CreateSub(j1, j0), b.getInt64(kLanes));
  counted_loop(C, b, b.getInt64(0), nblocks, {}, false,
               [&](llvm::Value* blk, const std::vector<llvm::Value*>&) {
                 llvm::Value* jb = b.CreateAdd(j0, b.CreateMul(blk, b.getInt64(kLanes)));
                 counted_loop(
                     C, b, b.getInt64(0), b.getInt64(kLanes), {}, true,
                     [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
                       llvm::Value* p = b.CreateInBoundsGEP(at, lanes, i);
                       b.CreateStore(b.CreateFAdd(b.CreateLoad(at, p), f(b.CreateAdd(jb, i))), p);
                       return std::vector<llvm::Value*>{};
                     },
                     kLanes);
                 return std::vector<llvm::Value*>{};
               });
  std::vector<llvm::Value*> part;
  for (int64_t i = 0; i < kLanes; ++i)
    part.push_back(b.CreateLoad(at, b.CreateConstInBoundsGEP1_64(at, lanes, i)));
  for (size_t w = part.size(); w > 1; w /= 2) {
    for (size_t i = 0; i < w / 2; ++i) part[i] = b.CreateFAdd(part[2 * i], part[2 * i + 1]);
  }
  llvm::Value* tail0 = b.CreateAdd(j0, b.CreateMul(nblocks, b.getInt64(kLanes)));
  auto tail = counted_loop(C, b, tail0, j1, {part[0]}, false,
                           [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
                             return std::vector<llvm::Value*>{b.CreateFAdd(acc[0], f(jv))};
                           });
  return tail[0];
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
  gen.bind_inputs(scalars);
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
  // A row's floating sum goes to kLanes partial sums in a fixed order (laned_sum).
  const bool laned = !column && sum_like && fl;
  llvm::Value* lane_arr = laned ? b.CreateAlloca(at, b.getInt64(kLanes)) : nullptr;

  // Floating sums carry no reassociation flag: their order is the IR's, the same at every tier.
  auto combine = [&](llvm::Value* acc, llvm::Value* v) -> llvm::Value* {
    if (sum_like) return fl ? b.CreateFAdd(acc, v) : b.CreateAdd(acc, v);
    if (fl) {
      llvm::Value* better = rop == Op::Amax ? b.CreateFCmpOGT(v, acc) : b.CreateFCmpOLT(v, acc);
      return b.CreateSelect(b.CreateFCmpUNO(acc, v), gen.cf(at, NAN),
                            b.CreateSelect(better, v, acc));
    }
    return b.CreateBinaryIntrinsic(rop == Op::Amax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin,
                                   acc, v);
  };
  // max(acc, v) ignoring a NaN v, as a vectorizable recurrence: NaN becomes -inf, so neither
  // operand is ever NaN and the nnan/nsz flags hold (the sign of a zero max is not observable:
  // it is only compared and subtracted).
  auto max_ignoring_nan = [&](llvm::Value* acc, llvm::Value* v, bool is_min = false) {
    llvm::Value* vv = b.CreateSelect(b.CreateFCmpUNO(v, v),
                                     gen.cf(v->getType(), is_min ? INFINITY : -INFINITY), v);
    llvm::FastMathFlags fmf;
    fmf.setNoNaNs();
    fmf.setNoSignedZeros();
    llvm::Value* c = is_min ? b.CreateFCmpOLT(vv, acc) : b.CreateFCmpOGT(vv, acc);
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
    for (size_t a = 0; a < na; ++a)
      offs.push_back(b.getInt64(a < nin ? s.inputs[array_inputs[a]].offset : 0));
    llvm::Value* rem = o;
    for (size_t d = kdims.size(); d-- > 0;) {
      llvm::Value* idx = d == 0 ? rem : b.CreateURem(rem, b.getInt64(kdims[d]));
      if (d != 0) rem = b.CreateUDiv(rem, b.getInt64(kdims[d]));
      for (size_t a = 0; a < na; ++a) {
        if (kstr[a][d] != 0)
          offs[a] = b.CreateAdd(offs[a], b.CreateMul(idx, b.getInt64(kstr[a][d])));
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
    llvm::Value* rowend =
        b.CreateMul(b.CreateAdd(b.CreateUDiv(o, b.getInt64(kin)), b.getInt64(1)), b.getInt64(kin));
    llvm::Value* oe = b.CreateAdd(o, b.getInt64(kBlock));
    oe = b.CreateSelect(b.CreateICmpSLT(rowend, oe), rowend, oe);
    oe = b.CreateSelect(b.CreateICmpSLT(end, oe), end, oe);
    llvm::Value* nblk = b.CreateSub(oe, o);
    counted_loop(C, b, b.getInt64(0), nblk, {}, false,
                 [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
                   b.CreateStore(init, b.CreateInBoundsGEP(at, acc_arr, i));
                   return std::vector<llvm::Value*>{};
                 });
    counted_loop(C, b, j0, j1, {}, false, [&](llvm::Value* jr, const std::vector<llvm::Value*>&) {
      std::vector<llvm::Value*> base(na);
      for (size_t a = 0; a < na; ++a) {
        base[a] = rj[a] == 0 ? offs[a] : b.CreateAdd(offs[a], b.CreateMul(jr, b.getInt64(rj[a])));
      }
      counted_loop(C, b, b.getInt64(0), nblk, {}, sum_like,
                   [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
                     llvm::Value* v = element(base, i, kj, true);
                     llvm::Value* p = b.CreateInBoundsGEP(at, acc_arr, i);
                     b.CreateStore(combine(b.CreateLoad(at, p), v), p);
                     return std::vector<llvm::Value*>{};
                   });
      return std::vector<llvm::Value*>{};
    });
    counted_loop(C, b, b.getInt64(0), nblk, {}, false,
                 [&](llvm::Value* i, const std::vector<llvm::Value*>&) {
                   store_result(b.CreateAdd(o, i),
                                b.CreateLoad(at, b.CreateInBoundsGEP(at, acc_arr, i)));
                   return std::vector<llvm::Value*>{};
                 });
    onext = oe;
  } else if (fl && (rop == Op::Amax || rop == Op::Amin)) {
    // As two vectorizable recurrences: the extreme ignoring NaN, and whether a NaN was seen
    // (which then is the result, as in torch).
    const bool is_min = rop == Op::Amin;
    auto st = counted_loop(C, b, j0, j1, {init, b.getInt8(0)}, true,
                           [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
                             llvm::Value* v = element(offs, jv, rj, true);
                             llvm::Value* isn = b.CreateZExt(b.CreateFCmpUNO(v, v), b.getInt8Ty());
                             return std::vector<llvm::Value*>{max_ignoring_nan(acc[0], v, is_min),
                                                              b.CreateOr(acc[1], isn)};
                           });
    llvm::Value* has_nan = b.CreateICmpNE(st[1], b.getInt8(0));
    store_result(o, b.CreateSelect(has_nan, gen.cf(at, NAN), st[0]));
    onext = b.CreateAdd(o, b.getInt64(1));
  } else if (laned) {
    store_result(o, laned_sum(C, b, j0, j1, lane_arr, init,
                              [&](llvm::Value* jv) { return element(offs, jv, rj, true); }));
    onext = b.CreateAdd(o, b.getInt64(1));
  } else if (splittable(rop)) {
    auto r = counted_loop(
        C, b, j0, j1, {init}, sum_like, [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
          return std::vector<llvm::Value*>{combine(acc[0], element(offs, jv, rj, true))};
        });
    store_result(o, r[0]);
    onext = b.CreateAdd(o, b.getInt64(1));
  } else if (rop == Op::Argmax) {
    // Two vectorizable passes: the max ignoring NaN and whether there is a NaN; then the first
    // index holding it (the first NaN if any), as the reference's strict-greater scan.
    auto st = counted_loop(
        C, b, j0, j1, {gen.cf(gen.f64, -INFINITY), b.getInt8(0)}, false,
        [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
          llvm::Value* v = element(offs, jv, rj, true);
          llvm::Value* isn = b.CreateZExt(b.CreateFCmpUNO(v, v), b.getInt8Ty());
          return std::vector<llvm::Value*>{max_ignoring_nan(acc[0], v), b.CreateOr(acc[1], isn)};
        });
    llvm::Value* has_nan = b.CreateICmpNE(st[1], b.getInt8(0));
    const int64_t none = std::numeric_limits<int64_t>::max();
    auto first =
        counted_loop(C, b, j0, j1, {gen.ci(none)}, false,
                     [&](llvm::Value* jv, const std::vector<llvm::Value*>& acc) {
                       llvm::Value* v = element(offs, jv, rj, false);
                       llvm::Value* hit = b.CreateSelect(has_nan, b.CreateFCmpUNO(v, v),
                                                         b.CreateFCmpOEQ(v, st[0]));
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
    // Only logsumexp shifts an infinite max by 0 (torch's rule); softmax rows holding +inf (or
    // only -inf) are NaN, as in eager.
    llvm::Value* shift =
        rop == Op::LogSumExp ? b.CreateSelect(isinf, gen.cf(gen.f64, 0.0), mx[0]) : mx[0];
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
                              if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r))
                                inst->setHasAllowReassoc(true);
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

}  // namespace lazyx::cpu::cg
