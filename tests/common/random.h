#pragma once
// Seeded test data shared by the passes and runtime tests (one copy, so a test that moves between
// files keeps its exact weights and inputs).
#include <cstdint>
#include <random>
#include <vector>

namespace onnxforge::test {

// n floats uniform in [lo, hi) from mt19937(seed).
inline std::vector<float> noise(size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 r(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(r);
  return v;
}

// n floats normal(0, sd) from mt19937(seed).
inline std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.f) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(r);
  return v;
}

// Element count of a shape.
inline int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

}  // namespace onnxforge::test
