#pragma once
// Convolution/pooling geometry from attributes (kernel, strides, dilations, pads, auto_pad).
#include <array>

#include "runtime/kernel.h"

namespace onnxforge::rt {

struct ConvGeometry {
  int rank = 2;
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  std::array<int64_t, 3> pad_begin{0, 0, 0}, pad_end{0, 0, 0};
};

// x: [N, C, spatial...]; w: the weight shape (Conv) or a shape whose spatial dims are the
// kernel (pooling passes [_, _, kernel_shape...]). Resolves SAME_UPPER/SAME_LOWER pads (not for
// ConvTranspose, which resolves its own).
ConvGeometry conv_geometry(const OpContext& c, const Shape& x, const Shape& w, bool transpose);

}  // namespace onnxforge::rt
