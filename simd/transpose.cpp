// N-d transpose / strided gather.
//
// Output dims are listed with the input stride each one walks; size-1 dims are dropped and
// neighbours that are contiguous in the input in the same order are merged. Then:
//  - the innermost output dim is unit-stride in the input: copy runs of it (memcpy rows);
//    this is the attention permutation (0,2,1,3), whose innermost head_dim stays in place;
//  - some other output dim is unit-stride in the input: transpose 2-D planes between that dim
//    and the innermost one in cache-sized tiles (the 2-D transpose is one such plane);
//  - no unit-stride dim (a strided view): gather along the innermost dim.
#include "simd/transpose.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "simd/detail/parallel.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace onnxforge::simd {
namespace {

struct Dim {
  std::int64_t size;
  std::int64_t in_stride;   // input stride (elements) of this output dim
  std::int64_t out_stride;  // output stride (elements)
};

std::vector<Dim> canonical_dims(std::span<const std::int64_t> shape, std::span<const std::int64_t> perm,
                                std::span<const std::int64_t> strides) {
  const std::size_t r = shape.size();
  std::vector<Dim> dims;
  for (std::size_t d = 0; d < r; ++d) {
    const auto src = static_cast<std::size_t>(perm[d]);
    if (shape[src] == 1) continue;
    const Dim next{shape[src], strides[src], 0};
    if (!dims.empty() && dims.back().in_stride == next.in_stride * next.size) {
      dims.back().size *= next.size;
      dims.back().in_stride = next.in_stride;
      continue;
    }
    dims.push_back(next);
  }
  std::int64_t s = 1;
  for (std::size_t d = dims.size(); d-- > 0;) dims[d].out_stride = s, s *= dims[d].size;
  return dims;
}

// Iterates the multi-index of `outer` dims for flat indices [begin, end), tracking offsets.
struct Odometer {
  const std::vector<Dim>& dims;
  std::vector<std::int64_t> idx;
  std::int64_t in_off = 0, out_off = 0;

  Odometer(const std::vector<Dim>& d, std::size_t begin) : dims(d), idx(d.size(), 0) {
    for (std::size_t i = dims.size(); i-- > 0;) {
      idx[i] = static_cast<std::int64_t>(begin % static_cast<std::size_t>(dims[i].size));
      begin /= static_cast<std::size_t>(dims[i].size);
      in_off += idx[i] * dims[i].in_stride;
      out_off += idx[i] * dims[i].out_stride;
    }
  }
  void next() {
    for (std::size_t i = dims.size(); i-- > 0;) {
      in_off += dims[i].in_stride;
      out_off += dims[i].out_stride;
      if (++idx[i] < dims[i].size) return;
      in_off -= dims[i].in_stride * dims[i].size;
      out_off -= dims[i].out_stride * dims[i].size;
      idx[i] = 0;
    }
  }
};

std::size_t count(const std::vector<Dim>& dims) {
  std::size_t n = 1;
  for (const Dim& d : dims) n *= static_cast<std::size_t>(d.size);
  return n;
}

template <class T>
void copy_rows(const T* x, T* y, const std::vector<Dim>& outer, std::int64_t inner) {
  const std::size_t rows = count(outer);
  const auto bytes = static_cast<std::size_t>(inner) * sizeof(T);
  detail::parallel_chunks(rows, std::max<std::size_t>(1, 65536 / bytes), [&](std::size_t b, std::size_t e) {
    Odometer it(outer, b);
    for (std::size_t r = b; r < e; ++r, it.next()) std::memcpy(y + it.out_off, x + it.in_off, bytes);
  });
}

#if defined(__SSE2__)
// A 4x4 block of 4-byte elements through SSE registers (the x86-64-v2 base level): weight
// transposes are ~3x the scalar loop's speed. Bit moves only, so any 4-byte type works.
inline void transpose_4x4(const std::uint32_t* x, std::int64_t b_in, std::uint32_t* y, std::int64_t a_out) {
  auto load = [](const std::uint32_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  const __m128i r0 = load(x), r1 = load(x + b_in), r2 = load(x + 2 * b_in), r3 = load(x + 3 * b_in);
  const __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm_unpacklo_epi64(t0, t2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + a_out), _mm_unpackhi_epi64(t0, t2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2 * a_out), _mm_unpacklo_epi64(t1, t3));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 3 * a_out), _mm_unpackhi_epi64(t1, t3));
}
#endif

