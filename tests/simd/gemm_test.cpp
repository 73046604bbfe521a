// GEMM, packed GEMM, batched GEMM and MatMul against the double-accumulating reference.
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "simd/gemm.h"
#include "simd/reference.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

struct Case {
  bool ta = false, tb = false;
  std::size_t M = 0, N = 0, K = 0;
  std::size_t pad = 0;  // extra elements per row on every leading dimension
  float alpha = 1.f, beta = 0.f;
  Epilogue ep{};
};

// Tolerance per element: float accumulation error scales with sum |a*b|.
std::vector<float> tolerances(const Case& c, const std::vector<float>& a, std::size_t lda, const std::vector<float>& b,
                              std::size_t ldb, const std::vector<float>& c0, std::size_t ldc) {
  std::vector<float> tol(c.M * ldc, 0.f);
  for (std::size_t i = 0; i < c.M; ++i)
    for (std::size_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < c.K; ++k)
        s += std::fabs((c.ta ? a[k * lda + i] : a[i * lda + k]) * (c.tb ? b[j * ldb + k] : b[k * ldb + j]));
      s = s * std::fabs(c.alpha) + (c.beta != 0.f ? std::fabs(c.beta * c0[i * ldc + j]) : 0.0) + 1.0;
      tol[i * ldc + j] = static_cast<float>(4e-6 * s);
    }
  return tol;
}

void run_case(const Case& c, unsigned seed) {
  const std::size_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const std::size_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const std::size_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  const auto a = random_floats(a_rows * lda, seed);
  const auto b = random_floats(b_rows * ldb, seed + 1);
  auto c0 = random_floats(c.M * ldc, seed + 2);
  if (c.beta == 0.f)  // must be ignored, NaN included
    for (float& v : c0) v = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> got = c0, want = c0;
  gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc, c.ep);
  ref::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, want.data(), ldc, c.ep);
  // Padding columns must be untouched (bitwise: they may hold NaN).
  for (std::size_t i = 0; i < c.M; ++i)
    for (std::size_t j = c.N; j < ldc; ++j) {
      const std::size_t at = i * ldc + j;
      EXPECT_EQ(std::memcmp(&got[at], &c0[at], sizeof(float)), 0) << "padding written at row " << i;
      got[at] = want[at] = 0.f;
    }
  std::vector<float> tol = tolerances(c, a, lda, b, ldb, c0, ldc);
  expect_close(got, want, tol,
               "gemm ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
                   " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K));
}

class Gemm : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(Gemm);

TEST_P(Gemm, SizesAndTransposes) {
  unsigned seed = 1;
  for (std::size_t M : {1, 2, 5, 8, 13, 33, 70})
    for (std::size_t N : {1, 3, 12, 16, 47, 48, 49, 100})
      for (std::size_t K : {1, 7, 64, 300})
        for (int t = 0; t < 4; ++t) {
          Case c;
          c.ta = t & 1, c.tb = t & 2, c.M = M, c.N = N, c.K = K;
          run_case(c, seed++);
        }
}

// One to three rows: the wide kernels (several B panels per call) on panels read in place,
// packed per tile and packed whole, with K over several blocks, wide B rows (> 1024 floats:
// read in place only for M <= 2), partial panel groups and epilogues.
TEST_P(Gemm, SmallMWidePanels) {
  unsigned seed = 400;
  for (std::size_t M : {1, 2, 3})
    for (std::size_t N : {144, 433, 1100})
      for (std::size_t K : {5, 390, 800})
        for (int t = 0; t < 4; ++t) {
          Case c;
          c.ta = t & 1, c.tb = t & 2, c.M = M, c.N = N, c.K = K;
          c.pad = seed % 3 == 0 ? 3 : 0;
          c.beta = seed % 2 == 0 ? 0.f : 0.5f;
          run_case(c, seed++);
        }
  const auto bias_row = random_floats(4, 5), bias_col = random_floats(400, 6);
  for (std::size_t M : {1, 2})
    for (Bias kind : {Bias::None, Bias::PerRow, Bias::PerCol})
      for (const Unary& act : {Unary::none(), Unary::relu(), Unary::of(UnaryOp::Gelu)})
        for (float beta : {0.f, 1.f}) {
          Case c;
          c.M = M, c.N = 400, c.K = 450, c.beta = beta, c.alpha = 0.75f;
          c.ep.act = act;
          c.ep.bias_kind = kind;
          c.ep.bias = kind == Bias::PerRow ? bias_row.data() : kind == Bias::PerCol ? bias_col.data() : nullptr;
          run_case(c, seed++);
        }
}

