// Integer GEMM (simd/int8_gemm.h): packing, the three micro-kernels and the threaded driver.
// The AVX2 and VNNI kernels carry target attributes instead of going through the per-ISA kernel
// families (simd/kernels/*.inl): VNNI is not part of the avx512 family's flags, and these are the
// only functions here that use the wider instructions; they run only after the CPU check.
#include "simd/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <type_traits>
#include <vector>

#include "simd/detail/int8_store.h"
#include "simd/detail/scratch.h"
#include "simd/parallel.h"

namespace onnxforge::simd {

struct Int8Access {
  static const std::uint8_t* panels(const PackedB8& b) { return b.data_.get(); }
  static const std::int32_t* colsum(const PackedB8& b) {
    return reinterpret_cast<const std::int32_t*>(b.data_.get() + panel_bytes(b));
  }
  static const std::int32_t* zbp(const PackedB8& b) { return colsum(b) + b.n_pad_; }
  static std::size_t panel_bytes(const PackedB8& b) { return b.n_pad_ * b.kg_ * 4; }
  static std::size_t kg(const PackedB8& b) { return b.kg_; }
  static std::size_t nr(const PackedB8& b) { return b.nr_; }
  static bool zb_zero(const PackedB8& b) { return b.zb_zero_; }
  // PackedW8: panels, then rowsum(W') and zw' (m_pad each).
  static const std::uint8_t* panels(const PackedW8& w) { return w.data_.get(); }
  static std::size_t panel_bytes(const PackedW8& w) { return w.m_pad_ * w.kg_ * 4; }
  static const std::int32_t* rowsum(const PackedW8& w) {
    return reinterpret_cast<const std::int32_t*>(w.data_.get() + panel_bytes(w));
  }
  static const std::int32_t* zwp(const PackedW8& w) { return rowsum(w) + w.m_pad_; }
  static std::size_t kg(const PackedW8& w) { return w.kg_; }
  static bool zw_zero(const PackedW8& w) { return w.zw_zero_; }
};

// ---- quantization of float input (header) ---------------------------------------------------

namespace {

template <class Q>
constexpr float q_lo() {
  return static_cast<float>(std::numeric_limits<Q>::min());
}
template <class Q>
constexpr float q_hi() {
  return static_cast<float>(std::numeric_limits<Q>::max());
}

// Four at a time with SSE4.1 (the x86-64-v2 base): roundps to nearest even, clamp, pack. The
// scalar form compiled to branches: 15 ns per element, 6 ms for one BERT-base activation
// [128, 3072] (measured), against memory speed.
template <class Q>
void quantize_span_sse(const float* x, Q* y, std::size_t n, float scale, float zp) {
  const __m128 s = _mm_set1_ps(scale), z = _mm_set1_ps(zp), lo = _mm_set1_ps(q_lo<Q>()), hi = _mm_set1_ps(q_hi<Q>());
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 v = _mm_round_ps(_mm_div_ps(_mm_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm_min_ps(_mm_max_ps(_mm_add_ps(v, z), lo), hi);
    __m128i q = _mm_cvtps_epi32(v);
    q = _mm_packs_epi32(q, q);
    q = std::is_signed_v<Q> ? _mm_packs_epi16(q, q) : _mm_packus_epi16(q, q);
    const std::int32_t w = _mm_cvtsi128_si32(q);
    std::memcpy(y + i, &w, 4);
  }
  for (; i < n; ++i) y[i] = saturate_round<Q>(x[i] / scale, zp);
}

// quantize_span's steps after the division, on 8 and 16 lanes of x / scale: round to nearest
// even, + zero, clamp in the SSE form's operand order, convert (exact) and narrow to bytes.
__attribute__((target("avx2"))) inline __m128i quantize8_bytes(__m256 d, __m256 z, __m256 lo, __m256 hi,
                                                               bool is_signed) {
  __m256 v = _mm256_round_ps(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, z), lo), hi);
  const __m256i q = _mm256_cvtps_epi32(v);
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  return is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
}
__attribute__((target("avx512f,avx512bw"))) inline __m128i quantize16_bytes(__m512 d, __m512 z, __m512 lo, __m512 hi,
                                                                            bool is_signed) {
  // The masked forms with every lane set: the unmasked ones pass an undefined source that GCC 12
  // reports as maybe-uninitialized outside an AVX-512 translation unit.
  constexpr __mmask16 all = 0xFFFF;
  __m512 v = _mm512_mask_roundscale_ps(d, all, d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm512_add_ps(v, z);
  v = _mm512_mask_max_ps(v, all, v, lo);
  v = _mm512_mask_min_ps(v, all, v, hi);
  const __m512i q = _mm512_mask_cvtps_epi32(_mm512_setzero_si512(), all, v);
  return is_signed ? _mm512_mask_cvtsepi32_epi8(_mm_setzero_si128(), all, q)
                   : _mm512_mask_cvtusepi32_epi8(_mm_setzero_si128(), all, q);
}

// The same steps 8 and 16 wide (the division is what bounds it: DynamicQuantizeLinear of one
// ISNet activation, 64x256x256, took 11.8 ms on the SSE form). Each lane computes exactly what
// the SSE form computes (IEEE division, round to nearest even, clamp in the same operand order,
// exact conversion of the clamped integer), so the ISA level never changes a byte.
template <class Q>
__attribute__((target("avx2"))) void quantize_span_avx2(const float* x, Q* y, std::size_t n, float scale, float zp) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), lo = _mm256_set1_ps(q_lo<Q>()),
               hi = _mm256_set1_ps(q_hi<Q>());
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i),
                     quantize8_bytes(_mm256_div_ps(_mm256_loadu_ps(x + i), s), z, lo, hi, std::is_signed_v<Q>));
  quantize_span_sse(x + i, y + i, n - i, scale, zp);
}

template <class Q>
__attribute__((target("avx512f,avx512bw"))) void quantize_span_avx512(const float* x, Q* y, std::size_t n, float scale,
                                                                      float zp) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp), lo = _mm512_set1_ps(q_lo<Q>()),
               hi = _mm512_set1_ps(q_hi<Q>());
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     quantize16_bytes(_mm512_div_ps(_mm512_loadu_ps(x + i), s), z, lo, hi, std::is_signed_v<Q>));
  quantize_span_sse(x + i, y + i, n - i, scale, zp);
}

template <class Q>
void quantize_any(const float* x, Q* y, std::size_t n, float scale, float zp) {
  switch (active_isa_level()) {
    case Isa::Avx512: return quantize_span_avx512(x, y, n, scale, zp);
    case Isa::Avx2: return quantize_span_avx2(x, y, n, scale, zp);
    case Isa::Sse: break;
  }
  quantize_span_sse(x, y, n, scale, zp);
}

}  // namespace

void quantize_span(const float* x, std::uint8_t* y, std::size_t n, float scale, float zero) {
  quantize_any(x, y, n, scale, zero);
}
void quantize_span(const float* x, std::int8_t* y, std::size_t n, float scale, float zero) {
  quantize_any(x, y, n, scale, zero);
}
namespace {

// The scalar twin (and every level's tail): the float steps of DequantizeLinear, the op and
// saturate_round, one element at a time.
void qlinear_binary_scalar(const QLinearBinary& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                           std::size_t n) {
  auto value = [](std::uint8_t v, bool is_signed) {
    return is_signed ? static_cast<std::int32_t>(static_cast<std::int8_t>(v)) : static_cast<std::int32_t>(v);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(value(a[i], p.a_signed) - p.za) * p.sa;
    const float fb = static_cast<float>(value(b[i], p.b_signed) - p.zb) * p.sb;
    const float v = (p.mul ? fa * fb : fa + fb) / p.sy;
    y[i] = p.y_signed ? static_cast<std::uint8_t>(saturate_round<std::int8_t>(v, p.zy))
                      : saturate_round<std::uint8_t>(v, p.zy);
  }
}

// 16 lanes: widened, the zero point subtracted as int32, converted, multiplied; the op; then
// quantize_span_avx512's steps. A block at a time through float buffers (dequantize, add,
// quantize: three passes) took 9.5% of ResNet QOperator at 1 thread (perf; its four residual adds).
__attribute__((target("avx512f,avx512bw"))) void qlinear_binary_avx512(const QLinearBinary& p, const std::uint8_t* a,
                                                                       const std::uint8_t* b, std::uint8_t* y,
                                                                       std::size_t n) {
  constexpr __mmask16 all = 0xFFFF;
  const __m512i za = _mm512_set1_epi32(p.za), zb = _mm512_set1_epi32(p.zb);
  const __m512 sa = _mm512_set1_ps(p.sa), sb = _mm512_set1_ps(p.sb), sy = _mm512_set1_ps(p.sy),
               zy = _mm512_set1_ps(p.zy), lo = _mm512_set1_ps(p.y_signed ? -128.f : 0.f),
               hi = _mm512_set1_ps(p.y_signed ? 127.f : 255.f);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // (Not a lambda: a lambda does not take the function's target.)
    const __m128i a8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)),
                  b8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    const __m512i ai = p.a_signed ? _mm512_maskz_cvtepi8_epi32(all, a8) : _mm512_maskz_cvtepu8_epi32(all, a8),
                  bi = p.b_signed ? _mm512_maskz_cvtepi8_epi32(all, b8) : _mm512_maskz_cvtepu8_epi32(all, b8);
    const __m512 fa = _mm512_mul_ps(_mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), all, _mm512_sub_epi32(ai, za)), sa);
    const __m512 fb = _mm512_mul_ps(_mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), all, _mm512_sub_epi32(bi, zb)), sb);
    const __m512 d = _mm512_div_ps(p.mul ? _mm512_mul_ps(fa, fb) : _mm512_add_ps(fa, fb), sy);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), quantize16_bytes(d, zy, lo, hi, p.y_signed));
  }
  qlinear_binary_scalar(p, a + i, b + i, y + i, n - i);
}

