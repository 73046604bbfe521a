// GEMM micro-kernels for one ISA level: an M x (NV vectors) tile of C held in registers,
// accumulated over kc steps of A (broadcast: from a packed panel, or in place from a row-major
// A in the "direct" variants) and B rows (vector loads, from packed panels or straight from a
// row-major B), then the epilogue (alpha, beta, bias, activation) applied before the single
// store. The wide variants cover several B panels at once for one or two rows of A.
#include "simd/kernels/isa_config.h"
#include "simd/kernels/gemm_direct.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

inline constexpr std::size_t kNr = kGemmNv * kW;
static_assert(kNr % 4 == 0, "the driver copies B panels in groups of 4 floats (pack_strided)");
// Wide kernels: 3 panels; for 1 and 2 rows where the registers allow (rows x 3 x NV
// accumulators plus 3 x NV B vectors).
inline constexpr int kWidePanels = 3;
inline constexpr int kWideRows = (2 + 1) * kWidePanels * kGemmNv <= (kIsa == Isa::Avx512 ? 32 : 16) ? 2 : 1;

// The general epilogue: alpha, beta, biases, activation, partial last vector. Its settings are
// read into locals first: the stores to C could alias `ep` as far as the compiler knows.
template <int M, int NV>
__attribute__((noinline)) void store_tile_general(const V (&acc)[M][NV], float* c, std::size_t ldc, std::size_t n,
                                                  const TileEpilogue& ep) {
  const bool full = n == NV * kW;
  const std::size_t last = n - (NV - 1) * kW;  // columns in the last vector
  const float alpha_s = ep.alpha, beta_s = ep.beta;
  const float* const bias_row = ep.bias_row;
  const float* const bias_col = ep.bias_col;
  const Unary* const act = ep.act;
  const V alpha(alpha_s), beta(beta_s);
  const bool fused_act = in_register_act(act);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const bool whole = full || j < NV - 1;
      V r = acc[i][j];
      if (alpha_s != 1.f) r *= alpha;
      if (beta_s != 0.f) {
        const V old = whole ? V::load_unaligned(row + j * kW) : load_partial(row + j * kW, last);
        r = beta_s == 1.f ? r + old : vfma(beta, old, r);
      }
      if (bias_row != nullptr) r += V(bias_row[i]);
      if (bias_col != nullptr)
        r += whole ? V::load_unaligned(bias_col + j * kW) : load_partial(bias_col + j * kW, last);
      if (fused_act) r = register_act(r, act);
      if (whole) {
        r.store_unaligned(row + j * kW);
      } else {
        store_partial(r, row + j * kW, last);
      }
    }
  }
  if (!fused_act)
    for (int i = 0; i < M; ++i) apply_unary_span(*act, c + i * ldc, c + i * ldc, n);
}

// Stores the tile: inline for the common cases of the K blocks before the last one (C = acc or
// C += acc over full vectors), with the same arithmetic as the general path.
template <int M, int NV>
inline __attribute__((always_inline)) void store_tile(const V (&acc)[M][NV], float* c, std::size_t ldc,
                                                      std::size_t n, const TileEpilogue& ep) {
  const float beta = ep.beta;
  const bool relu = ep.act != nullptr && ep.act->op == UnaryOp::Relu;
  const bool plain = n == NV * kW && ep.alpha == 1.f &&
                     (ep.act == nullptr || ep.act->op == UnaryOp::Identity || relu) && (beta == 0.f || beta == 1.f);
  if (!plain) {
    store_tile_general<M, NV>(acc, c, ldc, n, ep);
    return;
  }
  const float* const bias_row = ep.bias_row;
  const float* const bias_col = ep.bias_col;
  if (bias_row != nullptr || bias_col != nullptr || relu) {
    // The last K block of a conv or a Gemm with bias: per-row or per-column bias and/or Relu,
    // same arithmetic as the general path.
    V col[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) col[j] = bias_col != nullptr ? V::load_unaligned(bias_col + j * kW) : V(0.f);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const V bias(bias_row != nullptr ? bias_row[i] : 0.f);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        float* p = c + i * ldc + j * kW;
        V r = acc[i][j];
        if (beta != 0.f) r = r + V::load_unaligned(p);
        if (bias_row != nullptr) r += bias;
        if (bias_col != nullptr) r += col[j];
        if (relu) r = xsimd::max(V(0.f), r);
        r.store_unaligned(p);
      }
    }
    return;
  }
  if (beta == 0.f) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j].store_unaligned(c + i * ldc + j * kW);
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* p = c + i * ldc + j * kW;
      (acc[i][j] + V::load_unaligned(p)).store_unaligned(p);
    }
}

