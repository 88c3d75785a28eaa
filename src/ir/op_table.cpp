#include <array>
#include <cstddef>

#include "ir/math_ops.h"
#include "ir/op.h"

namespace lazyx::ir {

namespace {

using F = OpFamily;

struct Table {
  std::array<OpInfo, static_cast<size_t>(Op::kNumOps)> rows{};
  void set(Op op, const char* name, F family, bool ew = false, bool upd0 = false,
           bool fail = false) {
    rows[static_cast<size_t>(op)] = OpInfo{name, family, ew, upd0, fail};
  }
  Table() {
    set(Op::Parameter, "parameter", F::Leaf);
    set(Op::Scalar, "scalar", F::Leaf);
    set(Op::Full, "full", F::Elementwise, true);
    set(Op::Arange, "arange", F::Elementwise, true);
    set(Op::RandUniform, "rand", F::Elementwise, true);
    set(Op::RandNormal, "randn", F::Elementwise, true);
    set(Op::RandInt, "randint", F::Elementwise, true);
    const std::pair<Op, const char*> elementwise[] = {
        {Op::Neg, "neg"},       {Op::Abs, "abs"},         {Op::Exp, "exp"},
        {Op::Log, "log"},       {Op::Sqrt, "sqrt"},       {Op::Rsqrt, "rsqrt"},
        {Op::Tanh, "tanh"},     {Op::Sigmoid, "sigmoid"}, {Op::Relu, "relu"},
        {Op::Gelu, "gelu"},     {Op::GeluTanh, "gelu_tanh"}, {Op::Sin, "sin"},
        {Op::Cos, "cos"},       {Op::LogicalNot, "logical_not"}, {Op::Cast, "to"},
        {Op::Add, "add"},       {Op::Sub, "sub"},         {Op::Mul, "mul"},
        {Op::Div, "div"},       {Op::Pow, "pow"},         {Op::Maximum, "maximum"},
        {Op::Minimum, "minimum"}, {Op::Eq, "eq"},         {Op::Ne, "ne"},
        {Op::Lt, "lt"},         {Op::Le, "le"},           {Op::Gt, "gt"},
        {Op::Ge, "ge"},         {Op::LogicalAnd, "logical_and"}, {Op::LogicalOr, "logical_or"},
        {Op::Where, "where"},
    };
    for (auto [op, name] : elementwise) set(op, name, F::Elementwise, true);
    set(Op::Sum, "sum", F::Reduce);
    set(Op::Mean, "mean", F::Reduce);
    set(Op::Amax, "amax", F::Reduce);
    set(Op::Amin, "amin", F::Reduce);
    set(Op::Argmax, "argmax", F::Reduce);
    set(Op::LogSumExp, "logsumexp", F::Reduce);
    set(Op::Softmax, "softmax", F::Other);
    set(Op::LogSoftmax, "log_softmax", F::Other);
    set(Op::Matmul, "matmul", F::Other);
    set(Op::AsStrided, "as_strided", F::Other);
    set(Op::AsStridedScatter, "as_strided_scatter", F::Other, false, true);
    set(Op::Cat, "cat", F::Other);
    set(Op::IndexSelect, "index_select", F::Other, false, false, true);
    set(Op::Gather, "gather", F::Other, false, false, true);
    set(Op::Scatter, "scatter", F::Other, false, true, true);
    set(Op::ScatterAdd, "scatter_add", F::Other, false, true, true);
    set(Op::IndexCopy, "index_copy", F::Other, false, true, true);
    set(Op::IndexPut, "index_put", F::Other, false, true, true);
    // Collectives can fail at run time (a timeout, a dead rank), so donated writes wait for them.
    set(Op::AllReduce, "all_reduce", F::Collective, false, true, true);
    set(Op::AllGather, "all_gather", F::Collective, false, false, true);
    set(Op::ReduceScatter, "reduce_scatter", F::Collective, false, false, true);
    set(Op::Broadcast, "broadcast", F::Collective, false, true, true);
    // [math ops]
    for (auto [op, name] : math_op_names()) {
      // Integer division by zero fails at run time (float division gives inf or NaN).
      const bool divides = op == Op::Fmod || op == Op::Remainder || op == Op::FloorDiv ||
                           op == Op::TruncDiv;
      set(op, name, F::Elementwise, true, false, divides);
    }

    // [sort/scan ops]
    set(Op::Sort, "sort", F::Other);
    set(Op::Scan, "scan", F::Other);
    set(Op::ScatterReduce, "scatter_reduce", F::Other, false, true, true);

    // [conv ops]
    set(Op::Conv, "convolution", F::Other);
    set(Op::ConvBackwardInput, "convolution_backward_input", F::Other);
    set(Op::ConvBackwardWeight, "convolution_backward_weight", F::Other);

    // [pool ops]
    set(Op::TapSum, "tap_sum", F::Other, false, false, true);
    set(Op::TapMax, "tap_max", F::Other, false, false, true);
    set(Op::TapScatter, "tap_scatter", F::Other, false, false, true);

    // [sampling ops]
    set(Op::GridSample, "grid_sample", F::Other);
    set(Op::GridSampleBackward, "grid_sample_backward", F::Other);
    set(Op::SegmentReduce, "segment_reduce", F::Other, false, false, true);
    set(Op::SegmentReduceBackward, "segment_reduce_backward", F::Other, false, false, true);
    set(Op::Histogram, "histogram", F::Other, false, false, true);
  }
};

}  // namespace

const OpInfo& op_info(Op op) {
  static const Table table;
  return table.rows[static_cast<size_t>(op)];
}

}  // namespace lazyx::ir
