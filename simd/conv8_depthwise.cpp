// Depthwise 8-bit convolution (simd/conv8_depthwise.h): the int16 phase planes, the tap cells,
// the three kernels and the per-channel driver. As in simd/int8_gemm.cpp, the AVX2 and VNNI
// kernels carry target attributes (VNNI is not part of the avx512 kernel family's flags) and run
// only after the CPU check behind active_int8_kernel().
#include "simd/conv8_depthwise.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "simd/detail/int8_store.h"
#include "simd/detail/scratch.h"
#include "simd/parallel.h"

namespace onnxforge::simd {
namespace {

// What one channel's sums become (Conv8Output for channel c).
enum class StoreKind : std::uint8_t { I32, F32, Q8 };
struct ChannelStore {
  StoreKind kind = StoreKind::I32;
  bool q8_signed = false, has_bias = false, has_lo = false, has_hi = false;
  float mu = 1.f, zero = 0.f, bias = 0.f, lo = 0.f, hi = 0.f;  // Q8: lo/hi the type's range
  std::int32_t acc_bias = 0;
};

ChannelStore channel_store(const Conv8Output& o, std::size_t c) {
  ChannelStore s;
  if (o.i32) return s;
  s.mu = o.mult[o.mult_count > 1 ? c : 0];
  if (o.q8) {
    s.kind = StoreKind::Q8, s.q8_signed = o.q8_signed, s.zero = o.q8_zero;
    s.lo = o.q8_signed ? -128.f : 0.f, s.hi = o.q8_signed ? 127.f : 255.f;
    s.acc_bias = o.acc_bias ? o.acc_bias[c] : 0;
    return s;
  }
  s.kind = StoreKind::F32;
  s.has_bias = o.bias != nullptr, s.bias = o.bias ? o.bias[o.bias_count > 1 ? c : 0] : 0.f;
  const bool relu = o.act.op == UnaryOp::Relu, clip = o.act.op == UnaryOp::Clip;
  s.has_lo = relu || clip, s.lo = relu ? 0.f : o.act.alpha;
  s.has_hi = clip, s.hi = o.act.beta;
  return s;
}

// One channel's work for a kernel: positions [0, Q) of the plane, sum over the cells of
// lo16(wcell) * plane[q + off] + hi16(wcell) * plane[q + off + 1], stored to buf[q] (elements of
// the output type). The vector kernels compute whole blocks of 32 positions: buf and the plane
// have room for round_up(Q, 32) positions.
struct ChannelRun {
  const std::int16_t* plane;
  const std::size_t* off;
  const std::int32_t* wcell;
  std::size_t ncell, Q;
  void* buf;
  std::int32_t* acc;  // the scalar kernel's sums: round_up(Q, 4) int32
  ChannelStore st;
};

constexpr std::size_t kBlock = 32;

// ---- scalar (the twin) ----

// The stores: requantization four at a time by the SSE steps conv8's store_row takes, the others
// one loop per kind (vectorized by the compiler). Per element the steps of the vector kernels'
// stores. acc holds round_up(n, 4) values; the excess lands in buf's slack, never copied out.
void store_scalar(const ChannelStore& st, const std::int32_t* acc, std::size_t n, void* buf) {
  switch (st.kind) {
    case StoreKind::I32: std::memcpy(buf, acc, n * 4); return;
    case StoreKind::F32: {
      auto* y = static_cast<float*>(buf);
      for (std::size_t q = 0; q < n; ++q) {
        float f = static_cast<float>(acc[q]) * st.mu;
        if (st.has_bias) f = f + st.bias;
        if (st.has_lo) f = st.lo > f ? st.lo : f;  // maxps(lo, f)
        if (st.has_hi) f = st.hi < f ? st.hi : f;  // minps(hi, f)
        y[q] = f;
      }
      return;
    }
    case StoreKind::Q8: {
      const __m128i b = _mm_set1_epi32(st.acc_bias);
      const __m128 mu = _mm_set1_ps(st.mu), z = _mm_set1_ps(st.zero), lo = _mm_set1_ps(st.lo), hi = _mm_set1_ps(st.hi);
      auto* y = static_cast<std::uint8_t*>(buf);
      for (std::size_t q = 0; q < n; q += 4) {
        const __m128i v = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + q)), b);
        const std::int32_t w = detail::requant4_bytes(v, mu, z, lo, hi, st.q8_signed);
        std::memcpy(y + q, &w, 4);  // buf has room past n
      }
      return;
    }
  }
}

