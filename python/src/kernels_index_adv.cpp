// Kernels: advanced indexing (index, index_put_ with any mix of integer tensors, None and bool
// masks), take/put_, masked_select/masked_scatter_, nonzero/unique, scatter with values and
// reductions, repeat_interleave, bucketize/searchsorted, histc.
// Ops whose result shape depends on values (a mask's true count, unique values) read that
// value to the host: one partial sync, counted as ShapeSync:<op>; the gathers and scatters
// stay on the device.
#include <ATen/ATen.h>
#include <ATen/ops/_index_put_impl_ops.h>
#include <ATen/ops/index_ops.h>
#include <torch/library.h>

#include "kernels.h"

namespace lazyx_bridge {

using at::Tensor;
using c10::optional;
using lazyx::Shape;

namespace {

using IndexList = c10::List<optional<Tensor>>;


// A device value read to the host for a result shape (CPU tensors are read for free).
Tensor host_read(const Tensor& t, const char* op) {
  if (!is_lazyx(t)) return t;
  lazyx::metrics::add_counter(std::string("ShapeSync:") + op);
  return t.cpu();
}

bool is_mask(const Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

// Integer index tensors by dim (undefined for a full slice): bool masks become the positions
// of their true elements (read to the host).
std::vector<Tensor> expand_masks(const Tensor& self, const IndexList& indices, const char* op) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < indices.size(); ++i) {
    const optional<Tensor> ix = indices.get(i);
    if (!ix.has_value() || !ix->defined()) {
      out.emplace_back();
      continue;
    }
    if (!is_mask(*ix)) {
      out.push_back(*ix);
      continue;
    }
    const int64_t at_dim = static_cast<int64_t>(out.size());
    TORCH_CHECK(ix->dim() >= 1 && at_dim + ix->dim() <= self.dim(), "[", op, "] a mask of shape ",
                ix->sizes(), " does not fit the tensor of shape ", self.sizes(), " at dim ",
                at_dim, ".");
    for (int64_t d = 0; d < ix->dim(); ++d) {
      TORCH_CHECK(ix->size(d) == self.size(at_dim + d), "[", op, "] the shape of the mask ",
                  ix->sizes(), " does not match the shape of the indexed tensor ", self.sizes(),
                  " at dim ", at_dim + d, ".");
    }
    Tensor nz = host_read(*ix, op).to(at::kBool).nonzero();
    for (int64_t d = 0; d < ix->dim(); ++d) out.push_back(nz.select(1, d).contiguous());
  }
  return out;
}

// One index tensor per leading dim (0 .. last indexed), shaped to broadcast to the result's
// index shape G: eager puts the broadcast index dims B where the first index is when the
// indexed dims are adjacent, else first; the sliced dims among the leading ones take aranges.
struct Plan {
  std::vector<LT> idx;  // per leading dim
  Shape lead_sizes;     // sizes of the leading dims
};

Plan make_plan(const Tensor& self, const std::vector<Tensor>& ix, bool check) {
  std::vector<int64_t> pos, none_dims;
  std::vector<int64_t> b;
  for (size_t i = 0; i < ix.size(); ++i) {
    if (!ix[i].defined()) continue;
    pos.push_back(static_cast<int64_t>(i));
    b = b.empty() && pos.size() == 1 ? ix[i].sizes().vec() : at::infer_size(b, ix[i].sizes());
  }
  const int64_t last = pos.back();
  for (int64_t d = 0; d < last; ++d) if (!ix[d].defined()) none_dims.push_back(d);
  const bool adjacent = pos.back() - pos.front() + 1 == static_cast<int64_t>(pos.size());
  const size_t nb = b.size(), nn = none_dims.size();
  Plan p;
  for (int64_t d = 0; d <= last; ++d) {
    const int64_t n = self.size(d);
    p.lead_sizes.push_back(n);
    Shape s;
    LT v;
    if (ix[d].defined()) {
      v = lz(ix[d]).to(lazyx::kInt64);
      if (check) {  // wrapped, and checked at run time by index_select on an arange
        v = lazyx::where(v.lt(0), v.add(li(n)), v);
        Shape vs = v.shape();
        v = lazyx::arange(0, n, 1, lazyx::kInt64).index_select(0, v.reshape({v.numel()}))
                .reshape(vs);
      }
      Shape bs(nb - v.dim(), 1);
      bs.insert(bs.end(), v.shape().begin(), v.shape().end());
      Shape ones(nn, 1);
      s = adjacent ? ones : bs;
      s.insert(s.end(), (adjacent ? bs : ones).begin(), (adjacent ? bs : ones).end());
    } else {
      v = lazyx::arange(0, n, 1, lazyx::kInt64);
      const size_t k = std::find(none_dims.begin(), none_dims.end(), d) - none_dims.begin();
      Shape one(nn, 1);
      one[k] = n;
      Shape ones(nb, 1);
      s = adjacent ? one : ones;
      s.insert(s.end(), (adjacent ? ones : one).begin(), (adjacent ? ones : one).end());
    }
    p.idx.push_back(v.reshape(s));
  }
  return p;
}

bool plain(const std::vector<Tensor>& ix) {
  for (const Tensor& t : ix) if (t.defined()) return false;
  return true;
}

Tensor index_tensor(const Tensor& self, const IndexList& indices) {
  TORCH_CHECK(indices.size() <= static_cast<size_t>(self.dim()), "[index] too many indices (",
              indices.size(), ") for a tensor of dimension ", self.dim(), ".");
  std::vector<Tensor> ix = expand_masks(self, indices, "index");
  if (plain(ix)) return wrap(lz(self).clone());
  Plan p = make_plan(self, ix, true);
  const int64_t nl = static_cast<int64_t>(p.idx.size());
  LT lin = p.idx[0];
  for (int64_t d = 1; d < nl; ++d) lin = lin.mul(li(p.lead_sizes[d])).add(p.idx[d]);
  int64_t lead = 1;
  for (int64_t n : p.lead_sizes) lead *= n;
  Shape rest(self.sizes().begin() + nl, self.sizes().end());
  Shape flat{lead};
  flat.insert(flat.end(), rest.begin(), rest.end());
  Shape g = lin.shape();
  LT r = lz(self).reshape(flat).index_select(0, lin.reshape({lin.numel()}));
  Shape out = g;
  out.insert(out.end(), rest.begin(), rest.end());
  r = r.reshape(out);
  return wrap(r.is_view() ? r.clone() : r);
}

Tensor& index_put_impl_(Tensor& self, const IndexList& indices, const Tensor& values,
                        bool accumulate, bool) {
  LT t = lz(self);
  const optional<Tensor> i0 = indices.size() == 1 ? indices.get(0) : optional<Tensor>();
  if (i0.has_value() && i0->defined() && is_mask(*i0) && i0->sizes() == self.sizes() &&
      values.numel() == 1 && !accumulate) {
    // t[mask] = v: a where over the whole tensor, no sync needed.
    LT m = lz(*i0).to(lazyx::kBool);
    LT v = is_cpu_scalar(values) ? lazyx::full({}, cpu_scalar(values), t.dtype())
                                 : lz(values).reshape({}).to(t.dtype());
    t.copy_(lazyx::where(m, v, t));
    return self;
  }
  TORCH_CHECK(indices.size() <= static_cast<size_t>(self.dim()), "[index_put_] too many indices (",
              indices.size(), ") for a tensor of dimension ", self.dim(), ".");
  std::vector<Tensor> ix = expand_masks(self, indices, "index_put_");
  LT v = is_cpu_scalar(values) ? lazyx::full({}, cpu_scalar(values), t.dtype()) : lz(values);
  if (plain(ix)) {
    t.copy_(accumulate ? t.add(v.to(t.dtype())) : v.to(t.dtype()));
    return self;
  }
  Plan p = make_plan(self, ix, false);
  t.index_put_(p.idx, v, accumulate);
  return self;
}

// take / put_: indexing the flattened tensor (negative indices count from the end).
Tensor take_k(const Tensor& self, const Tensor& index) {
  const int64_t n = self.numel();
  LT i = lz(index).to(lazyx::kInt64);
  i = lazyx::where(i.lt(0), i.add(li(n)), i);
  LT r = lz(self).reshape({n}).index_select(0, i.reshape({i.numel()}));
  return wrap(r.reshape(to_shape(index.sizes())));
}
Tensor& take_out(const Tensor& self, const Tensor& index, Tensor& out) {
  return write_out(out, lz(take_k(self, index)));
}
Tensor& put_(Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  TORCH_CHECK(index.numel() == source.numel(), "[put_] index (", index.numel(),
              " elements) and source (", source.numel(), " elements) must have the same size.");
  LT t = lz(self);
  LT flat = t.reshape({self.numel()}).clone();
  flat.index_put_({lz(index).reshape({index.numel()})},
                  lz(source).reshape({source.numel()}).to(t.dtype()), accumulate);
  t.copy_(flat.reshape(t.shape()));
  return self;
}

// Masks.
Tensor nonzero_k(const Tensor& self) { return to_device(host_read(self, "nonzero").nonzero()); }
Tensor& nonzero_out(const Tensor& self, Tensor& out) { return write_out(out, lz(nonzero_k(self))); }
Tensor masked_select_k(const Tensor& self, const Tensor& mask) {
  Shape b = to_shape(at::infer_size(self.sizes(), mask.sizes()));
  LT x = lz(self).expand(b).contiguous();
  Tensor m = host_read(mask, "masked_select").expand(c10::IntArrayRef(b)).reshape({-1});
  Tensor where_true = m.to(at::kBool).nonzero().reshape({-1});
  return wrap(x.reshape({x.numel()}).index_select(0, upload(where_true)));
}
Tensor& masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  return write_out(out, lz(masked_select_k(self, mask)));
}
Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source) {
  Tensor m = host_read(mask, "masked_scatter_").to(at::kBool).expand(self.sizes()).reshape({-1});
  Tensor where_true = m.nonzero().reshape({-1});
  const int64_t c = where_true.numel();
  TORCH_CHECK(c <= source.numel(), "[masked_scatter_] the mask has ", c,
              " true elements but source has only ", source.numel(), ".");
  LT t = lz(self);
  if (c == 0) return self;
  LT flat = t.reshape({self.numel()}).clone();
  flat.index_put_({upload(where_true)},
                  lz(source).reshape({source.numel()}).narrow(0, 0, c).to(t.dtype()), false);
  t.copy_(flat.reshape(t.shape()));
  return self;
}

