#pragma once
// Convolution (ONNX Conv), NC[D]HW float32, 1 to 3 spatial dims.
//
// x: [N, C, in...], w: [M, C/group, kernel...], bias: [M] or nullptr, y: [N, M, out...] with
// out[i] = (in[i] + pad_begin[i] + pad_end[i] - dilation[i]*(kernel[i]-1) - 1) / stride[i] + 1.
// Paths, chosen per call:
//  - depthwise (group == C, M a multiple of C, 1-D/2-D): direct kernel over padded planes;
//  - AVX-512, group 1, 2-D, at most 4 input channels, C * kernel size <= 192 (CNN stems):
//    direct kernel over a zero-padded copy of the input (simd/conv_fewc.cpp; weights packed
//    per call, or once by pack_conv_weights);
//  - 1x1, stride 1, no padding: plain GEMM on the input, no copy;
//  - 1x1 with strides, no padding: the sampled positions copied into a dense input, then as above;
//  - other 1-D/2-D convs: GEMM over a padded copy of the input whose B rows are plain slices of
//    it (the output is computed over padded-width rows, then cropped); with strides the copy is
//    split into stride phases so that the slices stay contiguous (used when the padded rows
//    waste at most a quarter of the columns);
//  - everything else: GEMM whose B panels are gathered straight from the input (implicit
//    im2col, no column buffer).
// With packed weights (conv_packed): 3x3 / stride 1 or 2 / pad 1 convs on AVX-512 run a
// direct kernel (simd/conv_direct.cpp, conv_prefers_direct), so do the CNN stems above; the
// other shapes a GEMM over the packed weights.
// The epilogue adds the bias and applies `act` before the output leaves the cache. With
// `accumulate`, y holds a tensor of y's shape on entry (a residual) that is added before `act`:
// y = act(conv(x, w) + bias + y), the fused Conv + Add (+ Relu) of residual networks.
// Auto-padding (SAME_UPPER/LOWER) is the caller's business: pass the resolved pads.
#include <array>
#include <cstdint>
#include <vector>

#include "simd/gemm.h"
#include "simd/unary.h"

namespace onnxforge::simd {

struct ConvParams {
  int rank = 2;  // number of spatial dims: 1, 2 or 3
  std::int64_t batch = 1;
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t group = 1;
  std::array<std::int64_t, 3> in{1, 1, 1};  // spatial input size (first `rank` entries used)
  std::array<std::int64_t, 3> kernel{1, 1, 1};
  std::array<std::int64_t, 3> stride{1, 1, 1};
  std::array<std::int64_t, 3> dilation{1, 1, 1};
  std::array<std::int64_t, 3> pad_begin{0, 0, 0};
  std::array<std::int64_t, 3> pad_end{0, 0, 0};

  // Output size of spatial dim i (< rank).
  std::int64_t out(int i) const;
  // Product of the output spatial sizes.
  std::int64_t out_spatial() const;
};

// Throws std::invalid_argument for inconsistent parameters (channels not divisible by group,
// non-positive strides/dilations/kernel, negative pads, rank outside 1..3). A kernel that does
// not fit the padded input gives an empty output (out() == 0) and the call does nothing.
void conv(const ConvParams& p, const float* x, const float* w, const float* bias, float* y, const Unary& act = {},
          bool accumulate = false);

// Weights packed once for conv_packed(): per group g, W_g^T (K = C/group * kernel size rows,
// M/group columns) in the GEMM's packed-B layout.
// For convs routed to the direct 3x3 kernel (conv_prefers_direct), `direct` holds the weights
// as [ceil(M/16)][C][3][3][16] instead and `groups` is empty.
// For convs routed to the direct few-input-channel kernel, `fewc` is set and `direct` holds
// [ceil(M/16)][C][KH*KW][16].
struct ConvPackedWeights {
  std::vector<PackedB> groups;
  std::vector<float> direct;
  bool fewc = false;
};
ConvPackedWeights pack_conv_weights(const ConvParams& p, const float* w);

// conv() computed as Y^T = im2col(x)^T * W^T per (image, group), with the packed weights as B,
// then transposed into y (NCHW). Same contract as conv() otherwise. Better than conv() when the
// output has few positions and many channels (late CNN stages, 7x7): the GEMM tiles
// then run along the channels instead of leaving a sliver of positions in every tile row.
// Throws std::invalid_argument if `w` was packed for other parameters.
void conv_packed(const ConvParams& p, const float* x, const ConvPackedWeights& w, const float* bias, float* y,
                 const Unary& act = {}, bool accumulate = false);

// Whether conv_packed() is expected to beat conv() for these parameters.
bool conv_prefers_packed(const ConvParams& p);

// Whether pack_conv_weights() / conv_packed() take a direct path for these parameters
// (AVX-512 active, group 1, 2-D): the 3x3 one (3x3, stride 1 or 2, pad 1, enough output
// channels; weights packed as [ceil(M/16)][C][3][3][16], no copy of the input) or the
// few-input-channel one (C <= 4, C * kernel size <= 192, no dilation, horizontal stride <= 4;
// `fewc` set, over a zero-padded copy of the input). Callers that pack weights once should do
// so when this or conv_prefers_packed() holds.
bool conv_prefers_direct(const ConvParams& p);

}  // namespace onnxforge::simd