void run_scalar(const ChannelRun& r) {
  auto* acc = reinterpret_cast<std::uint32_t*>(r.acc);
  std::fill_n(acc, (r.Q + 3) / 4 * 4, 0u);
  for (std::size_t c = 0; c < r.ncell; ++c) {
    const std::int16_t* p = r.plane + r.off[c];
    const auto wc = static_cast<std::uint32_t>(r.wcell[c]);
    const std::int32_t wa = static_cast<std::int16_t>(wc & 0xFFFF), wb = static_cast<std::int16_t>(wc >> 16);
    for (std::size_t q = 0; q < r.Q; ++q) acc[q] += static_cast<std::uint32_t>(wa * p[q] + wb * p[q + 1]);
  }
  store_scalar(r.st, r.acc, r.Q, r.buf);
}

// ---- AVX2: 16 positions per even/odd accumulator pair ----

struct Consts256 {
  __m256 mu, z, lo, hi, bias;
  __m256i ab;
};

// Positions q .. q + 15 from lo = positions [0-3 | 8-11] and hi = [4-7 | 12-15] (the int32
// unpacks of the even and odd sums). Requantized, packssdw of (lo, hi) puts them in order.
__attribute__((target("avx2"))) inline void store16_avx2(const ChannelStore& st, const Consts256& k, __m256i lo,
                                                         __m256i hi, void* buf, std::size_t q) {
  if (st.kind == StoreKind::Q8) {
    const __m256i w = _mm256_packs_epi32(detail::requant8(lo, k.ab, k.mu, k.z, k.lo, k.hi),
                                         detail::requant8(hi, k.ab, k.mu, k.z, k.lo, k.hi));
    const __m128i a = _mm256_castsi256_si128(w), b = _mm256_extracti128_si256(w, 1);
    const __m128i bytes = st.q8_signed ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint8_t*>(buf) + q), bytes);
    return;
  }
  const __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20), v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
  if (st.kind == StoreKind::I32) {
    auto* d = static_cast<std::int32_t*>(buf) + q;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), v0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 8), v1);
    return;
  }
  float* d = static_cast<float*>(buf) + q;
  _mm256_storeu_ps(d, detail::dequant8(v0, k.mu, st.has_bias, k.bias, st.has_lo, k.lo, st.has_hi, k.hi));
  _mm256_storeu_ps(d + 8, detail::dequant8(v1, k.mu, st.has_bias, k.bias, st.has_lo, k.lo, st.has_hi, k.hi));
}

__attribute__((target("avx2"))) inline __m256i ld(const std::int16_t* s) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
}

__attribute__((target("avx2"))) void run_avx2(const ChannelRun& r) {
  const ChannelStore& st = r.st;
  const Consts256 k{_mm256_set1_ps(st.mu), _mm256_set1_ps(st.zero), _mm256_set1_ps(st.lo),
                    _mm256_set1_ps(st.hi), _mm256_set1_ps(st.bias), _mm256_set1_epi32(st.acc_bias)};
  const std::int16_t* p = r.plane;
  std::size_t q = 0;
  // Two blocks of 16 per step: four independent accumulators (a lone pair waits on the
  // multiply-add latency at every cell).
  for (; q + 16 < r.Q; q += 32) {
    __m256i e0 = _mm256_setzero_si256(), o0 = e0, e1 = e0, o1 = e0;
    for (std::size_t c = 0; c < r.ncell; ++c) {
      const __m256i w = _mm256_set1_epi32(r.wcell[c]);
      const std::int16_t* s = p + q + r.off[c];
      e0 = _mm256_add_epi32(e0, _mm256_madd_epi16(ld(s), w));
      o0 = _mm256_add_epi32(o0, _mm256_madd_epi16(ld(s + 1), w));
      e1 = _mm256_add_epi32(e1, _mm256_madd_epi16(ld(s + 16), w));
      o1 = _mm256_add_epi32(o1, _mm256_madd_epi16(ld(s + 17), w));
    }
    store16_avx2(st, k, _mm256_unpacklo_epi32(e0, o0), _mm256_unpackhi_epi32(e0, o0), r.buf, q);
    store16_avx2(st, k, _mm256_unpacklo_epi32(e1, o1), _mm256_unpackhi_epi32(e1, o1), r.buf, q + 16);
  }
  for (; q < r.Q; q += 16) {
    __m256i e0 = _mm256_setzero_si256(), o0 = e0;
    for (std::size_t c = 0; c < r.ncell; ++c) {
      const __m256i w = _mm256_set1_epi32(r.wcell[c]);
      const std::int16_t* s = p + q + r.off[c];
      e0 = _mm256_add_epi32(e0, _mm256_madd_epi16(ld(s), w));
      o0 = _mm256_add_epi32(o0, _mm256_madd_epi16(ld(s + 1), w));
    }
    store16_avx2(st, k, _mm256_unpacklo_epi32(e0, o0), _mm256_unpackhi_epi32(e0, o0), r.buf, q);
  }
}

