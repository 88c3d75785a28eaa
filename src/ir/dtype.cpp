#include <cstring>

#include "lazyx/dtype.h"
#include "lazyx/tensor.h"

namespace lazyx {

size_t dtype_size(Dtype d) {
  switch (d) {
    case kBool: return 1;
    case kUInt8: return 1;
    case kInt8: return 1;
    case kInt16: return 2;
    case kInt32: return 4;
    case kInt64: return 8;
    case kFloat16: return 2;
    case kBFloat16: return 2;
    case kFloat32: return 4;
    case kFloat64: return 8;
  }
  return 0;
}

const char* dtype_name(Dtype d) {
  switch (d) {
    case kBool: return "bool";
    case kUInt8: return "uint8";
    case kInt8: return "int8";
    case kInt16: return "int16";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kFloat16: return "float16";
    case kBFloat16: return "bfloat16";
    case kFloat32: return "float32";
    case kFloat64: return "float64";
  }
  return "?";
}

bool is_floating(Dtype d) {
  return d == kFloat16 || d == kBFloat16 || d == kFloat32 || d == kFloat64;
}
bool is_integral(Dtype d) {
  return d == kUInt8 || d == kInt8 || d == kInt16 || d == kInt32 || d == kInt64;
}

namespace {
// Position in the promotion lattice: bool < uint8 < int8 < int16 < int32 < int64 < f16/bf16 <
// f32 < f64 (uint8 with int8 is int16, f16 with bf16 is f32).
int rank(Dtype d) {
  switch (d) {
    case kBool: return 0;
    case kUInt8: return 1;
    case kInt8: return 2;
    case kInt16: return 3;
    case kInt32: return 4;
    case kInt64: return 5;
    case kFloat16: return 6;
    case kBFloat16: return 6;
    case kFloat32: return 7;
    case kFloat64: return 8;
  }
  return 0;
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
  if ((a == kUInt8 && b == kInt8) || (a == kInt8 && b == kUInt8)) return kInt16;
  return rank(a) > rank(b) ? a : b;
}

bool can_cast(Dtype from, Dtype to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

Dtype Scalar::default_dtype() const {
  switch (kind_) {
    case Kind::Bool: return kBool;
    case Kind::Int: return kInt64;
    case Kind::Float: return kFloat32;
  }
  return kFloat32;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow to zero
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;  // may carry into inf: correct
  return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace lazyx
