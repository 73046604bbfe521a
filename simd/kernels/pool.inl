// Channels-last pooling kernels and the 2-D transposes of the layout conversions for one ISA
// level (simd/pool_nhwc.cpp drives them). Pooling: every pixel's C channels are contiguous, so
// a window is KH x KW runs of C floats and the channels are the vector lanes. The driver clips the kernel rows to the input; these kernels clip the
// columns per output pixel (a window's interior needs no checks: only its start and length).
#include "simd/kernels/isa_config.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

// How a window combines its values.
enum class Op { MaxNan, Max, Sum };

// MaxNan: "v > acc || v != v", the largest value or the last NaN of the window. Max: the same
// on NaN-free data in one instruction (MAXPS returns its first operand only when it is greater).
template <Op O>
inline V step(V acc, V v) {
  if constexpr (O == Op::MaxNan) {
    return xsimd::select((v > acc) | xsimd::isnan(v), v, acc);
  } else if constexpr (O == Op::Max) {
#if defined(ONNXFORGE_SIMD_ISA_AVX512)
    return _mm512_max_ps(v, acc);
#elif defined(ONNXFORGE_SIMD_ISA_AVX2)
    return _mm256_max_ps(v, acc);
#else
    return _mm_max_ps(v, acc);
#endif
  } else {
    return acc + v;
  }
}

// Combines rows x cols pixels (rows row_stride apart, pixels C apart) of NV vectors from lane
// offset c; acc starts at `init`. Max also adds every value into `check` (NaN if one was NaN,
// or if +inf and -inf met: the caller then redoes the row exactly, for nothing). The sums run
// per window, so that no dependency chain spans more than a window.
template <Op O, int NV>
inline void window(const float* px, std::size_t rows, std::size_t row_stride, std::size_t cols, std::size_t C,
                   V init, V (&acc)[NV], V& check) {
  V sum[NV];
  for (int v = 0; v < NV; ++v) acc[v] = init, sum[v] = V(0.f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < cols; ++k) {
      const float* q = px + r * row_stride + k * C;
      for (int v = 0; v < NV; ++v) {
        const V x = V::load_unaligned(q + v * kW);
        acc[v] = step<O>(acc[v], x);
        if constexpr (O == Op::Max) sum[v] = sum[v] + x;
      }
    }
  if constexpr (O == Op::Max)
    for (int v = 0; v < NV; ++v) check = check + sum[v];
}

// Returns, for Op::Max, whether the row may have met a NaN (then its outputs are wrong).
template <Op O>
bool pool_row(const PoolRowArgs& a) {
  constexpr bool Max = O != Op::Sum;
  const auto C = static_cast<std::size_t>(a.C);
  const V init(Max ? -INFINITY : 0.f);
  V check(0.f);
  for (std::int64_t ow = a.ow0; ow < a.ow1; ++ow) {
    const std::int64_t w0 = ow * a.SW - a.pad_left;
    const std::int64_t b0 = w0 > 0 ? w0 : 0, b1 = w0 + a.KW < a.W ? w0 + a.KW : a.W;
    const std::size_t cols = b1 > b0 ? static_cast<std::size_t>(b1 - b0) : 0;
    float* out = a.y + ow * a.C;
    V scale(1.f);
    if constexpr (!Max) {
      std::int64_t wc = static_cast<std::int64_t>(cols);
      if (a.include_pad) {
        const std::int64_t end = w0 + a.KW < a.W + a.pad_right ? w0 + a.KW : a.W + a.pad_right;
        wc = end - w0;
      }
      const std::int64_t cnt = a.count_h * wc;
      scale = V(static_cast<float>(cnt > 0 ? cnt : 1));
    }
    auto finish = [&](V v) {
      if constexpr (Max) {
        return v;
      } else {
        return v / scale;
      }
    };
    std::size_t c = 0;
    if (a.rows == 0 || cols == 0) {  // the window is in the padding (x may be empty)
      const V v = finish(init);
      for (; c + kW <= C; c += kW) v.store_unaligned(out + c);
      if (c < C) store_partial(v, out + c, C - c);
      continue;
    }
    const std::size_t rows = a.rows;
    const float* px = a.x + b0 * a.C;
    for (; c + 4 * kW <= C; c += 4 * kW) {
      V acc[4];
      window<O, 4>(px + c, rows, a.row_stride, cols, C, init, acc, check);
      for (int v = 0; v < 4; ++v) finish(acc[v]).store_unaligned(out + c + v * kW);
    }
    for (; c + kW <= C; c += kW) {
      V acc[1];
      window<O, 1>(px + c, rows, a.row_stride, cols, C, init, acc, check);
      finish(acc[0]).store_unaligned(out + c);
    }
    if (c < C) {
      const std::size_t n = C - c;
      V acc = init;
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t k = 0; k < cols; ++k) {
          const V x = load_partial(px + r * a.row_stride + k * C + c, n);
          acc = step<O>(acc, x);
          if constexpr (O == Op::Max) check = check + x;
        }
      store_partial(finish(acc), out + c, n);
    }
  }
  return O == Op::Max && xsimd::any(xsimd::isnan(check));
}

