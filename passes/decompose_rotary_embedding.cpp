// decompose_rotary_embedding — RotaryEmbedding back into primitives, for a --target that lacks
// it (TensorRT 10, TFLite converters: passes/targets.h).                              class 1
//
//   x4 = X [B, H, S, D]  or  Reshape(X, [0, 0, num_heads, -1]) = [B, S, H, D]    (3-D input)
//   cos = Gather(cos_cache, position_ids) or cos_cache            [B, S, rot/2]
//   cos = Unsqueeze(cos, 1) (4-D) or Unsqueeze(cos, 2) (3-D)       broadcast over the heads
//   x1, x2 = the halves of x4[..., :rot] (rotate_half) or its even/odd elements (interleaved)
//   r = cos·x1 − sin·x2,  i = sin·x1 + cos·x2
//   y = Concat(r, i) or the pairs (r, i) re-interleaved (Unsqueeze, Concat, Reshape), then
//       Concat(y, x4[..., rot:]) when rotary_embedding_dim < D, then back to X's layout.
// The op's definition (RotaryEmbedding-23; what runtime/ops/attention.cpp computes: the same
// two products and one subtraction/addition per element, so the chain rounds where the kernel
// does, up to the kernel's contraction into an FMA: class 1). Written from the spec, with no
// code shared with fuse_rotary_embedding (verification independence, passes/decompose.h).
// The width comes from the caches (their last dim is rot/2 by the op's contract), so an input
// of unknown head size still decomposes when rot = D is not needed for a tail.
// Left alone, with the reason in optimize's report (rotary_refusal): data that is not float32,
// float16 or bfloat16, or caches of another type than the input, an input of unknown rank,
// caches of unknown width, a partial rotation whose head size is unknown, opset < 10 (Slice
// takes its bounds as inputs from 10; RotaryEmbedding itself is opset 23).
#include <limits>

#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {

namespace decompose {

namespace {

struct RotaryShape {
  int64_t rank = -1, heads = 0, half = -1, rot = -1, head_size = -1;
};

RotaryShape rotary_shape(const Graph& g, NodeId n) {
  RotaryShape r;
  const ValueId x = g.input(n, 0);
  r.rank = rank_of(g, x);
  r.heads = g.attr_int(n, "num_heads", 0);
  r.half = static_dim(g, g.input(n, 1), -1);
  if (r.half < 0) r.half = static_dim(g, g.input(n, 2), -1);
  if (r.rank == 4)
    r.head_size = static_dim(g, x, 3);
  else if (const int64_t hidden = static_dim(g, x, 2); r.rank == 3 && hidden > 0 && r.heads > 0)
    r.head_size = hidden / r.heads;
  const int64_t attr = g.attr_int(n, "rotary_embedding_dim", 0);
  r.rot = attr > 0 ? attr : (r.half > 0 ? 2 * r.half : r.head_size);
  return r;
}

}  // namespace

std::string rotary_refusal(const Graph& g, NodeId n) {
  if (g.inputs(n).size() < 3) return "fewer than three inputs";
  if (g.model().opset("") < 10) return "opset below 10 (Slice takes its bounds as inputs from opset 10)";
  // float32, float16 or bfloat16, all three alike: the chain computes in that type (the runtime
  // runs the op itself in float and rounds once; verification judges a float16 model in its ulps).
  const DType t = dtype_of(g, g.input(n, 0));
  if (t != DType::Float && t != DType::Float16 && t != DType::BFloat16)
    return "input 0 is not float32, float16 or bfloat16";
  for (size_t i = 1; i < 3; ++i)
    if (dtype_of(g, g.input(n, i)) != t) return "input " + std::to_string(i) + " is not of input 0's type";
  const RotaryShape r = rotary_shape(g, n);
  if (r.rank != 3 && r.rank != 4) return "the input's rank is unknown or not 3 or 4";
  if (r.rank == 3 && r.heads <= 0) return "3-D input without num_heads";
  if (r.half <= 0) return "the caches' last dim (rotary_embedding_dim / 2) is unknown";
  if (r.rot != 2 * r.half) return "rotary_embedding_dim disagrees with the caches' width";
  // A tail x[..., rot:] passes through: with an unknown head size it may or may not exist, and
  // the chain differs.
  if (g.attr_int(n, "rotary_embedding_dim", 0) > 0 && r.head_size < 0)
    return "partial rotation of an unknown head size";
  return {};
}

}  // namespace decompose

