#include "analysis/forensics.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string_view>

#include "ir/match.h"

namespace onnxforge {
namespace {

// An op of this type in the default domain or com.microsoft (the fused ops either writes).
bool op_type_is(const Graph& g, NodeId n, std::string_view t) {
  if (!n.valid() || !g.alive(n) || str(g.op_type(n)) != t) return false;
  const std::string_view d = str(g.domain(n));
  return d.empty() || d == "ai.onnx" || d == "com.microsoft";
}
bool fused_op(const Graph& g, NodeId n, std::initializer_list<std::string_view> types) {
  for (std::string_view t : types)
    if (op_type_is(g, n, t)) return true;
  return false;
}

// The producer of `v`, or invalid (absent input, graph input, initializer).
NodeId from(const Graph& g, ValueId v) { return v.valid() ? g.producer(v) : NodeId{}; }

// A value that is a constant: an initializer that is not an input, or a Constant node's output.
bool constant(const Graph& g, ValueId v) { return !v.valid() || constant_tensor(g, v).valid(); }

bool is_shape_consumer_slot(const Graph& g, NodeId n, uint32_t slot) {
  return (is(g, n, "Reshape") && slot == 1) || (is(g, n, "Expand") && slot == 1) ||
         (is(g, n, "ConstantOfShape") && slot == 0) || (is(g, n, "Tile") && slot == 1) || (is(g, n, "Range")) ||
         (is(g, n, "Slice") && slot >= 1) || (is(g, n, "Resize") && slot >= 2) || (is(g, n, "Pad") && slot == 1);
}

// Whether the value computed from a Shape node reaches a shape operand within a few steps.
bool feeds_shape_operand(const Graph& g, const Uses& u, ValueId v, int depth) {
  if (depth > 8) return false;
  for (const Use& use : u.of(v)) {
    if (use.slot == Use::kImplicit || !g.alive(use.node)) continue;
    if (is_shape_consumer_slot(g, use.node, use.slot)) return true;
    for (ValueId o : g.outputs(use.node))
      if (o.valid() && feeds_shape_operand(g, u, o, depth + 1)) return true;
  }
  return false;
}

// Ops that broadcast their inputs (an Expand feeding one of them is often redundant).
bool broadcasting(const Graph& g, NodeId n) {
  for (const char* t :
       {"Add", "Sub", "Mul", "Div", "Where", "Pow", "And", "Or", "Equal", "Less", "Greater", "Max", "Min"})
    if (is(g, n, t)) return true;
  return false;
}

// Follows single-input "view" ops (Reshape, Transpose, Squeeze/Unsqueeze, Cast) upwards.
NodeId through_views(const Graph& g, ValueId v, int max_steps = 6) {
  NodeId p = v.valid() ? from(g, v) : NodeId{};
  for (int i = 0; i < max_steps && p.valid(); ++i) {
    if (!(is(g, p, "Reshape") || is(g, p, "Transpose") || is(g, p, "Squeeze") || is(g, p, "Unsqueeze") ||
          is(g, p, "Cast") || is(g, p, "Expand")))
      break;
    p = from(g, g.input(p, 0));
  }
  return p;
}

// The projection behind one attention operand (Q, K or V): the MatMul/Gemm that computed it,
// past views, an optional bias Add, rotary products and a scaling Mul/Div.
NodeId projection_of(const Graph& g, ValueId v) {
  NodeId p = through_views(g, v);
  for (int i = 0; i < 6 && p.valid(); ++i) {
    if (is(g, p, "MatMul") || is(g, p, "Gemm") || is(g, p, "Split") || is(g, p, "Slice")) return p;
    if (is(g, p, "Add") || is(g, p, "Mul") || is(g, p, "Div")) {
      // Prefer the non-constant operand.
      ValueId a = g.input(p, 0), b = g.input(p, 1);
      p = through_views(g, constant(g, a) ? b : a);
      continue;
    }
    break;
  }
  return p;
}

void attention(const Graph& g, NodeId softmax, Forensics& f) {
  // Scores: Softmax <- [Add mask | Where | Cast | Div/Mul scale]* <- MatMul(Q, K^T).
  std::string scale = "none";
  NodeId p = from(g, g.input(softmax, 0));
  NodeId qk;
  for (int i = 0; i < 6 && p.valid(); ++i) {
    if (is(g, p, "MatMul")) {
      qk = p;
      break;
    }
    if (is(g, p, "Div") && constant(g, g.input(p, 1)))
      scale = "scores-div";
    else if (is(g, p, "Mul") && (constant(g, g.input(p, 1)) || constant(g, g.input(p, 0))))
      scale = "scores-mul";
    else if (is(g, p, "Div"))
      scale = "scores-div";
    if (is(g, p, "Where"))
      p = from(g, g.input(p, constant(g, g.input(p, 1)) ? 2 : 1));  // masked_fill either way
    else if (is(g, p, "Add") || is(g, p, "Sub")) {
      NodeId a = from(g, g.input(p, 0)), b = from(g, g.input(p, 1));
      p = (is(g, a, "MatMul") || is(g, a, "Div") || is(g, a, "Mul") || is(g, a, "Where") || is(g, a, "Cast")) ? a : b;
    } else
      p = from(g, g.input(p, 0));
  }
  if (!qk.valid()) return;
  // Softmax -> [Cast] -> MatMul(., V).
  ++f.attention_blocks;
  if (scale == "none") {
    auto scaled = [&](ValueId v) {
      for (NodeId n = from(g, v); n.valid();) {
        if (is(g, n, "Mul") || is(g, n, "Div")) return true;
        if (!(is(g, n, "Reshape") || is(g, n, "Transpose") || is(g, n, "Cast"))) return false;
        n = from(g, g.input(n, 0));
      }
      return false;
    };
    const bool q = scaled(g.input(qk, 0)), k = scaled(g.input(qk, 1));
    scale = q && k ? "q-and-k" : q ? "q-only" : k ? "k-only" : "none";
  }
  ++f.attention_scale[scale];
  NodeId pq = projection_of(g, g.input(qk, 0)), pk = projection_of(g, g.input(qk, 1));
  std::string qkv = "other";
  if (pq.valid() && pk.valid()) {
    if (pq == pk || (is(g, pq, "Split") && is(g, pk, "Split")) || (is(g, pq, "Slice") && is(g, pk, "Slice")))
      qkv = "fused-split";
    else if ((is(g, pq, "MatMul") || is(g, pq, "Gemm")) && (is(g, pk, "MatMul") || is(g, pk, "Gemm")))
      qkv = g.input(pq, 0) == g.input(pk, 0) ? "separate" : "separate-inputs";
  }
  ++f.qkv_pattern[qkv];
}

void scan(const Graph& g, Forensics& f) {
  const Uses u(g);
  for (NodeId n : g.nodes()) {
    if (is(g, n, "Shape")) {
      if (feeds_shape_operand(g, u, g.output(n, 0), 0)) ++f.shape_chains;
      continue;
    }
    if (is(g, n, "Reshape") || is(g, n, "Transpose") || is(g, n, "Cast")) {
      NodeId r = single_consumer(g, u, g.output(n, 0));
      const std::string_view t = str(g.op_type(n));
      if (r.valid() && g.op_type(r) == g.op_type(n) && g.domain(r) == g.domain(n)) {
        if (t == "Reshape")
          ++f.consecutive_reshapes;
        else if (t == "Transpose")
          ++f.consecutive_transposes;
        else
          ++f.cast_chains;
      }
    }
    if (is(g, n, "Transpose")) {
      auto perm = g.attr_ints(n, "perm");
      bool id = !perm.empty();
      for (size_t i = 0; i < perm.size(); ++i) id = id && perm[i] == static_cast<int64_t>(i);
      if (id) ++f.noop_transposes;
    }
    if (is(g, n, "Reshape") || is(g, n, "Expand")) {
      auto a = static_shape(g, g.input(n, 0)), b = static_shape(g, g.output(n, 0));
      if (a && b && *a == *b) ++(is(g, n, "Reshape") ? f.noop_reshapes : f.noop_expands);
      if (is(g, n, "Expand")) {
        NodeId r = single_consumer(g, u, g.output(n, 0));
        if (broadcasting(g, r)) ++f.expand_into_broadcast;
      }
    }
    if (is(g, n, "MatMul")) {
      const int32_t ra = g.input(n, 0).valid() ? g.rank(g.input(n, 0)) : -1;
      NodeId r = single_consumer(g, u, g.output(n, 0));
      if (ra >= 3 && is(g, r, "Add")) {
        ValueId other = g.input(r, 0) == g.output(n, 0) ? g.input(r, 1) : g.input(r, 0);
        if (constant(g, other)) ++f.matmul3d_add;
      }
    }
    if (is(g, n, "Softmax")) attention(g, n, f);
    if (is(g, n, "LayerNormalization")) ++f.layer_norm_ops;
    if (is(g, n, "ReduceMean")) {
      // The mean of a decomposed LayerNorm: some reader is Sub(x, mean) with the same x.
      for (const Use& use : u.of(g.output(n, 0)))
        if (use.slot == 1 && is(g, use.node, "Sub") && g.input(use.node, 0) == g.input(n, 0)) {
          ++f.layer_norm_decomposed;
          break;
        }
    }
    if (!is(g, n, "Constant") && !g.inputs(n).empty() && g.subgraphs(n).empty()) {
      bool all = true;
      for (ValueId v : g.inputs(n)) all = all && constant(g, v);
      if (all) ++f.constant_subgraph_nodes;
    }
  }
}

// Whether `v` is computed from a Range within a few index-arithmetic steps: the row and column
// indices of a causal mask built by comparisons (transformers' _make_causal_mask:
// arange < (arange + 1).view(-1, 1); _update_causal_mask: arange(total) > cache_position.view(-1, 1)).
bool from_range(const Graph& g, ValueId v, int depth = 0) {
  NodeId p = from(g, v);
  if (!p.valid() || depth > 5) return false;
  if (is(g, p, "Range")) return true;
  for (const char* t : {"Add", "Sub", "Reshape", "Unsqueeze", "Cast", "Slice", "Expand"})
    if (is(g, p, t)) {
      for (ValueId x : g.inputs(p))
        if (x.valid() && !constant(g, x) && from_range(g, x, depth + 1)) return true;
      return false;
    }
  return false;
}

// A comparison of a row index with a column index, both from Ranges: a triangular mask.
bool range_comparison(const Graph& g, NodeId n) {
  if (!(is(g, n, "Less") || is(g, n, "Greater") || is(g, n, "LessOrEqual") || is(g, n, "GreaterOrEqual"))) return false;
  return g.inputs(n).size() == 2 && from_range(g, g.input(n, 0)) && from_range(g, g.input(n, 1));
}

// rotate_half(x) = Concat(-x[..., d/2:], x[..., :d/2]): a Neg of a Slice beside a Slice of the
// same tensor. Rotary tables cached as initializers (transformers <= 4.37, Phi) have no Sin/Cos.
bool rotate_half(const Graph& g, NodeId n) {
  if (!is(g, n, "Concat") || g.inputs(n).size() != 2) return false;
  NodeId neg = from(g, g.input(n, 0)), other = from(g, g.input(n, 1));
  if (!is(g, neg, "Neg") || !is(g, other, "Slice")) return false;
  NodeId sliced = from(g, g.input(neg, 0));
  return is(g, sliced, "Slice") && g.input(sliced, 0) == g.input(other, 0);
}

// A KV cache: a rank-4 float graph input concatenated with this step's keys/values (the Concat's
// result is a `present` output or read by the attention's MatMul, maybe through repeat_kv's
// Expand/Reshape or a Transpose); fused, an attention node returning present_key/present_value as
// graph outputs.
bool cache_concat(const Graph& g, const Uses& u, NodeId n) {
  if (!is(g, n, "Concat")) return false;
  bool past = false;
  for (ValueId x : g.inputs(n))
    past = past || (x.valid() && g.is_graph_input(x) && !g.is_initializer(x) && g.has_type(x) && g.rank(x) == 4 &&
                    (g.dtype(x) == DType::Float || g.dtype(x) == DType::Float16 || g.dtype(x) == DType::BFloat16));
  if (!past) return false;
  ValueId y = g.output(n, 0);
  if (g.is_graph_output(y)) return true;
  std::vector<ValueId> frontier{y};
  for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
    std::vector<ValueId> next;
    for (ValueId v : frontier)
      for (const Use& use : u.of(v)) {
        if (use.slot == Use::kImplicit) continue;
        if (is(g, use.node, "MatMul")) return true;
        if (is(g, use.node, "Transpose") || is(g, use.node, "Expand") || is(g, use.node, "Reshape") ||
            is(g, use.node, "Unsqueeze") || is(g, use.node, "Cast"))
          next.push_back(g.output(use.node, 0));
      }
    frontier = std::move(next);
  }
  return false;
}

bool bookkeeping(const Graph& g, NodeId n) {
  for (const char* t : {"Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Cast", "Slice",
                        "Identity", "ConstantOfShape", "Range", "Equal", "Where", "Expand"})
    if (is(g, n, t)) return true;
  return false;
}

}  // namespace

