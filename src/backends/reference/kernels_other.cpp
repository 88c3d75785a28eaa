// Reductions, softmax, matmul, concatenation and indexing, as plain loops in double or int64.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/kernels.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

using ir::Op;

namespace {

// Output offset of each input element: the input's multi-index with reduced dims dropped.
struct ReduceMap {
  Shape in_shape, out_strides;  // out_strides aligned with the input dims, 0 where reduced
  int64_t reduced_count = 1;
};

ReduceMap reduce_map(const Shape& in, const std::vector<int64_t>& dims) {
  ReduceMap m;
  m.in_shape = in;
  m.out_strides.assign(in.size(), 0);
  int64_t acc = 1;
  for (size_t d = in.size(); d-- > 0;) {
    bool red = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (red) {
      m.reduced_count *= in[d];
    } else {
      m.out_strides[d] = acc;
      acc *= in[d];
    }
  }
  return m;
}

template <typename F>
void for_each_index(const Shape& shape, F f) {
  int64_t n = ir::shape_numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(k, idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

[[noreturn]] void bad_index(const char* op, int64_t v, int64_t size) {
  ir::fail(op, "index " + std::to_string(v) + " is out of range for a dimension of size " +
                   std::to_string(size) + " (found while running the program; nothing was "
                   "changed).");
}

int64_t check_index(const char* op, int64_t v, int64_t size, bool allow_negative) {
  if (allow_negative && v < 0) v += size;
  if (v < 0 || v >= size) bad_index(op, v < 0 && allow_negative ? v - size : v, size);
  return v;
}

}  // namespace

void run_reduce(const backend::Instr& in, const Val& src, const Val& out) {
  const Op op = in.op;
  ReduceMap m = reduce_map(src.shape, in.attrs.ints);
  int64_t on = out.numel();
  bool fl = is_floating(src.dtype) || op == Op::Mean || op == Op::LogSumExp;
  if (op == Op::Argmax) {
    std::vector<double> best(on, -std::numeric_limits<double>::infinity());
    std::vector<int64_t> arg(on, -1);
    std::vector<bool> nan(on, false);
    int64_t rdim = in.attrs.ints.empty() ? 0 : in.attrs.ints[0];
    for_each_index(src.shape, [&](int64_t k, const std::vector<int64_t>& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * m.out_strides[d];
      double v = get_f(src, k);
      int64_t pos = idx.empty() ? 0 : idx[rdim];
      if (nan[o]) return;
      if (std::isnan(v)) {  // NaN wins, as in PyTorch
        nan[o] = true;
        arg[o] = pos;
      } else if (arg[o] < 0 || v > best[o]) {
        best[o] = v;
        arg[o] = pos;
      }
    });
    for (int64_t o = 0; o < on; ++o) set_i(out, o, arg[o]);
    return;
  }
  if (fl) {
    double init = op == Op::Amax   ? -std::numeric_limits<double>::infinity()
                  : op == Op::Amin ? std::numeric_limits<double>::infinity()
                                   : 0.0;
    std::vector<double> acc(on, init);
    std::vector<double> mx;
    if (op == Op::LogSumExp) {
      mx.assign(on, -std::numeric_limits<double>::infinity());
      for_each_index(src.shape, [&](int64_t k, const std::vector<int64_t>& idx) {
        int64_t o = 0;
        for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * m.out_strides[d];
        mx[o] = std::max(mx[o], get_f(src, k));
      });
    }
    for_each_index(src.shape, [&](int64_t k, const std::vector<int64_t>& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * m.out_strides[d];
      double v = get_f(src, k);
      switch (op) {
        case Op::Sum:
        case Op::Mean: acc[o] += v; break;
        case Op::Amax: acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::max(acc[o], v); break;
        case Op::Amin: acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::min(acc[o], v); break;
        default: {  // LogSumExp
          double s = std::isinf(mx[o]) ? 0.0 : mx[o];
          acc[o] += std::exp(v - s);
        }
      }
    });
    for (int64_t o = 0; o < on; ++o) {
      double r = acc[o];
      if (op == Op::Mean) r /= static_cast<double>(m.reduced_count);
      if (op == Op::LogSumExp) r = std::log(r) + (std::isinf(mx[o]) ? 0.0 : mx[o]);
      set_f(out, o, r);
    }
    return;
  }
  int64_t init = op == Op::Amax   ? std::numeric_limits<int64_t>::min()
                 : op == Op::Amin ? std::numeric_limits<int64_t>::max()
                                  : 0;
  std::vector<int64_t> acc(on, init);
  for_each_index(src.shape, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * m.out_strides[d];
    int64_t v = get_i(src, k);
    if (op == Op::Sum) {
      acc[o] = static_cast<int64_t>(static_cast<uint64_t>(acc[o]) + static_cast<uint64_t>(v));
    } else if (op == Op::Amax) {
      acc[o] = std::max(acc[o], v);
    } else {
      acc[o] = std::min(acc[o], v);
    }
  });
  for (int64_t o = 0; o < on; ++o) set_i(out, o, acc[o]);
}

void run_softmax(const backend::Instr& in, const Val& src, const Val& out) {
  int64_t d = in.attrs.i0;
  const Shape& s = src.shape;
  int64_t n = s.empty() ? 1 : s[d], outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= s[k];
  for (size_t k = d + 1; k < s.size(); ++k) inner *= s[k];
  std::vector<double> row(n);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        row[j] = get_f(src, (o * n + j) * inner + i);
        mx = std::max(mx, row[j]);
      }
      // Shifted by the max even when it is infinite: a row holding +inf (or only -inf) is NaN,
      // as in eager.
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
      for (int64_t j = 0; j < n; ++j) {
        double r = in.op == Op::Softmax ? std::exp(row[j] - mx) / sum : row[j] - mx - std::log(sum);
        set_f(out, (o * n + j) * inner + i, r);
      }
    }
  }
}

