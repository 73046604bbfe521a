// The standard transformer ops the fusion passes emit: Attention (opset 23) and Swish (opset 24).
// RotaryEmbedding lives in attention.cpp, the normalizations in norm.cpp.
//
// Attention follows the ONNX spec and its reference implementation (onnx/reference/ops/
// op_attention.py), checked against ONNX Runtime 1.30 (tests/runtime/transformer_ops_test.cpp):
// - is_causal: query i attends key j iff j <= i + past_sequence_length (the spec's text since
//   onnx#8068, and what ORT 1.30's CPU kernel does: with q_len < kv_len and no past the frontier
//   is top-left, query 0 sees key 0 only); with Attention-24's nonpad_kv_seqlen (no past) it is
//   j <= i + nonpad_kv_seqlen[b] - q_len, and keys at or beyond nonpad_kv_seqlen[b] are masked;
// - attn_mask: bool (true = attend) or additive, broadcast right-aligned to (B, Hq, Sq, total);
//   a mask whose last dim is shorter than total masks the missing keys (the reference pads it
//   with -inf/false);
// - softcap (> 0) is applied to the scaled scores before the mask;
// - a query row whose combined bias (mask + causal) is -inf everywhere gives zeros (Y and the
//   mode-3 qk output), not NaN;
// - qk_matmul_output: mode 0 the scaled Q·Kᵀ, 1 after softcap, 2 after softcap and mask, 3 the
//   softmax.
// GQA: query head h reads KV head h / (Hq / Hkv); K and V are packed once per (batch, KV head)
// and shared by the group, never repeated.
#include <cmath>
#include <limits>
#include <optional>

#include "runtime/ops/common.h"
#include "simd/attention.h"
#include "simd/gemm.h"
#include "simd/norm.h"
#include "simd/parallel.h"
#include "simd/unary.h"