// ---- AVX-512 with VNNI: 32 positions per even/odd accumulator pair, vpdpwssd ----

struct Consts512 {
  __m512 mu, z, lo, hi, bias;
  __m512i ab, ilo, ihi;  // ilo / ihi: the even/odd interleave of positions 0-15 / 16-31
};

// 16 positions in order from q.
__attribute__((target("avx512f,avx512bw"))) inline void store16_avx512(const ChannelStore& st, const Consts512& k,
                                                                       __m512i v, void* buf, std::size_t q) {
  constexpr __mmask16 all = 0xFFFF;
  switch (st.kind) {
    case StoreKind::I32: _mm512_storeu_si512(static_cast<std::int32_t*>(buf) + q, v); return;
    case StoreKind::F32:
      _mm512_storeu_ps(static_cast<float*>(buf) + q,
                       detail::dequant16(v, k.mu, st.has_bias, k.bias, st.has_lo, k.lo, st.has_hi, k.hi));
      return;
    case StoreKind::Q8: {
      // In the type's range after the clamp: vpmovdb's truncation is exact.
      const __m512i rq = detail::requant16(v, k.ab, k.mu, k.z, k.lo, k.hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint8_t*>(buf) + q),
                       _mm512_mask_cvtepi32_epi8(_mm_setzero_si128(), all, rq));
      return;
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void store32_avx512(const ChannelStore& st,
                                                                                  const Consts512& k, __m512i e,
                                                                                  __m512i o, void* buf, std::size_t q) {
  store16_avx512(st, k, _mm512_permutex2var_epi32(e, k.ilo, o), buf, q);
  store16_avx512(st, k, _mm512_permutex2var_epi32(e, k.ihi, o), buf, q + 16);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void run_vnni(const ChannelRun& r) {
  const ChannelStore& st = r.st;
  const Consts512 k{_mm512_set1_ps(st.mu),
                    _mm512_set1_ps(st.zero),
                    _mm512_set1_ps(st.lo),
                    _mm512_set1_ps(st.hi),
                    _mm512_set1_ps(st.bias),
                    _mm512_set1_epi32(st.acc_bias),
                    _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23),
                    _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)};
  const std::int16_t* p = r.plane;
  std::size_t q = 0;
  for (; q + kBlock < r.Q; q += 2 * kBlock) {
    __m512i e0 = _mm512_setzero_si512(), o0 = e0, e1 = e0, o1 = e0;
    for (std::size_t c = 0; c < r.ncell; ++c) {
      const __m512i w = _mm512_set1_epi32(r.wcell[c]);
      const std::int16_t* s = p + q + r.off[c];
      e0 = _mm512_dpwssd_epi32(e0, _mm512_loadu_si512(s), w);
      o0 = _mm512_dpwssd_epi32(o0, _mm512_loadu_si512(s + 1), w);
      e1 = _mm512_dpwssd_epi32(e1, _mm512_loadu_si512(s + 32), w);
      o1 = _mm512_dpwssd_epi32(o1, _mm512_loadu_si512(s + 33), w);
    }
    store32_avx512(st, k, e0, o0, r.buf, q);
    store32_avx512(st, k, e1, o1, r.buf, q + kBlock);
  }
  for (; q < r.Q; q += kBlock) {
    __m512i e0 = _mm512_setzero_si512(), o0 = e0;
    for (std::size_t c = 0; c < r.ncell; ++c) {
      const __m512i w = _mm512_set1_epi32(r.wcell[c]);
      const std::int16_t* s = p + q + r.off[c];
      e0 = _mm512_dpwssd_epi32(e0, _mm512_loadu_si512(s), w);
      o0 = _mm512_dpwssd_epi32(o0, _mm512_loadu_si512(s + 1), w);
    }
    store32_avx512(st, k, e0, o0, r.buf, q);
  }
}

using RunFn = void (*)(const ChannelRun&);
RunFn kernel_for(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Vnni: return run_vnni;
    case Int8Kernel::Avx2: return run_avx2;
    case Int8Kernel::Scalar: break;
  }
  return run_scalar;
}

