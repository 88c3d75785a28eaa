// Elementwise kernels: operands are broadcast by strides (0 on broadcast dims), loaded in chunks
// into double or int64, computed, and stored with conversion to the output dtype.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/kernels.h"
#include "ir/math_ops.h"
#include "ir/random.h"
#include "ir/shape_infer.h"

namespace lazyx::reference {

using ir::Op;

namespace {

template <typename T>
T rd(const char* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void wr(char* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

// Float to integer without undefined behaviour: NaN gives 0, out-of-range saturates.
// Float to integer as PyTorch on x86 CPUs: NaN and values out of the target's range give the
// target's minimum (the "integer indefinite" of cvttsd2si); others truncate toward zero.
int64_t f2i(double x) {
  if (!(x >= -9.2233720368547758e18 && x < 9.2233720368547758e18)) {
    return std::numeric_limits<int64_t>::min();
  }
  return static_cast<int64_t>(x);
}
int64_t f2i32(double x) {
  if (!(x > -2147483649.0 && x < 2147483648.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int64_t>(x);
}
// Narrow integers convert through int32 and wrap, as eager does on x86.
int64_t f2i_to(double x, Dtype d) { return d == kInt64 ? f2i(x) : f2i32(x); }

// Walks the elements of a strided operand in the output's row-major order.
struct Cursor {
  Shape shape, strides, idx;
  int64_t off = 0;
  bool contiguous = false, constant = false;
  void seek(int64_t linear) {
    idx.assign(shape.size(), 0);
    off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      int64_t s = shape[d] ? shape[d] : 1;
      idx[d] = linear % s;
      linear /= s;
      off += idx[d] * strides[d];
    }
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) return;
      off -= strides[d] * idx[d];
      idx[d] = 0;
    }
  }
};

// Strides of operand shape `s` broadcast into output shape `out`.
Cursor broadcast_cursor(const Shape& s, const Shape& out) {
  Cursor c;
  // The common cases need no index arithmetic (and no allocation).
  if (s == out) {
    c.contiguous = true;
    return c;
  }
  if (ir::shape_numel(s) == 1) {
    c.constant = true;
    return c;
  }
  c.shape = out;
  c.strides.assign(out.size(), 0);
  Shape cs = ir::contiguous_strides(s);
  size_t lead = out.size() - s.size();
  bool all_zero = true;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] != 1 || out[d + lead] == 1) c.strides[d + lead] = s[d] == 1 ? 0 : cs[d];
    if (c.strides[d + lead] != 0) all_zero = false;
  }
  c.contiguous = s == out;
  c.constant = all_zero;
  return c;
}

constexpr int64_t kChunk = 512;

void load_f(const Val& v, Cursor& c, int64_t start, int64_t n, double* out) {
  if (c.constant) {
    double x = get_f(v, 0);
    std::fill(out, out + n, x);
    return;
  }
  if (c.contiguous) {
    switch (v.dtype) {
      case kFloat32: for (int64_t k = 0; k < n; ++k) out[k] = rd<float>(v.data, start + k); return;
      case kFloat64: for (int64_t k = 0; k < n; ++k) out[k] = rd<double>(v.data, start + k); return;
      default: for (int64_t k = 0; k < n; ++k) out[k] = get_f(v, start + k); return;
    }
  }
  c.seek(start);
  for (int64_t k = 0; k < n; ++k, c.next()) out[k] = get_f(v, c.off);
}

void load_i(const Val& v, Cursor& c, int64_t start, int64_t n, int64_t* out) {
  if (c.constant) {
    int64_t x = get_i(v, 0);
    std::fill(out, out + n, x);
    return;
  }
  if (c.contiguous) {
    for (int64_t k = 0; k < n; ++k) out[k] = get_i(v, start + k);
    return;
  }
  c.seek(start);
  for (int64_t k = 0; k < n; ++k, c.next()) out[k] = get_i(v, c.off);
}

void store_f(const Val& v, int64_t start, int64_t n, const double* x) {
  if (v.dtype == kFloat32) {
    for (int64_t k = 0; k < n; ++k) wr<float>(v.data, start + k, static_cast<float>(x[k]));
    return;
  }
  for (int64_t k = 0; k < n; ++k) set_f(v, start + k, x[k]);
}

