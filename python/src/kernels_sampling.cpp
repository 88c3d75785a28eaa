// Kernels: grid_sampler_2d and its backward, segment_reduce and its backward, frexp, histogram
// (lazyx/sampling.h, lazyx::frexp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using TT = std::tuple<Tensor, Tensor>;
using TTr = std::tuple<Tensor&, Tensor&>;

namespace {

lazyx::GridMode grid_mode(int64_t m) {
  TORCH_CHECK(m >= 0 && m <= 2, "[grid_sampler_2d] interpolation mode ", m,
              " is not bilinear (0), nearest (1) or bicubic (2); pass one of those.");
  return static_cast<lazyx::GridMode>(m);
}
lazyx::GridPadding grid_padding(int64_t p) {
  TORCH_CHECK(p >= 0 && p <= 2, "[grid_sampler_2d] padding mode ", p,
              " is not zeros (0), border (1) or reflection (2); pass one of those.");
  return static_cast<lazyx::GridPadding>(p);
}

Tensor grid_sampler_2d(const Tensor& input, const Tensor& grid, int64_t mode, int64_t padding,
                       bool align) {
  return wrap(
      lazyx::grid_sample(lz(input), lz(grid), grid_mode(mode), grid_padding(padding), align));
}

TT grid_sampler_2d_backward(const Tensor& grad, const Tensor& input, const Tensor& grid,
                            int64_t mode, int64_t padding, bool align, std::array<bool, 2> mask) {
  const lazyx::GridMode m = grid_mode(mode);
  const lazyx::GridPadding p = grid_padding(padding);
  LT g = lz(grad), x = lz(input), gr = lz(grid);
  Tensor gi, gg;
  if (mask[0]) gi = wrap(lazyx::grid_sample_backward_input(g, x, gr, m, p, align));
  gg = wrap(lazyx::grid_sample_backward_grid(g, x, gr, m, p, align));
  return {gi, gg};
}

TT frexp(const Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes");
  auto [m, e] = lazyx::frexp(lz(self));
  return {wrap(m), wrap(e)};
}
TTr frexp_out(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.scalar_type() == self.scalar_type() && exponent.scalar_type() == at::kInt,
              "[frexp] out= needs a mantissa of the input's dtype and an int32 exponent.");
  auto [m, e] = lazyx::frexp(lz(self));
  write_out(mantissa, m);
  write_out(exponent, e);
  return {mantissa, exponent};
}

lazyx::SegmentKind segment_kind(c10::string_view r) {
  if (r == "sum") return lazyx::SegmentKind::Sum;
  if (r == "mean") return lazyx::SegmentKind::Mean;
  if (r == "max") return lazyx::SegmentKind::Max;
  if (r == "min") return lazyx::SegmentKind::Min;
  TORCH_CHECK(r == "prod", "[segment_reduce] unsupported reduction '", r,
              "'; use sum, mean, max, min or prod.");
  return lazyx::SegmentKind::Prod;
}

// The offsets [..., S + 1] of lengths [..., S] or given offsets, as int64 on the device.
LT segment_offsets(const optional<Tensor>& lengths, const optional<Tensor>& offsets) {
  const bool has_len = lengths.has_value() && lengths->defined();
  const bool has_off = offsets.has_value() && offsets->defined();
  TORCH_CHECK(has_len != has_off,
              "[segment_reduce] pass exactly one of lengths and offsets (indices are not "
              "supported).");
  if (has_off) return lz(*offsets).to(lazyx::kInt64);
  LT len = lz(*lengths).to(lazyx::kInt64);
  TORCH_CHECK(len.dim() >= 1, "[segment_reduce] lengths must have at least one dim.");
  lazyx::Shape z = len.shape();
  z.back() = 1;
  return lazyx::cat({lazyx::zeros(z, lazyx::kInt64), lazyx::cumsum(len, -1)}, -1);
}

optional<double> initial_of(const optional<c10::Scalar>& initial) {
  return initial.has_value() ? optional<double>(initial->toDouble()) : c10::nullopt;
}
std::optional<double> std_opt(optional<double> v) {
  return v.has_value() ? std::optional<double>(*v) : std::nullopt;
}

Tensor segment_reduce(const Tensor& data, c10::string_view reduce, const optional<Tensor>& lengths,
                      const optional<Tensor>& indices, const optional<Tensor>& offsets,
                      int64_t axis, bool unsafe, const optional<c10::Scalar>& initial) {
  TORCH_CHECK(!indices.has_value() || !indices->defined(),
              "[segment_reduce] indices are not supported; pass lengths or offsets.");
  TORCH_CHECK(data.numel() > 0, "[segment_reduce] data must not be empty.");
  const lazyx::SegmentKind k = segment_kind(reduce);
  LT off = segment_offsets(lengths, offsets);
  return wrap(lazyx::segment_reduce(lz(data), off, k, axis, std_opt(initial_of(initial)),
                                    !unsafe && lengths.has_value() && lengths->defined()));
}

Tensor segment_reduce_backward(const Tensor& grad, const Tensor& output, const Tensor& data,
                               c10::string_view reduce, const optional<Tensor>& lengths,
                               const optional<Tensor>& offsets, int64_t axis,
                               const optional<c10::Scalar>& initial) {
  const lazyx::SegmentKind k = segment_kind(reduce);
  LT off = segment_offsets(lengths, offsets);
  return wrap(lazyx::segment_reduce_backward(lz(grad), lz(output), lz(data), off, k, axis,
                                             std_opt(initial_of(initial))));
}

LT weight_of(const optional<Tensor>& w) { return w.has_value() && w->defined() ? lz(*w) : LT(); }

TT histogram_bins(const Tensor& self, const Tensor& bins, const optional<Tensor>& weight,
                  bool density) {
  auto [h, e] = lazyx::histogram(lz(self), lz(bins), weight_of(weight), density);
  return {wrap(h), wrap(e)};
}

TT histogram_ct(const Tensor& self, int64_t bins, optional<at::ArrayRef<double>> range,
                const optional<Tensor>& weight, bool density) {
  std::optional<std::pair<double, double>> r;
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "[histogram] range needs 2 values (min, max), got ",
                range->size(), ".");
    r = std::make_pair((*range)[0], (*range)[1]);
  }
  auto [h, e] = lazyx::histogram(lz(self), bins, r, weight_of(weight), density);
  return {wrap(h), wrap(e)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "grid_sampler_2d", LZ_FN(grid_sampler_2d));
  impl(m, "grid_sampler_2d_backward", LZ_FN(grid_sampler_2d_backward));
  impl(m, "frexp.Tensor", LZ_FN(frexp));
  impl(m, "frexp.Tensor_out", LZ_FN(frexp_out));
  impl(m, "segment_reduce", LZ_FN(segment_reduce));
  impl(m, "_segment_reduce_backward", LZ_FN(segment_reduce_backward));
  impl(m, "histogram.bins_tensor", LZ_FN(histogram_bins));
  impl(m, "histogram.bin_ct", LZ_FN(histogram_ct));
}

}  // namespace lazyx_bridge
