// Kernels: scatter with values and reductions, index_fill_ with a tensor value,
// repeat_interleave, bucketize/searchsorted, histc, multinomial and embedding_bag.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

LT back(const Tensor& self, const LT& r) { return self.dim() == 0 ? r.reshape({}) : r; }

// scatter of a value: a source of the index's shape.
LT scatter_value(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& v) {
  LT x = v1(lz(self)), i = v1(lz(index));
  LT src = lazyx::full(i.shape(), to_lz(v), x.dtype());
  return back(self, x.scatter(wrap_dim(dim, self.dim()), i, src));
}
Tensor scatter_v(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& v) {
  return wrap(scatter_value(self, dim, index, v));
}
Tensor& scatter_v_(Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& v) {
  LT t = lz(self);
  t.copy_(scatter_value(self, dim, index, v));
  return self;
}

// Reductions of scatter, scatter_reduce and index_reduce: sum and mean through scatter_add,
// prod/amax/amin through the ScatterReduce op. Integer means (eager floor-divides) run on CPU,
// counted like the fallback.
LT scatter_sum(const Tensor& self, int64_t d, const LT& idx, const LT& src, bool include_self) {
  LT x = v1(lz(self));
  if (!include_self) x = x.scatter(d, idx, lazyx::zeros(idx.shape(), x.dtype()));
  return x.scatter_add(d, idx, src.to(x.dtype()));
}
Tensor cpu_scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          c10::string_view reduce, bool include_self) {
  lazyx::metrics::add_counter("aten::scatter_reduce");
  return to_device(at::scatter_reduce(to_cpu(self), dim, to_cpu(index), to_cpu(src), reduce,
                                      include_self));
}
std::optional<lazyx::ScatterKind> scatter_kind(c10::string_view r) {
  if (r == "prod" || r == "multiply") return lazyx::ScatterKind::Prod;
  if (r == "amax") return lazyx::ScatterKind::Amax;
  if (r == "amin") return lazyx::ScatterKind::Amin;
  return std::nullopt;
}
LT scatter_reduce_v(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    c10::string_view reduce, bool include_self) {
  const int64_t d = wrap_dim(dim, self.dim());
  LT idx = v1(lz(index)), s = v1(lz(src));
  const bool fl = at::isFloatingType(self.scalar_type());
  if (reduce == "sum") return back(self, scatter_sum(self, d, idx, s, include_self));
  if (reduce == "mean" && fl) {
    LT sum = scatter_sum(self, d, idx, s, include_self);
    LT base = include_self ? lazyx::ones(sum.shape(), sum.dtype())
                           : lazyx::ones(sum.shape(), sum.dtype())
                                 .scatter(d, idx, lazyx::zeros(idx.shape(), sum.dtype()));
    LT cnt = base.scatter_add(d, idx, lazyx::ones(idx.shape(), sum.dtype()));
    LT r = sum.div(lazyx::where(cnt.eq(0.0), lazyx::ones({}, cnt.dtype()), cnt));
    return back(self, r);
  }
  const std::optional<lazyx::ScatterKind> kind = scatter_kind(reduce);
  if (kind) {
    return back(self, lazyx::scatter_reduce(v1(lz(self)), d, idx.to(lazyx::kInt64), s, *kind,
                                            include_self));
  }
  return lz(cpu_scatter_reduce(self, dim, index, src, reduce, include_self));
}
Tensor scatter_reduce_two(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          c10::string_view reduce, bool include_self) {
  return wrap(scatter_reduce_v(self, dim, index, src, reduce, include_self));
}
Tensor& scatter_reduce_two_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                            c10::string_view reduce, bool include_self) {
  LT t = lz(self);
  t.copy_(scatter_reduce_v(self, dim, index, src, reduce, include_self));
  return self;
}
LT scatter_red(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               c10::string_view reduce) {
  if (reduce == "add") {
    return back(self, scatter_sum(self, wrap_dim(dim, self.dim()), v1(lz(index)), v1(lz(src)), true));
  }
  TORCH_CHECK(reduce == "multiply", "[scatter] reduce must be 'add' or 'multiply', got '",
              reduce, "'.");
  return scatter_reduce_v(self, dim, index, src, "prod", true);
}
Tensor scatter_reduce_k(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        c10::string_view reduce) {
  return wrap(scatter_red(self, dim, index, src, reduce));
}
Tensor& scatter_reduce_k_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          c10::string_view reduce) {
  LT t = lz(self);
  t.copy_(scatter_red(self, dim, index, src, reduce));
  return self;
}
Tensor value_src(const Tensor& self, const Tensor& index, const c10::Scalar& v) {
  return wrap(lazyx::full(to_shape(index.sizes()), to_lz(v), lz(self).dtype()));
}
Tensor scatter_value_reduce(const Tensor& self, int64_t dim, const Tensor& index,
                            const c10::Scalar& v, c10::string_view reduce) {
  return scatter_reduce_k(self, dim, index, value_src(self, index, v), reduce);
}
Tensor& scatter_value_reduce_(Tensor& self, int64_t dim, const Tensor& index,
                              const c10::Scalar& v, c10::string_view reduce) {
  return scatter_reduce_k_(self, dim, index, value_src(self, index, v), reduce);
}

