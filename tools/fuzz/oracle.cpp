#include "oracle.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace lazyx::fuzz {

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::string shape_cpp(const Shape& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

double round_to(double v, Dtype d) {
  if (d == kFloat32) return static_cast<double>(static_cast<float>(v));
  return v;
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::optional<Shape> view_strides(const Shape& os, const Shape& ost, const Shape& ns) {
  int64_t numel = numel_of(os);
  if (numel <= 1 || os.empty()) return contiguous_strides_of(ns);
  Shape nst(ns.size(), 0);
  int64_t view_d = static_cast<int64_t>(ns.size()) - 1;
  int64_t chunk_base = ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = static_cast<int64_t>(os.size()) - 1; td >= 0; --td) {
    tensor_numel *= os[td];
    if (td == 0 || (os[td - 1] != 1 && ost[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || ns[view_d] == 1)) {
        nst[view_d] = view_numel * chunk_base;
        view_numel *= ns[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (td > 0) {
        chunk_base = ost[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return nst;
}

Dtype result_dtype(Dtype a, bool a0d, Dtype b, bool b0d) {
  auto wider = [](Dtype x, Dtype y) { return (x == kFloat64 || y == kFloat64) ? kFloat64 : kFloat32; };
  if (a0d == b0d) return wider(a, b);
  return a0d ? b : a;  // both floating: the dimensioned tensor's dtype wins
}

double Dense::max_abs() const {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

bool Dense::bounded(double limit) const {
  for (double x : v) {
    if (!std::isfinite(x) || std::fabs(x) > limit) return false;
  }
  return true;
}

bool OTensor::identity() const {
  return offset == 0 && sizes == st->shape && strides == contiguous_strides_of(sizes);
}

bool OTensor::contiguous() const {
  int64_t expect = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expect) return false;
    expect *= sizes[i];
  }
  return true;
}

bool OTensor::expanded() const {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (strides[i] == 0 && sizes[i] > 1) return true;
  }
  return false;
}

std::shared_ptr<OStorage> Oracle::new_storage(const Shape& shape, Dtype dtype) {
  auto s = std::make_shared<OStorage>();
  s->uid = ++next_uid_;
  s->shape = shape;
  s->dtype = dtype;
  s->data.assign(numel_of(shape), 0.0);
  registry_.erase(std::remove_if(registry_.begin(), registry_.end(),
                                 [](const std::weak_ptr<OStorage>& w) { return w.expired(); }),
                  registry_.end());
  registry_.push_back(s);
  return s;
}

static OTensor base_of(std::shared_ptr<OStorage> s) {
  OTensor t;
  t.sizes = s->shape;
  t.strides = contiguous_strides_of(s->shape);
  t.st = std::move(s);
  return t;
}

OTensor Oracle::materialized(const Dense& d) {
  auto s = new_storage(d.shape, d.dtype);
  for (size_t i = 0; i < d.v.size(); ++i) s->data[i] = round_to(d.v[i], d.dtype);
  s->buf = ++next_buf_;
  return base_of(std::move(s));
}

OTensor Oracle::materialized_sharing(const Dense& d, int64_t buf) {
  auto s = new_storage(d.shape, d.dtype);
  for (size_t i = 0; i < d.v.size(); ++i) s->data[i] = round_to(d.v[i], d.dtype);
  s->buf = buf;
  return base_of(std::move(s));
}

OTensor Oracle::pinned_scalar(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  int64_t buf = 0;
  for (auto& [b, id] : pinned_by_value_) {
    if (b == bits) buf = id;
  }
  if (!buf) {
    buf = ++next_buf_;
    pinned_by_value_.emplace_back(bits, buf);
    pinned_bufs_.insert(buf);
  }
  auto s = new_storage({}, kFloat32);
  s->data[0] = round_to(v, kFloat32);
  s->buf = buf;
  return base_of(std::move(s));
}

OTensor Oracle::pending_new(const Dense& d, Expr e) {
  auto s = new_storage(d.shape, d.dtype);
  for (size_t i = 0; i < d.v.size(); ++i) s->data[i] = round_to(d.v[i], d.dtype);
  s->pending = true;
  s->expr = std::move(e);
  return base_of(std::move(s));
}

Dense Oracle::read(const OTensor& t) const {
  Dense d;
  d.shape = t.sizes;
  d.dtype = t.st->dtype;
  int64_t n = numel_of(t.sizes);
  d.v.resize(n);
  Shape idx(t.sizes.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = t.offset;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides[i];
    d.v[k] = t.st->data[off];
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < t.sizes[i]) break;
      idx[i] = 0;
    }
  }
  return d;
}

Expr Oracle::value_expr(const OTensor& t) {
  const OStorage& s = *t.st;
  if (s.pending) {
    Expr e = s.expr;
    if (e.node) e.deps.insert(-e.node);  // whatever reads it contains its node
    if (t.identity()) return e;
    return fresh_expr(e.deps);
  }
  if (t.identity()) return Expr{0, s.buf, {s.buf}};
  return fresh_expr({s.buf});
}

std::set<int64_t> Oracle::deps_union(const std::vector<Expr>& es) {
  std::set<int64_t> r;
  for (const Expr& e : es) r.insert(e.deps.begin(), e.deps.end());
  return r;
}

void Oracle::assign(const OTensor& t, const Dense& d, const Expr& v) {
  OStorage& s = *t.st;
  int64_t n = numel_of(t.sizes);
  Shape idx(t.sizes.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = t.offset;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides[i];
    s.data[off] = round_to(d.v[k], s.dtype);
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < t.sizes[i]) break;
      idx[i] = 0;
    }
  }
  Expr base = s.pending ? s.expr : Expr{0, s.buf, {s.buf}};
  if (base.node) base.deps.insert(-base.node);
  if (t.identity()) {
    s.expr = v;
  } else {
    std::set<int64_t> deps = base.deps;
    deps.insert(v.deps.begin(), v.deps.end());
    s.expr = fresh_expr(std::move(deps));
  }
  s.pending = true;  // the alias source (s.buf) is kept
}

OTensor Oracle::view(const OTensor& t, Shape sizes, Shape strides, int64_t offset) const {
  OTensor r;
  r.st = t.st;
  r.sizes = std::move(sizes);
  r.strides = std::move(strides);
  r.offset = offset;
  r.is_view = true;
  return r;
}

void Oracle::sync(const std::vector<OStorage*>& targets) {
  std::vector<std::pair<int64_t, int64_t>> out_of_node;
  std::vector<OStorage*> done;
  for (OStorage* s : targets) {
    if (!s->pending || std::find(done.begin(), done.end(), s) != done.end()) continue;
    done.push_back(s);
    if (s->expr.pass_buf) {
      s->buf = s->expr.pass_buf;
    } else {
      int64_t b = 0;
      for (auto& [node, nb] : out_of_node) {
        if (node == s->expr.node) b = nb;
      }
      if (!b) {
        b = ++next_buf_;
        out_of_node.emplace_back(s->expr.node, b);
      }
      s->buf = b;
    }
    s->pending = false;
    s->expr = Expr{};
    s->flagged = false;
  }
}

std::vector<OStorage*> Oracle::with_kept_live(const std::vector<OStorage*>& targets) const {
  std::set<int64_t> nodes;
  for (OStorage* t : targets) {
    if (!t->pending) continue;
    if (t->expr.node) nodes.insert(t->expr.node);
    for (int64_t d : t->expr.deps) {
      if (d < 0) nodes.insert(-d);
    }
  }
  std::vector<OStorage*> r = targets;
  for (const auto& w : registry_) {
    auto s = w.lock();
    if (!s || !s->pending || !s->expr.node || !nodes.count(s->expr.node)) continue;
    if (std::find(r.begin(), r.end(), s.get()) == r.end()) r.push_back(s.get());
  }
  return r;
}

void Oracle::mark_donated(OStorage* s) {
  s->donated = true;
  s->flagged = false;
  s->pending = false;
  s->buf = 0;
  s->expr = Expr{};
  std::fill(s->data.begin(), s->data.end(), std::numeric_limits<double>::quiet_NaN());
}

std::vector<std::shared_ptr<OStorage>> Oracle::live() const {
  std::vector<std::shared_ptr<OStorage>> r;
  for (const auto& w : registry_) {
    if (auto s = w.lock()) r.push_back(std::move(s));
  }
  return r;
}

std::vector<OStorage*> Oracle::holders(int64_t buf) const {
  std::vector<OStorage*> r;
  if (!buf) return r;
  for (const auto& w : registry_) {
    if (auto s = w.lock()) {
      if (s->buf == buf) r.push_back(s.get());
    }
  }
  return r;
}

// ---- numerics ----

Dense broadcast_to(const Dense& a, const Shape& s) {
  Dense r;
  r.shape = s;
  r.dtype = a.dtype;
  int64_t n = numel_of(s);
  r.v.resize(n);
  size_t lead = s.size() - a.shape.size();
  Shape ast = contiguous_strides_of(a.shape);
  Shape idx(s.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t i = 0; i < a.shape.size(); ++i) {
      if (a.shape[i] != 1) off += idx[i + lead] * ast[i];
    }
    r.v[k] = a.v[off];
    for (size_t i = s.size(); i-- > 0;) {
      if (++idx[i] < s[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

Dense map1(const Dense& a, double (*f)(double), std::optional<Dtype> out) {
  Dense r = a;
  if (out) r.dtype = *out;
  for (double& x : r.v) x = round_to(f(x), r.dtype);
  return r;
}

Dense round_dense(Dense d) {
  for (double& x : d.v) x = round_to(x, d.dtype);
  return d;
}

Dense reduce(const Dense& a, int kind, const std::vector<int64_t>& dims_in, bool keepdim) {
  int64_t rank = static_cast<int64_t>(a.shape.size());
  std::vector<bool> red(rank, dims_in.empty());
  for (int64_t d : dims_in) red[d] = true;
  Shape out_keep = a.shape, out;
  for (int64_t d = 0; d < rank; ++d) {
    if (red[d]) out_keep[d] = 1;
    if (!red[d] || keepdim) out.push_back(red[d] ? 1 : a.shape[d]);
  }
  int64_t on = numel_of(out_keep);
  std::vector<std::vector<double>> groups(on);
  Shape ost = contiguous_strides_of(out_keep);
  Shape idx(rank, 0);
  for (int64_t k = 0; k < numel_of(a.shape); ++k) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (!red[d]) o += idx[d] * ost[d];
    }
    groups[o].push_back(a.v[k]);
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < a.shape[d]) break;
      idx[d] = 0;
    }
  }
  Dense r;
  r.shape = out;
  r.dtype = a.dtype;
  r.v.resize(on);
  for (int64_t o = 0; o < on; ++o) {
    const auto& g = groups[o];
    double acc = 0;
    switch (kind) {
      case 0:
      case 1:
        for (double x : g) acc += x;
        if (kind == 1) acc /= static_cast<double>(g.size());
        break;
      case 2:
        acc = -std::numeric_limits<double>::infinity();
        for (double x : g) acc = std::max(acc, x);
        break;
      case 3:
        acc = std::numeric_limits<double>::infinity();
        for (double x : g) acc = std::min(acc, x);
        break;
      default: {
        double mx = -std::numeric_limits<double>::infinity();
        for (double x : g) mx = std::max(mx, x);
        for (double x : g) acc += std::exp(x - mx);
        acc = std::log(acc) + mx;
      }
    }
    r.v[o] = round_to(acc, r.dtype);
  }
  return r;
}

Dense softmax(const Dense& a, int64_t dim) {
  Dense r = a;
  int64_t rank = static_cast<int64_t>(a.shape.size());
  Shape st = contiguous_strides_of(a.shape);
  int64_t n = numel_of(a.shape), len = a.shape[dim], stride = st[dim];
  for (int64_t k = 0; k < n; ++k) {
    if ((k / stride) % len != 0) continue;  // k is the first element of its row
    double mx = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int64_t j = 0; j < len; ++j) mx = std::max(mx, a.v[k + j * stride]);
    for (int64_t j = 0; j < len; ++j) sum += std::exp(a.v[k + j * stride] - mx);
    for (int64_t j = 0; j < len; ++j) {
      r.v[k + j * stride] = round_to(std::exp(a.v[k + j * stride] - mx) / sum, a.dtype);
    }
  }
  (void)rank;
  return r;
}

