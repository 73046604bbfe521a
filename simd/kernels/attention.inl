// Attention over a block of keys in place, for one ISA level (simd/attention.h): scores as dot
// products of query rows with key rows, exp against the row max, and the probability-weighted
// sum of value rows.
#include "simd/detail/attention_kernels.h"
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

// Four keys per pass: four independent FMA chains, and each query vector loaded once for them.
void scores(std::size_t rows, const float* const* q, std::size_t n, std::size_t d, const float* k, std::size_t ldk,
            float scale, float* s, std::size_t lds) {
  const std::size_t body = d / kW * kW, tail = d - body;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* qr = q[r];
    float* sr = s + r * lds;
    std::size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float* k0 = k + j * ldk;
      const float *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
      V a0(0.f), a1(0.f), a2(0.f), a3(0.f);
      for (std::size_t e = 0; e < body; e += kW) {
        const V x = V::load_unaligned(qr + e);
        a0 = vfma(x, V::load_unaligned(k0 + e), a0);
        a1 = vfma(x, V::load_unaligned(k1 + e), a1);
        a2 = vfma(x, V::load_unaligned(k2 + e), a2);
        a3 = vfma(x, V::load_unaligned(k3 + e), a3);
      }
      if (tail != 0) {
        const V x = load_partial(qr + body, tail);
        a0 = vfma(x, load_partial(k0 + body, tail), a0);
        a1 = vfma(x, load_partial(k1 + body, tail), a1);
        a2 = vfma(x, load_partial(k2 + body, tail), a2);
        a3 = vfma(x, load_partial(k3 + body, tail), a3);
      }
      sr[j] = scale * xsimd::hadd(a0);
      sr[j + 1] = scale * xsimd::hadd(a1);
      sr[j + 2] = scale * xsimd::hadd(a2);
      sr[j + 3] = scale * xsimd::hadd(a3);
    }
    for (; j < n; ++j) {
      const float* kj = k + j * ldk;
      V a(0.f);
      for (std::size_t e = 0; e < body; e += kW) a = vfma(V::load_unaligned(qr + e), V::load_unaligned(kj + e), a);
      if (tail != 0) a = vfma(load_partial(qr + body, tail), load_partial(kj + body, tail), a);
      sr[j] = scale * xsimd::hadd(a);
    }
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