namespace onnxforge::rt {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct AttnDims {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, T = 0, D = 0, Dv = 0;
  bool three_d = false;
  // 3-D: elements between consecutive (b, s) rows of Q / K / V (their hidden sizes, or the
  // width of the tensor they are column ranges of: split_attention()).
  int64_t lq = 0, lk = 0, lv = 0;
  // Element offsets of row (b, h, s) of Q / K / V / Y and the stride between rows of one head.
  int64_t q_row(int64_t b, int64_t h, int64_t s) const {
    return three_d ? (b * Sq + s) * lq + h * D : ((b * Hq + h) * Sq + s) * D;
  }
  int64_t y_row(int64_t b, int64_t h, int64_t s) const {
    return three_d ? (b * Sq + s) * Hq * Dv + h * Dv : ((b * Hq + h) * Sq + s) * Dv;
  }
  int64_t k_row(int64_t b, int64_t h, int64_t s) const {
    return three_d ? (b * Skv + s) * lk + h * D : ((b * Hkv + h) * Skv + s) * D;
  }
  int64_t v_row(int64_t b, int64_t h, int64_t s) const {
    return three_d ? (b * Skv + s) * lv + h * Dv : ((b * Hkv + h) * Skv + s) * Dv;
  }
  int64_t ldq() const { return three_d ? lq : D; }
  int64_t ldy() const { return three_d ? Hq * Dv : Dv; }
  int64_t ldk() const { return three_d ? lk : D; }
  int64_t ldv() const { return three_d ? lv : Dv; }
};

AttnDims attention_dims(const OpContext& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* pk,
                        const Tensor* pv) {
  AttnDims d;
  if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
    c.error("Q, K and V must all be 3-D or all 4-D, got " + shape_str(q.shape) + ", " + shape_str(k.shape) + ", " +
            shape_str(v.shape));
  d.B = q.shape[0];
  if (k.shape[0] != d.B || v.shape[0] != d.B) c.error("Q, K and V disagree on the batch size");
  if (q.rank() == 4) {
    if (c.has_attr("q_num_heads") || c.has_attr("kv_num_heads")) {
      // Allowed by Attention-23 when they agree with the shapes.
      if (c.attr_i("q_num_heads", q.shape[1]) != q.shape[1] || c.attr_i("kv_num_heads", k.shape[1]) != k.shape[1])
        c.error("q_num_heads/kv_num_heads disagree with the 4-D shapes of Q and K");
    }
    d.Hq = q.shape[1];
    d.Sq = q.shape[2];
    d.D = q.shape[3];
    d.Hkv = k.shape[1];
    d.Skv = k.shape[2];
    if (k.shape[3] != d.D)
      c.error("K's head size " + std::to_string(k.shape[3]) + " differs from Q's " + std::to_string(d.D));
    if (v.shape[1] != d.Hkv || v.shape[2] != d.Skv)
      c.error("V " + shape_str(v.shape) + " does not match K " + shape_str(k.shape) + " in heads and sequence length");
    d.Dv = v.shape[3];
  } else {
    d.three_d = true;
    d.Hq = c.attr_i("q_num_heads", 0);
    d.Hkv = c.attr_i("kv_num_heads", 0);
    if (d.Hq <= 0 || d.Hkv <= 0) c.error("3-D Q, K, V need the q_num_heads and kv_num_heads attributes (> 0)");
    if (q.shape[2] % d.Hq || k.shape[2] % d.Hkv || v.shape[2] % d.Hkv)
      c.error("hidden sizes " + std::to_string(q.shape[2]) + "/" + std::to_string(k.shape[2]) + "/" +
              std::to_string(v.shape[2]) + " are not multiples of q_num_heads " + std::to_string(d.Hq) +
              " / kv_num_heads " + std::to_string(d.Hkv));
    d.Sq = q.shape[1];
    d.D = q.shape[2] / d.Hq;
    d.Skv = k.shape[1];
    if (k.shape[2] / d.Hkv != d.D) c.error("K's head size differs from Q's");
    if (v.shape[1] != d.Skv) c.error("K and V disagree on the sequence length");
    d.Dv = v.shape[2] / d.Hkv;
    d.lq = q.shape[2], d.lk = k.shape[2], d.lv = v.shape[2];
  }
  if (d.Hkv <= 0 || d.Hq % d.Hkv)
    c.error("q_num_heads " + std::to_string(d.Hq) + " is not a multiple of kv_num_heads " + std::to_string(d.Hkv));
  if ((pk == nullptr) != (pv == nullptr)) c.error("past_key and past_value must be given together");
  if (pk) {
    if (pk->rank() != 4 || pv->rank() != 4 || pk->shape[0] != d.B || pk->shape[1] != d.Hkv || pk->shape[3] != d.D ||
        pv->shape[0] != d.B || pv->shape[1] != d.Hkv || pv->shape[2] != pk->shape[2] || pv->shape[3] != d.Dv)
      c.error("past_key " + shape_str(pk->shape) + " / past_value " + shape_str(pv->shape) +
              " must be (batch, kv_num_heads, past_length, head_size) matching K and V");
    d.P = pk->shape[2];
  }
  d.T = d.P + d.Skv;
  return d;
}

// The attention mask as a view over (b, h, i) rows: element strides of its first three
// broadcast dims and its last-dim length (keys beyond it are masked).
struct MaskView {
  const Tensor* t = nullptr;
  Tensor converted;  // a numeric mask of another type, as float32 (the spec's U: any numeric type)
  bool boolean = false;
  const Tensor& values() const { return converted.data ? converted : *t; }
  int64_t sb = 0, sh = 0, sq = 0, len = 0;
  int64_t row(int64_t b, int64_t h, int64_t i) const { return b * sb + h * sh + i * sq; }
};

MaskView mask_view(const OpContext& c, const Tensor* m, const AttnDims& d) {
  MaskView mv;
  if (!m) return mv;
  mv.t = m;
  mv.boolean = m->dtype == DType::Bool;
  if (m->dtype != DType::Float && !mv.boolean) {
    if (m->dtype == DType::String) c.error("attn_mask must be bool or numeric, got a string tensor");
    mv.converted = cast(*m, DType::Float);
  }
  if (m->rank() < 1 || m->rank() > 4) c.error("attn_mask must have rank 1 to 4, got " + shape_str(m->shape));
  Shape s(4 - m->shape.size(), 1);
  s.insert(s.end(), m->shape.begin(), m->shape.end());
  const int64_t want[3] = {d.B, d.Hq, d.Sq};
  for (int i = 0; i < 3; ++i)
    if (s[static_cast<size_t>(i)] != 1 && s[static_cast<size_t>(i)] != want[i])
      c.error("attn_mask " + shape_str(m->shape) + " does not broadcast to (batch " + std::to_string(d.B) + ", heads " +
              std::to_string(d.Hq) + ", q_length " + std::to_string(d.Sq) + ", total_length " + std::to_string(d.T) +
              ")");
  mv.len = s[3];
  if (mv.len > d.T)
    c.error("attn_mask's last dim " + std::to_string(mv.len) + " exceeds the total sequence length " +
            std::to_string(d.T));
  mv.sq = s[2] == 1 ? 0 : s[3];
  mv.sh = s[1] == 1 ? 0 : s[2] * s[3];
  mv.sb = s[0] == 1 ? 0 : s[1] * s[2] * s[3];
  return mv;
}

// Copies rows [0, rows) of one head (row stride `ld`) into a contiguous [rows, width] block.
void copy_rows(const float* src, int64_t ld, int64_t rows, int64_t width, float* dst) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * width, src + r * ld, static_cast<size_t>(width) * 4);
}

