#pragma once
// float16 / bfloat16 <-> float32, round to nearest even. One definition for the whole tree: the
// runtime converts tensors with it, the passes read stored constants with it. Inline because
// the runtime's Cast and float16 compute loops call it per element.
#include <bit>
#include <cstdint>

namespace onnxforge {

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0)
      u = sign;
    else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31)
    u = sign | 0x7f800000u | man << 13;
  else
    u = sign | (exp + 112) << 23 | man << 13;
  return std::bit_cast<float>(u);
}

inline uint16_t float_to_half(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (a < 0x38800000u) {                                               // subnormal or zero in half
    // Adding 0.5 shifts the value so that the float's rounding gives the half subnormal bits.
    uint32_t ru = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f);
    return static_cast<uint16_t>(sign | (ru - 0x3f000000u));
  }
  uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (a >> 13));
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace onnxforge
