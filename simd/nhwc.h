#pragma once
// Channels-last (NHWC) kernels for CNN chains. The runtime keeps the activations between 2-D
// convs, pools and elementwise ops as [N, H, W, C] (runtime/README.md, "Layouts"): a pointwise
// conv is then a plain GEMM on the activations (no packing, no transposes) and a 3x3 conv an
// implicit GEMM whose A rows are input pixels, each C floats long and contiguous.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "simd/conv.h"
#include "simd/gemm.h"
#include "simd/isa.h"
#include "simd/unary.h"

namespace onnxforge::simd {

// Whether conv_nhwc() takes these parameters: 2-D, group 1 (any kernel, strides, dilations,
// pads, batch).
bool conv_nhwc_supported(const ConvParams& p);

// Whether conv_nhwc() takes these parameters through its few-output-channel kernel (at most 4
// outputs, at least 8 input channels, at most 49 taps): no panel padded to 48-64 outputs.
bool conv_nhwc_few_outputs(const ConvParams& p);

// Weights packed once for conv_nhwc(); opaque to callers. Throws std::invalid_argument for
// parameters conv_nhwc_supported() rejects. Tied to the ISA level active when packing (as
// PackedB): conv_nhwc() always runs that level's kernels.
struct ConvNhwcWeights {
  ConvParams params;          // what they were packed for (checked by conv_nhwc)
  PackedB b;                  // most pointwise convs (1x1, stride 1, no pads): W^T for a plain GEMM (K = C, N = M)
  std::vector<float> fewc;    // few-input-channel direct kernel (CNN stems), when it applies
  std::vector<float> direct;  // direct 3x3 kernel (NCHW, between transposes), on small maps
  std::vector<float> few;     // few output channels: [M][KH*KW][C], per-pixel dot products
  // Other convs, the implicit GEMM: K = KH*KW*C rows in (kh, kw, c) order, N = M, in the GEMM's
  // panel layout (simd/detail/gemm_driver.h) over the K blocks of conv_nhwc.cpp.
  std::shared_ptr<const float> igemm;
  Isa isa = Isa::Sse;
  std::size_t nr = 0, kc = 0;  // panel width and K block cap of the packing
  int panel = 0;               // which indirect panel kind (GemmIndirectKernels::panels)
};
ConvNhwcWeights pack_conv_weights_nhwc(const ConvParams& p, const float* w);  // w: [M][C][KH][KW]

// y [N, OH, OW, M] = act(conv(x, w) + bias (+ y on entry when accumulate)). x is [N, H, W, C],
// or [N, C, H, W] with x_nchw (a chain's first conv, reading a graph input).
void conv_nhwc(const ConvParams& p, const float* x, bool x_nchw, const ConvNhwcWeights& w, const float* bias, float* y,
               const Unary& act = {}, bool accumulate = false);

// 2-D pooling window geometry (pads resolved by the caller; ceil_mode shows in OH/OW).
struct Pool2d {
  std::int64_t N = 1, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  std::int64_t KH = 1, KW = 1, SH = 1, SW = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};
// x [N, H, W, C] -> y [N, OH, OW, C]. Max propagates NaN; a window entirely in the padding gives
// -inf (max) or 0 (average). Average divides by the window's size clipped to the input, or
// with count_include_pad by its size clipped to the padded input.
void max_pool_nhwc(const Pool2d& p, const float* x, float* y);
void avg_pool_nhwc(const Pool2d& p, const float* x, float* y, bool count_include_pad);
// x [N, HW, C] -> y [N, C] (the mean or max over HW; NaN propagates through max).
void global_avg_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y);
void global_max_pool_nhwc(std::int64_t N, std::int64_t HW, std::int64_t C, const float* x, float* y);

// Layout conversions of float tensors: [N, C, HW] <-> [N, HW, C].
void nchw_to_nhwc(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y);
void nhwc_to_nchw(std::int64_t N, std::int64_t C, std::int64_t HW, const float* x, float* y);

}  // namespace onnxforge::simd