// The per-row limits and masks of the scores of keys [j0, j0 + n) for query rows r = g * Sq + i
// (query head kvh * group + g, position i): keys at or beyond the row's limit and keys the mask
// excludes become -inf. False when every row's limit is at or before j0 (nothing visible).
struct RowMasking {
  const AttnDims& d;
  const MaskView& mv;
  const std::vector<int64_t>& valid;
  bool causal;
  int64_t limit(int64_t b, int64_t i) const {
    const int64_t offset = valid.empty() ? d.P : valid[static_cast<size_t>(b)] - d.Sq;
    int64_t lim = causal ? std::clamp<int64_t>(i + offset + 1, 0, d.T) : d.T;
    if (!valid.empty()) lim = std::min(lim, valid[static_cast<size_t>(b)]);
    if (mv.t) lim = std::min(lim, mv.len);
    return lim;
  }
  bool apply(int64_t b, int64_t kvh, int64_t group, int64_t j0, int64_t n, float* s) const {
    bool any = false;
    for (int64_t g = 0; g < group; ++g)
      for (int64_t i = 0; i < d.Sq; ++i) {
        float* row = s + (g * d.Sq + i) * n;
        const int64_t end = std::clamp<int64_t>(limit(b, i) - j0, 0, n);
        any = any || end > 0;
        if (mv.t && mv.boolean && end > 0) {
          const uint8_t* m = mv.values().ptr<uint8_t>() + mv.row(b, kvh * group + g, i) + j0;
          for (int64_t j = 0; j < end; ++j) row[j] = m[j] ? row[j] : kNegInf;
        } else if (mv.t && end > 0) {
          const float* m = mv.values().ptr<float>() + mv.row(b, kvh * group + g, i) + j0;
          for (int64_t j = 0; j < end; ++j) row[j] += m[j];
        }
        std::fill(row + end, row + n, kNegInf);
      }
    return any;
  }
};

