// decompose_attention — Attention back into primitives, for a --target that lacks it (TensorRT
// 10, TFLite converters: passes/targets.h).                                            class 1
//
//   3-D Q/K/V [B, S, H·D]: Reshape [0, 0, H, -1], Transpose [0, 2, 1, 3] → [B, H, S, D]
//   K, V = Concat(past_key, K), Concat(past_value, V) on the sequence axis; present_* = those
//   GQA: K, V [B, Hkv, T, D] → Unsqueeze 2, Expand [1, 1, Hq/Hkv, 1, 1], Reshape [0, Hq, -1, D]
//   S = MatMul(Q, Transpose(K, [0, 1, 3, 2])) · scale            (scale: attr or 1/√head_size)
//   S = softcap · Tanh(S / softcap)                              (softcap > 0)
//   S = Where(j <= i + past_length, S, -inf)                     (is_causal)
//   S = Where(j < nonpad_kv_seqlen[b], S, -inf), and the causal frontier at
//       j <= i + nonpad_kv_seqlen[b] - q_length                   (Attention-24's external cache)
//   S = Where(mask, S, -inf) or S + mask                         (attn_mask: boolean or additive,
//       padded to the total length with false / -inf when its last dim is shorter)
//   P = Softmax(S, -1); with a mask, Where(IsNaN(P), 0, P)       (a fully masked row is zeros)
//   Y = MatMul(P, V), back to [B, S, Hq·Dv] for 3-D input; qk_matmul_output from the step its
//   mode names (0: scaled scores, 1: after softcap, 2: after the masks, 3: P).
// The op's definition (Attention-23/24, and what runtime/ops/transformer.cpp computes: scale
// applied to the Q·Kᵀ products, softcap before the mask, the causal frontier past_length keys
// right of the diagonal — top-left aligned without a past, zeros, not NaN, for a row with no key
// left). Written from the spec, with no code shared with fuse_attention (verification
// independence, passes/decompose.h). Ops in the model's opset: Softmax over the last axis is
// the same op before 13 (coerced to 2-D at the last axis) and from 13 (axis -1; 3 below opset 11,
// which has no negative axes); Unsqueeze's axes an attribute below 13; a dynamic causal mask
// uses Range (11) and LessOrEqual (12; Not(Greater) below); a short mask's Pad takes a bool (13).
// ONNX Runtime 1.30 loads the chains at opsets 9-24 (it checks each node against its opset).
// The Where(IsNaN) guard costs two elementwise ops on the scores of a masked block; it stays even
// for BERT's finite additive mask, since telling a finite mask from one with -inf rows would
// take a matcher on the mask's producer.
// Class 1: each score is the same dot product scaled once, the softmax and the second product
// are the kernel's up to summation order (measured: max_diff 0 against the kernel over 320
// attribute combinations and the qk/nonpad/dynamic cases, 1.4e-6 on whisper_tiny_enc fused and
// decomposed against the export;
// tests/passes/test_decompose_transformer.cpp).
// Left alone, with the reason in optimize's report (attention_refusal): data not float32, float16
// or bfloat16 or of mixed types, nonpad_kv_seqlen with a past cache (the op forbids it),
// unknown ranks or head counts, an unknown head size where the default scale or the KV head
// repeat needs it.
#include <cmath>
#include <limits>

#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {

namespace decompose {

namespace {

struct AttnShape {
  int64_t rank = -1, hq = 0, hkv = 0, d = -1, dv = -1;
};

int64_t input_rank(const Graph& g, NodeId n, size_t i) {
  return g.inputs(n).size() > i && g.input(n, i).valid() ? rank_of(g, g.input(n, i)) : -1;
}
bool has_input(const Graph& g, NodeId n, size_t i) { return g.inputs(n).size() > i && g.input(n, i).valid(); }

AttnShape attn_shape(const Graph& g, NodeId n) {
  AttnShape a;
  const ValueId q = g.input(n, 0), k = g.input(n, 1), v = g.input(n, 2);
  a.rank = input_rank(g, n, 0);
  if (a.rank != input_rank(g, n, 1) || a.rank != input_rank(g, n, 2)) a.rank = -1;
  if (a.rank == 3) {
    a.hq = g.attr_int(n, "q_num_heads", 0);
    a.hkv = g.attr_int(n, "kv_num_heads", 0);
    if (const int64_t h = static_dim(g, q, 2); h > 0 && a.hq > 0) a.d = h / a.hq;
    if (const int64_t h = static_dim(g, v, 2); h > 0 && a.hkv > 0) a.dv = h / a.hkv;
  } else if (a.rank == 4) {
    a.hq = static_dim(g, q, 1) > 0 ? static_dim(g, q, 1) : g.attr_int(n, "q_num_heads", 0);
    a.hkv = static_dim(g, k, 1) > 0 ? static_dim(g, k, 1) : g.attr_int(n, "kv_num_heads", 0);
    a.d = static_dim(g, q, 3);
    a.dv = static_dim(g, v, 3);
  }
  return a;
}

bool same_dim(const Graph& g, ValueId a, int64_t i, ValueId b, int64_t j) {
  if (!g.has_shape(a) || !g.has_shape(b)) return false;
  const auto sa = g.shape(a), sb = g.shape(b);
  if (i < 0) i += static_cast<int64_t>(sa.size());
  if (j < 0) j += static_cast<int64_t>(sb.size());
  if (i < 0 || j < 0 || i >= static_cast<int64_t>(sa.size()) || j >= static_cast<int64_t>(sb.size())) return false;
  const Dim x = sa[static_cast<size_t>(i)], y = sb[static_cast<size_t>(j)];
  return x.known() ? y.known() && x.value == y.value : !x.param.empty() && x.param == y.param;
}

// The total key length T = past + new keys, when static (else -1).
int64_t total_length(const Graph& g, NodeId n, int64_t rank) {
  const int64_t skv = static_dim(g, g.input(n, 1), rank == 3 ? 1 : 2);
  if (skv < 0) return -1;
  if (!has_input(g, n, 4)) return skv;
  const int64_t p = static_dim(g, g.input(n, 4), 2);
  return p < 0 ? -1 : p + skv;
}

// Whether the mask's last dim is provably the total key length (no padding needed).
bool mask_covers_keys(const Graph& g, NodeId n, int64_t rank) {
  const ValueId m = g.input(n, 3);
  if (!has_input(g, n, 4)) return same_dim(g, m, -1, g.input(n, 1), rank == 3 ? 1 : 2);
  const int64_t t = total_length(g, n, rank);
  return t >= 0 && static_dim(g, m, -1) == t;
}

}  // namespace

std::string attention_refusal(const Graph& g, NodeId n) {
  if (g.inputs(n).size() < 3) return "fewer than three inputs";
  const int64_t opset = g.model().opset("");
  if (opset < 9) return "opset below 9 (Where and IsNaN)";
  if (has_input(g, n, 6)) {
    if (has_input(g, n, 4)) return "nonpad_kv_seqlen with past_key/past_value (the op forbids the combination)";
    if (opset < 13) return "nonpad_kv_seqlen below opset 13";  // Attention-24 only: never here
  }
  // float32, float16 or bfloat16, Q/K/V and the past alike: the chain computes in that type, as
  // the op does without softmax_precision (the runtime runs the op in float and rounds once;
  // verification judges a float16 model in its ulps).
  const DType t = dtype_of(g, g.input(n, 0));
  if (t != DType::Float && t != DType::Float16 && t != DType::BFloat16)
    return "input 0 is not float32, float16 or bfloat16";
  for (size_t i : {1, 2, 4, 5})
    if (has_input(g, n, i) && dtype_of(g, g.input(n, i)) != t)
      return "input " + std::to_string(i) + " is not of Q's type";
  if (const Attr* sp = g.attr(n, "softmax_precision");
      sp && sp->type == AttrType::Int && sp->i != static_cast<int64_t>(t))
    return "softmax_precision differs from Q's type";
  if (has_input(g, n, 4) != has_input(g, n, 5)) return "past_key without past_value or the reverse";
  const AttnShape a = attn_shape(g, n);
  if (a.rank != 3 && a.rank != 4) return "Q, K and V are not all 3-D or all 4-D (or their ranks are unknown)";
  if (a.hq <= 0 || a.hkv <= 0) return "the head counts are unknown";
  if (a.hq % a.hkv) return "q_num_heads is not a multiple of kv_num_heads";
  if (!(g.attr(n, "scale") != nullptr) && a.d <= 0)
    return "the head size is unknown (the default scale 1/sqrt(head_size) needs it)";
  if (a.hq != a.hkv && (a.d <= 0 || a.dv <= 0)) return "the head size is unknown (the KV head repeat needs it)";
  if (has_input(g, n, 3)) {
    const DType mt = dtype_of(g, g.input(n, 3));
    if (mt == DType::Undefined || mt == DType::String) return "the mask's element type is unknown or not numeric";
    if (input_rank(g, n, 3) < 1) return "the mask's rank is unknown";
    if (!mask_covers_keys(g, n, a.rank) && opset < 13)
      return "a mask that may be shorter than the keys needs Pad of a bool or -inf (opset 13)";
  }
  if (g.attr_int(n, "is_causal", 0) != 0) {
    const bool fixed = static_dim(g, g.input(n, 0), a.rank == 3 ? 1 : 2) >= 0 && total_length(g, n, a.rank) >= 0;
    if (!fixed && opset < 11) return "a causal mask of dynamic size needs Range (opset 11)";
  }
  const int64_t mode = g.attr_int(n, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) return "qk_matmul_output_mode is not 0..3";
  return {};
}

}  // namespace decompose