// index_reduce: scatter_reduce with the index spread along the other dims of `dim`.
LT index_reduce_v(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                  c10::string_view reduce, bool include_self) {
  TORCH_CHECK(index.dim() <= 1, "[index_reduce] index must be 0-D or 1-D, got ", index.dim(), "-D.");
  const int64_t d = wrap_dim(dim, self.dim());
  LT src = v1(lz(source));
  Shape at(static_cast<size_t>(src.dim()), 1);
  at[d] = index.numel();
  Tensor idx = wrap(lz(index).to(lazyx::kInt64).reshape(at).expand(src.shape()).contiguous());
  return scatter_reduce_v(self, d, idx, wrap(src), reduce, include_self);
}
Tensor index_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    c10::string_view reduce, bool include_self) {
  return wrap(index_reduce_v(self, dim, index, source, reduce, include_self));
}
Tensor& index_reduce_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      c10::string_view reduce, bool include_self) {
  LT t = lz(self);
  t.copy_(index_reduce_v(self, dim, index, source, reduce, include_self));
  return self;
}
Tensor& index_reduce_out(const Tensor& self, int64_t dim, const Tensor& index,
                         const Tensor& source, c10::string_view reduce, bool include_self,
                         Tensor& out) {
  return write_out(out, index_reduce_v(self, dim, index, source, reduce, include_self));
}

// index_fill_ with a 0-dim tensor value: the value is broadcast on the device (no read).
Tensor& index_fill_t(Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "[index_fill_] value must be a 0-dim tensor, got ", value.dim(),
              " dims.");
  const int64_t d = wrap_dim(dim, self.dim());
  LT t = v1(lz(self));
  Shape shape = t.shape();
  shape[d] = index.numel();
  LT i = lz(index).reshape({index.numel()});
  i = lazyx::where(i.lt(0), i.add(li(t.shape()[d])), i);
  LT v = is_cpu_scalar(value) ? lazyx::full({}, cpu_scalar(value), t.dtype()) : lz(value).to(t.dtype());
  t.index_copy_(d, i, v.expand(shape).contiguous());
  return self;
}

// repeat_interleave(repeats): the result's length is the repeats' sum, so they are read.
Tensor repeat_interleave(const Tensor& repeats, optional<int64_t> output_size) {
  Tensor r = repeats;
  if (is_lazyx(r)) {
    lazyx::metrics::add_counter("ShapeSync:repeat_interleave");
    r = r.cpu();
  }
  TORCH_CHECK(r.dim() <= 1, "[repeat_interleave] repeats must be 0-D or 1-D, got ", r.dim(), "-D.");
  TORCH_CHECK(r.numel() == 0 || r.min().item<int64_t>() >= 0,
              "[repeat_interleave] repeats must be non-negative.");
  Tensor idx = at::repeat_interleave(r.reshape({-1}), output_size);
  return to_device(idx);
}

