#pragma once
// Direct convolution for few input channels and a larger kernel (CNN stems: 3 -> 64 channels,
// 7x7, stride 2), group 1, NCHW, AVX-512 only: output-stationary tiles of 16-channel vectors x
// consecutive output pixels of one row, the input broadcast from a zero-padded copy (no border
// logic), the weights packed once as [ceil(M/16)][C][KH*KW][16]. Pixels are gathered 16 at a
// time for one 16 x 16 transpose per channel vector on the store; a channels-last output
// (y_nhwc) takes the channel vectors as they are, each pixel's stored straight.
#include <cstdint>
#include <vector>

namespace onnxforge::simd {
struct ConvParams;
struct Unary;
}  // namespace onnxforge::simd

namespace onnxforge::simd::detail {

// Driver (simd/conv_fewc.cpp). Whether the kernel handles p: 2-D, group 1, no dilation,
// horizontal stride <= 4, C * KH * KW <= 192 (any pads, any vertical stride).
bool conv_fewc_fits(const ConvParams& p);
// Whether conv() / conv_packed() / conv_nhwc() route p to it: AVX-512 active, it fits, at most 4
// input channels, and ONNXFORGE_CONV_FEWC is not 0.
bool conv_fewc_routed(const ConvParams& p);
// w [M][C][KH][KW] -> [ceil(M/16)][C][KH*KW][16] (for 3x3 the layout of the direct 3x3 kernel).
std::vector<float> pack_conv_fewc(const ConvParams& p, const float* w);
void unpack_conv_fewc(const ConvParams& p, const float* packed, float* w);
// y = act(conv(x, w) + bias (+ y)); AVX-512 must be active. x is NCHW; y is [N, M, OH, OW], or
// with y_nhwc [N, OH, OW, M] (each pixel's M channels contiguous; the residual, when
// accumulating, in the same layout). Both layouts hold the same bits.
void conv_fewc(const ConvParams& p, const float* x, const float* packed, const float* bias, float* y, const Unary& act,
               bool accumulate, bool y_nhwc = false);

struct ConvFewcArgs {
  const float* x;     // one zero-padded image [C][HP][WP]: padded row/column 0 = pad_begin before the input
  const float* w;     // packed [ceil(M/16)][C][KH*KW][16], zero beyond M
  const float* bias;  // [M] or nullptr
  float* y;           // one image [M][OH][OW], or [OH][OW][M] with y_nhwc
  std::int64_t C, M, HP, WP, KH, KW, OH, OW;
  std::int64_t stride_h;
  int stride_w;         // 1 to 4
  bool relu;            // fused Relu after bias (+ residual)
  bool accumulate;      // y holds a residual on entry, added before relu
  bool y_nhwc = false;  // y channels-last: tiles stored straight, no transpose
};

// Channel vectors per tile (and per work item of the driver).
inline constexpr int kFewcVectors = 4;

namespace avx512 {
// Output row oh for the channel vectors [mb0, mb0 + nv), nv 1 to kFewcVectors.
void conv_fewc_row(const ConvFewcArgs& a, std::int64_t oh, std::int64_t mb0, int nv);
}  // namespace avx512

}  // namespace onnxforge::simd::detail
