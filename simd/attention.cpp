// Drivers of the in-place attention kernels: the active level's kernels, and the merge of the
// key blocks' partial softmax sums.
#include "simd/attention.h"

#include <cmath>

#include "simd/detail/attention_kernels.h"
#include "simd/detail/kernel_table.h"

namespace onnxforge::simd {
namespace {

const detail::AttentionKernels& kernels() {
  switch (detail::active_table().isa) {
    case Isa::Avx512: return detail::avx512::attention_kernels();
    case Isa::Avx2: return detail::avx2::attention_kernels();
    case Isa::Sse: break;
  }
  return detail::sse::attention_kernels();
}

}  // namespace

void attention_scores(std::size_t rows, const float* const* q, std::size_t n, std::size_t d, const float* k,
                      std::size_t ldk, float scale, float* s, std::size_t lds) {
  kernels().scores(rows, q, n, d, k, ldk, scale, s, lds);
}

void attention_exp(std::size_t rows, std::size_t n, float* s, std::size_t lds, float* max, float* sum) {
  kernels().exp(rows, n, s, lds, max, sum);
}

void attention_values(std::size_t rows, std::size_t n, std::size_t dv, const float* p, std::size_t ldp, const float* v,
                      std::size_t ldv, float* const* acc) {
  kernels().values(rows, n, dv, p, ldp, v, ldv, acc);
}

void merge_partials(std::size_t blocks, const float* m, const float* l, std::size_t ld_ml, const float* acc,
                    std::size_t ld_acc, std::size_t dv, float* y) {
  float top = -INFINITY;
  bool nan = false;
  for (std::size_t c = 0; c < blocks; ++c) {
    const float mc = m[c * ld_ml];
    nan = nan || mc != mc;
    top = mc > top ? mc : top;
  }
  if (nan || top == -INFINITY) {  // NaN scores give NaN (as softmax); no visible key gives zeros
    for (std::size_t e = 0; e < dv; ++e) y[e] = nan ? NAN : 0.f;
    return;
  }
  float total = 0.f;
  for (std::size_t e = 0; e < dv; ++e) y[e] = 0.f;
  for (std::size_t c = 0; c < blocks; ++c) {
    const float mc = m[c * ld_ml];
    if (mc == -INFINITY) continue;
    const float w = std::exp(mc - top);
    total += w * l[c * ld_ml];
    const float* a = acc + c * ld_acc;
    for (std::size_t e = 0; e < dv; ++e) y[e] += w * a[e];
  }
  const float inv = 1.f / total;
  for (std::size_t e = 0; e < dv; ++e) y[e] *= inv;
}

}  // namespace onnxforge::simd
