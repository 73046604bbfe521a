// LayerNorm, RMSNorm, Softmax and LogSoftmax against double references, including odd sizes,
// large offsets, huge and infinite logits.
#include <cmath>
#include <limits>

#include "simd/norm.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

class Norm : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Norm);

TEST_P(Norm, LayerNorm) {
  unsigned seed = 1;
  for (std::size_t rows : {0, 1, 5, 128})
    for (std::size_t cols : {1, 3, 16, 17, 768, 1000})
      for (bool with_bias : {false, true})
        for (float offset : {0.f, 1000.f}) {
          auto x = random_floats(rows * cols, seed++, -2.f, 2.f);
          for (float& v : x) v += offset;  // two-pass variance must not cancel
          const auto scale = random_floats(cols, seed++, 0.5f, 1.5f), bias = random_floats(cols, seed++);
          const float* b = with_bias ? bias.data() : nullptr;
          std::vector<float> got(rows * cols), want(rows * cols), mean(rows), inv(rows), rmean(rows), rinv(rows);
          layer_norm(rows, cols, x.data(), scale.data(), b, 1e-5f, got.data(), mean.data(), inv.data());
          ref::layer_norm(rows, cols, x.data(), scale.data(), b, 1e-5f, want.data(), rmean.data(), rinv.data());
          const std::string what =
              "layer_norm " + std::to_string(rows) + "x" + std::to_string(cols) + " offset " + std::to_string(offset);
          // Inputs carry |offset| * eps of absolute error; relative to the row's spread that is
          // amplified by inv_std.
          const float tol = offset == 0.f ? 2e-5f : 2e-3f;
          expect_close(got, want, tol, 1e-5f, what);
          expect_close(mean, rmean, 1e-6f * (2.f + offset), 2e-6f, what + " mean");
          expect_close(inv, rinv, 0.f, offset == 0.f ? 2e-5f : 2e-3f, what + " inv_std");
          // In place.
          layer_norm(rows, cols, x.data(), scale.data(), b, 1e-5f, x.data());
          EXPECT_EQ(x, got) << what << " in place";
        }
}

TEST_P(Norm, RmsNorm) {
  unsigned seed = 100;
  for (std::size_t rows : {1, 7, 64})
    for (std::size_t cols : {1, 15, 64, 4097})
      for (bool with_scale : {false, true}) {
        const auto x = random_floats(rows * cols, seed++, -3.f, 3.f), scale = random_floats(cols, seed++);
        const float* s = with_scale ? scale.data() : nullptr;
        std::vector<float> got(rows * cols), want(rows * cols), inv(rows), rinv(rows);
        rms_norm(rows, cols, x.data(), s, 1e-6f, got.data(), inv.data());
        ref::rms_norm(rows, cols, x.data(), s, 1e-6f, want.data(), rinv.data());
        expect_close(got, want, 1e-6f, 1e-5f, "rms_norm " + std::to_string(rows) + "x" + std::to_string(cols));
        expect_close(inv, rinv, 0.f, 1e-5f, "rms_norm inv");
      }
}

TEST_P(Norm, SoftmaxAndLogSoftmax) {
  unsigned seed = 200;
  for (std::size_t rows : {0, 1, 3, 96})
    for (std::size_t cols : {0, 1, 2, 15, 16, 17, 128, 1000})
      for (float spread : {1.f, 30.f, 1e4f}) {
        const auto x = random_floats(rows * cols, seed++, -spread, spread);
        std::vector<float> got(rows * cols), want(rows * cols);
        const std::string what =
            std::to_string(rows) + "x" + std::to_string(cols) + " spread " + std::to_string(spread);
        softmax(rows, cols, x.data(), got.data());
        ref::softmax(rows, cols, x.data(), want.data());
        expect_close(got, want, 1e-37f, 1e-5f, "softmax " + what);
        log_softmax(rows, cols, x.data(), got.data());
        ref::log_softmax(rows, cols, x.data(), want.data());
        expect_close(got, want, 2e-6f, 2e-6f, "log_softmax " + what);
      }
}

TEST_P(Norm, SoftmaxExtremeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  // Rows: huge values (overflow without the max shift), a masked row, an all -inf row, +inf.
  const std::vector<float> x = {3e38f, 3e38f, -3e38f, 1.f,   // two equal huge logits
                                -inf,  0.f,   -inf,   2.f,   // additive attention mask
                                -inf,  -inf,  -inf,   -inf,  // fully masked: NaN as the definition
                                inf,   0.f,   1.f,    2.f};
  std::vector<float> got(16), want(16);
  softmax(4, 4, x.data(), got.data());
  ref::softmax(4, 4, x.data(), want.data());
  expect_close(got, want, 1e-7f, 1e-6f, "softmax extremes");
  EXPECT_FLOAT_EQ(got[0], 0.5f);
  EXPECT_EQ(got[4], 0.f);
  EXPECT_TRUE(std::isnan(got[8]));
  log_softmax(4, 4, x.data(), got.data());
  ref::log_softmax(4, 4, x.data(), want.data());
  expect_close(got, want, 1e-6f, 1e-6f, "log_softmax extremes");
  EXPECT_EQ(got[4], -inf);
}

TEST_P(Norm, SoftmaxCausalMasksFlushSubnormalsOnly) {
  // Causal masks as exporters write them (-FLT_MAX, -1e4, -inf): masked entries are 0 (exp()
  // would give subnormals, flushed), the rest match the reference; the caller's floating-point
  // mode (flush-to-zero off) is restored afterwards.
  const std::size_t rows = 37, cols = 37;
  for (float mask : {-std::numeric_limits<float>::max(), -1e4f, -std::numeric_limits<float>::infinity()}) {
    auto x = random_floats(rows * cols, 77, -3.f, 3.f);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = i + 1; j < cols; ++j) x[i * cols + j] += mask;
    std::vector<float> got(rows * cols), want(rows * cols);
    softmax(rows, cols, x.data(), got.data());
    ref::softmax(rows, cols, x.data(), want.data());
    expect_close(got, want, 1e-37f, 1e-5f, "masked softmax");
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = i + 1; j < cols; ++j) EXPECT_EQ(got[i * cols + j], 0.f);
  }
  volatile float tiny = std::numeric_limits<float>::min();
  EXPECT_GT(tiny / 4.f, 0.f);  // subnormals still exist on this thread
}

TEST_P(Norm, SoftmaxOverMiddleAxis) {
  unsigned seed = 300;
  for (std::size_t outer : {1, 3})
    for (std::size_t n : {1, 5, 64})
      for (std::size_t inner : {1, 7, 33, 2500})
        for (bool log : {false, true}) {
          const auto x = random_floats(outer * n * inner, seed++, -10.f, 10.f);
          std::vector<float> got(x.size()), want(x.size());
          softmax_axis(outer, n, inner, x.data(), got.data(), log);
          ref::softmax_axis(outer, n, inner, x.data(), want.data(), log);
          expect_close(got, want, 2e-6f, 1e-5f,
                       "softmax_axis " + std::to_string(outer) + "x" + std::to_string(n) + "x" + std::to_string(inner) +
                           (log ? " log" : ""));
        }
}

}  // namespace
}  // namespace onnxforge::simd::test
