// Element types and PyTorch's type promotion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lazyx {

// The narrow integers come last so that the numbers of the older dtypes (in cached programs'
// keys) stay as they were.
enum class Dtype : uint8_t {
  Bool, Int32, Int64, Float16, BFloat16, Float32, Float64, UInt8, Int8, Int16
};

constexpr Dtype kBool = Dtype::Bool;
constexpr Dtype kInt32 = Dtype::Int32;
constexpr Dtype kInt64 = Dtype::Int64;
constexpr Dtype kFloat16 = Dtype::Float16;
constexpr Dtype kBFloat16 = Dtype::BFloat16;
constexpr Dtype kFloat32 = Dtype::Float32;
constexpr Dtype kFloat64 = Dtype::Float64;
constexpr Dtype kUInt8 = Dtype::UInt8;
constexpr Dtype kInt8 = Dtype::Int8;
constexpr Dtype kInt16 = Dtype::Int16;

size_t dtype_size(Dtype d);
const char* dtype_name(Dtype d);
bool is_floating(Dtype d);
bool is_integral(Dtype d);  // bool excluded

// Promotion of two tensor dtypes, as torch.promote_types.
Dtype promote_types(Dtype a, Dtype b);
// Whether an in-place op may store a `from` result into a `to` tensor (torch.can_cast).
bool can_cast(Dtype from, Dtype to);

template <typename T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<bool>() { return kBool; }
template <>
constexpr Dtype dtype_of<int32_t>() { return kInt32; }
template <>
constexpr Dtype dtype_of<uint8_t>() { return kUInt8; }
template <>
constexpr Dtype dtype_of<int8_t>() { return kInt8; }
template <>
constexpr Dtype dtype_of<int16_t>() { return kInt16; }
template <>
constexpr Dtype dtype_of<int64_t>() { return kInt64; }
template <>
constexpr Dtype dtype_of<float>() { return kFloat32; }
template <>
constexpr Dtype dtype_of<double>() { return kFloat64; }

// 16-bit float conversions (round to nearest even), shared by every backend.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

}  // namespace lazyx