// Packed and unpacked B give bitwise the same result for few rows too (same K blocks and sum
// order, whichever kernel shape covers an element), on one thread and on all.
TEST_P(Gemm, SmallMPackedMatchesUnpacked) {
  unsigned seed = 500;
  for (std::size_t M : {1, 2, 5, 64})
    for (std::size_t N : {150, 1100})
      for (std::size_t K : {100, 800}) {
        const auto a = random_floats(M * K, seed), b = random_floats(K * N, seed + 1);
        const auto bias = random_floats(N, seed + 2);
        seed += 3;
        const Epilogue ep{Bias::PerCol, bias.data(), Unary::relu()};
        const PackedB packed = pack_b(false, K, N, b.data(), N);
        std::vector<float> got(M * N), want(M * N), one(M * N);
        gemm_packed(false, M, 1.f, a.data(), K, packed, 0.f, got.data(), N, ep);
        gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, want.data(), N, ep);
        tbb::task_arena single(1);
        single.execute([&] { gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, one.data(), N, ep); });
        EXPECT_EQ(got, want) << "M=" << M << " N=" << N << " K=" << K;
        EXPECT_EQ(one, want) << "M=" << M << " N=" << N << " K=" << K;
      }
}

TEST_P(Gemm, LeadingDimensionsAlphaBeta) {
  unsigned seed = 100;
  for (float beta : {0.f, 1.f, -0.75f})
    for (float alpha : {1.f, 0.5f})
      for (int t = 0; t < 4; ++t) {
        Case c;
        c.ta = t & 1, c.tb = t & 2, c.M = 37, c.N = 53, c.K = 291, c.pad = 5, c.alpha = alpha, c.beta = beta;
        run_case(c, seed++);
      }
}

TEST_P(Gemm, MultipleBlocksOfKAndN) {
  Case c;
  c.M = 19, c.N = 2100, c.K = 2050, c.beta = 0.5f;  // K * N exceeds the packing budget
  run_case(c, 7);
  c.tb = true;
  run_case(c, 8);
}

TEST_P(Gemm, Epilogues) {
  const auto bias_row = random_floats(64, 3), bias_col = random_floats(128, 4);
  const Unary acts[] = {Unary::none(),
                        Unary::relu(),
                        Unary::clip(-0.3f, 0.4f),
                        Unary::leaky_relu(0.1f),
                        Unary::of(UnaryOp::Sigmoid),
                        Unary::of(UnaryOp::Tanh),
                        Unary::of(UnaryOp::Gelu),
                        Unary::of(UnaryOp::GeluTanh),
                        Unary::hard_swish(),
                        Unary::of(UnaryOp::Silu)};
  unsigned seed = 200;
  for (const Unary& act : acts)
    for (Bias kind : {Bias::None, Bias::PerRow, Bias::PerCol})
      for (float beta : {0.f, 1.f}) {
        Case c;
        c.M = 29, c.N = 71, c.K = 40, c.beta = beta, c.pad = 3;
        c.ep.act = act;
        c.ep.bias_kind = kind;
        c.ep.bias = kind == Bias::PerRow ? bias_row.data() : kind == Bias::PerCol ? bias_col.data() : nullptr;
        run_case(c, seed++);
      }
  // Activations applied to whole tile rows after the last K block (Gelu, Sigmoid): tall tiles
  // (rows outer) and a short one (panels outer), two column tiles, two K blocks, A in place and packed.
  const auto wide_bias = random_floats(800, 7);
  for (const Unary& act : {Unary::of(UnaryOp::Gelu), Unary::of(UnaryOp::Sigmoid)})
    for (bool ta : {false, true})
      for (float beta : {0.f, 1.f}) {
        Case c;
        c.ta = ta, c.M = 140, c.N = 800, c.K = 450, c.beta = beta;
        c.ep.act = act;
        c.ep.bias_kind = Bias::PerCol;
        c.ep.bias = wide_bias.data();
        run_case(c, seed++);
      }
}

TEST_P(Gemm, ZeroSizes) {
  std::vector<float> c(12, 5.f);
  const std::vector<float> a(12, 1.f), b(12, 1.f);
  gemm(false, false, 0, 3, 4, 1.f, a.data(), 4, b.data(), 3, 0.f, c.data(), 3);
  gemm(false, false, 3, 0, 4, 1.f, a.data(), 4, b.data(), 1, 0.f, c.data(), 1);
  for (float v : c) EXPECT_EQ(v, 5.f);
  // K == 0: C = act(beta * C + bias).
  const std::vector<float> bias = {1.f, -20.f, 3.f, 4.f};
  Epilogue ep{Bias::PerCol, bias.data(), Unary::relu()};
  gemm(false, false, 3, 4, 0, 1.f, nullptr, 0, nullptr, 4, 2.f, c.data(), 4, ep);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i * 4 + 0], 11.f);
    EXPECT_EQ(c[i * 4 + 1], 0.f);
    EXPECT_EQ(c[i * 4 + 2], 13.f);
    EXPECT_EQ(c[i * 4 + 3], 14.f);
  }
}