namespace {

bool apply(Edits& e, const NodeId& n) {
  if (e.touched(n)) return false;
  const Graph& g = e.g;
  Builder c(e, n);
  const int64_t rank = rank_of(g, g.input(n, 0));
  const bool three_d = rank == 3, interleaved = g.attr_int(n, "interleaved", 0) != 0;
  int64_t half = decompose::static_dim(g, g.input(n, 1), -1);
  if (half < 0) half = decompose::static_dim(g, g.input(n, 2), -1);
  const int64_t rot = 2 * half;
  int64_t head_size = -1;
  if (!three_d)
    head_size = decompose::static_dim(g, g.input(n, 0), 3);
  else if (const int64_t hidden = decompose::static_dim(g, g.input(n, 0), 2); hidden > 0)
    head_size = hidden / g.attr_int(n, "num_heads", 1);
  const bool tail = g.attr_int(n, "rotary_embedding_dim", 0) > 0 && rot < head_size;

  ValueId x = g.input(n, 0);
  if (three_d) x = c.reshape(x, {0, 0, g.attr_int(n, "num_heads", 0), -1});  // [B, S, H, D]
  const bool pos = g.inputs(n).size() > 3 && g.input(n, 3).valid();
  ValueId cos = g.input(n, 1), sin = g.input(n, 2);
  if (pos) {
    cos = c.node("Gather", {cos, g.input(n, 3)}, {NewAttr::Int("axis", 0)});
    sin = c.node("Gather", {sin, g.input(n, 3)}, {NewAttr::Int("axis", 0)});
  }
  // [B, S, half] against [B, S, H, *] (3-D) or [B, H, S, *] (4-D): a unit dim for the heads.
  cos = c.unsqueeze(cos, {three_d ? 2 : 1});
  sin = c.unsqueeze(sin, {three_d ? 2 : 1});
  const ValueId xr = tail ? c.slice(x, 3, 0, rot) : x;
  const ValueId x1 = interleaved ? c.slice(xr, 3, 0, rot, 2) : c.slice(xr, 3, 0, half);
  const ValueId x2 = interleaved ? c.slice(xr, 3, 1, rot, 2) : c.slice(xr, 3, half, rot);
  const ValueId re = c.node("Sub", {c.node("Mul", {cos, x1}), c.node("Mul", {sin, x2})});
  const ValueId im = c.node("Add", {c.node("Mul", {sin, x1}), c.node("Mul", {cos, x2})});
  ValueId y;
  // The chain's last node finishes it (named after the op's output); which one is last depends
  // on the tail and the layout.
  auto last = [&](bool is_last, std::string_view op, std::vector<ValueId> in, std::vector<NewAttr> attrs) {
    if (is_last) {
      c.finish(op, std::move(in), std::move(attrs));
      return ValueId{};
    }
    return c.node(op, std::move(in), std::move(attrs));
  };
  if (interleaved) {
    // [.., half] pairs → [.., half, 2] → [.., rot]
    const ValueId pairs = c.node("Concat", {c.unsqueeze(re, {4}), c.unsqueeze(im, {4})}, {NewAttr::Int("axis", 4)});
    y = last(!tail && !three_d, "Reshape", {pairs, c.ints("shape", {0, 0, 0, -1})}, {});
  } else {
    y = last(!tail && !three_d, "Concat", {re, im}, {NewAttr::Int("axis", 3)});
  }
  if (tail)
    y = last(!three_d, "Concat", {y, c.slice(x, 3, rot, std::numeric_limits<int64_t>::max())},
             {NewAttr::Int("axis", 3)});
  if (three_d) last(true, "Reshape", {y, c.ints("shape", {0, 0, -1})}, {});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(decompose_rotary_embedding, NodeId, AccuracyClass::FloatBounded, "RotaryEmbedding",
                        decompose::unrefused<decompose::rotary_refusal>, apply,
                        "RotaryEmbedding becomes Gather/Unsqueeze of the caches, Slice halves (or even/odd elements), "
                        "Mul/Sub/Add, Concat (for a --target without the op)");

}  // namespace onnxforge::passes