// Attention for a few query rows (decode steps) over K and V read in place, flash-decoding
// style: the keys are cut into blocks, one task per (batch, KV head, block) computes the scores
// of the KV head's whole query group (GQA: each K/V row is read once for all its query heads),
// their exps against the block's max and the weighted V rows, and copies its rows of the past
// and the new keys into present_key/value (the only write of the cache); then each query row
// merges its blocks' partial sums. Many small tasks on a shared counter: a thread the OS
// preempts delays one block, not half of the heads (a static split of 2 threads lost half the
// attention to each preemption).
void attention_in_place(const AttnDims& d, const float* qp, const float* kp, const float* vp, const float* pkp,
                        const float* pvp, const RowMasking& masking, float scale, float softcap, float* yp,
                        float* present_k, float* present_v) {
  const int64_t group = d.Hq / d.Hkv, R = group * d.Sq, kvheads = d.B * d.Hkv;
  // About 16 blocks per thread over all KV heads, 32 keys at least (a block's scores and V rows
  // stay in L1).
  const int64_t threads = simd::max_threads();
  int64_t blk = (d.T * kvheads + 16 * threads - 1) / (16 * threads);
  blk = std::clamp<int64_t>((blk + 15) / 16 * 16, 32, 1024);
  const int64_t blocks = std::max<int64_t>((d.T + blk - 1) / blk, 1);
  const int64_t dv = d.Dv;
  std::vector<float> part_m(static_cast<size_t>(kvheads * blocks * R)), part_l(part_m.size());
  std::vector<float> part_acc(part_m.size() * static_cast<size_t>(dv));
  const int64_t tasks = kvheads * blocks;
  simd::parallel_each(static_cast<size_t>(tasks), true, [&](size_t task) {
    simd::SerialScope serial;
    const auto t = static_cast<int64_t>(task);
    const int64_t bkv = t / blocks, b = bkv / d.Hkv, kvh = bkv % d.Hkv;
    const int64_t j0 = (t % blocks) * blk, j1 = std::min(d.T, j0 + blk), n = j1 - j0;
    const int64_t np = std::clamp<int64_t>(d.P - j0, 0, n);  // keys of the block in the past
    const int64_t jn = j0 + np - d.P;                        // first new key of the block
    const float* pk_rows = pkp ? pkp + (bkv * d.P + j0) * d.D : nullptr;
    const float* pv_rows = pvp ? pvp + (bkv * d.P + j0) * dv : nullptr;
    const float* k_rows = n > np ? kp + d.k_row(b, kvh, jn) : nullptr;
    const float* v_rows = n > np ? vp + d.v_row(b, kvh, jn) : nullptr;
    if (present_k) {
      float* dst = present_k + (bkv * d.T + j0) * d.D;
      if (np) std::memcpy(dst, pk_rows, static_cast<size_t>(np * d.D) * 4);
      if (n > np) copy_rows(k_rows, d.ldk(), n - np, d.D, dst + np * d.D);
    }
    if (present_v) {
      float* dst = present_v + (bkv * d.T + j0) * dv;
      if (np) std::memcpy(dst, pv_rows, static_cast<size_t>(np * dv) * 4);
      if (n > np) copy_rows(v_rows, d.ldv(), n - np, dv, dst + np * dv);
    }
    float* m = part_m.data() + t * R;
    float* l = part_l.data() + t * R;
    float* acc = part_acc.data() + t * R * dv;
    std::fill(acc, acc + R * dv, 0.f);
    if (n == 0 || dv == 0) {
      std::fill(m, m + R, kNegInf);
      return;
    }
    std::vector<const float*> q(static_cast<size_t>(R));
    std::vector<float*> a(static_cast<size_t>(R));
    for (int64_t g = 0; g < group; ++g)
      for (int64_t i = 0; i < d.Sq; ++i) {
        q[static_cast<size_t>(g * d.Sq + i)] = qp + d.q_row(b, kvh * group + g, i);
        a[static_cast<size_t>(g * d.Sq + i)] = acc + (g * d.Sq + i) * dv;
      }
    std::vector<float> s(static_cast<size_t>(R * n));
    const auto ur = static_cast<size_t>(R), un = static_cast<size_t>(n), ud = static_cast<size_t>(d.D);
    if (np) simd::attention_scores(ur, q.data(), static_cast<size_t>(np), ud, pk_rows, ud, scale, s.data(), un);
    if (n > np)
      simd::attention_scores(ur, q.data(), static_cast<size_t>(n - np), ud, k_rows, static_cast<size_t>(d.ldk()), scale,
                             s.data() + np, un);
    if (softcap > 0.f) {
      for (float& x : s) x /= softcap;
      simd::vmath::tanh(s.data(), s.data(), s.size());
      for (float& x : s) x *= softcap;
    }
    if (!masking.apply(b, kvh, group, j0, n, s.data())) {
      std::fill(m, m + R, kNegInf);
      return;
    }
    simd::attention_exp(ur, un, s.data(), un, m, l);
    if (np)
      simd::attention_values(ur, static_cast<size_t>(np), static_cast<size_t>(dv), s.data(), un, pv_rows,
                             static_cast<size_t>(dv), a.data());
    if (n > np)
      simd::attention_values(ur, static_cast<size_t>(n - np), static_cast<size_t>(dv), s.data() + np, un, v_rows,
                             static_cast<size_t>(d.ldv()), a.data());
  });
  if (dv == 0) return;
  for (int64_t bkv = 0; bkv < kvheads; ++bkv) {
    const int64_t b = bkv / d.Hkv, kvh = bkv % d.Hkv;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t first = bkv * blocks * R + r;
      simd::merge_partials(static_cast<size_t>(blocks), part_m.data() + first, part_l.data() + first,
                           static_cast<size_t>(R), part_acc.data() + first * dv, static_cast<size_t>(R * dv),
                           static_cast<size_t>(dv), yp + d.y_row(b, kvh * group + r / d.Sq, r % d.Sq));
    }
  }
}