// The max pool row: MAXPS per value, redone the exact way when the row met a NaN.
void max_pool_row(const PoolRowArgs& a) {
  if (pool_row<Op::Max>(a)) pool_row<Op::MaxNan>(a);
}

// out[j] = sum (or max) over r < rows of x[r * stride + j], j < n.
template <Op O>
void reduce_rows(const float* x, std::size_t rows, std::size_t stride, std::size_t n, float* out) {
  const V init(O != Op::Sum ? -INFINITY : 0.f);
  std::size_t c = 0;
  for (; c + 4 * kW <= n; c += 4 * kW) {
    V acc[4], check(0.f);
    window<O, 4>(x + c, rows, stride, 1, 0, init, acc, check);
    for (int v = 0; v < 4; ++v) acc[v].store_unaligned(out + c + v * kW);
  }
  for (; c + kW <= n; c += kW) {
    V acc[1], check(0.f);
    window<O, 1>(x + c, rows, stride, 1, 0, init, acc, check);
    acc[0].store_unaligned(out + c);
  }
  if (c < n) {
    V acc = init;
    for (std::size_t r = 0; r < rows; ++r) acc = step<O>(acc, load_partial(x + r * stride + c, n - c));
    store_partial(acc, out + c, n - c);
  }
}

void pool_reduce_rows(bool max, const float* x, std::size_t rows, std::size_t stride, std::size_t n, float* out) {
  if (max) {
    reduce_rows<Op::MaxNan>(x, rows, stride, n, out);
  } else {
    reduce_rows<Op::Sum>(x, rows, stride, n, out);
  }
}

// ---- 2-D transposes (layout conversions) ----

#if defined(ONNXFORGE_SIMD_ISA_SSE)
constexpr std::size_t kT = 4;
// y[j * ldy + i] = x[i * ldx + j], i, j < 4.
inline void block(const float* x, std::size_t ldx, float* y, std::size_t ldy) {
  __m128 r0 = _mm_loadu_ps(x), r1 = _mm_loadu_ps(x + ldx), r2 = _mm_loadu_ps(x + 2 * ldx),
         r3 = _mm_loadu_ps(x + 3 * ldx);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(y, r0), _mm_storeu_ps(y + ldy, r1), _mm_storeu_ps(y + 2 * ldy, r2), _mm_storeu_ps(y + 3 * ldy, r3);
}
#else
// 8 x 8 in ymm registers (AVX2 and AVX-512: 16 x 16 in zmm needs more shuffles per element
// and the conversions are bound by memory anyway).
constexpr std::size_t kT = 8;
inline void block(const float* x, std::size_t ldx, float* y, std::size_t ldy) {
  __m256 r[8], t[8];
  for (std::size_t i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + i * ldx);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(y + i * ldy, _mm256_permute2f128_ps(r[i], r[4 + i], 0x20));
    _mm256_storeu_ps(y + (4 + i) * ldy, _mm256_permute2f128_ps(r[i], r[4 + i], 0x31));
  }
}
#endif

// y[j * ldy + i] = x[i * ldx + j] for i < rows, j < cols.
void transpose_tile(const float* x, std::size_t ldx, float* y, std::size_t ldy, std::size_t rows, std::size_t cols) {
  std::size_t i = 0;
  for (; i + kT <= rows; i += kT) {
    std::size_t j = 0;
    for (; j + kT <= cols; j += kT) block(x + i * ldx + j, ldx, y + j * ldy + i, ldy);
    for (; j < cols; ++j)
      for (std::size_t k = 0; k < kT; ++k) y[j * ldy + i + k] = x[(i + k) * ldx + j];
  }
  if (i < rows)
    for (std::size_t j = 0; j < cols; ++j)
      for (std::size_t k = i; k < rows; ++k) y[j * ldy + k] = x[k * ldx + j];
}

}  // namespace

void install_pool(KernelTable& t) {
  t.transpose_tile = &transpose_tile;
  t.max_pool_row = &max_pool_row;
  t.avg_pool_row = [](const PoolRowArgs& a) { pool_row<Op::Sum>(a); };
  t.pool_reduce_rows = &pool_reduce_rows;
}

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
