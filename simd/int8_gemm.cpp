// Integer GEMM (simd/int8_gemm.h): packing, the three micro-kernels and the threaded driver.
// The AVX2 and VNNI kernels carry target attributes instead of going through the per-ISA kernel
// families (simd/kernels/*.inl): VNNI is not part of the avx512 family's flags, and these are the
// only functions here that use the wider instructions; they run only after the CPU check.
#include "simd/int8_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

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
};

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
        const std::uint32_t v = static_cast<std::uint32_t>(src[2 * c] ^ flip) |
                                (static_cast<std::uint32_t>(src[2 * c + 1] ^ flip) << 16);
        std::memcpy(out + c * step, &v, 4);
      }
    }
    for (std::size_t c = full; c < kg; ++c)
      store_cell(out + c * step, g.group, c * g.group, K, [&](std::size_t k) { return src[k] ^ flip; });
  }
}

struct Tile {
  std::size_t kg;
  const std::uint8_t* a;     // packed A panel
  const std::uint8_t* b;     // packed B panel
  std::int32_t* c;           // tile's first element
  std::size_t ldc, rows, cols;
  const std::int32_t* colterm;  // tile's first column: K * za' * zb' - za' * colsum
  const std::int32_t* zbp;      // tile's first column, or nullptr when all zero
  const std::int32_t* rowsum;   // tile's first row
};

void ukernel_scalar(const Tile& t) {
  constexpr std::size_t MR = 4, NR = 16;
  std::int32_t acc[MR][NR] = {};
  for (std::size_t c = 0; c < t.kg; ++c)
    for (std::size_t i = 0; i < MR; ++i) {
      const std::uint8_t* a = t.a + (c * MR + i) * 4;
      for (std::size_t j = 0; j < NR; ++j) {
        const std::uint8_t* b = t.b + (c * NR + j) * 4;
        acc[i][j] += a[0] * static_cast<std::int8_t>(b[0]) + a[1] * static_cast<std::int8_t>(b[1]) +
                     a[2] * static_cast<std::int8_t>(b[2]) + a[3] * static_cast<std::int8_t>(b[3]);
      }
    }
  for (std::size_t i = 0; i < t.rows; ++i)
    for (std::size_t j = 0; j < t.cols; ++j) {
      std::uint32_t v = static_cast<std::uint32_t>(acc[i][j]) + static_cast<std::uint32_t>(t.colterm[j]);
      if (t.zbp) v -= static_cast<std::uint32_t>(t.zbp[j]) * static_cast<std::uint32_t>(t.rowsum[i]);
      t.c[i * t.ldc + j] = static_cast<std::int32_t>(v);
    }
}

// The accumulators are named variables, not an array: GCC 12 kept an array of vectors in
// registers only by copying it between two register sets (and the stack) on every K step, which
// halved the kernel's rate (measured in the disassembly: 30 moves per 16 vpdpbusd).
#define ONNXFORGE_I8_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define ONNXFORGE_I8_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

__attribute__((target("avx2"))) void ukernel_avx2(const Tile& t) {
#define DECL(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = _mm256_setzero_si256();
  ONNXFORGE_I8_ROWS6(DECL)
#undef DECL
  const std::uint8_t* a = t.a;
  const std::uint8_t* b = t.b;
  for (std::size_t c = 0; c < t.kg; ++c, a += 24, b += 64) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
#define STEP(i)                                                                    \
  {                                                                                \
    std::int32_t cell;                                                             \
    std::memcpy(&cell, a + (i) * 4, 4);                                            \
    const __m256i av = _mm256_set1_epi32(cell);                                    \
    c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(av, b0));               \
    c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(av, b1));               \
  }
    ONNXFORGE_I8_ROWS6(STEP)
