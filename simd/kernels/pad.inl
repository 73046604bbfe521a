// Pad's row kernel for one ISA level: one output row written once, border and copy in a
// single pass of vector stores (simd/pad.cpp drives it over the rows).
#include "simd/kernels/isa_config.h"

namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS {
namespace {

using VB = xsimd::batch<std::uint8_t, Arch>;
inline constexpr std::size_t kBytes = VB::size;

// y[0, n) = p[0, n) for a pattern whose period divides kBytes (n a multiple of the period):
// full vectors, then one vector ending at n (overlapping the last full one, same phase).
inline void fill_bytes(std::uint8_t* y, std::size_t n, const std::uint8_t* pattern) {
  if (n < kBytes) {
    if (n) std::memcpy(y, pattern, n);  // no border: the pattern may be absent
    return;
  }
  const VB p = VB::load_unaligned(pattern);
  std::size_t i = 0;
  for (; i + kBytes <= n; i += kBytes) p.store_unaligned(y + i);
  if (i < n) p.store_unaligned(y + n - kBytes);
}

// y[0, n) = x[0, n) (no overlap): four vectors a step, then one vector ending at n.
inline void copy_bytes(std::uint8_t* y, const std::uint8_t* x, std::size_t n) {
  if (n < kBytes) {
    if (n) std::memcpy(y, x, n);  // a row cropped to nothing may have no source (UBSan: memcpy(.., nullptr, 0))
    return;
  }
  std::size_t i = 0;
  for (; i + 4 * kBytes <= n; i += 4 * kBytes) {
    const VB a = VB::load_unaligned(x + i), b = VB::load_unaligned(x + i + kBytes);
    const VB c = VB::load_unaligned(x + i + 2 * kBytes), d = VB::load_unaligned(x + i + 3 * kBytes);
    a.store_unaligned(y + i), b.store_unaligned(y + i + kBytes);
    c.store_unaligned(y + i + 2 * kBytes), d.store_unaligned(y + i + 3 * kBytes);
  }
  for (; i + kBytes <= n; i += kBytes) VB::load_unaligned(x + i).store_unaligned(y + i);
  if (i < n) VB::load_unaligned(x + n - kBytes).store_unaligned(y + n - kBytes);
}

void fill_copy_fill_row(const void* x, std::size_t n, void* y, std::size_t left, std::size_t right,
                        const void* fill) {
  auto* out = static_cast<std::uint8_t*>(y);
  const auto* pattern = static_cast<const std::uint8_t*>(fill);
  fill_bytes(out, left, pattern);
  copy_bytes(out + left, static_cast<const std::uint8_t*>(x), n);
  fill_bytes(out + left + n, right, pattern);
}

}  // namespace

void install_pad(KernelTable& t) { t.fill_copy_fill_row = &fill_copy_fill_row; }

}  // namespace onnxforge::simd::detail::ONNXFORGE_ISA_NS