// 8 lanes, the same steps as quantize_span_avx2.
__attribute__((target("avx2"))) void qlinear_binary_avx2(const QLinearBinary& p, const std::uint8_t* a,
                                                         const std::uint8_t* b, std::uint8_t* y, std::size_t n) {
  const __m256i za = _mm256_set1_epi32(p.za), zb = _mm256_set1_epi32(p.zb);
  const __m256 sa = _mm256_set1_ps(p.sa), sb = _mm256_set1_ps(p.sb), sy = _mm256_set1_ps(p.sy),
               zy = _mm256_set1_ps(p.zy), lo = _mm256_set1_ps(p.y_signed ? -128.f : 0.f),
               hi = _mm256_set1_ps(p.y_signed ? 127.f : 255.f);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i a8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i)),
                  b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i));
    const __m256i ai = p.a_signed ? _mm256_cvtepi8_epi32(a8) : _mm256_cvtepu8_epi32(a8),
                  bi = p.b_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8);
    const __m256 fa = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ai, za)), sa);
    const __m256 fb = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(bi, zb)), sb);
    const __m256 d = _mm256_div_ps(p.mul ? _mm256_mul_ps(fa, fb) : _mm256_add_ps(fa, fb), sy);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), quantize8_bytes(d, zy, lo, hi, p.y_signed));
  }
  qlinear_binary_scalar(p, a + i, b + i, y + i, n - i);
}

}  // namespace

void qlinear_binary_span(const QLinearBinary& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                         std::size_t n) {
  switch (active_isa_level()) {
    case Isa::Avx512: return qlinear_binary_avx512(p, a, b, y, n);
    case Isa::Avx2: return qlinear_binary_avx2(p, a, b, y, n);
    case Isa::Sse: break;
  }
  qlinear_binary_scalar(p, a, b, y, n);
}

void dynamic_quantize_span(const float* x, std::uint8_t* y, std::size_t n, float scale, std::uint8_t zero) {
  if (scale == 0)
    std::memset(y, zero, n);
  else
    quantize_any(x, y, n, scale, static_cast<float>(zero));
}

namespace {

struct Geometry {
  std::size_t group;  // K steps per 4-byte cell: 4 (bytes) or 2 (int16 pairs)
  std::size_t mr, nr;
};

Geometry geometry(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Vnni: return {4, 8, 32};
    case Int8Kernel::Avx2: return {2, 6, 16};
    case Int8Kernel::Scalar: break;
  }
  return {4, 4, 16};
}

// B' values: the signed view of B (header comment).
inline int b_value(const void* B, std::size_t i, bool b_signed) {
  return b_signed ? static_cast<const std::int8_t*>(B)[i] : static_cast<const std::uint8_t*>(B)[i] - 128;
}

// Stores one 4-byte cell of K steps [k0, k0 + group) of a sequence v(k) (zero past K).
template <class V>
inline void store_cell(std::uint8_t* dst, std::size_t group, std::size_t k0, std::size_t K, V v) {
  if (group == 4) {
    for (std::size_t t = 0; t < 4; ++t) dst[t] = static_cast<std::uint8_t>(k0 + t < K ? v(k0 + t) : 0);
  } else {
    std::int16_t pair[2];
    for (std::size_t t = 0; t < 2; ++t) pair[t] = static_cast<std::int16_t>(k0 + t < K ? v(k0 + t) : 0);
    std::memcpy(dst, pair, 4);
  }
}

// Packs rows [m0, m0 + mr) of A (missing rows zero) into one panel; rowsum[i] = sum_k A'.
// Word-at-a-time copies and a separate (vectorized) row sum: with few output columns (a conv's
// 64 channels) packing A is a sizeable share of the work (3136 x 576 conv GEMM: 2.9 ms of
// element-wise packing against 3.8 ms of kernel).
void pack_a_panel(const Geometry& g, std::size_t kg, std::size_t K, const void* A, std::size_t lda, bool a_signed,
                  std::size_t m0, std::size_t M, std::uint8_t* dst, std::int32_t* rowsum) {
  const std::uint8_t flip = a_signed ? 0x80 : 0;
  for (std::size_t i = 0; i < g.mr; ++i) {
    const std::size_t m = m0 + i;
    std::uint8_t* out = dst + i * 4;
    const std::size_t step = g.mr * 4;
    if (m >= M) {
      for (std::size_t c = 0; c < kg; ++c) std::memset(out + c * step, 0, 4);
      rowsum[i] = 0;
      continue;
    }
    const auto* src = static_cast<const std::uint8_t*>(A) + m * lda;
    std::int32_t sum = 0;
    for (std::size_t k = 0; k < K; ++k) sum += static_cast<std::uint8_t>(src[k] ^ flip);
    rowsum[i] = sum;
    const std::size_t full = K / g.group;
    if (g.group == 4) {
      const std::uint32_t flip4 = flip * 0x01010101u;
      for (std::size_t c = 0; c < full; ++c) {
        std::uint32_t v;
        std::memcpy(&v, src + c * 4, 4);
        v ^= flip4;
        std::memcpy(out + c * step, &v, 4);
      }
    } else {
      for (std::size_t c = 0; c < full; ++c) {
        const std::uint32_t v =
            static_cast<std::uint32_t>(src[2 * c] ^ flip) | (static_cast<std::uint32_t>(src[2 * c + 1] ^ flip) << 16);
        std::memcpy(out + c * step, &v, 4);
      }
    }
    for (std::size_t c = full; c < kg; ++c)
      store_cell(out + c * step, g.group, c * g.group, K, [&](std::size_t k) { return src[k] ^ flip; });
  }
}

struct Tile {
  std::size_t kg;
  const std::uint8_t* a;  // packed A panel
  const std::uint8_t* b;  // packed B panel
  std::int32_t* c;        // tile's first element
  std::size_t ldc, rows, cols;
  // C = acc + colterm[j] + rowterm[i] - colfac[j] * rowfac[i] (modulo 2^32), the zero-point
  // terms. gemm8: colterm = K * za' * zb' - za' * colsum(B'), colfac = zb', rowfac = rowsum(A'),
  // no rowterm. conv8 (weights broadcast): rowterm = K * zx' * zw' - zx' * rowsum(W'),
  // colfac = colsum(X'), rowfac = zw', colterm = 0.
  const std::int32_t* colterm;  // tile's first column
  const std::int32_t* colfac;   // tile's first column, or nullptr when the product term is 0
  const std::int32_t* rowfac;   // tile's first row
  const std::int32_t* rowterm;  // tile's first row, or nullptr (0)
  // conv8 on VNNI: when set, row i is converted and stored from the registers to out's channel
  // m0 + i, segment by segment (c is not written).
  const Conv8Output* out;
  std::size_t m0;
  const struct Seg* segs;
  std::size_t nseg;
  // gemm8_requantize on VNNI: when set, row i is requantized from the registers into rq's row
  // m0 + i, columns n0 onwards (c is not written).
  const Gemm8Requant* rq;
  std::size_t n0;
};

// A run of a conv8 tile's columns that lands contiguously in the output: columns [j, j + n) at
// output position `at` onwards; lanes: bit c set for the columns of the run.
struct Seg {
  std::size_t j, n, at;
  std::uint32_t lanes;
};

// kSwap: the broadcast (A) operand is the signed one and the vector (B) operand the unsigned
// one (conv8: weights broadcast, patches as vectors); gemm8 has them the other way round.
template <bool kSwap>
void ukernel_scalar(const Tile& t) {
  constexpr std::size_t MR = 4, NR = 16;
  std::int32_t acc[MR][NR] = {};
  auto mul = [](std::uint8_t a, std::uint8_t b) {
    return kSwap ? static_cast<std::int8_t>(a) * b : a * static_cast<std::int8_t>(b);
  };
  for (std::size_t c = 0; c < t.kg; ++c)
    for (std::size_t i = 0; i < MR; ++i) {
      const std::uint8_t* a = t.a + (c * MR + i) * 4;
      for (std::size_t j = 0; j < NR; ++j) {
        const std::uint8_t* b = t.b + (c * NR + j) * 4;
        acc[i][j] += mul(a[0], b[0]) + mul(a[1], b[1]) + mul(a[2], b[2]) + mul(a[3], b[3]);
      }
    }
  for (std::size_t i = 0; i < t.rows; ++i)
    for (std::size_t j = 0; j < t.cols; ++j) {
      std::uint32_t v = static_cast<std::uint32_t>(acc[i][j]) + static_cast<std::uint32_t>(t.colterm[j]);
      if (t.rowterm) v += static_cast<std::uint32_t>(t.rowterm[i]);
      if (t.colfac) v -= static_cast<std::uint32_t>(t.colfac[j]) * static_cast<std::uint32_t>(t.rowfac[i]);
      t.c[i * t.ldc + j] = static_cast<std::int32_t>(v);
    }
}

// The accumulators are named variables, not an array: GCC 12 kept an array of vectors in
// registers only by copying it between two register sets (and the stack) on every K step, which
// halved the kernel's rate (measured in the disassembly: 30 moves per 16 vpdpbusd).
#define ONNXFORGE_I8_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define ONNXFORGE_I8_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// R: the tile's rows that are computed (t.rows <= R; the panel still holds MR rows): a GEMM of
// few rows (QLinearConv's small maps as patches x W^T: ResNet's 3x3 outputs, 9 rows) multiplies
// only those, where the full tile did 16 rows for 9.
template <std::size_t R>
__attribute__((target("avx2"))) void ukernel_avx2(const Tile& t) {
#define DECL(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = _mm256_setzero_si256();
  ONNXFORGE_I8_ROWS6(DECL)
#undef DECL
  const std::uint8_t* a = t.a;
  const std::uint8_t* b = t.b;
  for (std::size_t c = 0; c < t.kg; ++c, a += 24, b += 64) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
#define STEP(i)                                                     \
  if constexpr ((i) < R) {                                          \
    std::int32_t cell;                                              \
    std::memcpy(&cell, a + (i)*4, 4);                               \
    const __m256i av = _mm256_set1_epi32(cell);                     \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(av, b0)); \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(av, b1)); \
  }
    ONNXFORGE_I8_ROWS6(STEP)
