// The IR op vocabulary and its table: names, families and what each op may do in place.
#pragma once

#include <cstdint>

namespace lazyx::ir {

enum class Op : uint8_t {
  // Leaves.
  Parameter,  // a device buffer the program reads
  Scalar,     // a host number passed at run time; its value is not in the hash
  Full,       // operand 0 (scalar) broadcast to the shape
  Arange,     // start + i * step (scalars)
  RandUniform,  // operands: seed, offset (scalars)
  RandNormal,
  RandInt,      // operands: seed, offset, low, high
  // Unary elementwise.
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Sin, Cos, LogicalNot,
  Cast,
  // Binary elementwise. Add and Sub take an optional third operand alpha: a + alpha * b.
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr,
  // Ternary elementwise.
  Where,
  // Reductions over attrs.ints, attrs.flag = keepdim.
  Sum, Mean, Amax, Amin, Argmax, LogSumExp,
  // Normalizations over attrs.i0.
  Softmax, LogSoftmax,
  // Batched matmul with broadcast batch dims; operands are at least 2-D.
  Matmul,
  // Strided access to an operand read as a flat contiguous array: sizes = shape,
  // strides = attrs.ints, offset = attrs.i0. Scatter writes operand 1 into a copy of operand 0.
  AsStrided, AsStridedScatter,
  // Indexing, dim = attrs.i0.
  Cat, IndexSelect, Gather, Scatter, ScatterAdd, IndexCopy,
  IndexPut,  // operands: base, values, indices...; attrs.flag = accumulate
  // Collectives across the ranks of the process group (src/dist). attrs.flag: the last operand
  // is the previous collective (the order token). AllReduce and ReduceScatter: attrs.i0 = the
  // reduction (dist::ReduceKind), a Scalar scale operand follows the tensors.
  AllReduce,      // attrs.ints = {tensor count}; one tensor keeps its shape, several pack flat
  AllGather,      // operand 0 gathered along dim 0 in rank order
  ReduceScatter,  // operand 0 reduced, this rank's block of dim 0 kept
  Broadcast,      // operand 0 of rank attrs.i0
  // Elementwise math beyond the basics (reference: kernels_math.cpp; cpu: codegen).
  // [math ops]
  Floor, Ceil, Round, Trunc, Log1p, Expm1, Log2, Log10, Exp2, Erf, Erfc, Erfinv, Tan, Asin, Acos,
  Atan, Sinh, Cosh, Asinh, Acosh, Atanh, BitwiseNot,
  SpecialFn,  // unary; attrs.i0 = ir::Special id, attrs.ints = {order} where the function has one
  Atan2, Hypot, Copysign, Fmod, Remainder, FloorDiv, TruncDiv, BitwiseAnd, BitwiseOr, BitwiseXor,
  Nextafter,
  SpecialFn2,  // binary, floating only; attrs.i0 = ir::Special2 id

  // Sorts, scans and more reductions (reference: kernels_sort_scan.cpp).
  // [sort/scan ops]
  // Stable argsort of operand 0 along attrs.i0 (int64 indices); attrs.flag = descending. NaN
  // sorts as the largest value.
  Sort,
  // Inclusive scan along attrs.i0; attrs.ints[0] = ScanKind (sort_scan.h).
  Scan,
  // Scatter of operand 2 into a copy of operand 0 at operand 1 along attrs.i0, combining with
  // attrs.ints = {ScatterKind, include_self}.
  ScatterReduce,

  // Convolutions (reference: kernels_conv.cpp; cpu: oneDNN, dnnl_conv.cpp).
  // [conv ops]
  // attrs.ints = {k, stride[k], padding[k], dilation[k], output_padding[k], groups, transposed}.
  Conv,                // operands: input, weight
  ConvBackwardInput,   // operands: grad_out, weight; the shape is the input's
  ConvBackwardWeight,  // operands: grad_out, input; the shape is the weight's

  // Pooling, normalization and resampling (reference: kernels_pool.cpp; cpu: dnnl_pool.cpp).
  // [pool ops]
  // Tap tables (tensor/pool_taps.h): operand 0 [B, L], operand 1 int64 taps [P * K] into L,
  // attrs.ints = {K}. TapSum: operand 2 weights, out [B, P] = sum of weighted taps. TapMax:
  // out [B, P] the max (attrs.flag: the tap index of the first max, NaN wins, as int64).
  TapSum, TapMax,
  // operand 0 [B, P] added into zeros [B, attrs.ints[0]] at taps (operand 1: [P * K] shared or
  // [B, P * K] per row), times weights operand 2 [P * K] if present; attrs.ints = {L, K}.
  TapScatter,

  // Sampling and segments (reference: kernels_sampling.cpp; cpu: the reference loops).
  // [sampling ops]
  // Grid sampling of operand 0 [N, C, H, W] at operand 1 [N, Ho, Wo, 2] (x, y in [-1, 1]);
  // attrs.ints = {GridMode, GridPadding, align_corners}. Out [N, C, Ho, Wo].
  GridSample,
  // Its gradient: operands grad_out, input, grid; attrs as GridSample; attrs.i0 = 0 for the
  // input's gradient (input's shape), 1 for the grid's (grid's shape).
  GridSampleBackward,
  // Segments along dim 1 of operand 0 [O, N, I]: operand 1 int64 offsets [O, S + 1] (segment s
  // is [off[s], off[s + 1])), operand 2 the initial value (a scalar); attrs.ints =
  // {SegmentKind, has_initial, safe}. Out [O, S, I]. Offsets are checked at run time.
  SegmentReduce,
  // Its gradient for operand 2 (data): operands grad [O, S, I], output, data, offsets, initial.
  SegmentReduceBackward,
  // Counts of operand 0 [M] (weighted by operand 2 [M] if present) in the bins between the edges
  // operand 1 [E]: out [E - 1], as PyTorch's histogram. attrs.i0 = 0: binary search over the
  // edges (any order, as std::upper_bound), 1: linear edges (linspace) with a local search.
  Histogram,

  kNumOps,
};

enum class OpFamily : uint8_t { Leaf, Elementwise, Reduce, Other, Collective };

struct OpInfo {
  const char* name;
  OpFamily family;
  // Output element i depends on input element i only, so the output may overwrite an operand
  // of the same shape (rule 6 of ALIASING.md).
  bool elementwise_inplace_ok;
  // The op copies operand 0 and then writes into the copy, so it may run in operand 0's memory.
  bool updates_operand0;
  // The op reads operand values as indices and can fail at run time on a bad one.
  bool can_fail;
};

const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }

}  // namespace lazyx::ir