// ---- the int16 phase planes ----

bool cpu_has_vbmi2() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vbmi2");
}

// Eight zero int16 at p, or n of them when n > 8.
inline void zero16(std::int16_t* p, std::size_t n) {
  if (n <= 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_setzero_si128());
  else
    std::fill_n(p, n, std::int16_t{0});
}

// A phase row's columns: j < n reads input column first + j * stride; [lo, hi) of them are inside
// the input row of W (the same for every row of a phase: computed once, not per row).
struct PhaseCols {
  std::size_t n, stride;
  std::ptrdiff_t first, lo, hi;
  PhaseCols(std::size_t n_, std::size_t W, std::ptrdiff_t first_, std::size_t stride_)
      : n(n_), stride(stride_), first(first_) {
    const auto s = static_cast<std::ptrdiff_t>(stride), w = static_cast<std::ptrdiff_t>(W),
               sn = static_cast<std::ptrdiff_t>(n);
    lo = std::min(sn, first >= 0 ? 0 : (-first + s - 1) / s);
    hi = std::clamp<std::ptrdiff_t>(w - first <= 0 ? 0 : (w - first + s - 1) / s, lo, sn);
  }
};

// dst[j] = row[first + j * stride] - zx for j < n, 0 outside [lo, hi) (the zero point), eight at
// a time for strides 1 and 2 (SSE4.1, the baseline). Writes up to 8 elements past dst + n (the
// caller writes what lies there later, or never reads it as a kept position's input) and reads x
// below x_end only: per row, exact-length stores and copies were half of a 7x7 plane's time.
void phase_row16(std::int16_t* dst, const PhaseCols& pc, const std::uint8_t* row, bool x_signed, std::int16_t zx,
                 const std::uint8_t* x_end) {
  const std::ptrdiff_t lo = pc.lo, hi = pc.hi, sn = static_cast<std::ptrdiff_t>(pc.n);
  const std::size_t stride = pc.stride;
  if (hi <= lo) {
    zero16(dst, pc.n);
    return;
  }
  zero16(dst, static_cast<std::size_t>(lo));  // the data below overwrites what passes lo
  const std::uint8_t* src = row + pc.first + lo * static_cast<std::ptrdiff_t>(stride);
  const auto cnt = static_cast<std::size_t>(hi - lo);
  std::int16_t* d = dst + lo;
  const __m128i z = _mm_set1_epi16(zx);
  std::size_t j = 0;
  if (stride == 1) {
    for (; j < cnt && src + j + 8 <= x_end; j += 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + j));
      const __m128i v = x_signed ? _mm_cvtepi8_epi16(b) : _mm_cvtepu8_epi16(b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), _mm_sub_epi16(v, z));
    }
  } else if (stride == 2) {
    for (; j < cnt && src + 2 * j + 16 <= x_end; j += 8) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * j));
      const __m128i v = x_signed ? _mm_srai_epi16(_mm_slli_epi16(b, 8), 8) : _mm_and_si128(b, _mm_set1_epi16(0xFF));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + j), _mm_sub_epi16(v, z));
    }
  }
  for (; j < cnt; ++j) {
    const std::uint8_t b = src[j * stride];
    d[j] = static_cast<std::int16_t>((x_signed ? static_cast<std::int8_t>(b) : b) - zx);
  }
  zero16(dst + hi, static_cast<std::size_t>(sn - hi));  // after the data: over its overrun
}

// The geometry of one call: the phases some tap reads, their extents, the tap cells.
struct Layout {
  std::array<std::size_t, 3> O{}, ext{};
  std::array<std::vector<std::size_t>, 3> residues;
  std::size_t vol = 0, data = 0;  // elements per phase, and of all phases
  std::size_t Q = 0, Qr = 0;      // positions computed, rounded up to the vector block
  std::size_t plane = 0;          // int16 elements of a channel's plane (data and the kernels' overrun)
  std::vector<std::size_t> off;   // per cell
  std::vector<std::array<std::size_t, 2>> cell_taps;  // per cell: tap a, tap b (== taps: none)
  std::size_t taps = 0;
  // Stride 1, one depth slice, no depth padding: the input rows land in plane rows
  // [top, top + H) with their pad columns at fixed places, so build_plane_expand can write them
  // 64 elements at a time; expand[k]: which of chunk k's 64 elements come from the input.
  bool dense = false;
  std::size_t top = 0, bottom = 0;  // where the input rows start and end
  std::vector<std::uint64_t> expand;
  // One output depth slice of short rows: compress[k] marks which of positions [64k, 64k + 64)
  // are kept (column < O[2]), for copy_rows_compress.
  std::vector<std::uint64_t> compress;
};