#undef STEP
  }
  const __m256i ct0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colterm));
  const __m256i ct1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colterm + 8));
  __m256i zb0 = _mm256_setzero_si256(), zb1 = zb0;
  if (t.colfac) {
    zb0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colfac));
    zb1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colfac + 8));
  }
  const __m256i acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < std::min(R, t.rows); ++i) {
    const __m256i rs = _mm256_set1_epi32(t.colfac ? t.rowfac[i] : 0);
    const __m256i rt = _mm256_set1_epi32(t.rowterm ? t.rowterm[i] : 0);
    __m256i v0 = _mm256_sub_epi32(_mm256_add_epi32(_mm256_add_epi32(acc[i][0], ct0), rt), _mm256_mullo_epi32(zb0, rs));
    __m256i v1 = _mm256_sub_epi32(_mm256_add_epi32(_mm256_add_epi32(acc[i][1], ct1), rt), _mm256_mullo_epi32(zb1, rs));
    std::int32_t* c = t.c + i * t.ldc;
    if (t.cols == 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), v0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), v1);
    } else {
      alignas(32) std::int32_t tmp[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), v0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), v1);
      std::memcpy(c, tmp, t.cols * 4);
    }
  }
}

// The 32 sums of output channel m (columns in v0 lanes 0-15, v1 lanes 16-31) to the output with
// its epilogue (Conv8Output), each segment by masked stores whose lane c lands at at + c - j:
// the masked-off lanes are never accessed. Per lane the same IEEE steps in the same order as
// store_row's SSE, so the bytes do not depend on the kernel.
__attribute__((target("avx512f,avx512bw"))) inline void store_segments(const Conv8Output& o, std::size_t m,
                                                                       const Seg* segs, std::size_t nseg, __m512i v0,
                                                                       __m512i v1) {
  // Element address of column c of segment s, as an integer (before the row's start for the
  // masked-off lanes of a segment that starts mid-tile).
  auto base = [&](const Seg& sg, std::size_t elem) {
    return static_cast<std::uintptr_t>(m * o.ld + sg.at) * elem - sg.j * elem;
  };
  if (o.i32) {
    const auto row = reinterpret_cast<std::uintptr_t>(o.i32);
    for (std::size_t s = 0; s < nseg; ++s) {
      const auto p = reinterpret_cast<std::int32_t*>(row + base(segs[s], 4));
      _mm512_mask_storeu_epi32(p, static_cast<__mmask16>(segs[s].lanes), v0);
      _mm512_mask_storeu_epi32(p + 16, static_cast<__mmask16>(segs[s].lanes >> 16), v1);
    }
    return;
  }
  const __m512 mu = _mm512_set1_ps(o.mult[o.mult_count > 1 ? m : 0]);
  if (o.q8) {
    const __m512 z = _mm512_set1_ps(o.q8_zero), lo = _mm512_set1_ps(o.q8_signed ? -128.f : 0.f),
                 hi = _mm512_set1_ps(o.q8_signed ? 127.f : 255.f);
    const __m512i b = _mm512_set1_epi32(o.acc_bias ? o.acc_bias[m] : 0);
    const __m512i q0 = detail::requant16(v0, b, mu, z, lo, hi), q1 = detail::requant16(v1, b, mu, z, lo, hi);
    const auto row = reinterpret_cast<std::uintptr_t>(o.q8);
    for (std::size_t s = 0; s < nseg; ++s) {
      auto* p = reinterpret_cast<void*>(row + base(segs[s], 1));
      auto* p16 = reinterpret_cast<void*>(row + base(segs[s], 1) + 16);
      const auto k0 = static_cast<__mmask16>(segs[s].lanes), k1 = static_cast<__mmask16>(segs[s].lanes >> 16);
      if (o.q8_signed) {
        _mm512_mask_cvtsepi32_storeu_epi8(p, k0, q0);
        _mm512_mask_cvtsepi32_storeu_epi8(p16, k1, q1);
      } else {
        _mm512_mask_cvtusepi32_storeu_epi8(p, k0, q0);
        _mm512_mask_cvtusepi32_storeu_epi8(p16, k1, q1);
      }
    }
    return;
  }
  const bool relu = o.act.op == UnaryOp::Relu, clip = o.act.op == UnaryOp::Clip;
  const __m512 bias = _mm512_set1_ps(o.bias ? o.bias[o.bias_count > 1 ? m : 0] : 0.f),
               lo = _mm512_set1_ps(relu ? 0.f : o.act.alpha), hi = _mm512_set1_ps(o.act.beta);
  const __m512 f0 = detail::dequant16(v0, mu, o.bias != nullptr, bias, relu || clip, lo, clip, hi);
  const __m512 f1 = detail::dequant16(v1, mu, o.bias != nullptr, bias, relu || clip, lo, clip, hi);
  const auto row = reinterpret_cast<std::uintptr_t>(o.f32);
  for (std::size_t s = 0; s < nseg; ++s) {
    const auto p = reinterpret_cast<float*>(row + base(segs[s], 4));
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>(segs[s].lanes), f0);
    _mm512_mask_storeu_ps(p + 16, static_cast<__mmask16>(segs[s].lanes >> 16), f1);
  }
}

template <bool kSwap, std::size_t R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void ukernel_vnni(const Tile& t) {
#define DECL(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = _mm512_setzero_si512();
  ONNXFORGE_I8_ROWS8(DECL)
#undef DECL
  const std::uint8_t* a = t.a;
  const std::uint8_t* b = t.b;
  for (std::size_t c = 0; c < t.kg; ++c, a += 32, b += 128) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = _mm512_loadu_si512(b + 64);
#define STEP(i)                                       \
  if constexpr ((i) < R) {                            \
    std::int32_t cell;                                \
    std::memcpy(&cell, a + (i)*4, 4);                 \
    const __m512i av = _mm512_set1_epi32(cell);       \
    if constexpr (kSwap) {                            \
      c##i##0 = _mm512_dpbusd_epi32(c##i##0, b0, av); \
      c##i##1 = _mm512_dpbusd_epi32(c##i##1, b1, av); \
    } else {                                          \
      c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0); \
      c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1); \
    }                                                 \
  }
    ONNXFORGE_I8_ROWS8(STEP)
#undef STEP
  }
  const __m512i ct0 = _mm512_loadu_si512(t.colterm);
  const __m512i ct1 = _mm512_loadu_si512(t.colterm + 16);
  __m512i zb0 = _mm512_setzero_si512(), zb1 = zb0;
  if (t.colfac) {
    zb0 = _mm512_loadu_si512(t.colfac);
    zb1 = _mm512_loadu_si512(t.colfac + 16);
  }
  const __mmask16 m0 = static_cast<__mmask16>(t.cols >= 16 ? 0xFFFF : (1u << t.cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(t.cols >= 32 ? 0xFFFF : t.cols <= 16 ? 0 : (1u << (t.cols - 16)) - 1);
  const __m512i acc[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                             {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  // gemm8_requantize: the columns' multipliers and int32 biases (lanes past the tile zero), with
  // the steps and operand order of requantize_row's SSE, so the bytes do not depend on the kernel.
  // Through the int32 tile and four lanes at a time, the store took a quarter of ResNet's
  // 512 -> 1024 strided 1x1 QLinearConv on 6x6 outputs (perf).
  const Gemm8Requant* rq = kSwap ? nullptr : t.rq;
  __m512 qmu0 = _mm512_setzero_ps(), qmu1 = qmu0, qz = qmu0, qlo = qmu0, qhi = qmu0;
  __m512i qb0 = _mm512_setzero_si512(), qb1 = qb0;
  if (rq) {
    if (rq->mult_count > 1) {
      qmu0 = _mm512_maskz_loadu_ps(m0, rq->mult + t.n0);
      qmu1 = _mm512_maskz_loadu_ps(m1, rq->mult + t.n0 + 16);
    } else {
      qmu0 = qmu1 = _mm512_set1_ps(rq->mult[0]);
    }
    if (rq->acc_bias) {
      qb0 = _mm512_maskz_loadu_epi32(m0, rq->acc_bias + t.n0);
      qb1 = _mm512_maskz_loadu_epi32(m1, rq->acc_bias + t.n0 + 16);
    }
    qz = _mm512_set1_ps(rq->zero);
    qlo = _mm512_set1_ps(rq->y_signed ? -128.f : 0.f);
    qhi = _mm512_set1_ps(rq->y_signed ? 127.f : 255.f);
  }
  for (std::size_t i = 0; i < std::min(R, t.rows); ++i) {
    const __m512i rs = _mm512_set1_epi32(t.colfac ? t.rowfac[i] : 0);
    const __m512i rt = _mm512_set1_epi32(t.rowterm ? t.rowterm[i] : 0);
    __m512i v0 = _mm512_sub_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[i][0], ct0), rt), _mm512_mullo_epi32(zb0, rs));
    __m512i v1 = _mm512_sub_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[i][1], ct1), rt), _mm512_mullo_epi32(zb1, rs));
    if (t.out) {
      store_segments(*t.out, t.m0 + i, t.segs, t.nseg, v0, v1);
      continue;
    }
    if (rq) {
      const __m512i q0 = detail::requant16(v0, qb0, qmu0, qz, qlo, qhi),
                    q1 = detail::requant16(v1, qb1, qmu1, qz, qlo, qhi);
      const auto at = reinterpret_cast<std::uintptr_t>(rq->y) + (t.m0 + i) * rq->ldy + t.n0;
      if (rq->y_signed) {
        _mm512_mask_cvtsepi32_storeu_epi8(reinterpret_cast<void*>(at), m0, q0);
        _mm512_mask_cvtsepi32_storeu_epi8(reinterpret_cast<void*>(at + 16), m1, q1);
      } else {
        _mm512_mask_cvtusepi32_storeu_epi8(reinterpret_cast<void*>(at), m0, q0);
        _mm512_mask_cvtusepi32_storeu_epi8(reinterpret_cast<void*>(at + 16), m1, q1);
      }
      continue;
    }
    std::int32_t* c = t.c + i * t.ldc;
    _mm512_mask_storeu_epi32(c, m0, v0);
    _mm512_mask_storeu_epi32(c + 16, m1, v1);
  }
}
#undef ONNXFORGE_I8_ROWS6
#undef ONNXFORGE_I8_ROWS8