#undef STEP
  }
  const __m256i ct0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colterm));
  const __m256i ct1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colterm + 8));
  __m256i zb0 = _mm256_setzero_si256(), zb1 = zb0;
  if (t.zbp) {
    zb0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.zbp));
    zb1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.zbp + 8));
  }
  const __m256i acc[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < t.rows; ++i) {
    const __m256i rs = _mm256_set1_epi32(t.rowsum[i]);
    __m256i v0 = _mm256_sub_epi32(_mm256_add_epi32(acc[i][0], ct0), _mm256_mullo_epi32(zb0, rs));
    __m256i v1 = _mm256_sub_epi32(_mm256_add_epi32(acc[i][1], ct1), _mm256_mullo_epi32(zb1, rs));
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

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void ukernel_vnni(const Tile& t) {
#define DECL(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = _mm512_setzero_si512();
  ONNXFORGE_I8_ROWS8(DECL)
#undef DECL
  const std::uint8_t* a = t.a;
  const std::uint8_t* b = t.b;
  for (std::size_t c = 0; c < t.kg; ++c, a += 32, b += 128) {
    const __m512i b0 = _mm512_loadu_si512(b);
    const __m512i b1 = _mm512_loadu_si512(b + 64);
#define STEP(i)                                             \
  {                                                         \
    std::int32_t cell;                                      \
    std::memcpy(&cell, a + (i) * 4, 4);                     \
    const __m512i av = _mm512_set1_epi32(cell);             \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);         \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);         \
  }
    ONNXFORGE_I8_ROWS8(STEP)
#undef STEP
  }
  const __m512i ct0 = _mm512_loadu_si512(t.colterm);
  const __m512i ct1 = _mm512_loadu_si512(t.colterm + 16);
  __m512i zb0 = _mm512_setzero_si512(), zb1 = zb0;
  if (t.zbp) {
    zb0 = _mm512_loadu_si512(t.zbp);
    zb1 = _mm512_loadu_si512(t.zbp + 16);
  }
  const __mmask16 m0 = static_cast<__mmask16>(t.cols >= 16 ? 0xFFFF : (1u << t.cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(t.cols >= 32 ? 0xFFFF : t.cols <= 16 ? 0 : (1u << (t.cols - 16)) - 1);
  const __m512i acc[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                             {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  for (std::size_t i = 0; i < t.rows; ++i) {
    const __m512i rs = _mm512_set1_epi32(t.rowsum[i]);
    __m512i v0 = _mm512_sub_epi32(_mm512_add_epi32(acc[i][0], ct0), _mm512_mullo_epi32(zb0, rs));
    __m512i v1 = _mm512_sub_epi32(_mm512_add_epi32(acc[i][1], ct1), _mm512_mullo_epi32(zb1, rs));
    std::int32_t* c = t.c + i * t.ldc;
    _mm512_mask_storeu_epi32(c, m0, v0);
    _mm512_mask_storeu_epi32(c + 16, m1, v1);
  }
}
#undef ONNXFORGE_I8_ROWS6
#undef ONNXFORGE_I8_ROWS8

using UKernel = void (*)(const Tile&);
UKernel ukernel(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Vnni: return ukernel_vnni;
    case Int8Kernel::Avx2: return ukernel_avx2;
    case Int8Kernel::Scalar: break;
  }
  return ukernel_scalar;
}

std::shared_ptr<std::uint8_t[]> aligned_bytes(std::size_t n) {
  auto* p = static_cast<std::uint8_t*>(::operator new(n, std::align_val_t(64)));
  return {p, [](std::uint8_t* q) { ::operator delete(q, std::align_val_t(64)); }};
}

}  // namespace

bool cpu_has_vnni() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
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
  std::uint8_t* dst = p.data_.get();
  auto* colsum = reinterpret_cast<std::int32_t*>(dst + panel_bytes);
  std::int32_t* zbp = colsum + p.n_pad_;
  parallel_chunks(p.n_pad_ / g.nr, 1, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t panel = p0; panel < p1; ++panel)
      for (std::size_t j = 0; j < g.nr; ++j) {
        const std::size_t n = panel * g.nr + j;
        std::int32_t sum = 0;
        auto v = [&](std::size_t k) {
          const int x = n < N ? b_value(B, trans_b ? n * ldb + k : k * ldb + n, b_signed) : 0;
          sum += x;
          return x;
        };
        for (std::size_t c = 0; c < p.kg_; ++c)
          store_cell(dst + ((panel * p.kg_ + c) * g.nr + j) * 4, g.group, c * g.group, K, v);
        colsum[n] = sum;
        const std::int32_t z = n < N && zb && zb_count ? zb[zb_count > 1 ? n : 0] : 0;
        zbp[n] = n < N ? z - (b_signed ? 0 : 128) : 0;
      }
  });
  p.zb_zero_ = std::all_of(zbp, zbp + p.n_pad_, [](std::int32_t z) { return z == 0; });
  return p;
}