Dense matmul(const Dense& a, const Dense& b) {
  bool va = a.shape.size() == 1, vb = b.shape.size() == 1;
  int64_t n = va ? 1 : a.shape[0], k = a.shape.back(), m = vb ? 1 : b.shape[1];
  Dense r;
  r.dtype = a.dtype;
  if (!va) r.shape.push_back(n);
  if (!vb) r.shape.push_back(m);
  r.v.assign(n * m, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a.v[i * k + p] * b.v[p * m + j];
      r.v[i * m + j] = round_to(acc, r.dtype);
    }
  }
  return r;
}

Dense index_select(const Dense& a, int64_t dim, const std::vector<int64_t>& idx) {
  Dense r;
  r.dtype = a.dtype;
  r.shape = a.shape;
  r.shape[dim] = static_cast<int64_t>(idx.size());
  Shape ast = contiguous_strides_of(a.shape);
  int64_t n = numel_of(r.shape);
  r.v.resize(n);
  Shape pos(r.shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < pos.size(); ++d) {
      off += (static_cast<int64_t>(d) == dim ? idx[pos[d]] : pos[d]) * ast[d];
    }
    r.v[k] = a.v[off];
    for (size_t d = pos.size(); d-- > 0;) {
      if (++pos[d] < r.shape[d]) break;
      pos[d] = 0;
    }
  }
  return r;
}

}  // namespace lazyx::fuzz