void run_matmul(const backend::Instr& in, const Val& a, const Val& b, const Val& out) {
  const Shape& os = out.shape;
  size_t r = os.size();
  int64_t n = os[r - 2], m = os[r - 1], k = a.shape.back();
  Shape batch(os.begin(), os.end() - 2);
  Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  // Batch strides of a and b inside the broadcast batch shape (0 on broadcast dims).
  auto batch_strides = [&](const Shape& s) {
    Shape st(batch.size(), 0);
    int64_t acc = 1;
    size_t lead = batch.size() - s.size();
    for (size_t d = s.size(); d-- > 0;) {
      st[d + lead] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
    return st;
  };
  Shape sa = batch_strides(ab), sb = batch_strides(bb);
  bool fl = is_floating(in.dtype);
  // Operands converted once to the compute domain; then a plain i-p-j loop.
  std::vector<double> af, bf;
  std::vector<int64_t> ai, bi_;
  if (fl) {
    af.resize(a.numel());
    bf.resize(b.numel());
    for (int64_t q = 0; q < a.numel(); ++q) af[q] = get_f(a, q);
    for (int64_t q = 0; q < b.numel(); ++q) bf[q] = get_f(b, q);
  } else {
    ai.resize(a.numel());
    bi_.resize(b.numel());
    for (int64_t q = 0; q < a.numel(); ++q) ai[q] = get_i(a, q);
    for (int64_t q = 0; q < b.numel(); ++q) bi_[q] = get_i(b, q);
  }
  std::vector<double> accf(fl ? m : 0);
  std::vector<uint64_t> acci(fl ? 0 : m);
  for_each_index(batch, [&](int64_t bi, const std::vector<int64_t>& idx) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    oa *= n * k;
    ob *= k * m;
    for (int64_t i = 0; i < n; ++i) {
      if (fl) {
        std::fill(accf.begin(), accf.end(), 0.0);
        for (int64_t p = 0; p < k; ++p) {
          double x = af[oa + i * k + p];
          const double* row = bf.data() + ob + p * m;
          for (int64_t j = 0; j < m; ++j) accf[j] += x * row[j];
        }
        for (int64_t j = 0; j < m; ++j) set_f(out, bi * n * m + i * m + j, accf[j]);
      } else {
        std::fill(acci.begin(), acci.end(), 0);
        for (int64_t p = 0; p < k; ++p) {
          uint64_t x = static_cast<uint64_t>(ai[oa + i * k + p]);
          const int64_t* row = bi_.data() + ob + p * m;
          for (int64_t j = 0; j < m; ++j) acci[j] += x * static_cast<uint64_t>(row[j]);
        }
        for (int64_t j = 0; j < m; ++j) set_i(out, bi * n * m + i * m + j, static_cast<int64_t>(acci[j]));
      }
    }
  });
}