// bucketize / searchsorted by counting: the insertion point of v is the number of boundaries
// below it (left) or at most it (right). NaN counts as the largest value.
LT count_below(const LT& seq, const LT& vals, bool right, bool out_int32) {
  LT s = seq.unsqueeze(-2), v = vals.unsqueeze(-1);
  LT below = right ? s.le(v) : s.lt(v);
  below = below.logical_or(s.eq(s).logical_and(v.ne(v)));  // v NaN: after all numbers
  LT r = below.to(lazyx::kInt64).sum({-1});
  return out_int32 ? r.to(lazyx::kInt32) : r;
}
LT searchsorted_v(const Tensor& seq, const LT& vals, bool out_int32, bool right,
                  optional<c10::string_view> side, const optional<Tensor>& sorter) {
  if (side.has_value()) right = *side == "right";
  LT s = lz(seq);
  if (sorter.has_value() && sorter->defined()) s = s.gather(-1, lz(*sorter));
  if (seq.dim() == 1) {
    LT v = vals.dim() == 0 ? vals.reshape({1}) : vals;
    LT r = count_below(s, v.unsqueeze(-1), right, out_int32).squeeze(-1);
    return vals.dim() == 0 ? r.reshape({}) : r;
  }
  return count_below(s, vals, right, out_int32);
}
Tensor searchsorted_t(const Tensor& seq, const Tensor& self, bool out_int32, bool right,
                      optional<c10::string_view> side, const optional<Tensor>& sorter) {
  return wrap(searchsorted_v(seq, lz(self), out_int32, right, side, sorter));
}
Tensor searchsorted_s(const Tensor& seq, const c10::Scalar& self, bool out_int32, bool right,
                      optional<c10::string_view> side, const optional<Tensor>& sorter) {
  return wrap(searchsorted_v(seq, lazyx::full({}, to_lz(self), lz(seq).dtype()), out_int32,
                             right, side, sorter));
}
Tensor bucketize_t(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "[bucketize] boundaries must be 1-D, got ",
              boundaries.dim(), "-D.");
  return wrap(searchsorted_v(boundaries, lz(self), out_int32, right, c10::nullopt, c10::nullopt));
}
Tensor bucketize_s(const c10::Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  return wrap(searchsorted_v(boundaries, lazyx::full({}, to_lz(self), lz(boundaries).dtype()),
                             out_int32, right, c10::nullopt, c10::nullopt));
}

// histc: bins of equal width over [min, max] (the data's range when both are 0).
Tensor histc(const Tensor& self, int64_t bins, const c10::Scalar& mn, const c10::Scalar& mx) {
  TORCH_CHECK(bins > 0, "[histc] bins must be > 0, got ", bins, ".");
  LT x = lz(self).reshape({self.numel()});
  const lazyx::Dtype dt = x.dtype();
  LT lo = lazyx::full({}, to_lz(mn), dt), hi = lazyx::full({}, to_lz(mx), dt);
  if (mn.toDouble() == 0 && mx.toDouble() == 0 && self.numel() > 0) {
    lo = x.amin();
    hi = x.amax();
  }
  TORCH_CHECK(mn.toDouble() <= mx.toDouble(), "[histc] max must be larger than min.");
  LT same = lo.eq(hi);
  lo = lazyx::where(same, lo.sub(1.0), lo);
  hi = lazyx::where(same, hi.add(1.0), hi);
  // In eager's order and the input's dtype (torch 2.x's histogramdd kernel), (x - lo) * bins /
  // (hi - lo), so 16-bit inputs round where eager's do; a value at the top edge (hi itself)
  // counts in the last bin.
  LT pos = x.sub(lo).mul(static_cast<double>(bins)).div(hi.sub(lo)).to(lazyx::kInt64);
  pos = lazyx::where(pos.ge(li(bins)), lazyx::full({}, li(bins - 1), lazyx::kInt64), pos);
  LT ok = x.ge(lo).logical_and(x.le(hi));
  pos = lazyx::where(ok, pos, lazyx::zeros({}, lazyx::kInt64));
  return wrap(lazyx::zeros({bins}, dt).scatter_add(0, pos, ok.to(dt)));
}