void store_i(const Val& v, int64_t start, int64_t n, const int64_t* x) {
  for (int64_t k = 0; k < n; ++k) set_i(v, start + k, x[k]);
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double fmax_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }
double fmin_nan(double a, double b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }

int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : (b == -1 ? (e % 2 ? -1 : 1) : 0);
  uint64_t r = 1, base = static_cast<uint64_t>(b);
  while (e) {  // unsigned arithmetic wraps like PyTorch's integer overflow, without UB
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return static_cast<int64_t>(r);
}

// Wrapping integer arithmetic, as PyTorch's (and without signed-overflow UB).
int64_t wadd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wsub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wmul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

bool is_compare(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge;
}

template <typename T>
bool compare(Op op, T a, T b) {
  switch (op) {
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    default: return a >= b;
  }
}

}  // namespace

double get_f(const Val& v, int64_t i) {
  switch (v.dtype) {
    case kBool: return rd<uint8_t>(v.data, i) ? 1.0 : 0.0;
    case kUInt8: return rd<uint8_t>(v.data, i);
    case kInt8: return rd<int8_t>(v.data, i);
    case kInt16: return rd<int16_t>(v.data, i);
    case kInt32: return rd<int32_t>(v.data, i);
    case kInt64: return static_cast<double>(rd<int64_t>(v.data, i));
    case kFloat16: return half_to_float(rd<uint16_t>(v.data, i));
    case kBFloat16: return bf16_to_float(rd<uint16_t>(v.data, i));
    case kFloat32: return rd<float>(v.data, i);
    case kFloat64: return rd<double>(v.data, i);
  }
  return 0;
}

int64_t get_i(const Val& v, int64_t i) {
  switch (v.dtype) {
    case kBool: return rd<uint8_t>(v.data, i) ? 1 : 0;
    case kUInt8: return rd<uint8_t>(v.data, i);
    case kInt8: return rd<int8_t>(v.data, i);
    case kInt16: return rd<int16_t>(v.data, i);
    case kInt32: return rd<int32_t>(v.data, i);
    case kInt64: return rd<int64_t>(v.data, i);
    default: return f2i(get_f(v, i));
  }
}

void set_f(const Val& v, int64_t i, double x) {
  switch (v.dtype) {
    case kBool: wr<uint8_t>(v.data, i, x != 0 ? 1 : 0); return;
    case kUInt8:
    case kInt8:
    case kInt16:
    case kInt32: set_i(v, i, f2i32(x)); return;
    case kInt64: wr<int64_t>(v.data, i, f2i(x)); return;
    case kFloat16: wr<uint16_t>(v.data, i, float_to_half(static_cast<float>(x))); return;
    case kBFloat16: wr<uint16_t>(v.data, i, float_to_bf16(static_cast<float>(x))); return;
    case kFloat32: wr<float>(v.data, i, static_cast<float>(x)); return;
    case kFloat64: wr<double>(v.data, i, x); return;
  }
}

void set_i(const Val& v, int64_t i, int64_t x) {
  switch (v.dtype) {
    case kBool: wr<uint8_t>(v.data, i, x != 0 ? 1 : 0); return;
    case kUInt8: wr<uint8_t>(v.data, i, static_cast<uint8_t>(x)); return;
    case kInt8: wr<int8_t>(v.data, i, static_cast<int8_t>(static_cast<uint8_t>(x))); return;
    case kInt16: wr<int16_t>(v.data, i, static_cast<int16_t>(static_cast<uint16_t>(x))); return;
    case kInt32: wr<int32_t>(v.data, i, static_cast<int32_t>(static_cast<uint32_t>(x))); return;
    case kInt64: wr<int64_t>(v.data, i, x); return;
    default: set_f(v, i, static_cast<double>(x)); return;
  }
}

