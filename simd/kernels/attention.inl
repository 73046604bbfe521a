// Attention over a block of keys in place, for one ISA level (simd/attention.h): scores as dot
// products of query rows with key rows, exp against the row max, and the probability-weighted
// sum of value rows.
#include "simd/detail/attention_kernels.h"
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

// Lane i = the sum of a[i]'s lanes, for kW vectors. xsimd 8.1's AVX-512 haddp puts the sums in
// the wrong lanes: there, each vector is folded to 256 bits and two AVX transposing reductions
// of 8 run.
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
inline __m256 sum_lanes8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}
inline V sum_lanes(const V* a) {
  __m256 h[kW];
  for (std::size_t i = 0; i < kW; ++i)
    h[i] = _mm256_add_ps(_mm512_castps512_ps256(a[i]), _mm512_extractf32x8_ps(a[i], 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(sum_lanes8(h)), sum_lanes8(h + 8), 1);
}
#else
inline V sum_lanes(const V* a) { return xsimd::haddp(a); }
#endif

// kW keys per pass, one accumulator each (independent FMA chains; each query vector is loaded
// once for all of them), reduced together into one vector of scores.
template <bool Full>
inline void score_keys(const float* qr, const float* k, std::size_t ldk, std::size_t keys, std::size_t d, float scale,
                       float* out) {
  const std::size_t body = d / kW * kW, tail = d - body;
  V acc[kW];
  for (std::size_t i = 0; i < kW; ++i) acc[i] = V(0.f);
  for (std::size_t e = 0; e < body; e += kW) {
    const V x = V::load_unaligned(qr + e);
    for (std::size_t i = 0; i < kW; ++i)
      if (Full || i < keys) acc[i] = vfma(x, V::load_unaligned(k + i * ldk + e), acc[i]);
  }
  if (tail != 0) {
    const V x = load_partial(qr + body, tail);
    for (std::size_t i = 0; i < kW; ++i)
      if (Full || i < keys) acc[i] = vfma(x, load_partial(k + i * ldk + body, tail), acc[i]);
  }
  const V sums = sum_lanes(acc) * V(scale);
  if (Full) {
    sums.store_unaligned(out);
  } else {
    store_partial(sums, out, keys);
  }
}

void scores(std::size_t rows, const float* const* q, std::size_t n, std::size_t d, const float* k, std::size_t ldk,
            float scale, float* s, std::size_t lds) {
  for (std::size_t r = 0; r < rows; ++r) {
    std::size_t j = 0;
    for (; j + kW <= n; j += kW) score_keys<true>(q[r], k + j * ldk, ldk, kW, d, scale, s + r * lds + j);
    if (j < n) score_keys<false>(q[r], k + j * ldk, ldk, n - j, d, scale, s + r * lds + j);
  }
}

void exp_rows(std::size_t rows, std::size_t n, float* s, std::size_t lds, float* max, float* sum) {
  const std::size_t body = n / kW * kW, tail = n - body;
  for (std::size_t r = 0; r < rows; ++r) {
    float* x = s + r * lds;
    V mv(-INFINITY);
    for (std::size_t j = 0; j < body; j += kW) mv = vmax_nan(V::load_unaligned(x + j), mv);
    alignas(64) float lanes[kW];
    mv.store_aligned(lanes);
    float m = -INFINITY;
    for (std::size_t i = 0; i < kW; ++i) m = lanes[i] != lanes[i] || lanes[i] > m ? lanes[i] : m;
    for (std::size_t j = body; j < n; ++j) m = x[j] != x[j] || x[j] > m ? x[j] : m;
    if (m != m) {
      for (std::size_t j = 0; j < n; ++j) x[j] = NAN;  // as softmax: NaN in, NaN out
      max[r] = m, sum[r] = NAN;
      continue;
    }
    max[r] = m;
    if (m == -INFINITY) {
      for (std::size_t j = 0; j < n; ++j) x[j] = 0.f;
      sum[r] = 0.f;
      continue;
    }
    const V shift(m);
    V a(0.f);
    for (std::size_t j = 0; j < body; j += kW) {
      const V e = vexp(V::load_unaligned(x + j) - shift);
      e.store_unaligned(x + j);
      a += e;
    }
    if (tail != 0) {
      store_partial(vexp(load_partial(x + body, tail) - shift), x + body, tail);
      a += load_partial(x + body, tail);  // the lanes past the row read as 0
    }
    sum[r] = xsimd::hadd(a);
  }
}

// Up to NV vectors of one accumulator row, in registers over the whole key block.
template <std::size_t NV>
void values_block(std::size_t n, const float* p, const float* v, std::size_t ldv, float* acc, std::size_t last) {
  V c[NV];
  for (std::size_t i = 0; i < NV; ++i)
    c[i] = i + 1 < NV || last == kW ? V::load_unaligned(acc + i * kW) : load_partial(acc + i * kW, last);
  for (std::size_t j = 0; j < n; ++j) {
    const V pj(p[j]);
    const float* vj = v + j * ldv;
    for (std::size_t i = 0; i < NV; ++i)
      c[i] = vfma(pj, i + 1 < NV || last == kW ? V::load_unaligned(vj + i * kW) : load_partial(vj + i * kW, last),
                  c[i]);
  }
  for (std::size_t i = 0; i < NV; ++i) {
    if (i + 1 < NV || last == kW) {
      c[i].store_unaligned(acc + i * kW);
    } else {
      store_partial(c[i], acc + i * kW, last);
    }
  }
}

void values(std::size_t rows, std::size_t n, std::size_t dv, const float* p, std::size_t ldp, const float* v,
            std::size_t ldv, float* const* acc) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* pr = p + r * ldp;
    std::size_t e = 0;
    for (; e + 4 * kW <= dv; e += 4 * kW) values_block<4>(n, pr, v + e, ldv, acc[r] + e, kW);
    const std::size_t left = dv - e;
    if (left == 0) continue;
    const std::size_t nv = (left + kW - 1) / kW, last = left - (nv - 1) * kW;
    switch (nv) {
      case 1: values_block<1>(n, pr, v + e, ldv, acc[r] + e, last); break;
      case 2: values_block<2>(n, pr, v + e, ldv, acc[r] + e, last); break;
      case 3: values_block<3>(n, pr, v + e, ldv, acc[r] + e, last); break;
      default: values_block<4>(n, pr, v + e, ldv, acc[r] + e, last); break;
    }
  }
}

}  // namespace

const AttentionKernels& attention_kernels() {
  static const AttentionKernels k{.scores = &scores, .exp = &exp_rows, .values = &values};
  return k;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