namespace {

// Packs the k-major A (element (m, k) at At[k * ld + m]) rows [m0, m0 + mr) into one panel.
// Whole VNNI panels (8 rows x 4 k per cell) are 4 x 8 byte transposes: two byte unpacks and two
// word unpacks per 32 bytes; partial panels, the K tail and the other kernels go element-wise.
void pack_at_panel(const Geometry& g, std::size_t kg, std::size_t K, const std::uint8_t* At, std::size_t ld,
                   std::uint8_t flip, std::size_t m0, std::size_t M, std::uint8_t* dst) {
  std::size_t c0 = 0;
  const std::size_t step = g.mr * 4;
  if (g.group == 4 && g.mr == 8 && m0 + 8 <= M) {
    const __m128i fl = _mm_set1_epi8(static_cast<char>(flip));
    const std::size_t full = K / 4;
    for (; c0 < full; ++c0) {
      const std::uint8_t* s = At + c0 * 4 * ld + m0;
      const __m128i r0 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)), fl);
      const __m128i r1 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + ld)), fl);
      const __m128i r2 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 2 * ld)), fl);
      const __m128i r3 = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + 3 * ld)), fl);
      const __m128i x01 = _mm_unpacklo_epi8(r0, r1), x23 = _mm_unpacklo_epi8(r2, r3);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c0 * step), _mm_unpacklo_epi16(x01, x23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c0 * step + 16), _mm_unpackhi_epi16(x01, x23));
    }
  }
  for (std::size_t i = 0; i < g.mr; ++i) {
    const std::size_t m = m0 + i;
    for (std::size_t c = c0; c < kg; ++c)
      store_cell(dst + c * step + i * 4, g.group, c * g.group, K,
                 [&](std::size_t k) { return m < M ? At[k * ld + m] ^ flip : 0; });
  }
}

// The kernels over packed A (m_panels panels, rowsum per row) and packed B.
void run_tiles(std::size_t M, const std::uint8_t* a_pack, const std::int32_t* rowsum, std::int32_t* colterm,
               std::uint32_t zap, const PackedB8& B, std::int32_t* C, std::size_t ldc, bool par) {
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
  const UKernel uk = ukernel(B.kernel());
  const std::uint8_t* b_pack = Int8Access::panels(B);
  const bool zb_zero = Int8Access::zb_zero(B);
  // Items: one N panel x a block of M panels; the block keeps a B panel in L1/L2 over its rows.
  const std::size_t m_block = std::max<std::size_t>(1, std::min<std::size_t>(m_panels, 16));
  const std::size_t m_blocks = (m_panels + m_block - 1) / m_block;
  auto run = [&](std::size_t i0, std::size_t i1) {
    for (std::size_t item = i0; item < i1; ++item) {
      const std::size_t np = item % n_panels, mb = item / n_panels;
      const std::size_t n0 = np * nr;
      for (std::size_t mp = mb * m_block, me = std::min(m_panels, mp + m_block); mp < me; ++mp) {
        const std::size_t m0 = mp * g.mr;
        Tile t{kg,
               a_pack + mp * a_panel_bytes,
               b_pack + np * kg * nr * 4,
               C + m0 * ldc + n0,
               ldc,
               std::min(g.mr, M - m0),
               std::min(nr, N - n0),
               colterm + n0,
               zb_zero ? nullptr : zbp + n0,
               rowsum + m0};
        uk(t);
      }
    }
  };
  if (par)
    parallel_chunks(n_panels * m_blocks, 1, run);
  else
    run(0, n_panels * m_blocks);
}

}  // namespace

