// Channels-last pooling and layout conversions (simd/nhwc.h) against scalar references written
// here: kernels 1x1 to 7x7 (square and not), strides 1 to 3, asymmetric pads, windows entirely
// in the padding, extra output rows and columns past the padded input (ceil_mode), channel
// counts around the vector widths, batch 1 and 2, empty dims; max bit for bit (NaN payloads
// included: the last NaN of a window wins), averages both ways of counting within a tolerance;
// the same bits at every thread count. Every ISA level.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <tbb/global_control.h>

#include "simd/nhwc.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

// ---- references ----

void ref_max_pool(const Pool2d& p, const float* x, float* y) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow)
        for (std::int64_t c = 0; c < p.C; ++c) {
          float acc = -INFINITY;
          for (std::int64_t kh = 0; kh < p.KH; ++kh)
            for (std::int64_t kw = 0; kw < p.KW; ++kw) {
              const std::int64_t ih = oh * p.SH - p.pad_top + kh, iw = ow * p.SW - p.pad_left + kw;
              if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
              const float v = x[((n * p.H + ih) * p.W + iw) * p.C + c];
              if (v > acc || v != v) acc = v;
            }
          y[((n * p.OH + oh) * p.OW + ow) * p.C + c] = acc;
        }
}

// The mean in double, and sum |x| / count (the tolerance's scale).
void ref_avg_pool(const Pool2d& p, const float* x, bool include_pad, float* y, float* scale) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow)
        for (std::int64_t c = 0; c < p.C; ++c) {
          double s = 0, a = 0;
          std::int64_t valid = 0, padded = 0;
          for (std::int64_t kh = 0; kh < p.KH; ++kh)
            for (std::int64_t kw = 0; kw < p.KW; ++kw) {
              const std::int64_t ih = oh * p.SH - p.pad_top + kh, iw = ow * p.SW - p.pad_left + kw;
              if (ih < p.H + p.pad_bottom && iw < p.W + p.pad_right) ++padded;  // ih, iw >= -pad always
              if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
              const float v = x[((n * p.H + ih) * p.W + iw) * p.C + c];
              s += v, a += std::fabs(v), ++valid;
            }
          const double cnt = static_cast<double>(std::max<std::int64_t>(include_pad ? padded : valid, 1));
          const std::int64_t o = ((n * p.OH + oh) * p.OW + ow) * p.C + c;
          y[o] = static_cast<float>(s / cnt);
          scale[o] = static_cast<float>(a / cnt);
        }
}

// ---- helpers ----