// The JSON keys are the field names (nlohmann's objects sort them, as the list written out did).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Forensics, shape_chains, consecutive_reshapes, consecutive_transposes, cast_chains,
                                   noop_transposes, noop_reshapes, noop_expands, matmul3d_add, attention_blocks,
                                   qkv_pattern, attention_scale, constant_subgraph_nodes, layer_norm_decomposed,
                                   layer_norm_ops, expand_into_broadcast)

nlohmann::json Forensics::to_json() const { return *this; }

Forensics forensics(const Model& m) {
  Forensics f;
  for (size_t i = 0; i < m.graph_count(); ++i) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(i)));
    if (!g.detached()) scan(g, f);
  }
  return f;
}

const char* family_name(Family f) {
  switch (f) {
    case Family::VisionCnn: return "vision CNN";
    case Family::VisionTransformer: return "vision transformer";
    case Family::EncoderTransformer: return "encoder transformer";
    case Family::DecoderLlm: return "decoder LLM";
    case Family::Hybrid: return "hybrid";
    case Family::Speech: return "speech";
    case Family::Unknown: break;
  }
  return "unknown";
}

nlohmann::json Fingerprint::to_json() const {
  return {{"family", family_name(family)},
          {"reason", reason},
          {"compute_nodes", compute_nodes},
          {"conv_fraction", conv_fraction},
          {"matmul_fraction", matmul_fraction},
          {"norm_fraction", norm_fraction},
          {"convs", convs},
          {"conv1d", conv1d},
          {"matmuls", matmuls},
          {"softmaxes", softmaxes},
          {"attention_like", attention_like},
          {"token_input", token_input},
          {"image_input", image_input},
          {"audio_input", audio_input},
          {"causal_mask", causal_mask},
          {"rotary", rotary},
          {"kv_cache", kv_cache},
          {"silu", silu},
          {"recurrent", recurrent},
          {"layer_norm", has_layer_norm},
          {"rms_norm", has_rms_norm},
          {"gelu", has_gelu}};
}