using UKernel = void (*)(const Tile&);
// The kernel for a tile of `rows` rows (1 to MR). swap: conv8's operand roles (ukernel_scalar).
// The AVX2 kernel's vpmaddwd is symmetric: the packers widen each side with its own signedness.
UKernel ukernel(Int8Kernel k, bool swap, std::size_t rows) {
  static constexpr UKernel vnni[2][8] = {
      {ukernel_vnni<false, 1>, ukernel_vnni<false, 2>, ukernel_vnni<false, 3>, ukernel_vnni<false, 4>,
       ukernel_vnni<false, 5>, ukernel_vnni<false, 6>, ukernel_vnni<false, 7>, ukernel_vnni<false, 8>},
      {ukernel_vnni<true, 1>, ukernel_vnni<true, 2>, ukernel_vnni<true, 3>, ukernel_vnni<true, 4>,
       ukernel_vnni<true, 5>, ukernel_vnni<true, 6>, ukernel_vnni<true, 7>, ukernel_vnni<true, 8>}};
  static constexpr UKernel avx2[6] = {ukernel_avx2<1>, ukernel_avx2<2>, ukernel_avx2<3>,
                                      ukernel_avx2<4>, ukernel_avx2<5>, ukernel_avx2<6>};
  switch (k) {
    case Int8Kernel::Vnni: return vnni[swap][std::clamp<std::size_t>(rows, 1, 8) - 1];
    case Int8Kernel::Avx2: return avx2[std::clamp<std::size_t>(rows, 1, 6) - 1];
    case Int8Kernel::Scalar: break;
  }
  return swap ? ukernel_scalar<true> : ukernel_scalar<false>;
}

std::shared_ptr<std::uint8_t[]> aligned_bytes(std::size_t n) {
  auto* p = static_cast<std::uint8_t*>(::operator new(n, std::align_val_t(64)));
  return {p, [](std::uint8_t* q) { ::operator delete(q, std::align_val_t(64)); }};
}

// The kernels' signed operand (B' = the signed view: int8 as is, uint8 - 128): lines i in
// [0, n_pad) (each an output column of gemm8's B, or an output channel of conv8's W; missing
// lines zero) into panels of `width` lines, cells of `group` k, element (i, k) at src[i * line_step + k * k_step].
// sums[i] = sum_k B'(i, k), zp[i] = the line's zero point, offset to B' (0 past n).
void pack_signed_panels(std::size_t width, std::size_t group, std::size_t kg, std::size_t K, std::size_t n,
                        std::size_t n_pad, const void* src, bool is_signed, std::size_t line_step, std::size_t k_step,
                        const std::int32_t* z, std::size_t z_count, std::uint8_t* dst, std::int32_t* sums,
                        std::int32_t* zp) {
  parallel_chunks(n_pad / width, 1, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t i = p0 * width; i < p1 * width; ++i) {
      const std::size_t panel = i / width, j = i % width;
      std::int32_t sum = 0;
      auto v = [&](std::size_t k) {
        const int x = i < n ? b_value(src, i * line_step + k * k_step, is_signed) : 0;
        sum += x;
        return x;
      };
      for (std::size_t c = 0; c < kg; ++c) store_cell(dst + ((panel * kg + c) * width + j) * 4, group, c * group, K, v);
      sums[i] = sum;
      zp[i] = i < n ? (z && z_count ? z[z_count > 1 ? i : 0] : 0) - (is_signed ? 0 : 128) : 0;
    }
  });
}

}  // namespace

bool cpu_has_vnni() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

Int8Kernel active_int8_kernel() noexcept {
  const Isa isa = active_isa_level();
  if (isa == Isa::Avx512 && cpu_has_vnni()) return Int8Kernel::Vnni;
  if (isa >= Isa::Avx2) return Int8Kernel::Avx2;
  return Int8Kernel::Scalar;
}

const char* int8_kernel_name(Int8Kernel k) noexcept {
  switch (k) {
    case Int8Kernel::Vnni: return "avx512-vnni";
    case Int8Kernel::Avx2: return "avx2-vpmaddwd";
    case Int8Kernel::Scalar: break;
  }
  return "scalar";
}

PackedB8 pack_b8(bool trans_b, std::size_t K, std::size_t N, const void* B, std::size_t ldb, bool b_signed,
                 const std::int32_t* zb, std::size_t zb_count) {
  PackedB8 p;
  p.kernel_ = active_int8_kernel();
  const Geometry g = geometry(p.kernel_);
  p.k_ = K, p.n_ = N, p.nr_ = g.nr;
  p.kg_ = (K + g.group - 1) / g.group;
  p.n_pad_ = (N + g.nr - 1) / g.nr * g.nr;
  const std::size_t panel_bytes = p.n_pad_ * p.kg_ * 4;
  p.bytes_ = panel_bytes + 2 * p.n_pad_ * 4;
  p.data_ = aligned_bytes(std::max<std::size_t>(p.bytes_, 64));
  auto* colsum = reinterpret_cast<std::int32_t*>(p.data_.get() + panel_bytes);
  pack_signed_panels(g.nr, g.group, p.kg_, K, N, p.n_pad_, B, b_signed, trans_b ? ldb : 1, trans_b ? 1 : ldb, zb,
                     zb_count, p.data_.get(), colsum, colsum + p.n_pad_);
  const std::int32_t* zbp = colsum + p.n_pad_;
  p.zb_zero_ = std::all_of(zbp, zbp + p.n_pad_, [](std::int32_t z) { return z == 0; });
  return p;
}

namespace {

// One row of an int32 tile requantized into y (Gemm8Requant): float(acc) * mult[j], rounded half
// to even (roundps), + zero, clamped as QuantizeLinear clamps (max then min, NaN to the bottom),
// packed with saturation (exact: the value is already in range). SSE: the tile is in L1, and
// the four-lane steps are the ones store_row's requantization takes per channel.
// bias: nullptr, or n int32 values added to the sums first (wrapping, as paddd does).
template <class Q>
void requantize_row(const std::int32_t* src, Q* dst, std::size_t n, const float* mult, bool per_col, float zero,
                    const std::int32_t* bias) {
  const __m128 z = _mm_set1_ps(zero), lo = _mm_set1_ps(q_lo<Q>()), hi = _mm_set1_ps(q_hi<Q>());
  const __m128 mu1 = _mm_set1_ps(mult[0]);
  for (std::size_t j = 0; j < n; j += 4) {
    // The tail through zero-filled copies: four lanes computed, n - j stored.
    alignas(16) std::int32_t tail[4] = {}, tail_b[4] = {};
    alignas(16) float tail_mu[4] = {};
    const std::int32_t* s4 = src + j;
    const std::int32_t* b4 = bias ? bias + j : nullptr;
    const float* m4 = per_col ? mult + j : nullptr;
    if (j + 4 > n) {
      s4 = static_cast<const std::int32_t*>(std::memcpy(tail, src + j, (n - j) * 4));
      if (per_col) m4 = static_cast<const float*>(std::memcpy(tail_mu, mult + j, (n - j) * 4));
      if (bias) b4 = static_cast<const std::int32_t*>(std::memcpy(tail_b, bias + j, (n - j) * 4));
    }
    const __m128 mu = per_col ? _mm_loadu_ps(m4) : mu1;
    __m128i acc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s4));
    if (b4) acc = _mm_add_epi32(acc, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b4)));
    const std::int32_t w = detail::requant4_bytes(acc, mu, z, lo, hi, std::is_signed_v<Q>);
    std::memcpy(dst + j, &w, std::min<std::size_t>(4, n - j));
  }
}

}  // namespace

namespace {

// The kernels over packed A (m_panels panels, rowsum per row) and packed B; with rq, each tile
// goes through an int32 tile on the stack and is requantized into rq->y instead of C.
void run_tiles(std::size_t M, const std::uint8_t* a_pack, const std::int32_t* rowsum, std::int32_t* colterm,
               std::uint32_t zap, const PackedB8& B, std::int32_t* C, std::size_t ldc, bool par,
               const Gemm8Requant* rq = nullptr) {
  const std::size_t N = B.n(), K = B.k();
  const Geometry g = geometry(B.kernel());
  const std::size_t kg = Int8Access::kg(B), nr = Int8Access::nr(B);
  const std::size_t n_panels = (N + nr - 1) / nr, m_panels = (M + g.mr - 1) / g.mr;
  const std::size_t a_panel_bytes = kg * g.mr * 4;
  const std::size_t n_pad = n_panels * nr;
  const std::int32_t* colsum = Int8Access::colsum(B);
  const std::int32_t* zbp = Int8Access::zbp(B);
  for (std::size_t n = 0; n < n_pad; ++n)
    colterm[n] = static_cast<std::int32_t>(static_cast<std::uint32_t>(K) * zap * static_cast<std::uint32_t>(zbp[n]) -
                                           zap * static_cast<std::uint32_t>(colsum[n]));
  const std::uint8_t* b_pack = Int8Access::panels(B);
  const bool zb_zero = Int8Access::zb_zero(B);
  const bool vnni = B.kernel() == Int8Kernel::Vnni;  // requantizes from the registers
  // Items: one N panel x a block of M panels; the block keeps a B panel in L1/L2 over its rows.
  const std::size_t m_block = std::max<std::size_t>(1, std::min<std::size_t>(m_panels, 16));
  const std::size_t m_blocks = (m_panels + m_block - 1) / m_block;
  auto run = [&](std::size_t i0, std::size_t i1) {
    alignas(64) std::int32_t tile[8 * 32];  // rq: the largest tile (VNNI's 8 x 32)
    for (std::size_t item = i0; item < i1; ++item) {
      const std::size_t np = item % n_panels, mb = item / n_panels;
      const std::size_t n0 = np * nr;
      for (std::size_t mp = mb * m_block, me = std::min(m_panels, mp + m_block); mp < me; ++mp) {
        const std::size_t m0 = mp * g.mr, rows = std::min(g.mr, M - m0), cols = std::min(nr, N - n0);
        Tile t{kg,
               a_pack + mp * a_panel_bytes,
               b_pack + np * kg * nr * 4,
               rq ? tile : C + m0 * ldc + n0,
               rq ? nr : ldc,
               rows,
               cols,
               colterm + n0,
               zb_zero ? nullptr : zbp + n0,
               rowsum + m0,
               nullptr,
               nullptr,
               m0,
               nullptr,
               0,
               vnni ? rq : nullptr,
               n0};
        ukernel(B.kernel(), false, rows)(t);
        if (!rq || vnni) continue;
        const bool per_col = rq->mult_count > 1;
        const float* mu = rq->mult + (per_col ? n0 : 0);
        const std::int32_t* bias = rq->acc_bias ? rq->acc_bias + n0 : nullptr;
        for (std::size_t i = 0; i < rows; ++i) {
          const std::size_t at = (m0 + i) * rq->ldy + n0;
          if (rq->y_signed)
            requantize_row(tile + i * nr, static_cast<std::int8_t*>(rq->y) + at, cols, mu, per_col, rq->zero, bias);
          else
            requantize_row(tile + i * nr, static_cast<std::uint8_t*>(rq->y) + at, cols, mu, per_col, rq->zero, bias);
        }
      }
    }
  };
  if (par)
    parallel_chunks(n_panels * m_blocks, 1, run);
  else
    run(0, n_panels * m_blocks);
}

}  // namespace

