#pragma once
// Shared helpers for the simd kernel tests: every kernel test runs once per ISA level the CPU
// supports (SimdTest fixture), comparing against simd/reference.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "simd/isa.h"
#include "tests/common/random.h"

namespace onnxforge::simd::test {

// Parameterized over ISA levels; switches the active level for the duration of each test.
class SimdTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    saved_ = active_isa_level();
    ASSERT_TRUE(set_isa(GetParam()));
  }
  void TearDown() override { set_isa(saved_); }

 private:
  Isa saved_ = Isa::Sse;
};

inline std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) { return isa_name(info.param); }

#define ONNXFORGE_SIMD_ALL_ISAS(Suite)                                                           \
  INSTANTIATE_TEST_SUITE_P(Isa, Suite, ::testing::ValuesIn(::onnxforge::simd::available_isas()), \
                           ::onnxforge::simd::test::isa_param_name)

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  return onnxforge::test::noise(n, seed, lo, hi);
}

template <class T>
std::vector<T> random_ints(std::size_t n, unsigned seed, T lo, T hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<T> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = dist(rng);
  return v;
}

// Distance in units in the last place of the float nearest to `want` (0 if both NaN or equal).
inline double ulp_error(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1e30;
  if (std::isnan(got)) return 1e30;
  const float w = static_cast<float>(want);  // overflows to inf exactly when the float result should
  if (std::isinf(w) || std::isinf(got)) return got == w ? 0.0 : 1e30;
  const double ulp = std::fabs(static_cast<double>(std::nextafter(std::fabs(w), INFINITY)) - std::fabs(w));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Expects |got - want| <= tol[i] (NaN must match NaN, infinities must match exactly).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    const float g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= tol[i];
    }
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w << " (tol " << tol[i] << ")";
    }
  }
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float abs_tol, float rel_tol,
                         const std::string& what) {
  std::vector<float> tol(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) tol[i] = abs_tol + rel_tol * std::fabs(want[i]);
  expect_close(got, want, tol, what);
}

inline std::int64_t product(const std::vector<std::int64_t>& d) {
  std::int64_t n = 1;
  for (std::int64_t v : d) n *= v;
  return n;
}

inline std::string dims_str(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace onnxforge::simd::test
