#pragma once
// Separable resampling (the kernels of ONNX Resize) and float16 <-> float32 conversion spans.
//
// A resize is described per axis by a table of taps: output index i along the axis reads the
// source indices index[k * out + i] with weights weight[k * out + i], k < taps (tap-major, so
// that a vector of outputs loads its taps contiguously). The op (runtime/ops/resize.cpp) builds
// the tables from the coordinate transformation and the interpolation mode; these functions
// only apply them. Results are accumulated in float, tap by tap.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "simd/binary.h"
#include "simd/conv.h"

namespace onnxforge::simd {

// At most 64 taps per output (the tables the op builds for any interpolation mode, antialias
// down to 1/16 scale).
struct ResizeAxis {
  std::int64_t in = 0, out = 0;
  std::size_t taps = 1;
  std::vector<std::int32_t> index;  // [taps][out], each in [0, in)
  std::vector<float> weight;        // [taps][out]

  // out == in and every output reads its own index with weight 1.
  bool identity() const;
};

// y[p, oy, ox] = sum_a sum_b wh[oy, a] * ww[ox, b] * x[p, ih[oy, a], iw[ox, b]] for p < planes
// (x is [planes, h.in, w.in], y [planes, h.out, w.out], both contiguous). Vertical taps blend
// whole source rows (vectorized over the row), then the row is gathered along w; an output row
// whose vertical taps equal the previous row's is a copy of it (nearest upsampling).
void resize_2d(std::size_t planes, const ResizeAxis& h, const ResizeAxis& w, const float* x, float* y);

// The same resize on channels-last images: x [planes, h.in, w.in, channels] into
// y [planes, h.out, w.out, channels]. Same arithmetic as resize_2d per element (vertical taps
// first, then horizontal, each accumulated tap by tap with the same multiply-adds), so the two
// layouts give the same bits up to the sign of a zero (resize_2d's horizontal pass adds the
// zero-weight padding taps, this one skips them).
void resize_2d_nhwc(std::size_t planes, const ResizeAxis& h, const ResizeAxis& w, std::size_t channels, const float* x,
                    float* y);

// Along the middle axis of x [outer, a.in, inner] into y [outer, a.out, inner].
void resize_axis(std::size_t outer, const ResizeAxis& a, std::size_t inner, const float* x, float* y);

// float16 (IEEE binary16 bits) <-> float32, round to nearest even; round_to_half gives
// float(half(x)), what a Cast to float16 and back leaves. Parallel over the span.
void half_to_float(const std::uint16_t* x, float* y, std::size_t n);
void float_to_half(const float* x, std::uint16_t* y, std::size_t n);
void round_to_half(const float* x, float* y, std::size_t n);

// A 2-D convolution with few output channels (segmentation side outputs, 1 channel from 64):
// y[m] = bias[m] + sum over input channels and taps of w * the shifted input row, as weighted
// sums of whole rows (blend_rows), stride 1 along width. The GEMM paths compute one useful row
// of an 8-16-row tile there and gather an im2col panel per output: ISNet's 1 x 64 x 3 x 3 convs
// at 512x512 ran at 2.5 GFLOP/s. Whether these parameters qualify:
bool conv_few_outputs_supported(const ConvParams& p);
void conv_few_outputs(const ConvParams& p, const float* x, const float* w, const float* bias, float* y);

// y = half(op(float(a), float(b))) over n float16 elements, in cache-sized blocks (no float32
// copies of whole tensors); y may be a or b. The bits equal converting, computing in float32
// and converting back.
void half_binary(BinaryOp op, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* y, std::size_t n);

}  // namespace onnxforge::simd
