// bf16 on the host: conversions between float and the 16-bit pattern (round to nearest even), so
// the CPU references of the correctness checks see exactly the values the GPU read.
#pragma once

#include <cstdint>
#include <cstring>

namespace braid::profiler {

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace braid::profiler