// B rows this many k steps ahead are prefetched: packed panels (and in-place B rows) are
// streamed from L2/L3 once per tile row, faster than the hardware prefetcher ramps up.
inline constexpr std::size_t kPrefetchK = 16;
inline constexpr std::size_t kPrefetchC = 32;

// A from a packed panel (kDirect false: mr floats per k step) or in place from a row-major
// matrix (kDirect true: row i at a + i * lda). Same arithmetic, in the same order, either way.
// NV may exceed kGemmNv for the wide kernels: vector j then reads panel j / kGemmNv, found
// pstride floats after the previous one.
template <int M, int NV, bool kDirect>
inline __attribute__((always_inline)) void ukernel_body(std::size_t kc, const float* a, std::size_t lda,
                                                        const float* b, std::size_t ldb, std::size_t pstride,
                                                        float* c, std::size_t ldc, std::size_t n,
                                                        const TileEpilogue& ep) {
  V acc[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) acc[i][j] = V(0.f);
  const float* rows[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) rows[i] = kDirect ? a + i * lda : a + i;
  auto at = [&](int j) __attribute__((always_inline)) {
    return b + static_cast<std::size_t>(j / kGemmNv) * pstride + static_cast<std::size_t>(j % kGemmNv) * kW;
  };
  auto step = [&](std::size_t k) __attribute__((always_inline)) {
    V bv[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) bv[j] = V::load_unaligned(at(j));
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) __builtin_prefetch(at(j) + kPrefetchK * ldb, 0, 3);
    const std::size_t ak = kDirect ? k : k * kGemmMr;
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const V ai(rows[i][ak]);
#pragma GCC unroll 16
      for (int j = 0; j < NV; ++j) acc[i][j] = vfma(ai, bv[j], acc[i][j]);
    }
    b += ldb;
  };
  // C is touched only after the K loop: its lines are requested kPrefetchC steps before the
  // end (earlier, the B stream would evict them from L1 again before they are used).
  const std::size_t body = kc > kPrefetchC ? kc - kPrefetchC : 0;
  std::size_t k = 0;
#pragma GCC unroll 2
  for (; k < body; ++k) step(k);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < NV; ++j) __builtin_prefetch(c + i * ldc + j * kW, 1);
#pragma GCC unroll 2
  for (; k < kc; ++k) step(k);
  store_tile<M, NV>(acc, c, ldc, n, ep);
}

template <int M, int NV>
void ukernel(std::size_t kc, const float* a, const float* b, std::size_t ldb, float* c, std::size_t ldc,
             std::size_t n, const TileEpilogue& ep) {
  ukernel_body<M, NV, false>(kc, a, 0, b, ldb, 0, c, ldc, n, ep);
}

template <int M, int NV>
void ukernel_direct(std::size_t kc, const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                    std::size_t ldc, std::size_t n, const TileEpilogue& ep) {
  ukernel_body<M, NV, true>(kc, a, lda, b, ldb, 0, c, ldc, n, ep);
}

// M rows x kWidePanels full panels at once, A in place: enough independent accumulators for
// the FMA latency when M is 1 or 2 (the regular M x 1-panel tile has only NV or 2 NV).
template <int M>
void ukernel_wide(std::size_t kc, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                  std::size_t pstride, float* c, std::size_t ldc, const TileEpilogue& ep) {
  ukernel_body<M, kGemmNv * kWidePanels, true>(kc, a, lda, b, ldb, pstride, c, ldc, kNr * kWidePanels, ep);
}