TEST_P(Gemm, SingleThreadMatchesParallel) {
  const std::size_t M = 200, N = 300, K = 150;
  const auto a = random_floats(M * K, 1), b = random_floats(K * N, 2);
  std::vector<float> c1(M * N), c2(M * N);
  gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c1.data(), N);
  tbb::task_arena one(1);
  one.execute([&] { gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c2.data(), N); });
  EXPECT_EQ(c1, c2);  // the K order per element does not depend on the tiling
}

TEST_P(Gemm, PackedB) {
  unsigned seed = 300;
  for (bool tb : {false, true})
    for (std::size_t N : {1, 33, 48, 200})
      for (std::size_t K : {1, 100, 513}) {
        const std::size_t M = 45, ldb = (tb ? K : N) + 2;
        const auto a = random_floats(M * K, seed), b = random_floats((tb ? N : K) * ldb, seed + 1);
        const auto bias = random_floats(N, seed + 2);
        seed += 3;
        const PackedB packed = pack_b(tb, K, N, b.data(), ldb);
        EXPECT_EQ(packed.k(), K);
        EXPECT_EQ(packed.n(), N);
        EXPECT_EQ(packed.isa(), GetParam());
        const Epilogue ep{Bias::PerCol, bias.data(), Unary::relu()};
        std::vector<float> got(M * N), want(M * N);
        for (int rep = 0; rep < 2; ++rep) {  // reuse the packing
          gemm_packed(false, M, 1.f, a.data(), K, packed, 0.f, got.data(), N, ep);
          gemm(false, tb, M, N, K, 1.f, a.data(), K, b.data(), ldb, 0.f, want.data(), N, ep);
          EXPECT_EQ(got, want) << "N=" << N << " K=" << K << " tb=" << tb;
        }
      }
}

// Tiles whose rows are not a multiple of the micro-tile height run micro-rows of near-equal
// height (49 rows: seven of 7, not six of 8 and one of 1), with A in place or packed
// (transposed), and the inline per-column bias + Relu store of a packed B (conv_packed's shape).
TEST_P(Gemm, RowRemaindersSplitEvenly) {
  unsigned seed = 700;
  for (std::size_t M : {9, 17, 49, 50, 57, 196})
    for (bool ta : {false, true}) {
      Case c;
      c.ta = ta, c.M = M, c.N = 100, c.K = 300;
      run_case(c, seed++);
      const std::size_t K = 520, N = 96;
      const auto a = random_floats(M * K, seed), b = random_floats(K * N, seed + 1), bias = random_floats(N, seed + 2);
      seed += 3;
      const Epilogue ep{Bias::PerCol, bias.data(), Unary::relu()};
      std::vector<float> got(M * N), want(M * N);
      gemm_packed(ta, M, 1.f, a.data(), ta ? M : K, pack_b(false, K, N, b.data(), N), 0.f, got.data(), N, ep);
      ref::gemm(ta, false, M, N, K, 1.f, a.data(), ta ? M : K, b.data(), N, 0.f, want.data(), N, ep);
      for (std::size_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i]))) << "M=" << M << " ta=" << ta << " at " << i;
    }
}

TEST_P(Gemm, PackedBSurvivesIsaSwitch) {
  const std::size_t M = 20, N = 70, K = 90;
  const auto a = random_floats(M * K, 1), b = random_floats(K * N, 2);
  const PackedB packed = pack_b(false, K, N, b.data(), N);
  std::vector<float> got(M * N), want(M * N);
  ref::gemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, want.data(), N);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    gemm_packed(false, M, 1.f, a.data(), K, packed, 0.f, got.data(), N);
    expect_close(got, want, 1e-4f, 1e-5f,
                 std::string("packed under ") + isa_name(GetParam()) + ", run under " + isa_name(isa));
  }
}