namespace {

// The scratch of one gemm8 call: the packed A
// panels, their row sums (m_panels * mr) and the column terms (n_pad), in one per-thread block.
struct AWorkspace {
  AWorkspace(std::size_t M, const PackedB8& B)
      : g(geometry(B.kernel())),
        kg(Int8Access::kg(B)),
        m_panels((M + g.mr - 1) / g.mr),
        panel_bytes(kg * g.mr * 4),
        n_pad((B.n() + Int8Access::nr(B) - 1) / Int8Access::nr(B) * Int8Access::nr(B)),
        scratch((m_panels * panel_bytes + (m_panels * g.mr + n_pad) * 4) / 4 + 16),
        a_pack(reinterpret_cast<std::uint8_t*>(scratch.data())),
        rowsum(reinterpret_cast<std::int32_t*>(a_pack + m_panels * panel_bytes)),
        colterm(rowsum + m_panels * g.mr) {}
  std::uint8_t* panel(std::size_t p) const { return a_pack + p * panel_bytes; }
  const Geometry g;
  const std::size_t kg, m_panels, panel_bytes, n_pad;
  detail::Scratch scratch;
  std::uint8_t* const a_pack;
  std::int32_t* const rowsum;
  std::int32_t* const colterm;
};

// za' (header comment), as the kernels' unsigned arithmetic wants it.
std::uint32_t offset_zero_point(std::int32_t z, bool is_signed) {
  return static_cast<std::uint32_t>(z + (is_signed ? 128 : 0));
}

// A float A quantized while packed (gemm8_quantizing): the source and its parameters.
struct FloatA {
  const float* a;
  float scale;
  std::uint8_t zero;
};

// gemm8's body: A (8-bit, or float quantized per panel when fa is set) packed, then the tiles
// into C or requantized into rq.
void gemm8_body(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const FloatA* fa,
                const PackedB8& B, std::int32_t* C, std::size_t ldc, bool parallel, const Gemm8Requant* rq) {
  const std::size_t N = B.n(), K = B.k();
  if (M == 0 || N == 0) return;
  AWorkspace ws(M, B);
  const bool par = parallel && M * N * K >= (1u << 18) && max_threads() > 1;
  auto pack = [&](std::size_t p0, std::size_t p1) {
    // fa: each panel's rows quantized into an L1 buffer, then packed from it (the bytes
    // DynamicQuantizeLinear would have written, never in memory as a tensor).
    std::vector<std::uint8_t> rows_q(fa ? ws.g.mr * K : 0);
    for (std::size_t p = p0; p < p1; ++p) {
      const std::size_t m0 = p * ws.g.mr;
      if (!fa) {
        pack_a_panel(ws.g, ws.kg, K, A, lda, a_signed, m0, M, ws.panel(p), ws.rowsum + m0);
        continue;
      }
      const std::size_t rows = std::min(ws.g.mr, M - m0);
      for (std::size_t i = 0; i < rows; ++i)
        dynamic_quantize_span(fa->a + (m0 + i) * lda, rows_q.data() + i * K, K, fa->scale, fa->zero);
      pack_a_panel(ws.g, ws.kg, K, rows_q.data(), K, false, 0, rows, ws.panel(p), ws.rowsum + m0);
    }
  };
  // A few panels (QLinearConv's small maps as a GEMM: 36 positions, 5 panels) are packed by the
  // caller: a region of its own costs a hand-off for a split of 4 and 1 panels.
  if (par && ws.m_panels >= 16)
    parallel_chunks(ws.m_panels, 4, pack);
  else
    pack(0, ws.m_panels);
  run_tiles(M, ws.a_pack, ws.rowsum, ws.colterm, offset_zero_point(za, a_signed), B, C, ldc, par, rq);
}

}  // namespace

void gemm8(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const PackedB8& B,
           std::int32_t* C, std::size_t ldc, bool parallel) {
  gemm8_body(M, A, lda, a_signed, za, nullptr, B, C, ldc, parallel, nullptr);
}

void gemm8_quantizing(std::size_t M, const float* A, std::size_t lda, float scale, std::uint8_t zero, const PackedB8& B,
                      std::int32_t* C, std::size_t ldc, bool parallel) {
  const FloatA fa{A, scale, zero};
  gemm8_body(M, nullptr, lda, false, zero, &fa, B, C, ldc, parallel, nullptr);
}

void gemm8_requantize(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const PackedB8& B,
                      const Gemm8Requant& out, bool parallel) {
  gemm8_body(M, A, lda, a_signed, za, nullptr, B, nullptr, 0, parallel, &out);
}

// ---- conv8 ---------------------------------------------------------------------------------

PackedW8 pack_w8(std::size_t M, std::size_t K, const void* W, std::size_t ldw, bool w_signed, const std::int32_t* zw,
                 std::size_t zw_count) {
  PackedW8 p;
  p.kernel_ = active_int8_kernel();
  const Geometry g = geometry(p.kernel_);
  p.m_ = M, p.k_ = K, p.mr_ = g.mr;
  p.kg_ = (K + g.group - 1) / g.group;
  p.m_pad_ = (M + g.mr - 1) / g.mr * g.mr;
  const std::size_t panel_bytes = p.m_pad_ * p.kg_ * 4;
  p.data_ = aligned_bytes(std::max<std::size_t>(panel_bytes + 2 * p.m_pad_ * 4, 64));
  auto* rowsum = reinterpret_cast<std::int32_t*>(p.data_.get() + panel_bytes);
  pack_signed_panels(g.mr, g.group, p.kg_, K, M, p.m_pad_, W, w_signed, ldw, 1, zw, zw_count, p.data_.get(), rowsum,
                     rowsum + p.m_pad_);
  const std::int32_t* zwp = rowsum + p.m_pad_;
  p.zw_zero_ = std::all_of(zwp, zwp + p.m_pad_, [](std::int32_t z) { return z == 0; });
  return p;
}

namespace {

// One panel of conv8's patches: positions [q0, q0 + valid) (the rest zero), cells of `group` k
// per position, NR positions per cell row; colsum[j] = sum_k X'. Element by element: the partial
// panels, the K tail and the scalar level.
void pack_x_generic(const Geometry& g, std::size_t kg, std::size_t K, std::size_t c0, const std::uint8_t* x,
                    const std::size_t* off, std::uint8_t flip, std::size_t q0, std::size_t valid, std::uint8_t* dst,
                    std::int32_t* colsum) {
  for (std::size_t j = 0; j < g.nr; ++j) {
    std::int32_t sum = 0;
    auto v = [&](std::size_t k) {
      const int b = j < valid ? (x[off[k] + q0 + j] ^ flip) : 0;
      sum += b;
      return b;
    };
    for (std::size_t c = c0; c < kg; ++c) store_cell(dst + (c * g.nr + j) * 4, g.group, c * g.group, K, v);
    colsum[j] += sum;
  }
}

// A VNNI panel (32 positions, the first `valid` of them read, the rest zero): per 4 k, four
// 32-byte rows (masked loads: nothing past the last position is read) interleaved into 128 bytes
// of cells (byte then word unpacks, which work per 128-bit lane, then lane permutes), the column
// sums by vpdpbusd against ones (exact: u8 x 1 into int32). Packing a plane's last, partial panel
// element by element took 14% of ResNet's 128 -> 128 3x3 stride-2 conv on 24x24 (perf).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) std::size_t pack_x_vnni(
    std::size_t K, const std::uint8_t* x, const std::size_t* off, std::uint8_t flip, std::size_t q0, std::size_t valid,
    std::uint8_t* dst, std::int32_t* colsum) {
  const auto lanes = static_cast<__mmask32>(valid >= 32 ? ~0u : (1u << valid) - 1);
  const __m256i fl = _mm256_maskz_set1_epi8(lanes, static_cast<char>(flip)), ones = _mm256_set1_epi8(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  const std::size_t full = K / 4;
  for (std::size_t c = 0; c < full; ++c, dst += 128) {
    const std::size_t* o = off + 4 * c;
    const __m256i r0 = _mm256_xor_si256(_mm256_maskz_loadu_epi8(lanes, x + o[0] + q0), fl);
    const __m256i r1 = _mm256_xor_si256(_mm256_maskz_loadu_epi8(lanes, x + o[1] + q0), fl);
    const __m256i r2 = _mm256_xor_si256(_mm256_maskz_loadu_epi8(lanes, x + o[2] + q0), fl);
    const __m256i r3 = _mm256_xor_si256(_mm256_maskz_loadu_epi8(lanes, x + o[3] + q0), fl);
    const __m256i lo01 = _mm256_unpacklo_epi8(r0, r1), hi01 = _mm256_unpackhi_epi8(r0, r1);
    const __m256i lo23 = _mm256_unpacklo_epi8(r2, r3), hi23 = _mm256_unpackhi_epi8(r2, r3);
    // Positions per lane: a = [0-3 | 16-19], b = [4-7 | 20-23], cc = [8-11 | 24-27], d = [12-15 | 28-31].
    const __m256i a = _mm256_unpacklo_epi16(lo01, lo23), b = _mm256_unpackhi_epi16(lo01, lo23);
    const __m256i cc = _mm256_unpacklo_epi16(hi01, hi23), d = _mm256_unpackhi_epi16(hi01, hi23);
    const __m256i p0 = _mm256_permute2x128_si256(a, b, 0x20), p1 = _mm256_permute2x128_si256(cc, d, 0x20);
    const __m256i p2 = _mm256_permute2x128_si256(a, b, 0x31), p3 = _mm256_permute2x128_si256(cc, d, 0x31);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), p0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32), p1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64), p2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 96), p3);
    s0 = _mm256_dpbusd_epi32(s0, p0, ones), s1 = _mm256_dpbusd_epi32(s1, p1, ones);
    s2 = _mm256_dpbusd_epi32(s2, p2, ones), s3 = _mm256_dpbusd_epi32(s3, p3, ones);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum), s0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 8), s1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 16), s2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 24), s3);
  return full;
}