Layout layout(const Conv8Shape& s) {
  Layout L;
  for (std::size_t i = 0; i < 3; ++i) {
    L.O[i] = s.out(i);
    L.ext[i] = (s.in[i] + s.pad_begin[i] + s.pad_end[i] + s.stride[i] - 1) / s.stride[i];
    std::vector<bool> used(s.stride[i], false);
    for (std::size_t k = 0; k < s.kernel[i]; ++k) used[k * s.dilation[i] % s.stride[i]] = true;
    for (std::size_t r = 0; r < s.stride[i]; ++r)
      if (used[r]) L.residues[i].push_back(r);
  }
  L.vol = L.ext[0] * L.ext[1] * L.ext[2];
  L.data = L.residues[0].size() * L.residues[1].size() * L.residues[2].size() * L.vol;
  auto phase_index = [&](std::size_t i, std::size_t r) {
    return static_cast<std::size_t>(std::find(L.residues[i].begin(), L.residues[i].end(), r) - L.residues[i].begin());
  };
  // Tap (kd, kh, kw) reads its phase at (o + k * dil / stride) per dimension: plane[q + off].
  L.taps = s.kernel[0] * s.kernel[1] * s.kernel[2];
  std::vector<std::array<std::size_t, 2>> by_off;  // (offset, tap)
  for (std::size_t kd = 0, t = 0; kd < s.kernel[0]; ++kd)
    for (std::size_t kh = 0; kh < s.kernel[1]; ++kh)
      for (std::size_t kw = 0; kw < s.kernel[2]; ++kw, ++t) {
        const std::size_t td = kd * s.dilation[0], th = kh * s.dilation[1], tw = kw * s.dilation[2];
        const std::size_t ph =
            (phase_index(0, td % s.stride[0]) * L.residues[1].size() + phase_index(1, th % s.stride[1])) *
                L.residues[2].size() +
            phase_index(2, tw % s.stride[2]);
        by_off.push_back(
            {ph * L.vol + (td / s.stride[0] * L.ext[1] + th / s.stride[1]) * L.ext[2] + tw / s.stride[2], t});
      }
  // Taps one element apart share a cell (an int16 pair): a 3x3 stride-1 row gives (0, 1), (2).
  std::sort(by_off.begin(), by_off.end());
  for (std::size_t i = 0; i < by_off.size();) {
    const bool pair = i + 1 < by_off.size() && by_off[i + 1][0] == by_off[i][0] + 1;
    L.off.push_back(by_off[i][0]);
    L.cell_taps.push_back({by_off[i][1], pair ? by_off[i + 1][1] : L.taps});
    i += pair ? 2 : 1;
  }
  // Positions over the phase extents; the last one is the last kept position, so every read of
  // a kept position stays inside its phase.
  L.Q = ((L.O[0] - 1) * L.ext[1] + L.O[1] - 1) * L.ext[2] + L.O[2];
  L.Qr = (L.Q + kBlock - 1) / kBlock * kBlock;
  // A block's loads reach Qr + off (its odd load of 32 int16 at the last block's start + 1).
  // (64: build_plane_expand's last chunk and the kernels' last block may pass the data.)
  L.plane = std::max(L.data, L.Qr + L.off.back() + 1) + 64;
  // Input rows of at most 64 columns: there the row build's per-row work dominates (one-node
  // QLinearConvs, min of 300 runs: 960x7x7 0.082 -> 0.053 ms, 384x14x14 0.061 -> 0.041,
  // 144x56x56 0.178 -> 0.153); on 112 columns the expands were slower (0.152 -> 0.185).
  L.dense = s.stride == std::array<std::size_t, 3>{1, 1, 1} && s.in[0] == 1 && s.pad_begin[0] == 0 &&
            s.pad_end[0] == 0 && s.in[2] <= 64;
  // (Rows of at most 64 again: on 112-column rows the compresses cost more than the row copies.)
  if (L.O[0] == 1 && L.O[2] <= 64) {
    L.compress.assign((L.Q + 63) / 64, 0);
    for (std::size_t q = 0; q < L.Q; ++q)
      if (q % L.ext[2] < L.O[2]) L.compress[q / 64] |= std::uint64_t{1} << (q % 64);
  }
  if (L.dense) {
    L.top = s.pad_begin[1] * L.ext[2];
    const std::size_t R = s.in[1] * L.ext[2], pl = s.pad_begin[2], W = s.in[2];
    L.bottom = L.top + R;
    L.expand.assign((R + 63) / 64, 0);
    for (std::size_t e = 0; e < R; ++e)
      if (e % L.ext[2] >= pl && e % L.ext[2] < pl + W) L.expand[e / 64] |= std::uint64_t{1} << (e % 64);
  }
  return L;
}