void run_cat(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out) {
  int64_t d = in.attrs.i0;
  const Shape& os = out.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= os[k];
  for (size_t k = d + 1; k < os.size(); ++k) inner *= os[k];
  size_t es = dtype_size(out.dtype);
  int64_t pos = 0;
  for (const Val* a : args) {
    int64_t len = a->shape[d];
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(out.data + ((o * os[d] + pos) * inner) * es, a->data + (o * len * inner) * es,
                  len * inner * es);
    }
    pos += len;
  }
}

std::vector<int32_t> index_operands(const backend::Instr& in) {
  switch (in.op) {
    case Op::IndexSelect:
    case Op::Gather:
    case Op::Scatter:
    case Op::ScatterAdd:
    case Op::IndexCopy:
      return in.inputs.size() >= 2 ? std::vector<int32_t>{1} : std::vector<int32_t>{};
    case Op::IndexPut: {
      std::vector<int32_t> ops;
      for (size_t q = 2; q < in.inputs.size(); ++q) ops.push_back(static_cast<int32_t>(q));
      return ops;
    }
    default:
      return {};
  }
}

void check_indices(const backend::Instr& in, const std::vector<const Val*>& args) {
  const char* op = ir::op_name(in.op);
  const Val& self = *args[0];
  if (in.op == Op::IndexPut) {
    for (size_t q = 2; q < args.size(); ++q) {
      const Val& idx = *args[q];
      for (int64_t j = 0; j < idx.numel(); ++j) {
        check_index(op, get_i(idx, j), self.shape[q - 2], true);
      }
    }
    return;
  }
  if (index_operands(in).empty()) return;
  const int64_t size = self.shape.empty() ? 1 : self.shape[in.attrs.i0];
  const Val& idx = *args[1];
  for (int64_t k = 0; k < idx.numel(); ++k) check_index(op, get_i(idx, k), size, false);
}

