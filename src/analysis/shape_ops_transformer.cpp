// The standard transformer ops: Attention (23), Swish (24), RMSNormalization (23, whose Y takes
// the scale's type) and ORT's SimplifiedLayerNormalization, its default-domain forerunner.
// RotaryEmbedding keeps X's type and shape (shape_ops_elementwise.cpp).
#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

// Attention-23: Y, present_key, present_value, qk_matmul_output. 4-D Q (B, Hq, Sq, D) with
// K/V (B, Hkv, Skv, D/Dv), or 3-D (B, S, heads*head) with q_num_heads / kv_num_heads; past
// caches (B, Hkv, P, D/Dv) make the total length P + Skv.
void attention(OpCtx& c) {
  const VState &q = c.in(0), &k = c.in(1), &v = c.in(2);
  const DType tq = q.dtype, tv = v.dtype == DType::Undefined ? q.dtype : v.dtype;
  auto unknown = [&] {
    c.set_dtype(0, tq);
    c.set_dtype(1, tq);
    c.set_dtype(2, tv);
    c.set_dtype(3, tq);
  };
  if (!q.ranked || !k.ranked || !v.ranked) return unknown();
  const size_t r = q.rank();
  if ((r != 3 && r != 4) || k.rank() != r || v.rank() != r) {
    c.conflict("Attention expects Q, K and V all 3-D or all 4-D, got ranks " + std::to_string(q.rank()) + ", " +
               std::to_string(k.rank()) + ", " + std::to_string(v.rank()));
    return unknown();
  }
  SymDim B = q.dims[0], Hq, Sq, Hkv, Skv, D, Dv;
  std::vector<SymDim> y;
  auto or_fresh = [&](std::optional<SymDim> d) { return d ? *d : c.fresh(); };
  if (r == 4) {
    Hq = q.dims[1], Sq = q.dims[2], Hkv = k.dims[1], Skv = k.dims[2], D = k.dims[3], Dv = v.dims[3];
    y = {B, Hq, Sq, Dv};
  } else {
    const int64_t hq = c.attr_int("q_num_heads", 0), hkv = c.attr_int("kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0) {
      c.conflict("3-D Attention needs q_num_heads and kv_num_heads");
      return unknown();
    }
    Hq = SymDim::constant(hq), Hkv = SymDim::constant(hkv), Sq = q.dims[1], Skv = k.dims[1];
    D = or_fresh(exact_div(k.dims[2], Hkv));
    Dv = or_fresh(exact_div(v.dims[2], Hkv));
    y = {B, Sq, hq == hkv ? v.dims[2] : Hq * Dv};
  }
  SymDim total = Skv;
  if (c.has_input(4)) {
    const VState& past = c.in(4);
    total = past.ranked && past.rank() == 4 ? past.dims[2] + Skv : c.fresh();
  }
  c.set(0, tq, y);
  c.set(1, tq, {B, Hkv, total, D});
  c.set(2, tv, {B, Hkv, total, Dv});
  c.set(3, tq, {B, Hq, Sq, total});
}

// Y takes the scale's type (X's when the scale's is unknown).
void rms_norm(OpCtx& c) { same_as(c, 0, 0, c.has_input(1) ? c.in(1).dtype : DType::Undefined); }

void unary(OpCtx& c) { same_as(c, 0); }

}  // namespace

void register_transformer(const Registrar& reg) {
  reg("Attention", attention);
  reg("Swish", unary);
  reg("RMSNormalization", rms_norm);
  reg("SimplifiedLayerNormalization", rms_norm);
  reg("com.microsoft::SimplifiedLayerNormalization", rms_norm);
}

}  // namespace onnxforge::shape