// A full AVX2 panel (16 positions): per 2 k, two 16-byte rows widened to int16 and interleaved
// into 64 bytes of int16 pairs; column sums by vpmaddwd against ones.
__attribute__((target("avx2"))) std::size_t pack_x_avx2(std::size_t K, const std::uint8_t* x, const std::size_t* off,
                                                        std::uint8_t flip, std::size_t q0, std::uint8_t* dst,
                                                        std::int32_t* colsum) {
  const __m128i fl = _mm_set1_epi8(static_cast<char>(flip));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = s0;
  const std::size_t full = K / 2;
  for (std::size_t c = 0; c < full; ++c, dst += 64) {
    const std::size_t* o = off + 2 * c;
    const __m256i r0 =
        _mm256_cvtepu8_epi16(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + o[0] + q0)), fl));
    const __m256i r1 =
        _mm256_cvtepu8_epi16(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + o[1] + q0)), fl));
    // lo = [0-3 | 8-11], hi = [4-7 | 12-15].
    const __m256i lo = _mm256_unpacklo_epi16(r0, r1), hi = _mm256_unpackhi_epi16(r0, r1);
    const __m256i p0 = _mm256_permute2x128_si256(lo, hi, 0x20), p1 = _mm256_permute2x128_si256(lo, hi, 0x31);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), p0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32), p1);
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, ones)), s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, ones));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum), s0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(colsum + 8), s1);
  return full;
}

// One row segment of the int32 tile to the output (Conv8Output). The float steps are SSE with
// the products and sums as separate instructions (no FMA: the graph rounds twice), max/min in
// simd::unary's operand order so NaN and -0 come out as the standalone Relu/Clip gives them;
// requantization rounds with roundps (half to even) and clamps in QuantizeLinear's order.
void store_row(const Conv8Output& o, std::size_t m, const std::int32_t* src, std::size_t n, std::size_t at) {
  if (o.i32) {
    std::memcpy(o.i32 + m * o.ld + at, src, n * 4);
    return;
  }
  const __m128 vmu = _mm_set1_ps(o.mult[o.mult_count > 1 ? m : 0]);
  if (o.q8) {
    const __m128i vb = _mm_set1_epi32(o.acc_bias ? o.acc_bias[m] : 0);
    const __m128 z = _mm_set1_ps(o.q8_zero), lo = _mm_set1_ps(o.q8_signed ? -128.f : 0.f),
                 hi = _mm_set1_ps(o.q8_signed ? 127.f : 255.f);
    auto* dst = static_cast<std::uint8_t*>(o.q8) + m * o.ld + at;
    for (std::size_t j = 0; j < n; j += 4) {
      // The tail through a zero-filled copy: four lanes computed, n - j stored.
      alignas(16) std::int32_t tail[4] = {};
      const std::int32_t* s4 = src + j;
      if (j + 4 > n) s4 = static_cast<const std::int32_t*>(std::memcpy(tail, src + j, (n - j) * 4));
      const std::int32_t w = detail::requant4_bytes(
          _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s4)), vb), vmu, z, lo, hi, o.q8_signed);
      std::memcpy(dst + j, &w, std::min<std::size_t>(4, n - j));
    }
    return;
  }
  float* dst = o.f32 + m * o.ld + at;
  const bool has_bias = o.bias != nullptr;
  const float bv = has_bias ? o.bias[o.bias_count > 1 ? m : 0] : 0.f;
  const bool relu = o.act.op == UnaryOp::Relu, clip = o.act.op == UnaryOp::Clip;
  const float lo = relu ? 0.f : o.act.alpha, hi = o.act.beta;
  const __m128 vb = _mm_set1_ps(bv), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
  std::size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j))), vmu);
    if (has_bias) v = _mm_add_ps(v, vb);
    if (relu || clip) v = _mm_max_ps(vlo, v);
    if (clip) v = _mm_min_ps(vhi, v);
    _mm_storeu_ps(dst + j, v);
  }
  for (; j < n; ++j) {
    __m128 v = _mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), src[j]), vmu);
    if (has_bias) v = _mm_add_ss(v, vb);
    if (relu || clip) v = _mm_max_ss(vlo, v);
    if (clip) v = _mm_min_ss(vhi, v);
    dst[j] = _mm_cvtss_f32(v);
  }
}

}  // namespace

namespace {

// conv8's body.
void conv8_body(const Conv8Positions& pos, const std::uint8_t* x, const std::size_t* off, bool x_signed,
                std::int32_t zx, const PackedW8& w, const Conv8Output& out, bool parallel) {
  const std::size_t M = w.m(), K = w.k(), Q = pos.Q;
  if (Q == 0 || M == 0) return;
  const Geometry g = geometry(w.kernel());
  const std::size_t kg = Int8Access::kg(w);
  const std::size_t m_panels = (M + g.mr - 1) / g.mr, q_panels = (Q + g.nr - 1) / g.nr;
  const std::uint8_t flip = x_signed ? 0x80 : 0;
  const std::uint32_t zxp = offset_zero_point(zx, x_signed);
  // rowterm = K * zx' * zw' - zx' * rowsum(W'), per output channel.
  const std::int32_t* rowsum = Int8Access::rowsum(w);
  const std::int32_t* zwp = Int8Access::zwp(w);
  std::vector<std::int32_t> rowterm(m_panels * g.mr);
  for (std::size_t m = 0; m < rowterm.size(); ++m)
    rowterm[m] = static_cast<std::int32_t>(static_cast<std::uint32_t>(K) * zxp * static_cast<std::uint32_t>(zwp[m]) -
                                           zxp * static_cast<std::uint32_t>(rowsum[m]));
  const bool zw_zero = Int8Access::zw_zero(w);
  // One weight zero point for every channel (per-tensor): its term -zw' * colsum(X') is one value
  // per column, added as the tile's colterm, instead of a vpmulld per tile row (6% of a
  // 64 -> 256 1x1 conv, perf).
  const bool zw_uniform = !zw_zero && std::all_of(zwp, zwp + M, [&](std::int32_t z) { return z == zwp[0]; });
  const bool vnni = w.kernel() == Int8Kernel::Vnni;
  const std::uint8_t* w_pack = Int8Access::panels(w);
  const std::size_t w_panel_bytes = kg * g.mr * 4, x_panel_bytes = kg * g.nr * 4;
  alignas(64) static const std::int32_t kZeros[32] = {};
  // Blocks of patch panels: each weight panel (MR channels, in L1) runs over every panel of the
  // block (in L2) before the next, so each channel row of the output gets block * NR positions
  // written in one run. One panel at a time (every channel tile over it) scattered 128-byte
  // writes over all M channel planes at once (ResNet's 64 -> 256 1x1 at 0.68x the fp32 conv).
  // Blocks of 256 KiB and up to 64 panels (2048 positions) write each channel row in longer runs,
  // fewer pages at a time, than 96 KiB and 8 (that 1x1: 1.43-1.67x -> 1.73-1.89x the fp32 conv;
  // docs/benchmarks.md).
  const std::size_t block =
      std::clamp<std::size_t>((std::size_t{256} << 10) / std::max<std::size_t>(x_panel_bytes, 1), 1, 64);
  const std::size_t n_blocks = (q_panels + block - 1) / block;
  // Below 2^18 multiply-adds (gemm8's threshold) waking a helper costs more than it saves.
  const std::size_t threads = parallel && M * K * Q >= (1u << 18) ? static_cast<std::size_t>(max_threads()) : 1;
  // Few blocks (a small plane: ResNet's 24x24 at K = 576 has 1) leave threads idle or uneven, so
  // the channel panels are split too. Then every patch panel is packed once, by all threads, into
  // one shared buffer before any channel split runs (two regions): re-packing the block per
  // split made ResNet's 3x3 convs slower at 2 threads than at 1 (128 -> 128, stride 2, on 24x24:
  // 0.234 -> 0.492 ms; the packing is a sixth of the 1-thread time, and 8 splits did it 8 times).
  // (At most 16 blocks, 4 MiB of patches, however many threads.)
  const bool shared = threads > 1 && n_blocks < 4 * threads && n_blocks <= 16;
  const std::size_t m_splits = shared ? std::min(m_panels, (8 * threads + n_blocks - 1) / n_blocks) : 1;
  const std::size_t m_per_split = (m_panels + m_splits - 1) / m_splits;
  // The packed patch panels of `slots` panels: bytes, column sums, column terms, segments.
  struct Panels {
    Panels(std::size_t slots, std::size_t panel_bytes, std::size_t nr)
        : scratch((slots * (panel_bytes + 2 * nr * 4)) / 4 + 16),
          xp(reinterpret_cast<std::uint8_t*>(scratch.data())),
          colsum(reinterpret_cast<std::int32_t*>(xp + slots * panel_bytes)),
          colterm(colsum + slots * nr),
          segs(slots * nr),
          nseg(slots) {}
    detail::Scratch scratch;
    std::uint8_t* xp;
    std::int32_t* colsum;
    std::int32_t* colterm;  // zw_uniform: -zw' * colsum
    std::vector<Seg> segs;
    std::vector<std::size_t> nseg;
  };
  // Patch panel qp into slot u of pn.
  auto pack_panel = [&](std::size_t qp, Panels& pn, std::size_t u) {
    std::uint8_t* xp = pn.xp + u * x_panel_bytes;
    std::int32_t* colsum = pn.colsum + u * g.nr;
    const std::size_t q0 = qp * g.nr, valid = std::min(g.nr, Q - q0);
    std::fill_n(colsum, g.nr, 0);
    std::size_t c0 = 0;
    if (vnni)
      c0 = pack_x_vnni(K, x, off, flip, q0, valid, xp, colsum);
    else if (valid == g.nr && w.kernel() == Int8Kernel::Avx2)
      c0 = pack_x_avx2(K, x, off, flip, q0, xp, colsum);
    pack_x_generic(g, kg, K, c0, x, off, flip, q0, valid, xp, colsum);
    if (zw_uniform)
      for (std::size_t j = 0; j < g.nr; ++j)
        pn.colterm[u * g.nr + j] =
            static_cast<std::int32_t>(0u - static_cast<std::uint32_t>(zwp[0]) * static_cast<std::uint32_t>(colsum[j]));
    // The panel's runs of kept positions (Conv8Positions).
    Seg* sg = pn.segs.data() + u * g.nr;
    std::size_t ns = 0;
    for (std::size_t j = 0; j < valid;) {
      const std::size_t q = q0 + j, row = q / pos.row_len, col = q % pos.row_len;
      const std::size_t slice = row / pos.plane_rows, r = row % pos.plane_rows;
      if (r >= pos.out_h) {
        j += (pos.plane_rows - r) * pos.row_len - col;
        continue;
      }
      if (col >= pos.out_w) {
        j += pos.row_len - col;
        continue;
      }
      const std::size_t n = std::min(pos.out_w - col, valid - j), at = (slice * pos.out_h + r) * pos.out_w + col;
      // A run that continues the previous one in the output (a row of an unpadded input
      // followed by the next row) extends it: one segment per panel for 1x1 convs.
      if (ns && sg[ns - 1].j + sg[ns - 1].n == j && sg[ns - 1].at + sg[ns - 1].n == at)
        sg[ns - 1].n += n;
      else
        sg[ns++] = {j, n, at, 0};
      j += n;
    }
    for (std::size_t i = 0; i < ns; ++i)
      sg[i].lanes = static_cast<std::uint32_t>(((sg[i].n >= 32 ? ~0ull : (1ull << sg[i].n) - 1) << sg[i].j));
    pn.nseg[u] = ns;
  };
  // Channel panels [mp0, mp1) over the patch panels [qp0, qp1) held in pn's slots from u0.
  auto compute = [&](std::size_t mp0, std::size_t mp1, std::size_t qp0, std::size_t qp1, const Panels& pn,
                     std::size_t u0, std::int32_t* tile) {
    for (std::size_t mp = mp0; mp < mp1; ++mp) {
      const std::size_t m0 = mp * g.mr, rows = std::min(g.mr, M - m0);
      const UKernel uk = ukernel(w.kernel(), true, rows);
      for (std::size_t u = u0; u < u0 + (qp1 - qp0); ++u) {
        const Seg* sg = pn.segs.data() + u * g.nr;
        // VNNI stores from the kernel's registers, the others through the int32 tile. The
        // tile path on VNNI took 22% of a 64 -> 256 1x1 conv's time (perf).
        const bool in_regs = vnni;
        const Tile t{kg,
                     w_pack + mp * w_panel_bytes,
                     pn.xp + u * x_panel_bytes,
                     tile,
                     g.nr,
                     rows,
                     g.nr,
                     zw_uniform ? pn.colterm + u * g.nr : kZeros,
                     zw_zero || zw_uniform ? nullptr : pn.colsum + u * g.nr,
                     zwp + m0,
                     rowterm.data() + m0,
                     in_regs ? &out : nullptr,
                     m0,
                     sg,
                     pn.nseg[u],
                     nullptr,
                     0};
        uk(t);
        if (in_regs) continue;
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t s = 0; s < pn.nseg[u]; ++s)
            store_row(out, m0 + i, tile + i * g.nr + sg[s].j, sg[s].n, sg[s].at);
      }
    }
  };
  if (shared) {
    Panels pn(q_panels, x_panel_bytes, g.nr);
    parallel_chunks(q_panels, 1, [&](std::size_t p0, std::size_t p1) {
      for (std::size_t qp = p0; qp < p1; ++qp) pack_panel(qp, pn, qp);
    });
    parallel_chunks(n_blocks * m_splits, 1, [&](std::size_t i0, std::size_t i1) {
      alignas(64) std::int32_t tile[8 * 32];
      for (std::size_t item = i0; item < i1; ++item) {
        const std::size_t bi = item / m_splits, ms = item % m_splits;
        const std::size_t qp0 = bi * block, qp1 = std::min(q_panels, qp0 + block);
        const std::size_t mp0 = ms * m_per_split, mp1 = std::min(m_panels, mp0 + m_per_split);
        compute(mp0, mp1, qp0, qp1, pn, qp0, tile);
      }
    });
    return;
  }
  // One block at a time per thread, packed by the thread that computes it.
  auto run = [&](std::size_t b0, std::size_t b1) {
    Panels pn(block, x_panel_bytes, g.nr);
    alignas(64) std::int32_t tile[8 * 32];
    for (std::size_t bi = b0; bi < b1; ++bi) {
      const std::size_t qp0 = bi * block, qp1 = std::min(q_panels, qp0 + block);
      for (std::size_t qp = qp0; qp < qp1; ++qp) pack_panel(qp, pn, qp - qp0);
      compute(0, m_panels, qp0, qp1, pn, 0, tile);
    }
  };
  if (threads > 1)
    parallel_chunks(n_blocks, 1, run);
  else
    run(0, n_blocks);
}

}  // namespace