// Quiet NaNs with distinct payloads, so that "which NaN" shows in the bits.
float nan_with(unsigned payload) {
  std::uint32_t bits = 0x7fc00000u | (payload & 0x3fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Random values with signed zeros; with nan_every, NaNs about that far apart (sparse ones leave
// some input rows NaN-free: the max kernels take a faster path on those).
std::vector<float> data(std::size_t n, unsigned seed, std::size_t nan_every = 0) {
  std::vector<float> v = random_floats(n, seed, -2.f, 2.f);
  for (std::size_t i = seed % 5; i < n; i += 11) v[i] = i % 2 ? 0.f : -0.f;
  if (nan_every != 0)
    for (std::size_t i = seed % 7; i < n; i += nan_every + seed % 5) v[i] = nan_with(static_cast<unsigned>(i) + 1);
  return v;
}

std::int64_t out_dim(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p0, std::int64_t p1,
                     std::int64_t extra) {
  const std::int64_t span = in + p0 + p1 - k;
  return span < 0 ? 0 : span / s + 1 + extra;
}

Pool2d make_pool(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t kh, std::int64_t kw,
                 std::int64_t sh, std::int64_t sw, std::int64_t pt, std::int64_t pl, std::int64_t pb, std::int64_t pr,
                 std::int64_t extra = 0) {
  Pool2d p;
  p.N = n, p.C = c, p.H = h, p.W = w, p.KH = kh, p.KW = kw, p.SH = sh, p.SW = sw;
  p.pad_top = pt, p.pad_left = pl, p.pad_bottom = pb, p.pad_right = pr;
  p.OH = out_dim(h, kh, sh, pt, pb, extra), p.OW = out_dim(w, kw, sw, pl, pr, extra);
  return p;
}

std::string describe(const Pool2d& p) {
  auto s = [](std::int64_t v) { return std::to_string(v); };
  return "N" + s(p.N) + " C" + s(p.C) + " in " + s(p.H) + "x" + s(p.W) + " out " + s(p.OH) + "x" + s(p.OW) + " k " +
         s(p.KH) + "x" + s(p.KW) + " s " + s(p.SH) + "," + s(p.SW) + " pads " + s(p.pad_top) + "," + s(p.pad_left) +
         "," + s(p.pad_bottom) + "," + s(p.pad_right);
}

std::size_t in_size(const Pool2d& p) { return static_cast<std::size_t>(p.N * p.H * p.W * p.C); }
std::size_t out_size(const Pool2d& p) { return static_cast<std::size_t>(p.N * p.OH * p.OW * p.C); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_max(const Pool2d& p, unsigned seed) {
  for (std::size_t nan_every : {0, 23, 400}) {
    const std::vector<float> x = data(in_size(p), seed, nan_every);
    std::vector<float> got(out_size(p), 99.f), want(out_size(p));
    max_pool_nhwc(p, x.data(), got.data());
    ref_max_pool(p, x.data(), want.data());
    if (!same_bits(got, want)) {
      const std::string what = "max " + describe(p) + " NaN every " + std::to_string(nan_every);
      expect_close(got, want, std::vector<float>(want.size(), 0.f), what);
      ADD_FAILURE() << what << ": bits differ (signed zeros, NaN payloads?)";
    }
  }
}

void check_avg(const Pool2d& p, bool include_pad, unsigned seed) {
  const std::vector<float> x = data(in_size(p), seed);
  std::vector<float> got(out_size(p), 99.f), want(out_size(p)), tol(out_size(p));
  avg_pool_nhwc(p, x.data(), got.data(), include_pad);
  ref_avg_pool(p, x.data(), include_pad, want.data(), tol.data());
  for (float& t : tol) t = 1e-6f + 4e-6f * t;
  expect_close(got, want, tol, std::string("avg") + (include_pad ? " include_pad " : " ") + describe(p));
}

void check_all(const Pool2d& p, unsigned seed) {
  check_max(p, seed);
  check_avg(p, false, seed + 1);
  check_avg(p, true, seed + 2);
}

class PoolNhwc : public SimdTest {};
ONNXFORGE_SIMD_ALL_ISAS(PoolNhwc);

const std::int64_t kChannels[] = {1, 3, 15, 16, 17, 64, 100};

TEST_P(PoolNhwc, ResNetMaxPool) {
  check_all(make_pool(1, 64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1), 1);
  check_all(make_pool(2, 64, 23, 17, 3, 3, 2, 2, 1, 1, 1, 1), 2);
}

TEST_P(PoolNhwc, SquareKernelsStridesChannels) {
  unsigned seed = 10;
  for (std::int64_t k = 1; k <= 7; ++k)
    for (std::int64_t s = 1; s <= 3; ++s)
      for (std::int64_t c : kChannels) {
        const std::int64_t h = k / 2;
        check_all(make_pool(1 + seed % 2, c, 9 + k % 3, 13 - k % 2, k, k, s, s, h, h, h, h), seed);
        seed += 3;
      }
}

TEST_P(PoolNhwc, RectangularKernelsAsymmetricPads) {
  unsigned seed = 1000;
  const std::int64_t kernels[][2] = {{1, 7}, {7, 1}, {2, 3}, {3, 2}, {5, 3}, {4, 6}, {6, 4}, {2, 2}};
  for (const auto& k : kernels)
    for (std::int64_t sh = 1; sh <= 3; ++sh)
      for (std::int64_t c : {3, 17, 64}) {
        const std::int64_t sw = 4 - sh;
        // pads 0..k-1, different on each side
        const std::int64_t pt = (k[0] - 1) % 3, pb = k[0] - 1, pl = k[1] - 1, pr = (k[1] - 1) / 2;
        check_all(make_pool(1, c, 11, 10, k[0], k[1], sh, sw, pt, pl, pb, pr), seed);
        check_all(make_pool(2, c, 8, 15, k[0], k[1], sh, sw, pb, pr, pt, pl), seed + 10);
        seed += 20;
      }
}

TEST_P(PoolNhwc, WindowsInThePaddingAndCeilMode) {
  unsigned seed = 2000;
  for (std::int64_t c : kChannels) {
    // Pads wider than the kernel: whole windows (rows and columns) outside the input.
    check_all(make_pool(1, c, 5, 6, 2, 2, 1, 1, 3, 4, 2, 3), seed++);
    check_all(make_pool(2, c, 4, 3, 3, 2, 2, 3, 5, 2, 4, 6), seed++);
    // Extra output rows/columns (ceil_mode): the last windows run past the padded input.
    for (std::int64_t extra : {1, 2}) {
      check_all(make_pool(1, c, 9, 10, 3, 3, 2, 2, 1, 0, 0, 1, extra), seed++);
      check_all(make_pool(2, c, 7, 12, 2, 3, 3, 2, 0, 1, 1, 0, extra), seed++);
      check_all(make_pool(1, c, 6, 5, 1, 1, 2, 3, 0, 0, 0, 0, extra), seed++);
    }
  }
}

TEST_P(PoolNhwc, EmptyDims) {
  // No work: nothing is written (and nothing read).
  for (const Pool2d& p : {make_pool(0, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1), make_pool(1, 0, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1),
                          make_pool(1, 16, 2, 8, 3, 3, 1, 1, 0, 0, 0, 0)}) {
    std::vector<float> y(16, 7.f);
    max_pool_nhwc(p, nullptr, y.data());
    avg_pool_nhwc(p, nullptr, y.data(), true);
    EXPECT_EQ(y, std::vector<float>(16, 7.f)) << describe(p);
  }
  // An empty input with padding: every window is in the padding.
  for (std::int64_t c : {1, 17}) {
    check_all(make_pool(1, c, 0, 4, 2, 2, 1, 1, 1, 1, 1, 1), 3000);
    check_all(make_pool(2, c, 3, 0, 3, 1, 1, 1, 0, 0, 0, 2), 3001);
  }
}

// ---- global pools ----

void check_global(std::int64_t n, std::int64_t hw, std::int64_t c, unsigned seed) {
  const std::string what = "N" + std::to_string(n) + " HW" + std::to_string(hw) + " C" + std::to_string(c);
  const auto out = static_cast<std::size_t>(n * c);
  {
    const std::vector<float> x = data(static_cast<std::size_t>(n * hw * c), seed, seed % 2 ? 23 : 500);
    std::vector<float> got(out, 99.f), want(out);
    global_max_pool_nhwc(n, hw, c, x.data(), got.data());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        float acc = -INFINITY;
        for (std::int64_t r = 0; r < hw; ++r) {
          const float v = x[(i * hw + r) * c + j];
          if (v > acc || v != v) acc = v;
        }
        want[i * c + j] = acc;
      }
    if (!same_bits(got, want)) {
      expect_close(got, want, std::vector<float>(want.size(), 0.f), "global max " + what);
      ADD_FAILURE() << "global max " << what << ": bits differ";
    }
  }
  {
    const std::vector<float> x = data(static_cast<std::size_t>(n * hw * c), seed + 1);
    std::vector<float> got(out, 99.f), want(out), tol(out);
    global_avg_pool_nhwc(n, hw, c, x.data(), got.data());
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c; ++j) {
        double s = 0, a = 0;
        for (std::int64_t r = 0; r < hw; ++r) s += x[(i * hw + r) * c + j], a += std::fabs(x[(i * hw + r) * c + j]);
        want[i * c + j] = hw ? static_cast<float>(s / static_cast<double>(hw)) : NAN;
        tol[i * c + j] = 1e-6f + 4e-6f * static_cast<float>(hw ? a / static_cast<double>(hw) : 0.0);
      }
    expect_close(got, want, tol, "global avg " + what);
  }
}

TEST_P(PoolNhwc, GlobalPools) {
  unsigned seed = 4000;
  for (std::int64_t n : {1, 2})
    for (std::int64_t hw : {1, 7, 49, 513, 1100})
      for (std::int64_t c : {1, 3, 15, 16, 17, 64, 100, 300}) check_global(n, hw, c, seed += 2);
  check_global(1, 49, 2048, seed += 2);
  check_global(1, 0, 5, seed += 2);  // no pixels: max -inf, mean NaN
  std::vector<float> y(4, 7.f);
  global_max_pool_nhwc(0, 5, 4, nullptr, y.data());
  global_avg_pool_nhwc(2, 5, 0, nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(4, 7.f));
}

TEST_P(PoolNhwc, SameBitsAtEveryThreadCount) {
  const Pool2d p = make_pool(2, 64, 57, 43, 3, 3, 2, 2, 1, 1, 1, 1);
  const std::vector<float> x = data(in_size(p), 5000, 900), xa = data(in_size(p), 5001);
  const std::int64_t gn = 2, ghw = 700, gc = 600;
  const std::vector<float> gx = data(static_cast<std::size_t>(gn * ghw * gc), 5002), gxn = data(gx.size(), 5003, 5000);
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3, 4}) {
    tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    std::vector<std::vector<float>> got(5, std::vector<float>(out_size(p)));
    got[3].resize(static_cast<std::size_t>(gn * gc)), got[4].resize(static_cast<std::size_t>(gn * gc));
    max_pool_nhwc(p, x.data(), got[0].data());
    avg_pool_nhwc(p, xa.data(), got[1].data(), false);
    avg_pool_nhwc(p, xa.data(), got[2].data(), true);
    global_avg_pool_nhwc(gn, ghw, gc, gx.data(), got[3].data());
    global_max_pool_nhwc(gn, ghw, gc, gxn.data(), got[4].data());
    if (threads == 1) {
      first = got;
      continue;
    }
    for (std::size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(same_bits(first[k], got[k])) << "threads " << threads << " op " << k;
  }
}

// ---- layout conversions ----

TEST_P(PoolNhwc, LayoutConversions) {
  unsigned seed = 6000;
  for (std::int64_t n : {1, 2})
    for (std::int64_t c : {1, 3, 8, 16, 17, 64, 100})
      for (std::int64_t hw : {1, 5, 64, 100, 1001}) {
        const auto size = static_cast<std::size_t>(n * c * hw);
        const std::vector<float> x = random_floats(size, seed++);
        std::vector<float> nhwc(size, 99.f), back(size, 99.f), want(size);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < c; ++j)
            for (std::int64_t k = 0; k < hw; ++k) want[(i * hw + k) * c + j] = x[(i * c + j) * hw + k];
        nchw_to_nhwc(n, c, hw, x.data(), nhwc.data());
        EXPECT_EQ(nhwc, want) << "nchw_to_nhwc N" << n << " C" << c << " HW" << hw;
        nhwc_to_nchw(n, c, hw, nhwc.data(), back.data());
        EXPECT_EQ(back, x) << "nhwc_to_nchw N" << n << " C" << c << " HW" << hw;
      }
}