namespace {

bool apply(Edits& e, const NodeId& n) {
  if (e.touched(n)) return false;
  using decompose::static_dim;
  const Graph& g = e.g;
  Builder c(e, n);
  const decompose::AttnShape a = decompose::attn_shape(g, n);
  const bool three_d = a.rank == 3;
  const auto has = [&](size_t i) { return decompose::has_input(g, n, i); };
  const double inf = std::numeric_limits<double>::infinity();
  const DType T = dtype_of(g, g.input(n, 0));  // the constants' type (attention_refusal checked it)

  // [B, H, S, D] views.
  auto heads = [&](ValueId x, int64_t h) {
    return three_d ? c.transpose(c.reshape(x, {0, 0, h, -1}), {0, 2, 1, 3}) : x;
  };
  const ValueId q = heads(g.input(n, 0), a.hq);
  ValueId k = heads(g.input(n, 1), a.hkv), v = heads(g.input(n, 2), a.hkv);
  if (has(4)) {
    k = c.node("Concat", {g.input(n, 4), k}, {NewAttr::Int("axis", 2)});
    v = c.node("Concat", {g.input(n, 5), v}, {NewAttr::Int("axis", 2)});
  }
  const Uses& u = e.uses;
  if (decompose::output_read(g, u, n, 1)) c.bind(1, k);
  if (decompose::output_read(g, u, n, 2)) c.bind(2, v);
  // Grouped-query attention: each KV head serves Hq/Hkv consecutive query heads.
  if (a.hq != a.hkv) {
    const int64_t group = a.hq / a.hkv;
    auto repeat = [&](ValueId x, int64_t width) {
      const ValueId r = c.node("Expand", {c.unsqueeze(x, {2}), c.ints("repeat", {1, 1, group, 1, 1})});
      return c.reshape(r, {0, a.hq, -1, width});
    };
    k = repeat(k, a.d);
    v = repeat(v, a.dv);
  }
  ValueId s = c.node("MatMul", {q, c.transpose(k, {0, 1, 3, 2})});
  const double scale = (g.attr(n, "scale") != nullptr) ? g.attr_float(n, "scale", 1.f)
                                                       : static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.d)));
  s = c.node("Mul", {s, c.scalar("scale", T, scale)});
  ValueId qk[4];
  qk[0] = s;
  if (const float cap = g.attr_float(n, "softcap", 0.f); cap > 0.f) {
    const ValueId capv = c.scalar("softcap", T, cap);
    s = c.node("Mul", {c.node("Tanh", {c.node("Div", {s, capv})}), capv});
  }
  qk[1] = s;
  const ValueId neg_inf = c.scalar("neg_inf", T, -inf);
  const bool nonpad = has(6);
  // 0 .. length of axis 2 of x - 1 (the query or key positions).
  auto positions = [&](ValueId x) {
    return c.node("Range", {c.tensor("zero", DType::Int64, {}, {0}), c.reshape(c.dim(x, 2), {}),
                            c.tensor("one", DType::Int64, {}, {1})});
  };
  ValueId lens;  // nonpad_kv_seqlen as int64 [B, 1]
  if (nonpad) {
    lens = g.input(n, 6);
    if (dtype_of(g, lens) != DType::Int64) lens = c.cast(lens, DType::Int64);
    lens = c.unsqueeze(lens, {1});
  }
  if (g.attr_int(n, "is_causal", 0) != 0) {
    // Query i sees key j iff j <= i + past_length (with nonpad_kv_seqlen: i + valid[b] - q_length).
    const int64_t sq = static_dim(g, g.input(n, 0), three_d ? 1 : 2), t = decompose::total_length(g, n, a.rank);
    ValueId causal;
    if (nonpad) {
      const ValueId offset = c.node("Sub", {lens, c.dim(q, 2)});                            // [B, 1]
      const ValueId frontier = c.unsqueeze(c.node("Add", {positions(q), offset}), {1, 3});  // [B, 1, Sq, 1]
      causal = c.node("LessOrEqual", {positions(k), frontier});                             // [B, 1, Sq, T]
    } else if (sq >= 0 && t >= 0) {
      const int64_t p = t - static_dim(g, g.input(n, 1), three_d ? 1 : 2);
      std::vector<double> bits(static_cast<size_t>(sq * t));
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < t; ++j) bits[static_cast<size_t>(i * t + j)] = j <= i + p;
      causal = c.tensor("causal", DType::Bool, {sq, t}, bits);
    } else {
      ValueId rows = positions(q);
      if (has(4)) rows = c.node("Add", {rows, c.dim(g.input(n, 4), 2)});
      rows = c.unsqueeze(rows, {1});
      const ValueId cols = positions(k);
      causal = c.opset() >= 12 ? c.node("LessOrEqual", {cols, rows}) : c.node("Not", {c.node("Greater", {cols, rows})});
    }
    s = c.node("Where", {causal, s, neg_inf});
  }
  if (nonpad) {
    // Keys at or beyond nonpad_kv_seqlen[b] are padding.
    const ValueId valid = c.node("Less", {positions(k), lens});  // [B, T]
    s = c.node("Where", {c.unsqueeze(valid, {1, 2}), s, neg_inf});
  }
  const bool masked = has(3) || nonpad;  // a row may be left without a key
  if (has(3)) {
    ValueId mask = g.input(n, 3);
    const DType mt = dtype_of(g, mask);
    const bool boolean = mt == DType::Bool;
    if (!boolean && mt != T) mask = c.cast(mask, T);
    if (!decompose::mask_covers_keys(g, n, a.rank)) {
      // Keys beyond the mask's last dim are masked (the spec pads with false / -inf).
      const int64_t r = rank_of(g, g.input(n, 3));
      const ValueId need = c.node("Sub", {c.dim(k, 2), c.dim(mask, -1)});
      const ValueId pads =
          c.node("Concat", {c.ints("pads", std::vector<int64_t>(static_cast<size_t>(2 * r - 1), 0)), need},
                 {NewAttr::Int("axis", 0)});
      const ValueId fill = boolean ? c.tensor("fill", DType::Bool, {}, {0}) : c.scalar("fill", T, -inf);
      mask = c.node("Pad", {mask, pads, fill});
    }
    s = boolean ? c.node("Where", {mask, s, neg_inf}) : c.node("Add", {s, mask});
  }
  qk[2] = s;
  // The last axis: -1 from opset 11 (negative axes), 3 before (the scores are 4-D).
  ValueId p = c.node("Softmax", {s}, {NewAttr::Int("axis", c.opset() >= 11 ? -1 : 3)});
  // A row the masks leave no key is -inf everywhere: Softmax gives NaN, the op zeros.
  if (masked) p = c.node("Where", {c.node("IsNaN", {p}), c.scalar("zero", T, 0), p});
  qk[3] = p;
  if (decompose::output_read(g, u, n, 3)) c.bind(3, qk[g.attr_int(n, "qk_matmul_output_mode", 0)]);
  if (!three_d) {
    c.finish("MatMul", {p, v});
    return true;
  }
  const ValueId y = c.transpose(c.node("MatMul", {p, v}), {0, 2, 1, 3});
  c.finish("Reshape", {y, c.ints("shape", {0, 0, -1})});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(
    decompose_attention, NodeId, AccuracyClass::FloatBounded, "Attention",
    decompose::unrefused<decompose::attention_refusal>, apply,
    "Attention becomes MatMul/Mul/Softmax/MatMul with the head Reshape/Transposes, the KV head repeat, causal and "
    "attn_mask masking, softcap and the past/present caches (for a --target without the op)");

}  // namespace onnxforge::passes