#if defined(__SSE2__)
// One full 32x32 tile of 4-byte elements through two L1 buffers: the source rows (whole cache
// lines) are copied in, transposed in 4x4 register blocks, and written out as whole lines. Rows
// of a weight are a power of two apart, so working on them in place keeps evicting each other
// from the same L1 sets (1.7 GB/s in place).
constexpr std::int64_t kTile32 = 32;
inline void transpose_tile32(const std::uint32_t* x, std::int64_t b_in, std::uint32_t* y, std::int64_t a_out) {
  alignas(64) std::uint32_t in[kTile32][kTile32], out[kTile32][kTile32];
  for (std::int64_t b = 0; b < kTile32; ++b) std::memcpy(in[b], x + b * b_in, sizeof in[b]);
  for (std::int64_t a = 0; a < kTile32; a += 4)
    for (std::int64_t b = 0; b < kTile32; b += 4) transpose_4x4(&in[b][a], kTile32, &out[a][b], kTile32);
  for (std::int64_t a = 0; a < kTile32; ++a) std::memcpy(y + a * a_out, out[a], sizeof out[a]);
}
#endif

// Square tiles of two cache lines' width (8 elements at least).
template <class T>
constexpr std::int64_t plane_tile() {
  return 64 / sizeof(T) < 8 ? 8 : 64 / sizeof(T) * 2;
}

// y[a * a_out + b] = x[a + b * b_in] for a < na, b < nb (one plane), in square tiles, swept in
// blocks of kRows input rows (a big plane's rows are pages apart: keeps the TLB warm).
template <class T>
void transpose_plane(const T* x, T* y, std::int64_t na, std::int64_t a_out, std::int64_t nb, std::int64_t b_in) {
  constexpr std::int64_t kTile = plane_tile<T>();
  constexpr std::int64_t kRows = 128;
  for (std::int64_t bb = 0; bb < nb; bb += kRows)
    for (std::int64_t a0 = 0; a0 < na; a0 += kTile) {
      const std::int64_t a1 = std::min(na, a0 + kTile);
      for (std::int64_t b0 = bb; b0 < std::min(nb, bb + kRows); b0 += kTile) {
        const std::int64_t b1 = std::min({nb, b0 + kTile, bb + kRows});
#if defined(__SSE2__)
        if constexpr (sizeof(T) == 4) {
          if (a1 - a0 == kTile32 && b1 - b0 == kTile32) {
            transpose_tile32(reinterpret_cast<const std::uint32_t*>(x + a0 + b0 * b_in), b_in,
                             reinterpret_cast<std::uint32_t*>(y + a0 * a_out + b0), a_out);
            continue;
          }
        }
#endif
        for (std::int64_t a = a0; a < a1; ++a)
          for (std::int64_t b = b0; b < b1; ++b) y[a * a_out + b] = x[a + b * b_in];
      }
    }
}

template <class T>
void transpose_planes(const T* x, T* y, const std::vector<Dim>& dims, std::size_t unit) {
  const Dim a = dims[unit], b = dims.back();
  std::vector<Dim> outer;
  for (std::size_t d = 0; d + 1 < dims.size(); ++d)
    if (d != unit) outer.push_back(dims[d]);
  const std::size_t planes = count(outer);
  const auto plane = static_cast<std::size_t>(a.size * b.size);
  if (planes == 1) {
    // One big plane: split it along a, in whole tiles (a chunk cut mid-tile fell back to the
    // scalar loop for all of it).
    const std::size_t tile = static_cast<std::size_t>(plane_tile<T>());
    const std::size_t tiles = (static_cast<std::size_t>(a.size) + tile - 1) / tile;
    detail::parallel_chunks(
        tiles, std::max<std::size_t>(1, 16384 / (b.size * tile)), [&](std::size_t t0, std::size_t t1) {
          const std::size_t a0 = t0 * tile, a1 = std::min(static_cast<std::size_t>(a.size), t1 * tile);
          transpose_plane(x + a0, y + a0 * a.out_stride, static_cast<std::int64_t>(a1 - a0), a.out_stride, b.size,
                          b.in_stride);
        });
    return;
  }
  detail::parallel_chunks(planes, std::max<std::size_t>(1, 16384 / plane), [&](std::size_t p0, std::size_t p1) {
    Odometer it(outer, p0);
    for (std::size_t p = p0; p < p1; ++p, it.next())
      transpose_plane(x + it.in_off, y + it.out_off, a.size, a.out_stride, b.size, b.in_stride);
  });
}

