// The counter-based generator behind rand/randn/randint. Part of the IR's meaning: every backend
// must produce these exact bits for (seed, counter).
#pragma once

#include <cmath>
#include <cstdint>

namespace lazyx::ir {

inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t random_bits(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed) ^ counter);
}

// Uniform in [0, 1) with 24 bits (float32 and narrower) or 53 bits (float64).
inline double random_uniform(uint64_t seed, uint64_t counter, bool wide) {
  uint64_t b = random_bits(seed, counter);
  return wide ? static_cast<double>(b >> 11) * 0x1.0p-53 : static_cast<double>(b >> 40) * 0x1.0p-24;
}

// Standard normal by Box-Muller over the counter pair (2c, 2c + 1).
inline double random_normal(uint64_t seed, uint64_t counter) {
  double u1 = 1.0 - random_uniform(seed, 2 * counter, true);  // (0, 1]
  double u2 = random_uniform(seed, 2 * counter + 1, true);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace lazyx::ir
