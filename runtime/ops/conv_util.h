#pragma once
// Convolution/pooling geometry from attributes (kernel, strides, dilations, pads, auto_pad).
#include <array>
#include <optional>
#include <vector>

#include "runtime/kernel.h"

namespace onnxforge::rt {

struct ConvGeometry {
  int rank = 2;
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  std::array<int64_t, 3> pad_begin{0, 0, 0}, pad_end{0, 0, 0};
};

// x: [N, C, spatial...]; w: the weight shape (Conv) or a shape whose spatial dims are the
// kernel (pooling passes [_, _, kernel_shape...]). Resolves SAME_UPPER/SAME_LOWER pads (not for
// ConvTranspose, which resolves its own). `extra_pads` (begin..., end... per spatial axis, or
// empty) are added to the node's own: a Pad the plan folded into the conv (pad_conv_kernel()).
ConvGeometry conv_geometry(const OpContext& c, const Shape& x, const Shape& w, bool transpose,
                           std::span<const int64_t> extra_pads = {});

// The spatial pads (begin..., end...) of a Pad node that a Conv reading it as its data input can
// take as its own padding: constant mode, fill +0, pads known before any run (attribute, or
// constant inputs, the opset-18 axes included), none negative, none on the batch and channel
// axes, at least one spatial axis. nullopt otherwise (reflect/edge/wrap, a fill value, a crop,
// pads computed at run time). Plan time: the fusion pad_into_conv and the kernel's prepare.
std::optional<std::vector<int64_t>> zero_spatial_pads(const Graph& g, NodeId pad, int64_t opset);

// Not registered for any op: Pad -> Conv as one step (runtime/fusions.cpp, pad_into_conv). The
// step's node is the Conv, its inputs the Conv's with the Pad's input as input 0; the Pad's
// zero spatial pads (zero_spatial_pads of the Conv's input producer) are added to the Conv's.
const KernelDef& pad_conv_kernel();

}  // namespace onnxforge::rt
