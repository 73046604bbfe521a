#pragma once
// Direct 3x3 / stride 1 or 2 / pad 1 convolution (group 1, NCHW), AVX-512 only: output-stationary
// tiles of 16-channel vectors x consecutive output pixels of one row (small maps: of several
// whole rows, so that a weight load feeds as many pixels as on wide maps), the input broadcast from
// the unpadded planes (borders: the out-of-range taps are skipped), the weights packed once
// as [ceil(M/16)][C][3][3][16].
#include <cstdint>
#include <vector>

namespace onnxforge::simd {
struct ConvParams;
struct Unary;
}  // namespace onnxforge::simd

namespace onnxforge::simd::detail {

// Driver (simd/conv_direct.cpp).
bool conv_direct_fits(const ConvParams& p);
// Whether conv_packed() / conv_nhwc() route p to it (AVX-512 active, it fits, enough output
// channels, ONNXFORGE_CONV_DIRECT not 0).
bool conv_direct_routed(const ConvParams& p);
std::vector<float> pack_conv_direct(const ConvParams& p, const float* w);
void unpack_conv_direct(const ConvParams& p, const float* packed, float* w);
void conv_direct(const ConvParams& p, const float* x, const float* wp, const float* bias, float* y, const Unary& act,
                 bool accumulate);

struct ConvDirectArgs {
  const float* x;     // one image [C][H][W]
  const float* w;     // packed [ceil(M/16)][C][9][16], zero beyond M
  const float* bias;  // [M] or nullptr
  float* y;           // one image [M][OH][OW]
  std::int64_t C, M, H, W, OH, OW;
  int stride;       // 1 or 2 (both dims)
  bool relu;        // fused Relu after bias (+ residual)
  bool accumulate;  // y holds a residual on entry, added before relu
};

// Small maps (OW < kSmallPx; with stride 2 W even, so that no output reads the right padding):
// tiles of small_rows(OW) whole output rows.
constexpr int kSmallPx = 14, kSmallMaxRows = 4;
constexpr int small_rows(int ow) { return kSmallPx / ow < kSmallMaxRows ? kSmallPx / ow : kSmallMaxRows; }
inline bool small_map(std::int64_t W, std::int64_t OW, int stride) {
  return OW < kSmallPx && (stride == 1 || W % 2 == 0);
}

namespace avx512 {
// Output row oh for the channel vectors [mb0, mb0 + nv), nv 1 or 2.
void conv3x3_direct_row(const ConvDirectArgs& a, std::int64_t oh, std::int64_t mb0, int nv);
// small_map(): output rows [oh0, oh0 + rows), rows <= small_rows(OW).
void conv3x3_direct_rows(const ConvDirectArgs& a, std::int64_t oh0, int rows, std::int64_t mb0, int nv);
}  // namespace avx512

}  // namespace onnxforge::simd::detail
