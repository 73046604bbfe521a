#pragma once
// Row-wise normalizations over a [rows, cols] row-major view (the normalized axes are the
// trailing, contiguous ones; the caller flattens). All are parallel over rows.
#include <cstddef>

namespace onnxforge::simd {

// y = (x - mean) * inv_std * scale + bias, inv_std = 1 / sqrt(var + eps), var the biased
// variance (two-pass, so large offsets do not cancel). scale/bias have `cols` elements (the
// caller expands broadcast forms); bias may be nullptr. If mean/inv_std are not nullptr they
// receive the per-row statistics (ONNX LayerNormalization outputs 1 and 2). y may equal x.
void layer_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, const float* bias, float eps,
                float* y, float* mean = nullptr, float* inv_std = nullptr);

// y = x / sqrt(mean(x^2) + eps) * scale; scale has `cols` elements or is nullptr (1).
// inv_rms, if not nullptr, receives 1 / sqrt(mean(x^2) + eps) per row. y may equal x.
void rms_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, float eps, float* y,
              float* inv_rms = nullptr);

// Numerically stable softmax / log-softmax over the last axis (max subtracted first). A row of
// all -inf gives NaN, as exp(-inf - -inf) does in the reference definition. y may equal x.
void softmax(std::size_t rows, std::size_t cols, const float* x, float* y);
void log_softmax(std::size_t rows, std::size_t cols, const float* x, float* y);

// Softmax over the middle axis of an [outer, n, inner] view (ONNX Softmax-13 with an axis that
// is not the last one), without transposing.
void softmax_axis(std::size_t outer, std::size_t n, std::size_t inner, const float* x, float* y, bool log = false);

}  // namespace onnxforge::simd