TEST_P(PoolNhwc, LayoutConversionsLargeAndThreads) {
  for (const auto& s : {std::vector<std::int64_t>{1, 64, 112 * 112}, std::vector<std::int64_t>{2, 35, 61 * 67},
                        std::vector<std::int64_t>{1, 3, 224 * 224}}) {
    const std::int64_t n = s[0], c = s[1], hw = s[2];
    const auto size = static_cast<std::size_t>(n * c * hw);
    const std::vector<float> x = random_floats(size, 7000);
    std::vector<float> want(size);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < c; ++j)
        for (std::int64_t k = 0; k < hw; ++k) want[(i * hw + k) * c + j] = x[(i * c + j) * hw + k];
    for (int threads : {1, 2, 4}) {
      tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      std::vector<float> nhwc(size, 99.f), back(size, 99.f);
      nchw_to_nhwc(n, c, hw, x.data(), nhwc.data());
      EXPECT_TRUE(same_bits(nhwc, want)) << "nchw_to_nhwc " << dims_str(s) << " threads " << threads;
      nhwc_to_nchw(n, c, hw, want.data(), back.data());
      EXPECT_TRUE(same_bits(back, x)) << "nhwc_to_nchw " << dims_str(s) << " threads " << threads;
    }
  }
  std::vector<float> y(3, 7.f);
  nchw_to_nhwc(0, 3, 4, nullptr, y.data());
  nhwc_to_nchw(1, 0, 4, nullptr, y.data());
  nchw_to_nhwc(1, 3, 0, nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(3, 7.f));
}

}  // namespace
}  // namespace onnxforge::simd::test