void gemm8(std::size_t M, const void* A, std::size_t lda, bool a_signed, std::int32_t za, const PackedB8& B,
           std::int32_t* C, std::size_t ldc, bool parallel) {
  const std::size_t N = B.n(), K = B.k();
  if (M == 0 || N == 0) return;
  const Geometry g = geometry(B.kernel());
  const std::size_t kg = Int8Access::kg(B), nr = Int8Access::nr(B);
  const std::size_t n_panels = (N + nr - 1) / nr, m_panels = (M + g.mr - 1) / g.mr;
  const std::size_t a_panel_bytes = kg * g.mr * 4;
  const std::size_t a_bytes = m_panels * a_panel_bytes;
  const std::size_t n_pad = n_panels * nr;
  // Scratch: packed A, rowsum (m_panels * mr), colterm (n_pad).
  detail::Scratch scratch((a_bytes + (m_panels * g.mr + n_pad) * 4) / 4 + 16);
  auto* a_pack = reinterpret_cast<std::uint8_t*>(scratch.data());
  auto* rowsum = reinterpret_cast<std::int32_t*>(a_pack + a_bytes);
  std::int32_t* colterm = rowsum + m_panels * g.mr;
  const std::uint32_t zap = static_cast<std::uint32_t>(za + (a_signed ? 128 : 0));
  const bool par = parallel && M * N * K >= (1u << 18) && max_threads() > 1;
  auto pack = [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p)
      pack_a_panel(g, kg, K, A, lda, a_signed, p * g.mr, M, a_pack + p * a_panel_bytes, rowsum + p * g.mr);
  };
  if (par)
    parallel_chunks(m_panels, 4, pack);
  else
    pack(0, m_panels);
  run_tiles(M, a_pack, rowsum, colterm, zap, B, C, ldc, par);
}

void gemm8_at(std::size_t M, const void* At, std::size_t ld_at, bool a_signed, std::int32_t za, const PackedB8& B,
              std::int32_t* C, std::size_t ldc) {
  const std::size_t N = B.n(), K = B.k();
  if (M == 0 || N == 0) return;
  const Geometry g = geometry(B.kernel());
  const std::size_t kg = Int8Access::kg(B), nr = Int8Access::nr(B);
  const std::size_t n_panels = (N + nr - 1) / nr, m_panels = (M + g.mr - 1) / g.mr;
  const std::size_t a_panel_bytes = kg * g.mr * 4;
  const std::size_t a_bytes = m_panels * a_panel_bytes;
  const std::size_t n_pad = n_panels * nr;
  detail::Scratch scratch((a_bytes + (m_panels * g.mr + n_pad) * 4) / 4 + 16);
  auto* a_pack = reinterpret_cast<std::uint8_t*>(scratch.data());
  auto* rowsum = reinterpret_cast<std::int32_t*>(a_pack + a_bytes);
  std::int32_t* colterm = rowsum + m_panels * g.mr;
  const auto* at = static_cast<const std::uint8_t*>(At);
  const std::uint8_t flip = a_signed ? 0x80 : 0;
  // Row sums of A' over k, vectorized along m (k-major rows are contiguous in m).
  std::fill_n(rowsum, m_panels * g.mr, 0);
  for (std::size_t k = 0; k < K; ++k) {
    const std::uint8_t* row = at + k * ld_at;
    for (std::size_t m = 0; m < M; ++m) rowsum[m] += static_cast<std::uint8_t>(row[m] ^ flip);
  }
  for (std::size_t p = 0; p < m_panels; ++p)
    pack_at_panel(g, kg, K, at, ld_at, flip, p * g.mr, M, a_pack + p * a_panel_bytes);
  const std::uint32_t zap = static_cast<std::uint32_t>(za + (a_signed ? 128 : 0));
  run_tiles(M, a_pack, rowsum, colterm, zap, B, C, ldc, false);
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