// Indirect A (GemmUKernelIndirect): per segment, the M row pointers are loaded once, then the
// same steps as ukernel_body over the segment's k range (B from a packed panel, nr floats per
// k step, prefetched kPrefetchK steps ahead; C prefetched kPrefetchC steps before the end).
// PNV: vectors per panel row (the panel's k stride).
template <int M, int NV, int PNV>
void ukernel_indirect(std::size_t segs, std::size_t len, const float* const* ptrs, std::size_t off, const float* b,
                      float* c, std::size_t ldc, std::size_t n, const TileEpilogue& ep) {
  V acc[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) acc[i][j] = V(0.f);
  const float* rows[M];
  auto step = [&](std::size_t k) __attribute__((always_inline)) {
    V bv[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) bv[j] = V::load_unaligned(b + j * kW);
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) __builtin_prefetch(b + j * kW + kPrefetchK * PNV * kW, 0, 3);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const V ai(rows[i][k]);
#pragma GCC unroll 16
      for (int j = 0; j < NV; ++j) acc[i][j] = vfma(ai, bv[j], acc[i][j]);
    }
    b += PNV * kW;
  };
  // One loop nest (the sums stay in registers across the segments); C is prefetched
  // kPrefetchC steps before the end of the last segment.
  for (std::size_t s = 0; s < segs; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) rows[i] = ptrs[s * M + i] + off;
    const bool last = s + 1 == segs;
    const std::size_t mid = last && len > kPrefetchC ? len - kPrefetchC : len;
    std::size_t k = 0;
#pragma GCC unroll 2
    for (; k < mid; ++k) step(k);
    if (last)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < NV; ++j) __builtin_prefetch(c + i * ldc + j * kW, 1);
#pragma GCC unroll 2
    for (; k < len; ++k) step(k);
  }
  // A copy for the store: the general store takes the tile's address, which would keep `acc`
  // itself in memory across the segments (GCC promotes it to registers only per loop).
  V out[M][NV];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) out[i][j] = acc[i][j];
  store_tile<M, NV>(out, c, ldc, n, ep);
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

template <int M, int... NV>
void install_direct_row(GemmDirectKernels& g, std::integer_sequence<int, NV...>) {
  ((g.ukernel[M - 1][NV] = &ukernel_direct<M, NV + 1>), ...);
}

template <int... M>
GemmDirectKernels make_direct(std::integer_sequence<int, M...>) {
  GemmDirectKernels g;
  (install_direct_row<M + 1>(g, std::make_integer_sequence<int, kGemmNv>{}), ...);
  return g;
}

// The wide indirect panel (GemmIndirectKernels::panels[1]): 6 rows x 4 vectors on AVX-512
// (24 accumulators + 4 B vectors), none elsewhere.
inline constexpr int kWideNv = kIsa == Isa::Avx512 ? 4 : 0;
inline constexpr int kWideMr = kIsa == Isa::Avx512 ? 6 : 0;

template <int PNV, int M, int... NV>
void install_indirect_row(GemmIndirectKernels::Panel& g, std::integer_sequence<int, NV...>) {
  ((g.ukernel[M - 1][NV] = &ukernel_indirect<M, NV + 1, PNV>), ...);
}

template <int PNV, int... M>
GemmIndirectKernels::Panel make_indirect(std::integer_sequence<int, M...>) {
  GemmIndirectKernels::Panel g;
  g.nv = PNV;
  g.mr = static_cast<int>(sizeof...(M));
  (install_indirect_row<PNV, M + 1>(g, std::make_integer_sequence<int, PNV>{}), ...);
  return g;
}

}  // namespace

const GemmIndirectKernels& gemm_indirect_kernels() noexcept {
  static const GemmIndirectKernels table = [] {
    GemmIndirectKernels g;
    g.panels[0] = make_indirect<kGemmNv>(std::make_integer_sequence<int, kGemmMr>{});
    if constexpr (kWideNv > 0) g.panels[1] = make_indirect<kWideNv>(std::make_integer_sequence<int, kWideMr>{});
    return g;
  }();
  return table;
}

const GemmDirectKernels& gemm_direct_kernels() noexcept {
  static const GemmDirectKernels table = [] {
    GemmDirectKernels g = make_direct(std::make_integer_sequence<int, kGemmMr>{});
    g.wide_panels = kWidePanels;
    g.wide[0] = &ukernel_wide<1>;
    if constexpr (kWideRows >= 2) g.wide[1] = &ukernel_wide<2>;
    return g;
  }();
  return table;
}

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