// multinomial with the engine's counter-based generator: inverse CDF with replacement, the
// exponential race (top k of log(u) / p) without.
Tensor multinomial(const Tensor& self, int64_t n, bool replacement, optional<at::Generator> gen) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "[multinomial] prob_dist must be 1 or 2 dim.");
  const int64_t C = self.size(-1);
  TORCH_CHECK(n > 0, "[multinomial] cannot sample n_sample <= 0 samples.");
  TORCH_CHECK(replacement || n <= C, "[multinomial] cannot sample n_sample > prob_dist.size(-1) "
              "samples without replacement.");
  seed_from_torch(gen);
  LT p = lz(self).to(lazyx::kFloat64);
  if (self.dim() == 1) p = p.unsqueeze(0);
  const int64_t B = p.size(0);
  LT out;
  if (replacement) {
    LT cdf = lazyx::cumsum(p.div(p.sum({-1}, true)), -1);
    LT u = lazyx::rand({B, n}, lazyx::kFloat64);
    LT idx = cdf.unsqueeze(1).le(u.unsqueeze(-1)).to(lazyx::kInt64).sum({-1});
    LT pos = lazyx::arange(0, C, 1, lazyx::kInt64);
    LT last = lazyx::where(p.gt(0.0), pos, lazyx::zeros({}, lazyx::kInt64)).amax({-1}, true);
    out = lazyx::minimum(idx, last);
  } else {
    LT u = lazyx::rand({B, C}, lazyx::kFloat64);
    out = lazyx::topk(u.log().div(p), n, -1, true).second;
  }
  return wrap(self.dim() == 1 ? out.squeeze(0).contiguous() : out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "scatter.value", LZ_FN(scatter_v));
  impl(m, "scatter_.value", LZ_FN(scatter_v_));
  impl(m, "scatter.reduce", LZ_FN(scatter_reduce_k));
  impl(m, "scatter_.reduce", LZ_FN(scatter_reduce_k_));
  impl(m, "scatter.value_reduce", LZ_FN(scatter_value_reduce));
  impl(m, "scatter_.value_reduce", LZ_FN(scatter_value_reduce_));
  impl(m, "scatter_reduce.two", LZ_FN(scatter_reduce_two));
  impl(m, "scatter_reduce_.two", LZ_FN(scatter_reduce_two_));
  impl(m, "index_fill_.int_Tensor", LZ_FN(index_fill_t));
  impl(m, "index_reduce", LZ_FN(index_reduce));
  impl(m, "index_reduce_", LZ_FN(index_reduce_));
  impl(m, "index_reduce.out", LZ_FN(index_reduce_out));
  impl(m, "repeat_interleave.Tensor", LZ_FN(repeat_interleave));
  impl(m, "searchsorted.Tensor", LZ_FN(searchsorted_t));
  impl(m, "searchsorted.Scalar", LZ_FN(searchsorted_s));
  impl(m, "bucketize.Tensor", LZ_FN(bucketize_t));
  impl(m, "bucketize.Scalar", LZ_FN(bucketize_s));
  impl(m, "histc", LZ_FN(histc));
  impl(m, "multinomial", LZ_FN(multinomial));
}

}  // namespace lazyx_bridge