// Attention on Q, K, V given as tensors (shapes as the op's inputs); `ld`, when set, are the
// 3-D row strides of Q, K and V (column ranges of one wider tensor: split_attention()).
void run_attention(OpContext& c, const Tensor& q, const Tensor& k, const Tensor& v, const int64_t* ld = nullptr) {
  const Tensor* mask = c.in(3);
  const Tensor* pk = c.in(4);
  const Tensor* pv = c.in(5);
  const Tensor* nonpad = c.in(6);  // Attention-24: valid keys per batch (an external, static KV cache)
  for (const Tensor* t : {&q, &k, &v, pk, pv})
    if (t && t->dtype != DType::Float)
      c.error("Q, K, V and the past caches must be float32, float16 or bfloat16, got " +
              std::string(dtype_name(t->dtype)));
  AttnDims d = attention_dims(c, q, k, v, pk, pv);
  if (ld != nullptr && d.three_d) d.lq = ld[0], d.lk = ld[1], d.lv = ld[2];
  const MaskView mv = mask_view(c, mask, d);
  std::vector<int64_t> valid;  // per batch: keys at or beyond are padding
  if (nonpad) {
    if (pk) c.error("nonpad_kv_seqlen cannot be combined with past_key/past_value");
    valid = ints_of(*nonpad);
    if (nonpad->rank() != 1 || static_cast<int64_t>(valid.size()) != d.B)
      c.error("nonpad_kv_seqlen must be 1-D with one length per batch, got " + shape_str(nonpad->shape));
    for (int64_t n : valid)
      if (n < 0 || n > d.T)
        c.error("nonpad_kv_seqlen " + std::to_string(n) + " is outside [0, " + std::to_string(d.T) + "]");
  }
  const bool causal = c.attr_i("is_causal", 0) != 0;
  const float scale =
      c.has_attr("scale") ? c.attr_f("scale", 1.f) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.D)));
  const float softcap = c.attr_f("softcap", 0.f);
  const int64_t qk_mode = c.attr_i("qk_matmul_output_mode", 0);
  if (qk_mode < 0 || qk_mode > 3) c.error("qk_matmul_output_mode must be 0..3, got " + std::to_string(qk_mode));

  Tensor& y = c.output(0, DType::Float, d.three_d ? Shape{d.B, d.Sq, d.Hq * d.Dv} : Shape{d.B, d.Hq, d.Sq, d.Dv});
  const bool want_pk = c.output_count() > 1 && c.has_output(1), want_pv = c.output_count() > 2 && c.has_output(2);
  const bool want_qk = c.output_count() > 3 && c.has_output(3);
  // Up to this many query rows per head, attention reads K and V in place (decode steps); above,
  // GEMMs over packed K and V pay off.
  constexpr int64_t kInPlaceMaxRows = 4;
  if (d.Sq <= kInPlaceMaxRows && !want_qk) {
    const Shape ks{d.B, d.Hkv, d.T, d.D}, vs{d.B, d.Hkv, d.T, d.Dv};
    float* present_k = want_pk ? c.output(1, DType::Float, ks).ptr<float>() : nullptr;
    float* present_v = want_pv ? c.output(2, DType::Float, vs).ptr<float>() : nullptr;
    attention_in_place(d, q.ptr<float>(), k.ptr<float>(), v.ptr<float>(), pk ? pk->ptr<float>() : nullptr,
                       pv ? pv->ptr<float>() : nullptr, RowMasking{d, mv, valid, causal}, scale, softcap,
                       y.ptr<float>(), present_k, present_v);
    return;
  }
  // present_key/value: (B, Hkv, T, D). With a past cache, K and V are read from them (one
  // contiguous block per head); a temporary stands in when the graph does not ask for them.
  Tensor present_k, present_v;
  const float* kbase = k.ptr<float>();
  const float* vbase = v.ptr<float>();
  int64_t ldk = d.ldk(), ldv = d.ldv();
  auto head_k = [&](int64_t b, int64_t h) {
    return kbase + (pk || !d.three_d ? (b * d.Hkv + h) * d.T * d.D : d.k_row(b, h, 0));
  };
  auto head_v = [&](int64_t b, int64_t h) {
    return vbase + (pk || !d.three_d ? (b * d.Hkv + h) * d.T * d.Dv : d.v_row(b, h, 0));
  };
  if (pk || want_pk || want_pv) {
    const Shape ks{d.B, d.Hkv, d.T, d.D}, vs{d.B, d.Hkv, d.T, d.Dv};
    present_k = want_pk ? c.output(1, DType::Float, ks) : (pk ? Tensor::alloc(DType::Float, ks) : Tensor{});
    present_v = want_pv ? c.output(2, DType::Float, vs) : (pk ? Tensor::alloc(DType::Float, vs) : Tensor{});
    simd::parallel_for(d.B * d.Hkv, [&](int64_t bh) {
      const int64_t b = bh / d.Hkv, h = bh % d.Hkv;
      if (present_k.data) {
        float* dst = present_k.ptr<float>() + bh * d.T * d.D;
        if (pk) std::memcpy(dst, pk->ptr<float>() + bh * d.P * d.D, static_cast<size_t>(d.P * d.D) * 4);
        copy_rows(k.ptr<float>() + d.k_row(b, h, 0), d.ldk(), d.Skv, d.D, dst + d.P * d.D);
      }
      if (present_v.data) {
        float* dst = present_v.ptr<float>() + bh * d.T * d.Dv;
        if (pv) std::memcpy(dst, pv->ptr<float>() + bh * d.P * d.Dv, static_cast<size_t>(d.P * d.Dv) * 4);
        copy_rows(v.ptr<float>() + d.v_row(b, h, 0), d.ldv(), d.Skv, d.Dv, dst + d.P * d.Dv);
      }
    });
    if (pk) {
      kbase = present_k.ptr<float>();
      vbase = present_v.ptr<float>();
      ldk = d.D;
      ldv = d.Dv;
    }
  }
  // Without a past cache, 4-D K/V rows are contiguous per head already (head_k/head_v above).
  if (!pk && !d.three_d) ldk = d.D, ldv = d.Dv;
  float* qk_out = nullptr;
  if (want_qk) qk_out = c.output(3, DType::Float, Shape{d.B, d.Hq, d.Sq, d.T}).ptr<float>();
  if (y.numel() == 0 && !qk_out) return;

  // K packed transposed ([D, T]) and V ([T, Dv]) once per (batch, KV head).
  const int64_t groups = d.B * d.Hkv;
  std::vector<simd::PackedB> pkt(static_cast<size_t>(groups)), pvv(static_cast<size_t>(groups));
  const bool gemm_ok = d.T > 0 && d.D > 0 && d.Dv > 0;
  // With at least two items per thread, each item runs its GEMMs and softmax on its own thread:
  // nested regions only added hand-offs. BERT-base (12 heads x 2 row blocks, 2 threads): the
  // helper thread ran a tenth of the Attention work and spun for the rest (perf), 1 thread and
  // 2 threads took the same time.
  const bool serial_items = groups >= 2 * simd::max_threads();
  if (gemm_ok)
    simd::parallel_for(groups, [&](int64_t bh) {
      std::optional<simd::SerialScope> serial;
      if (serial_items) serial.emplace();
      const int64_t b = bh / d.Hkv, h = bh % d.Hkv;
      const auto u = static_cast<size_t>(bh);
      pkt[u] = simd::pack_b(true, static_cast<size_t>(d.D), static_cast<size_t>(d.T), head_k(b, h),
                            static_cast<size_t>(ldk));
      pvv[u] = simd::pack_b(false, static_cast<size_t>(d.T), static_cast<size_t>(d.Dv), head_v(b, h),
                            static_cast<size_t>(ldv));
    });

  constexpr int64_t kRows = 64;  // score tile: 64 query rows x T keys, kept in cache
  const bool unmasked = !mv.t && !causal && !nonpad;
  const int64_t blocks = (d.Sq + kRows - 1) / kRows;
  const int64_t group = d.Hq / d.Hkv;
  const float* qp = q.ptr<float>();
  float* yp = y.ptr<float>();
  const int64_t tasks = d.B * d.Hq * blocks;
  simd::parallel_each(static_cast<size_t>(tasks), true, [&](size_t task) {
    std::optional<simd::SerialScope> serial;
    if (tasks >= 2 * simd::max_threads()) serial.emplace();
    const auto t = static_cast<int64_t>(task);
    const int64_t bh = t / blocks, b = bh / d.Hq, h = bh % d.Hq, kvh = h / group;
    const int64_t r0 = (t % blocks) * kRows, rows = std::min(kRows, d.Sq - r0);
    const auto u = static_cast<size_t>(b * d.Hkv + kvh);
    const int64_t T = d.T;
    std::vector<float> scores(static_cast<size_t>(rows * std::max<int64_t>(T, 1)));
    if (gemm_ok)
      simd::gemm_packed(false, static_cast<size_t>(rows), scale, qp + d.q_row(b, h, r0), static_cast<size_t>(d.ldq()),
                        pkt[u], 0.f, scores.data(), static_cast<size_t>(T));
    else
      std::fill(scores.begin(), scores.end(), 0.f);
    float* qk_rows = qk_out ? qk_out + (bh * d.Sq + r0) * T : nullptr;
    if (qk_rows && qk_mode == 0) std::memcpy(qk_rows, scores.data(), static_cast<size_t>(rows * T) * 4);
    if (softcap > 0.f && T > 0) {
      const size_t n = static_cast<size_t>(rows * T);
      for (size_t i = 0; i < n; ++i) scores[i] /= softcap;
      simd::vmath::tanh(scores.data(), scores.data(), n);
      for (size_t i = 0; i < n; ++i) scores[i] *= softcap;
    }
    if (qk_rows && qk_mode == 1) std::memcpy(qk_rows, scores.data(), static_cast<size_t>(rows * T) * 4);
    // Masking: keys at or beyond a row's `limit` (the causal frontier, the padding of an external
    // cache, the end of a short mask) and keys the mask excludes get -inf; then one softmax call
    // for the whole tile (exp(-inf) is 0), and fully masked rows become zeros: faster than a call
    // per row over its first `limit` keys (docs/benchmarks.md, "Measurements that decided the code").
    std::vector<uint8_t> dead;
    if (!unmasked) {
      dead.assign(static_cast<size_t>(rows), 0);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r0 + r;
        float* s = scores.data() + r * T;
        // The frontier sits past_length keys right of the diagonal, or valid_length - q_length
        // with nonpad_kv_seqlen (then it may mask a whole row).
        const int64_t offset = nonpad ? valid[static_cast<size_t>(b)] - d.Sq : d.P;
        int64_t limit = causal ? std::clamp<int64_t>(i + offset + 1, 0, T) : T;
        if (nonpad) limit = std::min(limit, valid[static_cast<size_t>(b)]);
        if (mv.t) limit = std::min(limit, mv.len);
        bool any = limit > 0;
        if (mv.t && mv.boolean) {
          const uint8_t* m = mv.values().ptr<uint8_t>() + mv.row(b, h, i);
          for (int64_t j = 0; j < limit; ++j) s[j] = m[j] ? s[j] : kNegInf;
          any = std::any_of(m, m + limit, [](uint8_t x) { return x != 0; });
        } else if (mv.t) {
          const float* m = mv.values().ptr<float>() + mv.row(b, h, i);
          for (int64_t j = 0; j < limit; ++j) s[j] += m[j];
          any = std::any_of(m, m + limit, [](float x) { return x != kNegInf; });
        }
        for (int64_t j = limit; j < T; ++j) s[j] = kNegInf;
        dead[static_cast<size_t>(r)] = !any;
      }
    }
    if (qk_rows && qk_mode == 2) std::memcpy(qk_rows, scores.data(), static_cast<size_t>(rows * T) * 4);
    if (T > 0) simd::softmax(static_cast<size_t>(rows), static_cast<size_t>(T), scores.data(), scores.data());
    for (size_t r = 0; r < dead.size(); ++r)
      if (dead[r])
        std::fill(scores.begin() + static_cast<std::ptrdiff_t>(r) * T,
                  scores.begin() + static_cast<std::ptrdiff_t>(r + 1) * T, 0.f);  // not NaN
    if (qk_rows && qk_mode == 3) std::memcpy(qk_rows, scores.data(), static_cast<size_t>(rows * T) * 4);
    if (d.Dv == 0) return;
    float* yrow = yp + d.y_row(b, h, r0);
    if (gemm_ok) {
      simd::gemm_packed(false, static_cast<size_t>(rows), 1.f, scores.data(), static_cast<size_t>(T), pvv[u], 0.f, yrow,
                        static_cast<size_t>(d.ldy()));
    } else {
      for (int64_t r = 0; r < rows; ++r) std::fill(yrow + r * d.ldy(), yrow + r * d.ldy() + d.Dv, 0.f);
    }
  });
}

