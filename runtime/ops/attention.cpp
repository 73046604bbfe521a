// RotaryEmbedding (opset 23 semantics, accepted at any opset: the optimizer emits it).
#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

void rotary(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& cosc = c.input(1);
  const Tensor& sinc = c.input(2);
  const Tensor* pos = c.in(3);
  const bool interleaved = c.attr_i("interleaved", 0);
  int64_t heads = c.attr_i("num_heads", 0);
  if (x.dtype != DType::Float) c.error("expects float data");
  // View x as [B, S, H, D] through strides (4-D input is [B, H, S, D]).
  int64_t B = x.shape[0], S, H, D;
  int64_t sb, ss, sh;
  if (x.rank() == 4) {
    H = x.shape[1]; S = x.shape[2]; D = x.shape[3];
    sb = H * S * D; sh = S * D; ss = D;
  } else {
    if (heads <= 0) c.error("num_heads is required for 3-D input");
    S = x.shape[1]; H = heads; D = x.shape[2] / heads;
    sb = S * H * D; ss = H * D; sh = D;
  }
  int64_t rot = c.attr_i("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  const int64_t half = rot / 2, cache_w = cosc.shape.back();
  Tensor& y = c.output(0, x.dtype, x.shape);
  const float* X = x.ptr<float>();
  float* Y = y.ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t row = pos ? pos->get_i64(b * S + s) : -1;
      const float* cs = cosc.ptr<float>() + (pos ? row * cache_w : (b * S + s) * cache_w);
      const float* sn = sinc.ptr<float>() + (pos ? row * cache_w : (b * S + s) * cache_w);
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = X + b * sb + s * ss + h * sh;
        float* yo = Y + b * sb + s * ss + h * sh;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
          const float x1 = xi[i1], x2 = xi[i2];
          yo[i1] = cs[i] * x1 - sn[i] * x2;
          yo[i2] = sn[i] * x1 + cs[i] * x2;
        }
        for (int64_t i = rot; i < D; ++i) yo[i] = xi[i];
      }
    }
}

}  // namespace

void register_attention(Registry& r) { r.add("", "RotaryEmbedding", {rotary}); }

}  // namespace onnxforge::rt
