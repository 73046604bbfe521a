// RotaryEmbedding (opset 23 semantics, accepted at any opset: the optimizer emits it), and the
// plan's fused MatMul -> Softmax -> MatMul (attention without materializing the scores).

#include <optional>

#include "runtime/ops/common.h"
#include "simd/gemm.h"
#include "simd/norm.h"
#include "simd/parallel.h"

namespace onnxforge::rt {
namespace {

void rotary(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& cosc = c.input(1);
  const Tensor& sinc = c.input(2);
  const Tensor* pos = c.in(3);
  const bool interleaved = c.attr_i("interleaved", 0);
  int64_t heads = c.attr_i("num_heads", 0);
  if (x.dtype != DType::Float || cosc.dtype != DType::Float || sinc.dtype != DType::Float)
    c.error("expects float data and caches");
  if (x.rank() != 3 && x.rank() != 4) c.error("input must be 3-D or 4-D, got " + shape_str(x.shape));
  // View x as [B, S, H, D] through strides (4-D input is [B, H, S, D]).
  int64_t B = x.shape[0], S, H, D;
  int64_t sb, ss, sh;
  if (x.rank() == 4) {
    H = x.shape[1];
    S = x.shape[2];
    D = x.shape[3];
    sb = H * S * D;
    sh = S * D;
    ss = D;
  } else {
    if (heads <= 0) c.error("num_heads is required for 3-D input");
    if (x.shape[2] % heads)
      c.error("hidden size " + std::to_string(x.shape[2]) + " is not a multiple of num_heads " + std::to_string(heads));
    S = x.shape[1];
    H = heads;
    D = x.shape[2] / heads;
    sb = S * H * D;
    ss = H * D;
    sh = D;
  }
  int64_t rot = c.attr_i("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot < 0 || rot > D || rot % 2)
    c.error("rotary_embedding_dim " + std::to_string(rot) + " must be even and at most the head size " +
            std::to_string(D));
  const int64_t half = rot / 2;
  // Caches are half-width: [max_pos, rot/2] indexed by position_ids, or [B, S, rot/2] without.
  if (cosc.shape != sinc.shape)
    c.error("cos_cache " + shape_str(cosc.shape) + " and sin_cache " + shape_str(sinc.shape) + " differ");
  if (cosc.rank() < 1 || cosc.shape.back() != half)
    c.error("the caches' last dim must be rotary_embedding_dim / 2 = " + std::to_string(half) + ", got " +
            shape_str(cosc.shape));
  int64_t max_pos = 0;
  if (pos) {
    if (cosc.rank() != 2)
      c.error("with position_ids the caches must be 2-D (max_position, rotary_dim / 2), got " + shape_str(cosc.shape));
    if (pos->rank() != 2 || pos->shape[0] != B || pos->shape[1] != S)
      c.error("position_ids " + shape_str(pos->shape) + " must be (batch " + std::to_string(B) + ", sequence " +
              std::to_string(S) + ")");
    need_index_type(c, *pos, "position_ids");
    max_pos = cosc.shape[0];
    for (int64_t i = 0, n = pos->numel(); i < n; ++i)
      if (int64_t p = pos->get_i64(i); p < 0 || p >= max_pos)
        c.error("position id " + std::to_string(p) + " is outside the caches' " + std::to_string(max_pos) +
                " positions");
  } else if (cosc.rank() != 3 || cosc.shape[0] != B || cosc.shape[1] != S) {
    c.error("without position_ids the caches must be (batch " + std::to_string(B) + ", sequence " + std::to_string(S) +
            ", rotary_dim / 2), got " + shape_str(cosc.shape));
  }
  Tensor& y = c.output(0, x.dtype, x.shape);
  const float* X = x.ptr<float>();
  float* Y = y.ptr<float>();
  simd::parallel_for(B * S, [&](int64_t bs) {
    const int64_t b = bs / S, s = bs % S;
    const int64_t row = pos ? pos->get_i64(bs) : bs;
    const float* cs = cosc.ptr<float>() + row * half;
    const float* sn = sinc.ptr<float>() + row * half;
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
  });
}

// y = softmax(a @ b, last axis) @ v. With equal batch dims, each batch's b and v are packed once
// and the scores are computed kRows query rows at a time, so they never leave the cache (the
// unfused graph writes and reads back a [batch, M, N] tensor twice: tens of MB for Whisper).
void softmax_attention(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const Tensor& v = c.input(2);
  if (a.dtype != DType::Float || b.dtype != DType::Float || v.dtype != DType::Float)
    c.error("the fused MatMul-Softmax-MatMul expects float32 operands");
  if (a.rank() < 2 || b.rank() < 2 || v.rank() < 2) c.error("the fused MatMul-Softmax-MatMul expects matrices");
  const Shape ss = simd::matmul_shape(a.shape, b.shape);
  const Shape ys = simd::matmul_shape(ss, v.shape);
  Tensor& y = c.output(0, DType::Float, ys);
  const size_t r = a.shape.size();
  const int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = b.shape.back(), D = v.shape.back();
  bool same = b.shape.size() == r && v.shape.size() == r && b.shape[r - 2] == K && v.shape[r - 2] == N;
  for (size_t i = 0; same && i + 2 < r; ++i) same = a.shape[i] == b.shape[i] && a.shape[i] == v.shape[i];
  if (!same || y.numel() == 0 || K == 0 || N == 0) {  // broadcasting batch dims or empty: unfused
    Tensor s = Tensor::alloc(DType::Float, ss);
    simd::matmul(a.shape, a.ptr<float>(), b.shape, b.ptr<float>(), s.ptr<float>());
    if (N > 0)
      simd::softmax(static_cast<size_t>(s.numel() / N), static_cast<size_t>(N), s.ptr<float>(), s.ptr<float>());
    simd::matmul(s.shape, s.ptr<float>(), v.shape, v.ptr<float>(), y.ptr<float>());
    return;
  }
  const int64_t batch = a.numel() / (M * K);
  std::vector<simd::PackedB> pb(static_cast<size_t>(batch)), pv(static_cast<size_t>(batch));
  // As the Attention op (ops/transformer.cpp): with two items per thread or more, an item's
  // packing, GEMMs and softmax run on its own thread, without nested regions.
  const bool serial_packs = batch >= 2 * simd::max_threads();
  simd::parallel_for(batch, [&](int64_t i) {
    std::optional<simd::SerialScope> serial;
    if (serial_packs) serial.emplace();
    const auto u = static_cast<size_t>(i);
    pb[u] = simd::pack_b(false, static_cast<size_t>(K), static_cast<size_t>(N), b.ptr<float>() + i * K * N,
                         static_cast<size_t>(N));
    pv[u] = simd::pack_b(false, static_cast<size_t>(N), static_cast<size_t>(D), v.ptr<float>() + i * N * D,
                         static_cast<size_t>(D));
  });
  constexpr int64_t kRows = 64;
  const int64_t blocks = (M + kRows - 1) / kRows;
  const bool serial_items = batch * blocks >= 2 * simd::max_threads();
  simd::parallel_each(static_cast<size_t>(batch * blocks), true, [&](size_t task) {
    std::optional<simd::SerialScope> serial;
    if (serial_items) serial.emplace();
    std::vector<float> scores(static_cast<size_t>(kRows * N));
    const auto t = static_cast<int64_t>(task);
    const int64_t i = t / blocks, r0 = (t % blocks) * kRows, rows = std::min(kRows, M - r0);
    const auto u = static_cast<size_t>(i);
    simd::gemm_packed(false, static_cast<size_t>(rows), 1.f, a.ptr<float>() + (i * M + r0) * K, static_cast<size_t>(K),
                      pb[u], 0.f, scores.data(), static_cast<size_t>(N));
    simd::softmax(static_cast<size_t>(rows), static_cast<size_t>(N), scores.data(), scores.data());
    simd::gemm_packed(false, static_cast<size_t>(rows), 1.f, scores.data(), static_cast<size_t>(N), pv[u], 0.f,
                      y.ptr<float>() + (i * M + r0) * D, static_cast<size_t>(D));
  });
}

}  // namespace

const KernelDef& softmax_attention_kernel() {
  static const KernelDef def{.run = softmax_attention};
  return def;
}

void register_attention(Registry& r) { r.add("", "RotaryEmbedding", {.run = rotary}); }

}  // namespace onnxforge::rt