void conv8(const Conv8Positions& pos, const std::uint8_t* x, const std::size_t* off, bool x_signed, std::int32_t zx,
           const PackedW8& w, const Conv8Output& out, bool parallel) {
  conv8_body(pos, x, off, x_signed, zx, w, out, parallel);
}

namespace {

// Row j < n of one phase row: src[j * stride] (src may start before the input row: then the
// columns outside [0, W) are the zero point), for the input row `row` of W bytes and the first
// read at column `first` (signed). Stride 2 splits 32 bytes into their even bytes per 16.
void phase_row(std::uint8_t* dst, std::size_t n, const std::uint8_t* row, std::size_t W, std::ptrdiff_t first,
               std::size_t stride, std::uint8_t pad) {
  const auto s = static_cast<std::ptrdiff_t>(stride), w = static_cast<std::ptrdiff_t>(W);
  // Outputs [lo, hi) read inside the row.
  const auto sn = static_cast<std::ptrdiff_t>(n);
  const std::ptrdiff_t lo = std::min(sn, first >= 0 ? 0 : (-first + s - 1) / s);
  const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(w - first <= 0 ? 0 : (w - first + s - 1) / s, lo, sn);
  std::memset(dst, pad, static_cast<std::size_t>(lo));
  std::memset(dst + hi, pad, static_cast<std::size_t>(sn - hi));
  if (hi <= lo) return;
  const std::uint8_t* src = row + first + lo * s;
  const std::size_t cnt = static_cast<std::size_t>(hi - lo);
  std::uint8_t* d = dst + lo;
  if (stride == 1) {
    std::memcpy(d, src, cnt);
    return;
  }
  std::size_t j = 0;
  if (stride == 2) {
    // Bytes left in the row from src: 2 * j + 32 <= avail keeps both loads inside it.
    const std::size_t avail = static_cast<std::size_t>(w - (first + lo * s));
    const __m128i even = _mm_set1_epi16(0x00FF);
    for (; j + 16 <= cnt && 2 * j + 32 <= avail; j += 16) {
      const __m128i a = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * j)), even);
      const __m128i b = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * j + 16)), even);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), _mm_packus_epi16(a, b));
    }
  }
  for (; j < cnt; ++j) d[j] = src[j * stride];
}

// phase_row for stride 1 or 2 with AVX-512BW: per 64 input bytes one masked load (the columns
// outside the row read as the pad: nothing outside it is touched), the even bytes of a stride-2
// chunk by vpmovwb, one masked store. phase_row's memsets, copies and scalar stride-2 loop on
// short rows (ResNet's 24-wide maps: 13 outputs a row) took a third of its 128 -> 128 3x3
// stride-2 conv (perf).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void phase_row_avx512(std::uint8_t* dst, std::size_t n,
                                                                           const std::uint8_t* row, std::size_t W,
                                                                           std::ptrdiff_t first, std::size_t stride,
                                                                           std::uint8_t pad) {
  const __m512i pv = _mm512_set1_epi8(static_cast<char>(pad));
  const std::size_t per = 64 / stride;  // outputs per chunk
  const auto w = static_cast<std::ptrdiff_t>(W);
  for (std::size_t j0 = 0; j0 < n; j0 += per) {
    const std::size_t cnt = std::min(per, n - j0);
    // Lane i holds input column c0 + i; the lanes read are those inside [0, W).
    const std::ptrdiff_t c0 = first + static_cast<std::ptrdiff_t>(stride * j0);
    const std::ptrdiff_t lo = std::clamp<std::ptrdiff_t>(-c0, 0, 64);
    const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(w - c0, lo, static_cast<std::ptrdiff_t>(stride * cnt));
    const std::uint64_t below_hi = hi >= 64 ? ~0ull : (1ull << hi) - 1, below_lo = lo >= 64 ? ~0ull : (1ull << lo) - 1;
    const __m512i v = _mm512_mask_loadu_epi8(
        pv, static_cast<__mmask64>(below_hi & ~below_lo),
        reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(row) + static_cast<std::uintptr_t>(c0)));
    if (stride == 1)
      _mm512_mask_storeu_epi8(dst + j0, static_cast<__mmask64>(cnt >= 64 ? ~0ull : (1ull << cnt) - 1), v);
    else
      _mm256_mask_storeu_epi8(dst + j0, static_cast<__mmask32>(cnt >= 32 ? ~0u : (1u << cnt) - 1),
                              _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, v));
  }
}

// Every phase of one channel of a 2-D conv whose column stride is 2, both column phases read and
// padded rows at most 64 bytes: each input row loaded once (masked: the pad columns read as the
// pad, nothing outside the row touched), its even and odd bytes split by vpmovwb into the two
// column phases' rows; rows outside the input are the pad. Phase (row residue row_res[i], column
// residue e) is phase 2 * i + e, each ext1 rows of ext2 bytes, as conv8_nd_body lays them out.
// Row by row through phase_row_avx512 the split still took 30% of ResNet's 128 -> 128 3x3
// stride-2 conv on 24x24 (perf).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void phases_s2_avx512(
    std::uint8_t* dst, const std::uint8_t* xc, std::size_t H, std::size_t W, std::size_t pad_top, std::size_t pad_left,
    std::size_t sh, const std::vector<std::size_t>& row_res, std::size_t ext1, std::size_t ext2, std::uint8_t pad) {
  const __m512i pv = _mm512_set1_epi8(static_cast<char>(pad));
  const std::uint64_t below_end = pad_left + W >= 64 ? ~0ull : (1ull << (pad_left + W)) - 1;
  const auto in = static_cast<__mmask64>(below_end & ~((1ull << pad_left) - 1));
  const auto out = static_cast<__mmask32>(ext2 >= 32 ? ~0u : (1u << ext2) - 1);
  const std::size_t vol = ext1 * ext2;
  for (std::size_t bi = 0; bi < row_res.size(); ++bi) {
    std::uint8_t* d0 = dst + 2 * bi * vol;
    std::uint8_t* d1 = d0 + vol;
    for (std::size_t r = 0; r < ext1; ++r) {
      const auto ih = static_cast<std::ptrdiff_t>(r * sh + row_res[bi]) - static_cast<std::ptrdiff_t>(pad_top);
      __m512i v = pv;
      if (ih >= 0 && ih < static_cast<std::ptrdiff_t>(H))
        v = _mm512_mask_loadu_epi8(
            pv, in,
            reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(xc + static_cast<std::size_t>(ih) * W) -
                                          pad_left));
      _mm256_mask_storeu_epi8(d0 + r * ext2, out, _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, v));
      _mm256_mask_storeu_epi8(d1 + r * ext2, out, _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, _mm512_srli_epi16(v, 8)));
    }
  }
}

}  // namespace

