// Row kernels for one ISA level: layer/RMS normalization, softmax, and reductions (over a
// contiguous row, and elementwise across rows).
#include "simd/kernels/isa_config.h"
#include "simd/kernels/vmath.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

V load_fill(const float* p, std::size_t n, float fill) {
  alignas(64) float tmp[kW];
  for (std::size_t i = 0; i < kW; ++i) tmp[i] = i < n ? p[i] : fill;
  return V::load_aligned(tmp);
}

float identity_of(RowReduce op) {
  switch (op) {
    case RowReduce::Max:
      return -INFINITY;
    case RowReduce::Min:
      return INFINITY;
    case RowReduce::Prod:
      return 1.f;
    default:
      return 0.f;
  }
}

template <RowReduce op>
V pre(V x) {
  if constexpr (op == RowReduce::SumAbs) return xsimd::abs(x);
  if constexpr (op == RowReduce::SumSquare) return x * x;
  if constexpr (op != RowReduce::SumAbs && op != RowReduce::SumSquare) return x;
}

template <RowReduce op>
V combine(V acc, V x) {
  if constexpr (op == RowReduce::Max) return vmax_nan(acc, x);
  if constexpr (op == RowReduce::Min) return vmin_nan(acc, x);
  if constexpr (op == RowReduce::Prod) return acc * x;
  if constexpr (op == RowReduce::Sum || op == RowReduce::SumAbs || op == RowReduce::SumSquare) return acc + x;
}

template <RowReduce op>
float horizontal(V v) {
  alignas(64) float tmp[kW];
  v.store_aligned(tmp);
  float r = tmp[0];
  for (std::size_t i = 1; i < kW; ++i) {
    if constexpr (op == RowReduce::Max) {
      r = (r != r || tmp[i] != tmp[i]) ? r + tmp[i] : (tmp[i] > r ? tmp[i] : r);
    } else if constexpr (op == RowReduce::Min) {
      r = (r != r || tmp[i] != tmp[i]) ? r + tmp[i] : (tmp[i] < r ? tmp[i] : r);
    } else if constexpr (op == RowReduce::Prod) {
      r *= tmp[i];
    } else {
      r += tmp[i];
    }
  }
  return r;
}

// Four independent accumulators hide the add/max latency.
template <RowReduce op>
float reduce_row_op(const float* x, std::size_t n) {
  const V id(identity_of(op));
  V a0 = id, a1 = id, a2 = id, a3 = id;
  std::size_t i = 0;
  for (; i + 4 * kW <= n; i += 4 * kW) {
    a0 = combine<op>(a0, pre<op>(V::load_unaligned(x + i)));
    a1 = combine<op>(a1, pre<op>(V::load_unaligned(x + i + kW)));
    a2 = combine<op>(a2, pre<op>(V::load_unaligned(x + i + 2 * kW)));
    a3 = combine<op>(a3, pre<op>(V::load_unaligned(x + i + 3 * kW)));
  }
  for (; i + kW <= n; i += kW) a0 = combine<op>(a0, pre<op>(V::load_unaligned(x + i)));
  if (i < n) a1 = combine<op>(a1, pre<op>(load_fill(x + i, n - i, identity_of(op))));
  return horizontal<op>(combine<op>(combine<op>(a0, a1), combine<op>(a2, a3)));
}

template <RowReduce op>
void accumulate_op(const float* x, float* acc, std::size_t n) {
  std::size_t i = 0;
  for (; i + kW <= n; i += kW)
    combine<op>(V::load_unaligned(acc + i), pre<op>(V::load_unaligned(x + i))).store_unaligned(acc + i);
  if (i < n)
    store_partial(combine<op>(load_partial(acc + i, n - i), pre<op>(load_partial(x + i, n - i))), acc + i, n - i);
}

#define ONNXFORGE_ROW_REDUCE_SWITCH(op, fn, ...)      \
  switch (op) {                                       \
    case RowReduce::Sum:                              \
      return fn<RowReduce::Sum>(__VA_ARGS__);         \
    case RowReduce::SumAbs:                           \
      return fn<RowReduce::SumAbs>(__VA_ARGS__);      \
    case RowReduce::SumSquare:                        \
      return fn<RowReduce::SumSquare>(__VA_ARGS__);   \
    case RowReduce::Max:                              \
      return fn<RowReduce::Max>(__VA_ARGS__);         \
    case RowReduce::Min:                              \
      return fn<RowReduce::Min>(__VA_ARGS__);         \
    case RowReduce::Prod:                             \
      return fn<RowReduce::Prod>(__VA_ARGS__);        \
  }

float reduce_row(RowReduce op, const float* x, std::size_t n) {
  ONNXFORGE_ROW_REDUCE_SWITCH(op, reduce_row_op, x, n)
  return 0.f;
}

void reduce_accumulate(RowReduce op, const float* x, float* acc, std::size_t n) {
  ONNXFORGE_ROW_REDUCE_SWITCH(op, accumulate_op, x, acc, n)
}
#undef ONNXFORGE_ROW_REDUCE_SWITCH