// Channel c's phase planes (int16, x - zx) into plane[0, L.data), rows in order (each row's
// overrun lands where a later row is written, or in the slack after the data); x_end: the end
// of x.
void build_plane(const Conv8Shape& s, const Layout& L, const std::uint8_t* xc, bool x_signed, std::int16_t zx,
                 const std::uint8_t* x_end, std::int16_t* plane) {
  const std::size_t D = s.in[0], H = s.in[1], W = s.in[2];
  std::int16_t* dst = plane;
  for (std::size_t a : L.residues[0])
    for (std::size_t b : L.residues[1])
      for (std::size_t e : L.residues[2]) {
        const PhaseCols pc(L.ext[2], W, static_cast<std::ptrdiff_t>(e) - static_cast<std::ptrdiff_t>(s.pad_begin[2]),
                           s.stride[2]);
        for (std::size_t d = 0; d < L.ext[0]; ++d) {
          const auto id =
              static_cast<std::ptrdiff_t>(d * s.stride[0] + a) - static_cast<std::ptrdiff_t>(s.pad_begin[0]);
          for (std::size_t r = 0; r < L.ext[1]; ++r, dst += L.ext[2]) {
            const auto ih =
                static_cast<std::ptrdiff_t>(r * s.stride[1] + b) - static_cast<std::ptrdiff_t>(s.pad_begin[1]);
            if (id < 0 || id >= static_cast<std::ptrdiff_t>(D) || ih < 0 || ih >= static_cast<std::ptrdiff_t>(H)) {
              for (std::size_t j = 0; j < L.ext[2]; j += 8)
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), _mm_setzero_si128());
              continue;
            }
            phase_row16(dst, pc, xc + (static_cast<std::size_t>(id) * H + static_cast<std::size_t>(ih)) * W, x_signed,
                        zx, x_end);
          }
        }
      }
}

// The kept positions of a channel (rows of O[2] elements of elem bytes in buf, ext[2] apart) to
// its plane of the output, rows in order: a row whose 16-byte rounding stays inside the channel's
// plane is copied in 16-byte steps (the next rows overwrite the excess), the others by memcpy.
void copy_rows(const Layout& L, const std::uint8_t* buf, std::uint8_t* dst, std::size_t elem) {
  const std::size_t bytes = L.O[2] * elem, rows = L.O[0] * L.O[1], rounded = (bytes + 15) / 16 * 16;
  for (std::size_t sl = 0, i = 0; sl < L.O[0]; ++sl)
    for (std::size_t r = 0; r < L.O[1]; ++r, ++i) {
      const std::uint8_t* src = buf + (sl * L.ext[1] + r) * L.ext[2] * elem;
      std::uint8_t* d = dst + i * bytes;
      if (rounded <= 64 && i * bytes + rounded <= rows * bytes) {
        for (std::size_t b = 0; b < rounded; b += 16)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(d + b),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + b)));
      } else {
        std::memcpy(d, src, bytes);
      }
    }
}