namespace {

// conv8_nd's body; fx: a float input quantized on the way (conv8_nd_quantizing; x unused).
void conv8_nd_body(const Conv8Shape& s, const std::uint8_t* x, const float* fx, float fscale, bool x_signed,
                   std::int32_t zx, const PackedW8& w, const Conv8Output& out, bool parallel) {
  const std::array<std::size_t, 3> O{s.out(0), s.out(1), s.out(2)};
  if (O[0] == 0 || O[1] == 0 || O[2] == 0) return;
  bool rearrange = false;
  std::array<std::size_t, 3> ext{};  // phase extents (the input's when it is read in place)
  // Per dimension: the residues (input index % stride) some tap reads, one phase each.
  std::array<std::vector<std::size_t>, 3> residues;
  for (std::size_t i = 0; i < 3; ++i) {
    rearrange |= s.pad_begin[i] || s.pad_end[i] || s.stride[i] > 1;
    ext[i] = (s.in[i] + s.pad_begin[i] + s.pad_end[i] + s.stride[i] - 1) / s.stride[i];
    std::vector<bool> used(s.stride[i], false);
    for (std::size_t k = 0; k < s.kernel[i]; ++k) used[k * s.dilation[i] % s.stride[i]] = true;
    for (std::size_t r = 0; r < s.stride[i]; ++r)
      if (used[r]) residues[i].push_back(r);
  }
  const std::size_t phases = residues[0].size() * residues[1].size() * residues[2].size();
  const std::size_t vol = ext[0] * ext[1] * ext[2], chan = phases * vol;
  auto phase_index = [&](std::size_t i, std::size_t r) {
    return static_cast<std::size_t>(std::find(residues[i].begin(), residues[i].end(), r) - residues[i].begin());
  };
  const std::uint8_t* src = x;
  std::optional<detail::Scratch> scratch;
  if (rearrange) {
    scratch.emplace((s.C * chan + 3) / 4 + 16);
    auto* buf = reinterpret_cast<std::uint8_t*>(scratch->data());
    const auto pad = static_cast<std::uint8_t>(zx);
    const std::size_t D = s.in[0], H = s.in[1], W = s.in[2], plane = D * H * W;
    // The VNNI kernel implies AVX-512BW (cpu_has_vnni); the other levels keep phase_row.
    const bool row_avx512 = w.kernel() == Int8Kernel::Vnni && s.stride[2] <= 2;
    // 2-D, column stride 2 with both column phases read, padded rows of at most 64 bytes
    // (ResNet's stride-2 3x3 convs on small maps): every input row split once (phases_s2_avx512).
    const bool rows_s2 = row_avx512 && s.in[0] == 1 && s.kernel[0] == 1 && s.stride[0] == 1 && s.pad_begin[0] == 0 &&
                         s.pad_end[0] == 0 && s.stride[2] == 2 && residues[2].size() == 2 && 2 * ext[2] <= 64;
    auto fill = [&](std::size_t c0, std::size_t c1) {
      // fx: each channel quantized into this buffer (in L2 for the phase pass that follows).
      std::vector<std::uint8_t> cq(fx ? plane : 0);
      for (std::size_t c = c0; c < c1; ++c) {
        std::uint8_t* dst = buf + c * chan;
        const std::uint8_t* xc = cq.data();
        if (fx)
          dynamic_quantize_span(fx + c * plane, cq.data(), plane, fscale, pad);
        else
          xc = x + c * plane;
        if (rows_s2) {
          phases_s2_avx512(dst, xc, H, W, s.pad_begin[1], s.pad_begin[2], s.stride[1], residues[1], ext[1], ext[2],
                           pad);
          continue;
        }
        for (std::size_t a : residues[0])
          for (std::size_t b : residues[1])
            for (std::size_t e : residues[2]) {
              for (std::size_t d = 0; d < ext[0]; ++d) {
                const auto id =
                    static_cast<std::ptrdiff_t>(d * s.stride[0] + a) - static_cast<std::ptrdiff_t>(s.pad_begin[0]);
                for (std::size_t r = 0; r < ext[1]; ++r, dst += ext[2]) {
                  const auto ih =
                      static_cast<std::ptrdiff_t>(r * s.stride[1] + b) - static_cast<std::ptrdiff_t>(s.pad_begin[1]);
                  if (id < 0 || id >= static_cast<std::ptrdiff_t>(D) || ih < 0 ||
                      ih >= static_cast<std::ptrdiff_t>(H)) {
                    std::memset(dst, pad, ext[2]);
                    continue;
                  }
                  const std::uint8_t* row = xc + (static_cast<std::size_t>(id) * H + static_cast<std::size_t>(ih)) * W;
                  const std::ptrdiff_t first =
                      static_cast<std::ptrdiff_t>(e) - static_cast<std::ptrdiff_t>(s.pad_begin[2]);
                  if (row_avx512)
                    phase_row_avx512(dst, ext[2], row, W, first, s.stride[2], pad);
                  else
                    phase_row(dst, ext[2], row, W, first, s.stride[2], pad);
                }
              }
            }
      }
    };
    if (parallel && s.C * chan >= (std::size_t{64} << 10) && max_threads() > 1)
      parallel_chunks(s.C, 1, fill);
    else
      fill(0, s.C);
    src = buf;
  } else if (fx) {
    // An unpadded stride-1 conv reads x in place: x quantized once, into scratch (the bytes the
    // op would have written). Quantizing inside a 1x1 conv's packing is slower (0.62-0.98x of
    // quantize-then-conv; docs/benchmarks.md): the packing reads K rows at a time, 128 float bytes
    // from each, which the prefetchers do not follow; the quantize pass reads x in order.
    const std::size_t n = s.C * vol;
    scratch.emplace((n + 3) / 4 + 16);
    auto* buf = reinterpret_cast<std::uint8_t*>(scratch->data());
    auto q = [&](std::size_t b, std::size_t e) {
      dynamic_quantize_span(fx + b, buf + b, e - b, fscale, static_cast<std::uint8_t>(zx));
    };
    if (parallel && n >= (std::size_t{64} << 10) && max_threads() > 1)
      parallel_chunks(n, 1 << 16, q);
    else
      q(0, n);
    src = buf;
  }
  // Tap (kd, kh, kw) of channel c reads its phase at (o + k * dil / stride) per dimension.
  std::vector<std::size_t> off(s.C * s.kernel[0] * s.kernel[1] * s.kernel[2]);
  std::size_t k = 0;
  for (std::size_t c = 0; c < s.C; ++c)
    for (std::size_t kd = 0; kd < s.kernel[0]; ++kd)
      for (std::size_t kh = 0; kh < s.kernel[1]; ++kh)
        for (std::size_t kw = 0; kw < s.kernel[2]; ++kw) {
          const std::size_t td = kd * s.dilation[0], th = kh * s.dilation[1], tw = kw * s.dilation[2];
          const std::size_t ph =
              (phase_index(0, td % s.stride[0]) * residues[1].size() + phase_index(1, th % s.stride[1])) *
                  residues[2].size() +
              phase_index(2, tw % s.stride[2]);
          off[k++] = c * chan + ph * vol + (td / s.stride[0] * ext[1] + th / s.stride[1]) * ext[2] + tw / s.stride[2];
        }
  // Positions over the phase extents; the last one is the last kept position, so every read
  // stays inside the phase (a kept position's taps are inside the padded input).
  const Conv8Positions pos{((O[0] - 1) * ext[1] + O[1] - 1) * ext[2] + O[2], ext[2], O[2], ext[1], O[1]};
  conv8_body(pos, src, off.data(), x_signed, zx, w, out, parallel);
}

}  // namespace

void conv8_nd(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx, const PackedW8& w,
              const Conv8Output& out, bool parallel) {
  conv8_nd_body(s, x, nullptr, 0, x_signed, zx, w, out, parallel);
}

void conv8_nd_quantizing(const Conv8Shape& s, const float* x, float scale, std::uint8_t zero, const PackedW8& w,
                         const Conv8Output& out, bool parallel) {
  conv8_nd_body(s, nullptr, x, scale, false, zero, w, out, parallel);
}

void gemm8_reference(std::size_t M, std::size_t N, std::size_t K, const void* A, std::size_t lda, bool a_signed,
                     std::int32_t za, bool trans_b, const void* B, std::size_t ldb, bool b_signed,
                     const std::int32_t* zb, std::size_t zb_count, std::int32_t* C, std::size_t ldc) {
  auto av = [&](std::size_t i) -> std::int64_t {
    return a_signed ? static_cast<const std::int8_t*>(A)[i] : static_cast<const std::uint8_t*>(A)[i];
  };
  auto bv = [&](std::size_t i) -> std::int64_t {
    return b_signed ? static_cast<const std::int8_t*>(B)[i] : static_cast<const std::uint8_t*>(B)[i];
  };
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      const std::int64_t z = zb && zb_count ? zb[zb_count > 1 ? n : 0] : 0;
      std::int64_t acc = 0;
      for (std::size_t k = 0; k < K; ++k) acc += (av(m * lda + k) - za) * (bv(trans_b ? n * ldb + k : k * ldb + n) - z);
      C[m * ldc + n] = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(acc)));
    }
}

}  // namespace onnxforge::simd