void run_elementwise(const backend::Instr& in, const std::vector<const Val*>& args, const Val& out) {
  const int64_t n = out.numel();
  const Op op = in.op;
  // The domain operands are loaded in: comparisons use their promoted dtype (attrs.i0), casts
  // their input's, logic ops a truth value; everything else the output's.
  Dtype dom = in.dtype;
  if (is_compare(op)) dom = static_cast<Dtype>(in.attrs.i0);
  if (op == Op::Cast) dom = args[0]->dtype;
  const bool fdom = float_domain(dom) || op == Op::LogicalAnd || op == Op::LogicalOr ||
                    op == Op::LogicalNot;

  // Leaves with scalar operands.
  if (op == Op::Full || op == Op::Arange || op == Op::RandUniform || op == Op::RandNormal ||
      op == Op::RandInt) {
    std::vector<double> fs;
    std::vector<int64_t> is;
    for (const Val* a : args) {
      fs.push_back(get_f(*a, 0));
      is.push_back(get_i(*a, 0));
    }
    const bool fout = is_floating(in.dtype);
    for (int64_t k = 0; k < n; ++k) {
      switch (op) {
        case Op::Full:
          if (fout) set_f(out, k, fs[0]); else set_i(out, k, is[0]);
          break;
        case Op::Arange:
          if (fout) set_f(out, k, fs[0] + static_cast<double>(k) * fs[1]);
          else set_i(out, k, wadd(is[0], wmul(k, is[1])));
          break;
        case Op::RandUniform:
          set_f(out, k, ir::random_uniform(is[0], is[1] + k, in.dtype == kFloat64));
          break;
        case Op::RandNormal:
          set_f(out, k, ir::random_normal(is[0], is[1] + k));
          break;
        default: {  // RandInt
          uint64_t range = static_cast<uint64_t>(is[3] - is[2]);
          uint64_t b = ir::random_bits(is[0], is[1] + k);
          set_i(out, k, is[2] + static_cast<int64_t>(range ? b % range : 0));
        }
      }
    }
    return;
  }

  const size_t na = args.size();
  if (na > 3) ir::fail(ir::op_name(op), "internal: too many operands for an elementwise op.");
  Cursor cur[3];
  for (size_t a = 0; a < na; ++a) cur[a] = broadcast_cursor(args[a]->shape, out.shape);
  // Chunk buffers on the stack: small programs pay no allocation per instruction.
  double fbuf[3][kChunk];
  int64_t ibuf[3][kChunk];
  double cond[kChunk];  // Where's condition is a truth value; its other operands follow the domain
  double rf[kChunk];
  int64_t ri[kChunk];
  const bool out_f = is_floating(in.dtype);

  for (int64_t start = 0; start < n; start += kChunk) {
    int64_t m = std::min(kChunk, n - start);
    for (size_t a = 0; a < na; ++a) {
      if (op == Op::Where && a == 0) {
        load_f(*args[0], cur[0], start, m, cond);
      } else if (fdom) {
        load_f(*args[a], cur[a], start, m, fbuf[a]);
      } else {
        load_i(*args[a], cur[a], start, m, ibuf[a]);
      }
    }
    if (fdom) {
      const double* x = na > 0 ? fbuf[0] : nullptr;
      const double* y = na > 1 ? fbuf[1] : nullptr;
      const double* z = na > 2 ? fbuf[2] : nullptr;
      for (int64_t k = 0; k < m; ++k) {
        double r = 0;
        switch (op) {
          case Op::Neg: r = -x[k]; break;
          case Op::Abs: r = std::fabs(x[k]); break;
          case Op::Exp: r = std::exp(x[k]); break;
          case Op::Log: r = std::log(x[k]); break;
          case Op::Sqrt: r = std::sqrt(x[k]); break;
          case Op::Rsqrt: r = 1.0 / std::sqrt(x[k]); break;
          case Op::Tanh: r = std::tanh(x[k]); break;
          case Op::Sigmoid: r = 1.0 / (1.0 + std::exp(-x[k])); break;
          // Eager's relu keeps -0 and NaN: only values below zero become 0.
          case Op::Relu: r = x[k] < 0 ? 0.0 : x[k]; break;
          case Op::Gelu: r = gelu(x[k]); break;
          case Op::GeluTanh: r = gelu_tanh(x[k]); break;
          case Op::Sin: r = std::sin(x[k]); break;
          case Op::Cos: r = std::cos(x[k]); break;
          case Op::LogicalNot: r = x[k] == 0; break;
          case Op::Cast: r = x[k]; break;
          case Op::Add: r = z ? x[k] + z[k] * y[k] : x[k] + y[k]; break;
          case Op::Sub: r = z ? x[k] - z[k] * y[k] : x[k] - y[k]; break;
          case Op::Mul: r = x[k] * y[k]; break;
          case Op::Div: r = x[k] / y[k]; break;
          case Op::Pow: r = std::pow(x[k], y[k]); break;
          case Op::Maximum: r = fmax_nan(x[k], y[k]); break;
          case Op::Minimum: r = fmin_nan(x[k], y[k]); break;
          case Op::LogicalAnd: r = (x[k] != 0) && (y[k] != 0); break;
          case Op::LogicalOr: r = (x[k] != 0) || (y[k] != 0); break;
          case Op::Where: r = cond[k] != 0 ? y[k] : z[k]; break;
          default:
            r = ir::is_math_op(op) ? math_f(in, x[k], y ? y[k] : 0.0) : compare(op, x[k], y[k]);
            break;
        }
        rf[k] = r;
      }
      if (out_f || is_compare(op) || op == Op::LogicalAnd || op == Op::LogicalOr ||
          op == Op::LogicalNot || op == Op::Cast) {
        store_f(out, start, m, rf);
      } else {
        for (int64_t k = 0; k < m; ++k) ri[k] = f2i_to(rf[k], out.dtype);
        store_i(out, start, m, ri);
      }
    } else {
      const int64_t* x = na > 0 ? ibuf[0] : nullptr;
      const int64_t* y = na > 1 ? ibuf[1] : nullptr;
      const int64_t* z = na > 2 ? ibuf[2] : nullptr;
      for (int64_t k = 0; k < m; ++k) {
        int64_t r = 0;
        switch (op) {
          case Op::Neg: r = wsub(0, x[k]); break;
          case Op::Abs: r = x[k] < 0 ? wsub(0, x[k]) : x[k]; break;
          case Op::Relu: r = x[k] > 0 ? x[k] : 0; break;
          case Op::Cast: r = x[k]; break;
          case Op::Add: r = z ? wadd(x[k], wmul(z[k], y[k])) : wadd(x[k], y[k]); break;
          case Op::Sub: r = z ? wsub(x[k], wmul(z[k], y[k])) : wsub(x[k], y[k]); break;
          case Op::Mul: r = wmul(x[k], y[k]); break;
          case Op::Pow: r = ipow(x[k], y[k]); break;
          case Op::Maximum: r = std::max(x[k], y[k]); break;
          case Op::Minimum: r = std::min(x[k], y[k]); break;
          case Op::Where: r = cond[k] != 0 ? y[k] : z[k]; break;
          default:
            if (ir::is_math_op(op)) {
              r = math_i(in, x[k], y ? y[k] : 0);
            } else if (is_compare(op)) {
              r = compare(op, x[k], y[k]);
            } else {
              ir::fail(ir::op_name(op), std::string("internal: no integer kernel for dtype ") +
                                            dtype_name(dom) + ".");
            }
        }
        // Bool results of arithmetic (bool + bool) are truth values.
        ri[k] = in.dtype == kBool ? (r != 0) : r;
      }
      store_i(out, start, m, ri);
    }
  }
}

void run_as_strided(const backend::Instr& in, const Val& src, const Val& out) {
  Cursor c;
  c.shape = in.shape;
  c.strides = in.attrs.ints;
  int64_t n = out.numel();
  if (n == 0) return;
  size_t es = dtype_size(out.dtype);
  c.seek(0);
  for (int64_t k = 0; k < n; ++k, c.next()) {
    std::memcpy(out.data + k * es, src.data + (in.attrs.i0 + c.off) * es, es);
  }
}

void run_as_strided_scatter(const backend::Instr& in, const Val& base, const Val& src,
                            const Val& out) {
  size_t es = dtype_size(out.dtype);
  if (out.data != base.data) std::memcpy(out.data, base.data, out.numel() * es);
  Cursor c;
  c.shape = src.shape;
  c.strides = in.attrs.ints;
  int64_t n = src.numel();
  if (n == 0) return;
  c.seek(0);
  for (int64_t k = 0; k < n; ++k, c.next()) {
    std::memcpy(out.data + (in.attrs.i0 + c.off) * es, src.data + k * es, es);
  }
}

}  // namespace lazyx::reference