Fingerprint fingerprint(const Model& m) {
  Fingerprint p;
  int64_t norms = 0;
  bool sin = false, cos = false, half_rotation = false;
  const Forensics f = forensics(m);
  p.attention_like = f.attention_blocks;
  int64_t fused_attention = 0;
  for (size_t i = 0; i < m.graph_count(); ++i) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(i)));
    if (g.detached()) continue;
    const Uses u(g);
    for (NodeId n : g.nodes()) {
      if (!bookkeeping(g, n)) ++p.compute_nodes;
      if (is(g, n, "Conv") || is(g, n, "ConvTranspose")) {
        ++p.convs;
        if (g.attr_ints(n, "kernel_shape").size() == 1 ||
            (g.input(n, 1).valid() && g.has_shape(g.input(n, 1)) && g.rank(g.input(n, 1)) == 3))
          ++p.conv1d;
      }
      if (is(g, n, "MatMul") || is(g, n, "Gemm")) ++p.matmuls;
      if (is(g, n, "Softmax")) ++p.softmaxes;
      if (is(g, n, "Trilu") || range_comparison(g, n)) p.causal_mask = true;
      if (rotate_half(g, n)) half_rotation = true;
      if (cache_concat(g, u, n)) p.kv_cache = true;
      if (is(g, n, "Where") && !p.causal_mask) {
        // GPT-2's masked_fill(bias[:, :, k-q:k, :k]): the condition is a slice of a stored
        // square boolean table.
        NodeId c = from(g, g.input(n, 0));
        for (int k = 0; k < 6 && c.valid() && (is(g, c, "Slice") || is(g, c, "Cast") || is(g, c, "Unsqueeze")); ++k) {
          ValueId src = g.input(c, 0);
          if (constant(g, src) && g.has_type(src) && (g.dtype(src) == DType::Bool || g.dtype(src) == DType::Uint8)) {
            auto d = static_shape(g, src);
            if (d && d->size() >= 2 && (*d)[d->size() - 1] == (*d)[d->size() - 2]) p.causal_mask = true;
            break;
          }
          c = from(g, src);
        }
      }
      // Fused spellings (ONNX opset 23 ops, com.microsoft contrib ops): what `optimize` leaves of
      // the decomposed blocks the checks around them look for. Without them an optimized ViT read
      // as a vision CNN and an optimized BERT/GPT-2/Llama as unknown (the MatMul->Softmax->MatMul
      // chain is inside the Attention node).
      if (fused_op(g, n,
                   {"Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
                    "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention"})) {
        ++fused_attention;
        for (size_t k = 1; k < g.outputs(n).size(); ++k)  // present_key / present_value
          if (g.is_graph_output(g.output(n, k))) p.kv_cache = true;
        if (g.attr_int(n, "is_causal", 0) != 0 || g.attr_int(n, "unidirectional", 0) != 0 ||
            op_type_is(g, n, "GroupQueryAttention") || op_type_is(g, n, "DecoderMaskedMultiHeadAttention"))
          p.causal_mask = true;
      }
      if (fused_op(g, n, {"RotaryEmbedding"})) sin = cos = true;
      if (fused_op(g, n, {"Swish", "QuickGelu"})) p.silu = true;
      if (fused_op(g, n, {"FastGelu", "BiasGelu"}) || (op_type_is(g, n, "Gelu") && !is(g, n, "Gelu")))
        p.has_gelu = true;
      if (fused_op(g, n, {"SkipLayerNormalization", "EmbedLayerNormalization"})) {
        ++norms;
        p.has_layer_norm = true;
      }
      if (fused_op(g, n, {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization"}) ||
          (op_type_is(g, n, "RMSNormalization") && !is(g, n, "RMSNormalization"))) {
        ++norms;
        p.has_rms_norm = true;
      }
      if (is(g, n, "Sin")) sin = true;
      if (is(g, n, "Cos")) cos = true;
      if (is(g, n, "LSTM") || is(g, n, "GRU") || is(g, n, "RNN")) p.recurrent = true;
      if (is(g, n, "Erf") || is(g, n, "Gelu")) p.has_gelu = true;
      if (is(g, n, "Tanh")) {  // GELU's tanh form: Tanh(c * (x + 0.044715 * x^3))
        NodeId mul = from(g, g.input(n, 0));
        NodeId add = is(g, mul, "Mul") ? from(g, g.input(mul, constant(g, g.input(mul, 0)) ? 1 : 0)) : NodeId{};
        if (is(g, add, "Add")) p.has_gelu = true;
      }
      if (is(g, n, "LayerNormalization") || is(g, n, "BatchNormalization") || is(g, n, "InstanceNormalization") ||
          is(g, n, "GroupNormalization") || is(g, n, "RMSNormalization"))
        ++norms;
      if (is(g, n, "LayerNormalization")) p.has_layer_norm = true;
      if (is(g, n, "RMSNormalization")) p.has_rms_norm = true;
      if (is(g, n, "Sigmoid")) {
        for (const Use& use : u.of(g.output(n, 0)))
          if (is(g, use.node, "Mul") &&
              (g.input(use.node, 0) == g.input(n, 0) || g.input(use.node, 1) == g.input(n, 0)))
            p.silu = true;
      }
      if (is(g, n, "ReduceMean")) {
        // A ReduceMean over a square with no mean subtracted: RMSNorm; with one: LayerNorm.
        NodeId sq = from(g, g.input(n, 0));
        if (is(g, sq, "Pow") || is(g, sq, "Mul")) {
          NodeId sub = from(g, g.input(sq, 0));
          if (is(g, sub, "Sub"))
            p.has_layer_norm = true;
          else
            p.has_rms_norm = true;
          ++norms;
        }
      }
    }
    if (i == 0) {
      for (ValueId v : g.graph_inputs()) {
        if (g.is_initializer(v) || !g.has_type(v)) continue;
        const DType t = g.dtype(v);
        const int32_t r = g.rank(v);
        const bool integer = t == DType::Int64 || t == DType::Int32;
        const bool real = t == DType::Float || t == DType::Float16 || t == DType::BFloat16;
        if (integer && r == 2) {
          // Token ids are the indices of a Gather on an embedding table, maybe after a view
          // (GPT-2 reshapes input_ids to [-1, seq] first).
          std::vector<ValueId> frontier{v};
          for (int depth = 0; depth < 3 && !p.token_input && !frontier.empty(); ++depth) {
            std::vector<ValueId> next;
            for (ValueId x : frontier)
              for (const Use& use : u.of(x)) {
                if (use.slot == Use::kImplicit) continue;
                if (is(g, use.node, "Gather") && use.slot == 1) p.token_input = true;
                if (is(g, use.node, "Reshape") || is(g, use.node, "Unsqueeze") || is(g, use.node, "Cast") ||
                    is(g, use.node, "Squeeze"))
                  next.push_back(g.output(use.node, 0));
              }
            frontier = std::move(next);
          }
        }
        if (real && r == 4) p.image_input = true;
        if (real && (r == 2 || r == 3)) {
          for (const Use& use : u.of(v))
            if (is(g, use.node, "Conv") || is(g, use.node, "LSTM") || is(g, use.node, "GRU") ||
                is(g, use.node, "Unsqueeze") || is(g, use.node, "Reshape"))
              p.audio_input = true;
        }
      }
    }
  }
  p.rotary = (sin && cos) || half_rotation;
  p.attention_like += fused_attention;
  p.has_layer_norm = p.has_layer_norm || f.layer_norm_decomposed > 0;
  const double c = std::max<int64_t>(p.compute_nodes, 1);
  p.conv_fraction = static_cast<double>(p.convs) / c;
  p.matmul_fraction = static_cast<double>(p.matmuls) / c;
  p.norm_fraction = static_cast<double>(norms) / c;

  const bool attention = p.attention_like > 0;
  if (p.recurrent || (p.audio_input && p.conv1d > 0)) {
    p.family = Family::Speech;
    p.reason = p.recurrent ? "recurrent ops" : "audio-shaped input read by 1-D convolutions";
  } else if (p.token_input && attention && (p.causal_mask || p.rotary || p.kv_cache)) {
    p.family = Family::DecoderLlm;
    std::string why;
    for (auto [on, what] : {std::pair{p.kv_cache, "a KV cache"}, std::pair{p.causal_mask, "a causal mask"},
                            std::pair{p.rotary, "rotary embeddings"}})
      if (on) why += (why.empty() ? "" : ", ") + std::string(what);
    p.reason = "token input, attention, " + why;
  } else if (p.token_input && attention) {
    p.family = Family::EncoderTransformer;
    p.reason = "token input, attention without a causal mask";
  } else if (attention && p.convs >= 8) {  // ViT/DeiT have one conv (the patch embedding)
    p.family = Family::Hybrid;
    p.reason = "convolutions and attention blocks";
  } else if (attention && p.image_input) {
    p.family = Family::VisionTransformer;
    p.reason = "image input and attention blocks";
  } else if (p.convs > 0 && !attention) {
    p.family = Family::VisionCnn;
    p.reason = "convolutions, no attention";
  } else if (attention) {
    p.family = Family::EncoderTransformer;
    p.reason = "attention blocks";
  } else {
    p.reason = "no convolutions and no attention";
  }
  return p;
}

}  // namespace onnxforge