template <class T>
void gather_rows(const T* x, T* y, const std::vector<Dim>& dims) {
  const std::vector<Dim> outer(dims.begin(), dims.end() - 1);
  const Dim inner = dims.back();
  const std::size_t rows = count(outer);
  detail::parallel_chunks(rows, std::max<std::size_t>(1, 16384 / inner.size), [&](std::size_t b, std::size_t e) {
    Odometer it(outer, b);
    for (std::size_t r = b; r < e; ++r, it.next()) {
      const T* src = x + it.in_off;
      T* dst = y + it.out_off;
      for (std::int64_t i = 0; i < inner.size; ++i) dst[i] = src[i * inner.in_stride];
    }
  });
}

template <class T>
void run(const T* x, T* y, std::span<const std::int64_t> shape, std::span<const std::int64_t> perm,
         std::span<const std::int64_t> strides) {
  const std::vector<Dim> dims = canonical_dims(shape, perm, strides);
  if (dims.empty()) {
    y[0] = x[0];
    return;
  }
  if (dims.back().in_stride == 1) {
    copy_rows(x, y, std::vector<Dim>(dims.begin(), dims.end() - 1), dims.back().size);
    return;
  }
  for (std::size_t d = 0; d + 1 < dims.size(); ++d)
    if (dims[d].in_stride == 1) {
      transpose_planes(x, y, dims, d);
      return;
    }
  gather_rows(x, y, dims);
}

}  // namespace

void transpose(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
               std::span<const std::int64_t> perm, void* y, std::span<const std::int64_t> in_strides) {
  const std::size_t r = in_shape.size();
  if (perm.size() != r)
    throw std::invalid_argument("simd::transpose: perm has " + std::to_string(perm.size()) + " entries for a rank-" +
                                std::to_string(r) + " tensor");
  if (!in_strides.empty() && in_strides.size() != r)
    throw std::invalid_argument("simd::transpose: in_strides must be empty or have one entry per dim");
  std::vector<bool> seen(r, false);
  for (std::int64_t p : perm) {
    if (p < 0 || static_cast<std::size_t>(p) >= r || seen[static_cast<std::size_t>(p)])
      throw std::invalid_argument("simd::transpose: perm is not a permutation of 0.." + std::to_string(r) + "-1");
    seen[static_cast<std::size_t>(p)] = true;
  }
  std::int64_t total = 1;
  for (std::int64_t d : in_shape) total *= d;
  if (total == 0) return;
  std::vector<std::int64_t> strides(in_strides.begin(), in_strides.end());
  if (strides.empty()) {
    strides.assign(r, 1);
    for (std::size_t i = r; i-- > 1;) strides[i - 1] = strides[i] * in_shape[i];
  }
  switch (elem_size) {
    case 1: return run(static_cast<const std::uint8_t*>(x), static_cast<std::uint8_t*>(y), in_shape, perm, strides);
    case 2: return run(static_cast<const std::uint16_t*>(x), static_cast<std::uint16_t*>(y), in_shape, perm, strides);
    case 4: return run(static_cast<const std::uint32_t*>(x), static_cast<std::uint32_t*>(y), in_shape, perm, strides);
    case 8: return run(static_cast<const std::uint64_t*>(x), static_cast<std::uint64_t*>(y), in_shape, perm, strides);
    default:
      throw std::invalid_argument("simd::transpose: element size " + std::to_string(elem_size) +
                                  " is not 1, 2, 4 or 8");
  }
}

}  // namespace onnxforge::simd