float sum_exp_shifted(const float* x, std::size_t n, float shift) {
  const V s(shift);
  V a0(0.f), a1(0.f);
  std::size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    a0 += vexp(V::load_unaligned(x + i) - s);
    a1 += vexp(V::load_unaligned(x + i + kW) - s);
  }
  for (; i + kW <= n; i += kW) a0 += vexp(V::load_unaligned(x + i) - s);
  if (i < n) a1 += vexp(load_fill(x + i, n - i, -INFINITY) - s);
  return horizontal<RowReduce::Sum>(a0 + a1);
}

void accumulate_exp_shifted(const float* x, const float* shift, float* acc, std::size_t n) {
  std::size_t i = 0;
  for (; i + kW <= n; i += kW)
    (V::load_unaligned(acc + i) + vexp(V::load_unaligned(x + i) - V::load_unaligned(shift + i)))
        .store_unaligned(acc + i);
  if (i < n)
    store_partial(load_partial(acc + i, n - i) + vexp(load_partial(x + i, n - i) - load_partial(shift + i, n - i)),
                  acc + i, n - i);
}

// Sum of (x - mean)^2: the second pass of a two-pass variance.
float sum_sq_dev(const float* x, std::size_t n, float mean) {
  const V m(mean);
  V a0(0.f), a1(0.f);
  std::size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    const V d0 = V::load_unaligned(x + i) - m, d1 = V::load_unaligned(x + i + kW) - m;
    a0 = vfma(d0, d0, a0);
    a1 = vfma(d1, d1, a1);
  }
  for (; i + kW <= n; i += kW) {
    const V d = V::load_unaligned(x + i) - m;
    a0 = vfma(d, d, a0);
  }
  if (i < n) {
    const V d = load_fill(x + i, n - i, mean) - m;
    a1 = vfma(d, d, a1);
  }
  return horizontal<RowReduce::Sum>(a0 + a1);
}

void layer_norm_row(const float* x, std::size_t n, const float* scale, const float* bias, float eps, float* y,
                    float* mean_out, float* inv_std_out) {
  const float mean = reduce_row_op<RowReduce::Sum>(x, n) / static_cast<float>(n);
  const float var = sum_sq_dev(x, n, mean) / static_cast<float>(n);
  const float inv = 1.f / std::sqrt(var + eps);
  if (mean_out != nullptr) *mean_out = mean;
  if (inv_std_out != nullptr) *inv_std_out = inv;
  const V m(mean), s(inv);
  std::size_t i = 0;
  auto one = [&](std::size_t at, std::size_t cnt) {
    const bool full = cnt == kW;
    const V xv = full ? V::load_unaligned(x + at) : load_partial(x + at, cnt);
    const V sc = full ? V::load_unaligned(scale + at) : load_partial(scale + at, cnt);
    V r = (xv - m) * s * sc;
    if (bias != nullptr) r += full ? V::load_unaligned(bias + at) : load_partial(bias + at, cnt);
    if (full) {
      r.store_unaligned(y + at);
    } else {
      store_partial(r, y + at, cnt);
    }
  };
  for (; i + kW <= n; i += kW) one(i, kW);
  if (i < n) one(i, n - i);
}

void rms_norm_row(const float* x, std::size_t n, const float* scale, float eps, float* y, float* inv_out) {
  const float ms = reduce_row_op<RowReduce::SumSquare>(x, n) / static_cast<float>(n);
  const float inv = 1.f / std::sqrt(ms + eps);
  if (inv_out != nullptr) *inv_out = inv;
  const V s(inv);
  std::size_t i = 0;
  for (; i + kW <= n; i += kW) {
    V r = V::load_unaligned(x + i) * s;
    if (scale != nullptr) r *= V::load_unaligned(scale + i);
    r.store_unaligned(y + i);
  }
  if (i < n) {
    V r = load_partial(x + i, n - i) * s;
    if (scale != nullptr) r *= load_partial(scale + i, n - i);
    store_partial(r, y + i, n - i);
  }
}

void softmax_row(const float* x, std::size_t n, float* y, bool log) {
  const float max = reduce_row_op<RowReduce::Max>(x, n);
  const V m(max);
  if (log) {
    const V lse(std::log(sum_exp_shifted(x, n, max)));
    map_span(x, y, n, [&](V v) { return (v - m) - lse; });
    return;
  }
  V a0(0.f);
  std::size_t i = 0;
  for (; i + kW <= n; i += kW) {
    const V e = vexp(V::load_unaligned(x + i) - m);
    e.store_unaligned(y + i);
    a0 += e;
  }
  if (i < n) {
    const V e = vexp(load_fill(x + i, n - i, -INFINITY) - m);
    store_partial(e, y + i, n - i);
    a0 += e;
  }
  const V inv(1.f / horizontal<RowReduce::Sum>(a0));
  map_span(y, y, n, [&](V v) { return v * inv; });
}

}  // namespace

void install_rows(KernelTable& t) {
  t.layer_norm_row = &layer_norm_row;
  t.rms_norm_row = &rms_norm_row;
  t.softmax_row = &softmax_row;
  t.reduce_row = &reduce_row;
  t.reduce_accumulate = &reduce_accumulate;
  t.sum_exp_shifted = &sum_exp_shifted;
  t.accumulate_exp_shifted = &accumulate_exp_shifted;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
