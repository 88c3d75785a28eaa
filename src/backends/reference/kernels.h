// The reference interpreter's kernels: plain loops over contiguous values, one op at a time.
#pragma once

#include <vector>

#include "backends/backend.h"

namespace lazyx::reference {

// A contiguous value of an instruction.
struct Val {
  char* data = nullptr;
  Dtype dtype = kFloat32;
  Shape shape;
  int64_t numel() const { return ir::shape_numel(shape); }
};

// One element, converted.
double get_f(const Val& v, int64_t i);
int64_t get_i(const Val& v, int64_t i);
void set_f(const Val& v, int64_t i, double x);
void set_i(const Val& v, int64_t i, int64_t x);

// Whether values of `d` compute in double (floating) or int64 (integral and bool).
inline bool float_domain(Dtype d) { return is_floating(d); }

void run_elementwise(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);
void run_as_strided(const backend::Instr& in, const Val& src, const Val& out);
void run_as_strided_scatter(const backend::Instr& in, const Val& base, const Val& src,
                            const Val& out);
void run_reduce(const backend::Instr& in, const Val& src, const Val& out);
void run_softmax(const backend::Instr& in, const Val& src, const Val& out);
void run_matmul(const backend::Instr& in, const Val& a, const Val& b, const Val& out);
void run_cat(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);
void run_index(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);
// The operands of a run_index op that hold indices, which check_indices validates before the op
// runs (as soon as they are computed); empty for other ops.
std::vector<int32_t> index_operands(const backend::Instr& in);
// Fails as run_index would on a bad index; reads only the index operands' data (and shapes).
void check_indices(const backend::Instr& in, const std::vector<const Val*>& args);
// [math ops]
// One element of a math op (ir::is_math_op) in the float (double) or integer (int64) domain.
double math_f(const backend::Instr& in, double x, double y);
int64_t math_i(const backend::Instr& in, int64_t x, int64_t y);

// [sort/scan ops]
void run_sort(const backend::Instr& in, const Val& src, const Val& out);
void run_scan(const backend::Instr& in, const Val& src, const Val& out);
void run_scatter_reduce(const backend::Instr& in, const std::vector<const Val*>& args,
                        const Val& out);

// [conv ops]
void run_conv(const backend::Instr& in, const Val& a, const Val& b, const Val& out);

// [pool ops]
// TapSum, TapMax and TapScatter (kernels_pool.cpp).
void run_taps(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);
// Rows [b0, b1) of run_taps (rows are independent), for backends that split the work.
void run_taps_rows(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out,
                   int64_t b0, int64_t b1);
// Taps read per row: the work of one row, for choosing chunk sizes.
int64_t taps_per_row(const backend::Instr& in, const std::vector<const Val*>& args);

// [sampling ops]
// GridSample and GridSampleBackward (kernels_sampling.cpp); batches [n0, n1) are independent.
void run_grid_sample(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);
void run_grid_sample_batches(const backend::Instr& in, const std::vector<const Val*>& args,
                             const Val& out, int64_t n0, int64_t n1);
// SegmentReduce and SegmentReduceBackward (kernels_segment.cpp).
void run_segment_reduce(const backend::Instr& in, const std::vector<const Val*>& args,
                        const Val& out);
// Histogram (kernels_segment.cpp).
void run_histogram(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out);

}  // namespace lazyx::reference
