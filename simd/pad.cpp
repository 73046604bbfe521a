// Pad's driver: crops, merges the untouched trailing axes into the element, maps every padded
// axis once, then writes the output row by row (kernels/pad.inl), in parallel over rows.
#include "simd/pad.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"

namespace onnxforge::simd {

std::int64_t pad_source_index(std::int64_t o, std::int64_t before, std::int64_t n, PadMode mode) {
  std::int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return i < 0 ? 0 : n - 1;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const std::int64_t period = 2 * (n - 1);
      i = ((i % period) + period) % period;
      return i < n ? i : period - i;
    }
    case PadMode::Wrap: return ((i % n) + n) % n;
  }
  return -1;
}

namespace {

// One element of E bytes (a border element of a non-constant mode): fixed-size copies for
// the common sizes, so pad-by-one borders do not pay a library call each.
inline void copy_element(unsigned char* y, const unsigned char* x, std::size_t e) {
  switch (e) {
    case 1: *y = *x; return;
    case 2: std::memcpy(y, x, 2); return;
    case 4: std::memcpy(y, x, 4); return;
    case 8: std::memcpy(y, x, 8); return;
    default: std::memcpy(y, x, e);
  }
}

}  // namespace

void pad(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
         std::span<const std::int64_t> begin, std::span<const std::int64_t> end, PadMode mode, const void* value,
         void* y) {
  const std::size_t r = in_shape.size();
  if (elem_size == 0 || 64 % elem_size != 0)
    throw std::invalid_argument("pad: element size " + std::to_string(elem_size) + " does not divide 64");
  if (begin.size() != r || end.size() != r) throw std::invalid_argument("pad: one begin and one end pad per axis");
  // Crop (negative pads), then only non-negative pads remain.
  std::vector<std::int64_t> stride(r), len(r), pb(r), pe(r), out(r);
  std::int64_t s = 1, base = 0, total = 1;
  for (std::size_t d = r; d-- > 0;) stride[d] = s, s *= in_shape[d];
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t cb = std::max<std::int64_t>(-begin[d], 0), ce = std::max<std::int64_t>(-end[d], 0);
    len[d] = in_shape[d] - cb - ce;
    if (len[d] < 0)
      throw std::invalid_argument("pad: negative pads crop more than axis " + std::to_string(d) + " holds");
    base += cb * stride[d];
    pb[d] = std::max<std::int64_t>(begin[d], 0), pe[d] = std::max<std::int64_t>(end[d], 0);
    if (mode != PadMode::Constant && len[d] == 0 && pb[d] + pe[d] > 0)
      throw std::invalid_argument("pad: axis " + std::to_string(d) + " is empty, only constant mode can pad it");
    out[d] = len[d] + pb[d] + pe[d];
    total *= out[d];
  }
  if (total == 0) return;
  const auto* src = static_cast<const unsigned char*>(x) + base * static_cast<std::int64_t>(elem_size);
  auto* dst = static_cast<unsigned char*>(y);

  // Axes [k, r) are whole (neither padded nor cropped): one element of E bytes.
  std::size_t k = r, E = elem_size;
  while (k > 0 && pb[k - 1] == 0 && pe[k - 1] == 0 && len[k - 1] == in_shape[k - 1])
    E *= static_cast<std::size_t>(len[--k]);
  if (k == 0) {  // nothing to pad or crop: a copy
    parallel_chunks(E, std::size_t{1} << 16,
                    [&](std::size_t b, std::size_t e) { std::memcpy(dst + b, src + b, e - b); });
    return;
  }
  const std::size_t L = k - 1;  // the row axis: its elements are E bytes apart in x and y
  // Source element offset of every output index of the outer axes, -1 where Constant fills.
  std::vector<std::vector<std::int64_t>> map(L);
  std::size_t rows = 1;
  for (std::size_t d = 0; d < L; ++d) {
    map[d].resize(static_cast<std::size_t>(out[d]));
    for (std::int64_t o = 0; o < out[d]; ++o) {
      const std::int64_t i = pad_source_index(o, pb[d], len[d], mode);
      map[d][static_cast<std::size_t>(o)] = i < 0 ? -1 : i * stride[d];
    }
    rows *= static_cast<std::size_t>(out[d]);
  }
  const auto left = static_cast<std::size_t>(pb[L]), right = static_cast<std::size_t>(pe[L]);
  const auto n = static_cast<std::size_t>(len[L]);
  std::vector<std::int64_t> border(left + right, 0);  // non-constant modes: the row's border sources
  if (mode != PadMode::Constant)
    for (std::size_t j = 0; j < left + right; ++j)
      border[j] = pad_source_index(static_cast<std::int64_t>(j < left ? j : n + j), pb[L], len[L], mode);
  alignas(64) unsigned char fill[64] = {};
  if (mode == PadMode::Constant)
    for (std::size_t i = 0; i < 64; i += elem_size) std::memcpy(fill + i, value, elem_size);

  const std::size_t row_bytes = static_cast<std::size_t>(out[L]) * E;
  const std::size_t ebytes = static_cast<std::size_t>(elem_size);
  const detail::KernelTable& kt = detail::active_table();
  // Chunks of at least 64 KiB of output: smaller ones cost more to hand out than to copy.
  parallel_chunks(
      rows, std::max<std::size_t>(1, (std::size_t{1} << 16) / row_bytes), [&](std::size_t b, std::size_t e) {
        std::vector<std::size_t> idx(L);
        for (std::size_t d = L, rem = b; d-- > 0;) {
          idx[d] = rem % static_cast<std::size_t>(out[d]);
          rem /= static_cast<std::size_t>(out[d]);
        }
        for (std::size_t row = b; row < e; ++row) {
          std::int64_t off = 0;
          bool inside = true;
          for (std::size_t d = 0; d < L && inside; ++d) {
            const std::int64_t m = map[d][idx[d]];
            inside = m >= 0;
            off += m;
          }
          unsigned char* yr = dst + row * row_bytes;
          if (!inside) {
            kt.fill_copy_fill_row(fill, 0, yr, row_bytes, 0, fill);
          } else {
            const unsigned char* xr = src + off * static_cast<std::int64_t>(ebytes);
            if (mode == PadMode::Constant) {
              kt.fill_copy_fill_row(xr, n * E, yr, left * E, right * E, fill);
            } else {
              kt.fill_copy_fill_row(xr, n * E, yr + left * E, 0, 0, fill);
              for (std::size_t j = 0; j < left + right; ++j)
                copy_element(yr + (j < left ? j : n + j) * E, xr + static_cast<std::size_t>(border[j]) * E, E);
            }
          }
          for (std::size_t d = L; d-- > 0;) {
            if (++idx[d] < static_cast<std::size_t>(out[d])) break;
            idx[d] = 0;
          }
        }
      });
}

}  // namespace onnxforge::simd