void run_index(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out) {
  const char* op = ir::op_name(in.op);
  size_t es = dtype_size(out.dtype);
  const Val& self = *args[0];
  int64_t d = in.attrs.i0;
  auto copy_self = [&] {
    if (out.data != self.data) std::memcpy(out.data, self.data, self.numel() * es);
  };
  switch (in.op) {
    case Op::IndexSelect: {
      const Val& idx = *args[1];
      const Shape& s = self.shape;
      int64_t size = s.empty() ? 1 : s[d], outer = 1, inner = 1;
      for (int64_t k = 0; k < d; ++k) outer *= s[k];
      for (size_t k = d + 1; k < s.size(); ++k) inner *= s[k];
      int64_t j_n = idx.numel();
      for (int64_t j = 0; j < j_n; ++j) check_index(op, get_i(idx, j), size, false);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < j_n; ++j) {
          int64_t v = get_i(idx, j);
          std::memcpy(out.data + ((o * j_n + j) * inner) * es,
                      self.data + ((o * size + v) * inner) * es, inner * es);
        }
      }
      return;
    }
    case Op::Gather: {
      const Val& idx = *args[1];
      Shape st = ir::contiguous_strides(self.shape);
      int64_t size = self.shape.empty() ? 1 : self.shape[d];
      for (int64_t k = 0; k < idx.numel(); ++k) check_index(op, get_i(idx, k), size, false);
      for_each_index(idx.shape, [&](int64_t k, const std::vector<int64_t>& ix) {
        int64_t off = 0;
        for (size_t q = 0; q < ix.size(); ++q) {
          off += (static_cast<int64_t>(q) == d ? get_i(idx, k) : ix[q]) * st[q];
        }
        std::memcpy(out.data + k * es, self.data + off * es, es);
      });
      return;
    }
    case Op::Scatter:
    case Op::ScatterAdd: {
      const Val& idx = *args[1];
      const Val& src = *args[2];
      int64_t size = self.shape.empty() ? 1 : self.shape[d];
      for (int64_t k = 0; k < idx.numel(); ++k) check_index(op, get_i(idx, k), size, false);
      copy_self();
      Shape st = ir::contiguous_strides(self.shape), sst = ir::contiguous_strides(src.shape);
      bool fl = is_floating(out.dtype);
      for_each_index(idx.shape, [&](int64_t k, const std::vector<int64_t>& ix) {
        int64_t off = 0, soff = 0;
        for (size_t q = 0; q < ix.size(); ++q) {
          off += (static_cast<int64_t>(q) == d ? get_i(idx, k) : ix[q]) * st[q];
          soff += ix[q] * sst[q];
        }
        if (in.op == Op::Scatter) {
          std::memcpy(out.data + off * es, src.data + soff * es, es);
        } else if (fl) {
          set_f(out, off, get_f(out, off) + get_f(src, soff));
        } else {
          set_i(out, off, get_i(out, off) + get_i(src, soff));
        }
      });
      return;
    }
    case Op::IndexCopy: {
      const Val& idx = *args[1];
      const Val& src = *args[2];
      const Shape& s = self.shape;
      int64_t size = s.empty() ? 1 : s[d], outer = 1, inner = 1;
      for (int64_t k = 0; k < d; ++k) outer *= s[k];
      for (size_t k = d + 1; k < s.size(); ++k) inner *= s[k];
      int64_t j_n = idx.numel();
      for (int64_t j = 0; j < j_n; ++j) check_index(op, get_i(idx, j), size, false);
      copy_self();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < j_n; ++j) {
          std::memcpy(out.data + ((o * size + get_i(idx, j)) * inner) * es,
                      src.data + ((o * j_n + j) * inner) * es, inner * es);
        }
      }
      return;
    }
    case Op::IndexPut: {
      const Val& values = *args[1];
      size_t nidx = args.size() - 2;
      Shape st = ir::contiguous_strides(self.shape);
      int64_t inner = 1;
      for (size_t k = nidx; k < self.shape.size(); ++k) inner *= self.shape[k];
      int64_t j_n = args[2]->numel();
      for (size_t q = 0; q < nidx; ++q) {
        for (int64_t j = 0; j < j_n; ++j) check_index(op, get_i(*args[2 + q], j), self.shape[q], true);
      }
      copy_self();
      bool fl = is_floating(out.dtype);
      for (int64_t j = 0; j < j_n; ++j) {
        int64_t off = 0;
        for (size_t q = 0; q < nidx; ++q) {
          off += check_index(op, get_i(*args[2 + q], j), self.shape[q], true) * st[q];
        }
        for (int64_t e = 0; e < inner; ++e) {
          if (!in.attrs.flag) {
            std::memcpy(out.data + (off + e) * es, values.data + (j * inner + e) * es, es);
          } else if (fl) {
            set_f(out, off + e, get_f(out, off + e) + get_f(values, j * inner + e));
          } else {
            set_i(out, off + e, get_i(out, off + e) + get_i(values, j * inner + e));
          }
        }
      }
      return;
    }
    default:
      ir::fail(op, "internal: not an index op.");
  }
}

}  // namespace lazyx::reference