// build_plane for a dense layout (Layout::dense) with AVX512-VBMI2: vpexpandb places the input's
// bytes (read in order, popcount(mask) per chunk, never past the channel) at the chunk's data
// columns and x's zero point at its pad columns, then the chunk is widened and offset as in
// phase_row16. One expand per 64 plane elements where each row took a dozen instructions (a 7x7
// plane: a third of the conv's time). Writes up to 63 elements past the data (the slack).
__attribute__((target("avx512f,avx512bw,avx512vbmi2"))) void build_plane_expand(const Layout& L, const std::uint8_t* xc,
                                                                                bool x_signed, std::int16_t zx,
                                                                                std::int16_t* plane) {
  const __m512i zero = _mm512_setzero_si512(), z = _mm512_set1_epi16(zx);
  const __m512i fill = _mm512_set1_epi8(static_cast<char>(zx));
  for (std::size_t i = 0; i < L.top; i += 32) _mm512_storeu_si512(plane + i, zero);
  std::int16_t* d = plane + L.top;
  const std::uint8_t* src = xc;
  for (std::size_t k = 0; k < L.expand.size(); ++k, d += 64) {
    const __m512i b = _mm512_mask_expandloadu_epi8(fill, L.expand[k], src);
    src += __builtin_popcountll(L.expand[k]);
    // (Masked extracts with every lane set: the unmasked forms trip GCC 12's maybe-uninitialized.)
    const __m256i b0 = _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xF, b, 0),
                  b1 = _mm512_mask_extracti64x4_epi64(_mm256_setzero_si256(), 0xF, b, 1);
    const __m512i v0 = x_signed ? _mm512_cvtepi8_epi16(b0) : _mm512_cvtepu8_epi16(b0);
    const __m512i v1 = x_signed ? _mm512_cvtepi8_epi16(b1) : _mm512_cvtepu8_epi16(b1);
    _mm512_storeu_si512(d, _mm512_sub_epi16(v0, z));
    _mm512_storeu_si512(d + 32, _mm512_sub_epi16(v1, z));
  }
  // The bottom pad rows, after the last chunk's overrun.
  for (std::size_t i = L.bottom; i < L.data; i += 32) _mm512_storeu_si512(plane + i, zero);
}

// copy_rows for 8-bit outputs of one depth slice with AVX512-VBMI2: vpcompressb packs each 64
// positions' kept bytes (the rows in order are the output's plane) and a masked store writes
// them, no per-row copy. (Into a register, then stored: vpcompressb's memory form took 3x the
// whole conv's time on this AMD core.)
__attribute__((target("avx512f,avx512bw,avx512vbmi2"))) void copy_rows_compress(const Layout& L,
                                                                                const std::uint8_t* buf,
                                                                                std::uint8_t* dst) {
  for (std::size_t k = 0; k < L.compress.size(); ++k) {
    const __m512i v = _mm512_maskz_compress_epi8(L.compress[k], _mm512_loadu_si512(buf + 64 * k));
    const int n = __builtin_popcountll(L.compress[k]);
    _mm512_mask_storeu_epi8(dst, n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1, v);
    dst += n;
  }
}

void check_shape(const Conv8Shape& s) {
  for (std::size_t i = 0; i < 3; ++i)
    if (s.in[i] == 0 || s.kernel[i] == 0 || s.stride[i] == 0 || s.dilation[i] == 0)
      throw std::invalid_argument("conv8_depthwise: sizes, kernel, strides and dilations must be positive");
}

}  // namespace