TEST_P(Gemm, BatchedStrided) {
  const std::size_t batch = 5, M = 17, N = 29, K = 33;
  const auto a = random_floats(batch * M * K, 1), b = random_floats(batch * K * N, 2);
  for (std::size_t b_stride : {std::size_t{0}, K * N}) {
    std::vector<float> got(batch * M * N), want(batch * M * N);
    gemm_batched(batch, false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, got.data(), N,
                 {M * K, b_stride, M * N});
    for (std::size_t i = 0; i < batch; ++i)
      ref::gemm(false, false, M, N, K, 1.f, a.data() + i * M * K, K, b.data() + i * b_stride, N, 0.f,
                want.data() + i * M * N, N);
    expect_close(got, want, 1e-5f, 1e-5f, "batched, b stride " + std::to_string(b_stride));
  }
  // Transposed A cannot be merged into one GEMM; a per-row bias is per problem.
  const auto bias = random_floats(M, 3);
  const Epilogue ep{Bias::PerRow, bias.data(), Unary::none()};
  std::vector<float> got(batch * M * N), want(batch * M * N);
  gemm_batched(batch, true, false, M, N, K, 1.f, a.data(), M, b.data(), N, 0.f, got.data(), N, {M * K, 0, M * N}, ep);
  for (std::size_t i = 0; i < batch; ++i)
    ref::gemm(true, false, M, N, K, 1.f, a.data() + i * M * K, M, b.data(), N, 0.f, want.data() + i * M * N, N, ep);
  expect_close(got, want, 1e-5f, 1e-5f, "batched, transposed A");
}

TEST_P(Gemm, BatchedPointers) {
  const std::size_t batch = 12, M = 64, N = 64, K = 32;  // attention-sized problems
  const auto a = random_floats(batch * M * K, 1), b = random_floats(batch * K * N, 2);
  std::vector<float> got(batch * M * N), want(batch * M * N);
  std::vector<const float*> pa, pb;
  std::vector<float*> pc;
  for (std::size_t i = 0; i < batch; ++i) {
    pa.push_back(a.data() + ((i * 5) % batch) * M * K);
    pb.push_back(b.data() + i * K * N);
    pc.push_back(got.data() + i * M * N);
    ref::gemm(false, true, M, N, K, 0.125f, pa.back(), K, pb.back(), K, 0.f, want.data() + i * M * N, N);
  }
  gemm_batched(batch, false, true, M, N, K, 0.125f, pa.data(), K, pb.data(), K, 0.f, pc.data(), N);
  expect_close(got, want, 1e-5f, 1e-5f, "batched pointers");
}

TEST_P(Gemm, MatMulBroadcasting) {
  using D = std::vector<std::int64_t>;
  const std::vector<std::tuple<D, D, D>> cases = {
      {{2, 3, 4}, {4, 5}, {2, 3, 5}},
      {{4}, {4, 5}, {5}},
      {{3, 4}, {4}, {3}},
      {{4}, {4}, {}},
      {{2, 1, 3, 4}, {1, 5, 4, 6}, {2, 5, 3, 6}},
      {{5, 4}, {2, 4, 3}, {2, 5, 3}},
      {{3, 2, 4}, {3, 4, 2}, {3, 2, 2}},
      {{7}, {2, 7, 3}, {2, 3}},
      {{0, 3}, {3, 4}, {0, 4}},
      {{2, 0}, {0, 3}, {2, 3}},
      {{1, 1, 4, 8}, {8, 16}, {1, 1, 4, 16}},
  };
  unsigned seed = 1;
  for (const auto& [as, bs, ys] : cases) {
    EXPECT_EQ(matmul_shape(as, bs), ys) << dims_str(as) << " x " << dims_str(bs);
    const auto a = random_floats(static_cast<std::size_t>(product(as)), seed++);
    const auto b = random_floats(static_cast<std::size_t>(product(bs)), seed++);
    std::vector<float> got(static_cast<std::size_t>(product(ys)), 7.f), want(got.size());
    matmul(as, a.data(), bs, b.data(), got.data());
    ref::matmul(as, a.data(), bs, b.data(), want.data());
    expect_close(got, want, 1e-5f, 1e-5f, "matmul " + dims_str(as) + " x " + dims_str(bs));
  }
  EXPECT_THROW(matmul_shape(D{2, 3}, D{4, 5}), std::invalid_argument);
  EXPECT_THROW(matmul_shape(D{2, 2, 3}, D{3, 3, 5}), std::invalid_argument);
}

TEST_P(Gemm, RejectsBadArguments) {
  std::vector<float> a(16), b(16), c(16);
  EXPECT_THROW(gemm(false, false, 2, 2, 4, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2), std::invalid_argument);
  EXPECT_THROW(
      gemm(false, false, 2, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2, Epilogue{Bias::PerCol, nullptr, {}}),
      std::invalid_argument);
  EXPECT_THROW(gemm_packed(false, 2, 1.f, a.data(), 2, PackedB{}, 0.f, c.data(), 2), std::invalid_argument);
}

}  // namespace
}  // namespace onnxforge::simd::test
