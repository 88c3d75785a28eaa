// Sorts, scans and the reductions built on them (free functions, lazy like every op).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "lazyx/tensor.h"

namespace lazyx {

// What a scan combines (the IR op Scan keeps it in attrs.ints[0]).
enum class ScanKind : int64_t {
  Sum = 0,
  Prod = 1,
  Max = 2,        // running max; NaN propagates
  Min = 3,
  LogSumExp = 4,  // log(sum(exp)) so far
  ArgMax = 5,     // index of the running max (the last of ties, the last NaN), int64
  ArgMin = 6,
};

// How Sort orders equal values (the IR op Sort keeps it in attrs.ints[0], k in ints[1]).
// Stable keeps their input order. The others reproduce the tie order of PyTorch's CPU kernels
// (the same libstdc++ algorithms), so results match eager exactly: EagerUnstable is sort with
// stable=False, EagerTopk orders the first k as topk does, EagerKth puts the k-th (1-based)
// smallest at position k - 1 as kthvalue does; other positions are unspecified.
enum class SortMode : int64_t { Stable = 0, EagerUnstable = 1, EagerTopk = 2, EagerKth = 3 };

// Sort along `dim`; NaN sorts as the largest value (as PyTorch). Indices are int64.
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false,
               SortMode mode = SortMode::Stable, int64_t k = 0);
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                               bool stable = true);
// The k largest (smallest) along `dim`, in sorted order; ties as eager's topk.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// The k-th smallest (1-based) along `dim`; ties as eager's kthvalue.
std::pair<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1,
                                   bool keepdim = false);

// Inclusive scans along `dim`. cumsum/cumprod of integers and bool give int64 unless `dtype`.
Tensor scan(const Tensor& x, int64_t dim, ScanKind kind);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor logcumsumexp(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::pair<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);

// Reductions: product (all elements, or one dim), argmin (first minimum; NaN wins).
Tensor prod(const Tensor& x, std::optional<Dtype> dtype = std::nullopt);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false,
            std::optional<Dtype> dtype = std::nullopt);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// scatter_reduce: src combined into a copy of x at index along dim (index and src as
// scatter's). Without include_self the first value scattered to a position replaces x there.
enum class ScatterKind : int64_t { Prod = 0, Amax = 1, Amin = 2 };
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      ScatterKind kind, bool include_self = true);

// Triangles of the last two dims (the rest zero), and reversal along dims.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
Tensor roll(const Tensor& x, int64_t shift, int64_t dim);

}  // namespace lazyx