void conv8_depthwise(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx, const std::int32_t* w,
                     const Conv8Output& out, bool parallel) {
  check_shape(s);
  if (!out.i32 && !out.f32 && !out.q8) throw std::invalid_argument("conv8_depthwise: no output");
  if (s.C == 0 || s.out(0) == 0 || s.out(1) == 0 || s.out(2) == 0) return;
  const Layout L = layout(s);
  const Int8Kernel kernel = active_int8_kernel();
  const RunFn run = kernel_for(kernel);
  const bool vbmi2 = kernel == Int8Kernel::Vnni && cpu_has_vbmi2();
  const bool expand = L.dense && vbmi2, compress = !L.compress.empty() && out.q8 && vbmi2;
  const bool scalar = run == run_scalar;
  const std::size_t elem = out.q8 ? 1 : 4, in_sp = s.in[0] * s.in[1] * s.in[2];
  const std::size_t ncell = L.off.size();
  const std::uint8_t* x_end = x + s.C * in_sp;
  auto* y = static_cast<std::uint8_t*>(out.q8 ? out.q8 : out.i32 ? static_cast<void*>(out.i32) : out.f32);
  // Per thread: the plane (int16), the channel's output positions (elem bytes each; the scalar
  // kernel's int32 sums), its cell weights.
  // (buf: 64 bytes more for copy_rows' 16-byte steps.)
  const std::size_t plane_bytes = (L.plane * 2 + 63) / 64 * 64, buf_bytes = (L.Qr * 4 + 127) / 64 * 64;
  const std::size_t scratch_floats = (plane_bytes + buf_bytes * (scalar ? 2 : 1) + ncell * 4) / 4 + 16;
  auto channels = [&](std::size_t c0, std::size_t c1) {
    detail::Scratch scratch(scratch_floats);
    auto* base = reinterpret_cast<std::uint8_t*>(scratch.data());
    auto* plane = reinterpret_cast<std::int16_t*>(base);
    void* buf = base + plane_bytes;
    auto* acc = reinterpret_cast<std::int32_t*>(base + plane_bytes + buf_bytes);
    auto* wcell = reinterpret_cast<std::int32_t*>(base + plane_bytes + buf_bytes * (scalar ? 2 : 1));
    // After the data: read for discarded positions only, zero so that no read is of
    // uninitialized memory (build_plane's overrun writes finite values there).
    std::fill(plane + L.data, plane + L.plane, std::int16_t{0});
    for (std::size_t c = c0; c < c1; ++c) {
      if (expand)
        build_plane_expand(L, x + c * in_sp, x_signed, static_cast<std::int16_t>(zx), plane);
      else
        build_plane(s, L, x + c * in_sp, x_signed, static_cast<std::int16_t>(zx), x_end, plane);
      const std::int32_t* wc = w + c * L.taps;
      for (std::size_t i = 0; i < ncell; ++i) {
        const auto [a, b] = L.cell_taps[i];
        const auto lo = static_cast<std::uint16_t>(wc[a]), hi = static_cast<std::uint16_t>(b < L.taps ? wc[b] : 0);
        wcell[i] = static_cast<std::int32_t>(lo | static_cast<std::uint32_t>(hi) << 16);
      }
      run(ChannelRun{plane, L.off.data(), wcell, ncell, L.Q, buf, acc, channel_store(out, c)});
      if (compress)
        copy_rows_compress(L, static_cast<const std::uint8_t*>(buf), y + c * out.ld);
      else
        copy_rows(L, static_cast<const std::uint8_t*>(buf), y + c * out.ld * elem, elem);
    }
  };
  // About 2^15 multiply-adds per chunk at least: a helper's wake-up costs more than a small plane.
  const std::size_t work = std::max<std::size_t>(1, L.Q * ncell + L.data);
  if (parallel)
    parallel_chunks(s.C, std::max<std::size_t>(1, (std::size_t{1} << 15) / work), channels);
  else
    channels(0, s.C);
}

void conv8_depthwise_reference(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx,
                               const std::int32_t* w, std::int32_t* acc) {
  check_shape(s);
  const std::array<std::size_t, 3> O{s.out(0), s.out(1), s.out(2)};
  const std::size_t taps = s.kernel[0] * s.kernel[1] * s.kernel[2], in_sp = s.in[0] * s.in[1] * s.in[2];
  auto coord = [&](std::size_t i, std::size_t o, std::size_t k) {
    return static_cast<std::ptrdiff_t>(o * s.stride[i] + k * s.dilation[i]) -
           static_cast<std::ptrdiff_t>(s.pad_begin[i]);
  };
  for (std::size_t c = 0; c < s.C; ++c)
    for (std::size_t od = 0; od < O[0]; ++od)
      for (std::size_t oh = 0; oh < O[1]; ++oh)
        for (std::size_t ow = 0; ow < O[2]; ++ow) {
          std::int64_t sum = 0;
          for (std::size_t kd = 0, t = 0; kd < s.kernel[0]; ++kd)
            for (std::size_t kh = 0; kh < s.kernel[1]; ++kh)
              for (std::size_t kw = 0; kw < s.kernel[2]; ++kw, ++t) {
                const std::ptrdiff_t id = coord(0, od, kd), ih = coord(1, oh, kh), iw = coord(2, ow, kw);
                if (id < 0 || ih < 0 || iw < 0 || id >= static_cast<std::ptrdiff_t>(s.in[0]) ||
                    ih >= static_cast<std::ptrdiff_t>(s.in[1]) || iw >= static_cast<std::ptrdiff_t>(s.in[2]))
                  continue;
                const std::uint8_t b =
                    x[c * in_sp + (static_cast<std::size_t>(id) * s.in[1] + static_cast<std::size_t>(ih)) * s.in[2] +
                      static_cast<std::size_t>(iw)];
                const std::int64_t v = x_signed ? static_cast<std::int8_t>(b) : b;
                sum += (v - zx) * w[c * taps + t];
              }
          acc[c * O[0] * O[1] * O[2] + (od * O[1] + oh) * O[2] + ow] =
              static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(sum)));
        }
}

}  // namespace onnxforge::simd
