// The integer GEMM (simd/int8_gemm.h) against its int64 reference, bit-exact, at every ISA level
// this CPU supports (each level packs for its own kernel): every signedness pair, per-tensor and
// per-column zero points, saturating values (all 255 x -128 / 127: the case vpmaddubsw would get
// wrong), ragged M/N/K around the tile and cell sizes, transposed B, and a strided C; gemm8_at
// (k-major A) on every case too.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "simd/int8_gemm.h"

using namespace onnxforge::simd;

namespace {

class Int8GemmTest : public ::testing::Test {
 protected:
  void TearDown() override { set_isa(saved_); }
  Isa saved_ = active_isa_level();
};

struct Case {
  std::size_t M, N, K;
  bool a_signed, b_signed, trans_b, per_col;
  int fill;  // 0 random, 1 extremes (A max, B min), 2 extremes with zero points at the far end
};

void check(const Case& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> A(c.M * c.K), B(c.K * c.N);
  for (auto& v : A) v = static_cast<std::uint8_t>(c.fill ? (c.a_signed ? 127 : 255) : byte(rng));
  for (auto& v : B) v = static_cast<std::uint8_t>(c.fill ? (c.b_signed ? 0x80 : 0) : byte(rng));
  const std::int32_t za = c.fill == 2 ? (c.a_signed ? -128 : 0) : c.a_signed ? byte(rng) - 128 : byte(rng);
  std::vector<std::int32_t> zb(c.per_col ? c.N : 1);
  for (auto& z : zb) z = c.fill == 2 ? (c.b_signed ? 127 : 255) : c.b_signed ? byte(rng) - 128 : byte(rng);
  const std::size_t ldb = c.trans_b ? c.K : c.N, ldc = c.N + 3;
  std::vector<std::int32_t> want(c.M * ldc, 7), got(c.M * ldc, 7);
  gemm8_reference(c.M, c.N, c.K, A.data(), c.K, c.a_signed, za, c.trans_b, B.data(), ldb, c.b_signed, zb.data(),
                  zb.size(), want.data(), ldc);
  PackedB8 p = pack_b8(c.trans_b, c.K, c.N, B.data(), ldb, c.b_signed, zb.data(), zb.size());
  ASSERT_EQ(p.kernel(), active_int8_kernel());
  gemm8(c.M, A.data(), c.K, c.a_signed, za, p, got.data(), ldc);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << int8_kernel_name(p.kernel()) << " M=" << c.M << " N=" << c.N << " K=" << c.K
                               << " a_signed=" << c.a_signed << " b_signed=" << c.b_signed << " fill=" << c.fill
                               << " at " << i / ldc << "," << i % ldc;
  // The same product from k-major A (a conv's patch rows), with a row stride past M.
  const std::size_t ld_at = c.M + 5;
  std::vector<std::uint8_t> At(c.K * ld_at, 0xA5);
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t k = 0; k < c.K; ++k) At[k * ld_at + m] = A[m * c.K + k];
  std::vector<std::int32_t> got_at(c.M * ldc, 7);
  gemm8_at(c.M, At.data(), ld_at, c.a_signed, za, p, got_at.data(), ldc);
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got_at[i], want[i]) << "gemm8_at " << int8_kernel_name(p.kernel()) << " M=" << c.M << " N=" << c.N
                                  << " K=" << c.K << " a_signed=" << c.a_signed << " b_signed=" << c.b_signed
                                  << " fill=" << c.fill << " at " << i / ldc << "," << i % ldc;
}

}  // namespace

TEST_F(Int8GemmTest, ExactAtEveryIsaLevel) {
  std::mt19937 rng(18);
  int levels = 0;
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    ++levels;
    for (bool as : {false, true})
      for (bool bs : {false, true})
        for (bool tb : {false, true})
          for (bool pc : {false, true})
            for (auto [M, N, K] : {std::array<std::size_t, 3>{1, 1, 1}, {5, 17, 3}, {9, 33, 7}, {8, 32, 64},
                                   {13, 47, 130}, {70, 65, 300}})
              for (int fill : {0, 1, 2}) check({M, N, K, as, bs, tb, pc, fill}, rng);
  }
  EXPECT_GE(levels, 1);
}

// Large enough for the threaded split (M * N * K >= 2^18) and for K beyond int16 pair sums.
TEST_F(Int8GemmTest, ExactThreadedLargeK) {
  std::mt19937 rng(5);
  for (Isa isa : available_isas()) {
    ASSERT_TRUE(set_isa(isa));
    check({64, 96, 3072, false, true, false, true, 0}, rng);
    check({37, 50, 1000, false, false, true, false, 2}, rng);
  }
}

TEST_F(Int8GemmTest, KernelFollowsIsaLevel) {
  ASSERT_TRUE(set_isa(Isa::Sse));
  EXPECT_EQ(active_int8_kernel(), Int8Kernel::Scalar);
  if (set_isa(Isa::Avx2)) {
    EXPECT_EQ(active_int8_kernel(), Int8Kernel::Avx2);
  }
  if (set_isa(Isa::Avx512)) {
    EXPECT_EQ(active_int8_kernel(), cpu_has_vnni() ? Int8Kernel::Vnni : Int8Kernel::Avx2);
  }
}