void attention(OpContext& c) { run_attention(c, c.input(0), c.input(1), c.input(2)); }

// Split(three parts) -> 3-D Attention as one step (split_attention_kernel()): split on the last
// axis, Q, K and V are read in place as column ranges of the Split's input, never copied out.
void split_attention(OpContext& c) {
  const auto& st = *static_cast<const SplitAttentionState*>(c.state);
  const Tensor& x = c.input(0);
  if (x.dtype != DType::Float)
    c.error("Q, K and V must be float32, float16 or bfloat16, got " + std::string(dtype_name(x.dtype)));
  int64_t axis = c.attr_i("axis", 0);
  if (axis < -x.rank() || axis >= x.rank())
    c.error("axis " + std::to_string(axis) + " is out of range for an input of shape " + shape_str(x.shape));
  if (axis < 0) axis += x.rank();
  const int64_t dim = x.shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (const Tensor* sp = c.in(SplitAttentionState::kSplitInput))
    sizes = ints_of(*sp);
  else if (c.has_attr("split"))
    sizes.assign(c.attr_ints("split").begin(), c.attr_ints("split").end());
  else if (dim % 3 == 0)
    sizes.assign(3, dim / 3);
  else
    sizes = {(dim + 2) / 3, (dim + 2) / 3, dim - 2 * ((dim + 2) / 3)};  // Split-18's uneven last part
  if (sizes.size() != 3 || sizes[0] < 0 || sizes[1] < 0 || sizes[2] < 0 || sizes[0] + sizes[1] + sizes[2] != dim)
    c.error("the Split before this Attention needs three sizes adding up to dim " + std::to_string(axis) + " of " +
            shape_str(x.shape) + ", got " + shape_str(sizes));
  // 3-D split on the last axis: views of the three column ranges, their shapes the Split's
  // outputs', their rows `width` elements apart (run_attention reads them through the row
  // strides only). Another rank or axis (4-D Q, K, V split on the head size) gets copies, as the
  // Split would have made.
  const bool views = x.rank() == 3 && axis == 2;
  const int64_t width = x.shape.back();
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t outer = dim * inner > 0 ? x.numel() / (dim * inner) : 0;
  Tensor parts[3];
  int64_t start = 0;
  for (size_t i = 0; i < 3; ++i) {
    Shape ps = x.shape;
    ps[static_cast<size_t>(axis)] = sizes[i];
    if (views) {
      parts[i] = Tensor::view(DType::Float, ps, x.data + static_cast<size_t>(start) * sizeof(float));
    } else {
      parts[i] = Tensor::alloc(DType::Float, ps);
      const int64_t run = sizes[i] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(parts[i].ptr<float>() + o * run, x.ptr<float>() + (o * dim + start) * inner,
                    static_cast<size_t>(run) * sizeof(float));
    }
    start += sizes[i];
  }
  const int64_t ld[3] = {width, width, width};
  // Attributes, shapes in errors and the node named in messages are the Attention's.
  struct AsAttention {
    OpContext& c;
    NodeId split;
    ~AsAttention() { c.node = split; }
  } restore{c, c.node};
  c.node = st.attention;
  run_attention(c, parts[0], parts[1], parts[2], views ? ld : nullptr);
}

