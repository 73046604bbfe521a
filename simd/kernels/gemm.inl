// GEMM micro-kernels for one ISA level: an M x (NV vectors) tile of C held in registers,
// accumulated over kc steps of packed A (broadcast) and B rows (vector loads, from packed
// panels or straight from a row-major B), then the epilogue (alpha, beta, bias, activation)
// applied before the single store.
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

inline constexpr std::size_t kNr = kGemmNv * kW;

template <int M, int NV>
void store_tile(V (&acc)[M][NV], float* c, std::size_t ldc, std::size_t n, const TileEpilogue& ep) {
  const bool full = n == NV * kW;
  const std::size_t last = n - (NV - 1) * kW;  // columns in the last vector
  const V alpha(ep.alpha), beta(ep.beta);
  const bool fused_act = in_register_act(ep.act);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const bool whole = full || j < NV - 1;
      V r = acc[i][j];
      if (ep.alpha != 1.f) r *= alpha;
      if (ep.beta != 0.f) {
        const V old = whole ? V::load_unaligned(row + j * kW) : load_partial(row + j * kW, last);
        r = ep.beta == 1.f ? r + old : vfma(beta, old, r);
      }
      if (ep.bias_row != nullptr) r += V(ep.bias_row[i]);
      if (ep.bias_col != nullptr)
        r += whole ? V::load_unaligned(ep.bias_col + j * kW) : load_partial(ep.bias_col + j * kW, last);
      if (fused_act) r = register_act(r, ep.act);
      if (whole) {
        r.store_unaligned(row + j * kW);
      } else {
        store_partial(r, row + j * kW, last);
      }
    }
  }
  if (!fused_act)
    for (int i = 0; i < M; ++i) apply_unary_span(*ep.act, c + i * ldc, c + i * ldc, n);
}

template <int M, int NV>
void ukernel(std::size_t kc, const float* a, const float* b, std::size_t ldb, float* c, std::size_t ldc,
             std::size_t n, const TileEpilogue& ep) {
  V acc[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = V(0.f);
  // C is touched only after the K loop: bring its lines in on the way.
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < NV; ++j) __builtin_prefetch(c + i * ldc + j * kW, 1);

#pragma GCC unroll 2
  for (std::size_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = V::load_unaligned(b + j * kW);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const V ai(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = vfma(ai, bv[j], acc[i][j]);
    }
    a += kGemmMr;
    b += ldb;
  }
  store_tile<M, NV>(acc, c, ldc, n, ep);
}

// ---- packing: dst[k * width + i] = src[i * ld + k] (rows of a row-major matrix become the
// k-major panel layout), zero for rows <= i < width. Used for A and for transposed B. ----

#if defined(ONNXFORGE_SIMD_ISA_AVX2) || defined(ONNXFORGE_SIMD_ISA_AVX512)
// Eight rows, eight k steps: a classic 8x8 transpose in ymm registers.
inline void transpose8x8(const float* src, std::size_t ld, float* dst, std::size_t dst_stride) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + j * dst_stride, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * dst_stride, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
  }
}
#endif

void pack_kmajor(const float* src, std::size_t ld, std::size_t rows, std::size_t width, std::size_t kc, float* dst) {
  std::size_t i0 = 0;
#if defined(ONNXFORGE_SIMD_ISA_AVX2) || defined(ONNXFORGE_SIMD_ISA_AVX512)
  for (; i0 + 8 <= rows; i0 += 8) {
    std::size_t k = 0;
    for (; k + 8 <= kc; k += 8) transpose8x8(src + i0 * ld + k, ld, dst + k * width + i0, width);
    for (; k < kc; ++k)
      for (std::size_t i = i0; i < i0 + 8; ++i) dst[k * width + i] = src[i * ld + k];
  }
#endif
  for (std::size_t k = 0; k < kc; ++k) {
    for (std::size_t i = i0; i < rows; ++i) dst[k * width + i] = src[i * ld + k];
    for (std::size_t i = rows; i < width; ++i) dst[k * width + i] = 0.f;
  }
}

template <int M, int... NV>
void install_row(GemmKernels& g, std::integer_sequence<int, NV...>) {
  ((g.ukernel[M - 1][NV] = &ukernel<M, NV + 1>), ...);
}

template <int... M>
void install_all(GemmKernels& g, std::integer_sequence<int, M...>) {
  (install_row<M + 1>(g, std::make_integer_sequence<int, kGemmNv>{}), ...);
}

}  // namespace

void install_gemm(KernelTable& t) {
  t.isa = kIsa;
  t.vec = static_cast<int>(kW);
  t.gemm.mr = kGemmMr;
  t.gemm.nr = static_cast<int>(kNr);
  t.gemm.kc = kGemmKc;
  t.gemm.pack_kmajor = &pack_kmajor;
  install_all(t.gemm, std::make_integer_sequence<int, kGemmMr>{});
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