// unique: sorted on the device; the "starts a new value" flags are read to the host to size
// the result, then values, inverse and counts are gathered on the device.
std::tuple<Tensor, Tensor, Tensor> unique_from_sorted(const LT& sorted, const LT& order,
                                                      const Tensor& self, const char* op) {
  const int64_t n = sorted.numel();
  if (n == 0) {
    LT e = lazyx::zeros({0}, lazyx::kInt64);
    return {wrap(sorted.clone()), wrap(lazyx::zeros(to_shape(self.sizes()), lazyx::kInt64)), wrap(e)};
  }
  LT starts = n == 1 ? lazyx::full({1}, true, lazyx::kBool)
                     : lazyx::cat({lazyx::full({1}, true, lazyx::kBool),
                                   sorted.narrow(0, 1, n - 1).ne(sorted.narrow(0, 0, n - 1))});
  Tensor st = host_read(wrap(starts), op);
  Tensor pos = st.nonzero().reshape({-1});
  LT vals = sorted.index_select(0, upload(pos));
  LT group = lazyx::cumsum(starts, 0).sub(li(1));  // group of each sorted element
  LT inverse = lazyx::zeros({n}, lazyx::kInt64).scatter(0, order, group);
  Tensor ends = at::cat({pos.narrow(0, 1, pos.numel() - 1), at::full({1}, n, pos.options())});
  Tensor counts = ends - pos;
  return {wrap(vals), wrap(inverse.reshape(to_shape(self.sizes()))), to_device(counts)};
}
// An eager result computed on the host after the one read, on the device.
std::tuple<Tensor, Tensor, Tensor> to_device3(const std::tuple<Tensor, Tensor, Tensor>& r) {
  return {to_device(std::get<0>(r)), to_device(std::get<1>(r)), to_device(std::get<2>(r))};
}
std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted_out, bool inverse,
                                           bool counts) {
  if (!sorted_out) {
    // Unsorted, eager's order is that of a hash set: the values are read to the host anyway
    // (they decide the result's size), and eager's own kernel orders them there.
    return to_device3(at::_unique2(host_read(self, "_unique2"), false, inverse, counts));
  }
  auto [sorted, order] = lazyx::sort(lz(self).reshape({self.numel()}), 0, false);
  return unique_from_sorted(sorted, order, self, "_unique2");
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& self, bool inverse, bool counts,
                                                      optional<int64_t> dim) {
  if (dim.has_value() && self.dim() > 1) {
    // Runs of equal slices: the values are read to the host anyway (they decide the result's
    // size), and eager's own kernel compares the slices there.
    return to_device3(
        at::unique_consecutive(host_read(self, "unique_consecutive"), inverse, counts, dim));
  }
  LT flat = lz(self).reshape({self.numel()});
  return unique_from_sorted(flat, lazyx::arange(0, self.numel(), 1, lazyx::kInt64), self,
                            "unique_consecutive");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Lazy, m) {
  impl(m, "index.Tensor", LZ_FN(index_tensor));
  impl(m, "_index_put_impl_", LZ_FN(index_put_impl_));
  impl(m, "take", LZ_FN(take_k));
  impl(m, "take.out", LZ_FN(take_out));
  impl(m, "put_", LZ_FN(put_));
  impl(m, "nonzero", LZ_FN(nonzero_k));
  impl(m, "nonzero.out", LZ_FN(nonzero_out));
  impl(m, "masked_select", LZ_FN(masked_select_k));
  impl(m, "masked_select.out", LZ_FN(masked_select_out));
  impl(m, "masked_scatter_", LZ_FN(masked_scatter_));
  impl(m, "_unique2", LZ_FN(unique2));
  impl(m, "unique_consecutive", LZ_FN(unique_consecutive));
}

}  // namespace lazyx_bridge