// Swish-24: x * sigmoid(alpha * x). alpha = 1 is simd's Silu; otherwise sigmoid(alpha x) on
// the simd path, in chunks that stay in cache, times x.
void swish(OpContext& c) {
  const Tensor& x = c.input(0);
  const float alpha = c.attr_f("alpha", 1.f);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const auto n = static_cast<size_t>(x.numel());
  if (x.dtype == DType::Float) {
    const float* X = x.ptr<float>();
    float* Y = y.ptr<float>();
    if (alpha == 1.f) {
      simd::unary(simd::Unary::of(simd::UnaryOp::Silu), X, Y, n);
      return;
    }
    simd::parallel_chunks(n, simd::elementwise_grain(8), [&](size_t b, size_t e) {
      constexpr size_t kChunk = 1024;
      float tmp[kChunk];
      for (size_t i = b; i < e; i += kChunk) {
        const size_t m = std::min(kChunk, e - i);
        for (size_t j = 0; j < m; ++j) tmp[j] = alpha * X[i + j];
        simd::vmath::sigmoid(tmp, tmp, m);
        for (size_t j = 0; j < m; ++j) Y[i + j] = X[i + j] * tmp[j];
      }
    });
    return;
  }
  if (x.dtype != DType::Double) c.error("expects float data, got " + std::string(dtype_name(x.dtype)));
  const double* X = x.ptr<double>();
  double* Y = y.ptr<double>();
  for (size_t i = 0; i < n; ++i) Y[i] = X[i] / (1 + std::exp(-static_cast<double>(alpha) * X[i]));
}

// In a producer's epilogue: Silu when alpha is 1 (the Llama MLP's gate), else not fused.
std::optional<simd::Unary> swish_epilogue(const Graph& g, NodeId n) {
  if (g.attr_float(n, "alpha", 1.f) != 1.f) return std::nullopt;
  return simd::Unary::of(simd::UnaryOp::Silu);
}

}  // namespace

const KernelDef& split_attention_kernel() {
  static const KernelDef def{.run = split_attention};
  return def;
}

void register_transformer(Registry& r) {
  r.add("", "Attention", {.run = attention});
  r.add("", "Swish", {.run = swish, .inplace_input = 0, .layout = LayoutUse::Elementwise, .epilogue = swish_epilogue});
}

}  // namespace onnxforge::rt
