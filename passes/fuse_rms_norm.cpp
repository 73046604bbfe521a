// fuse_rms_norm — an RMSNorm written out in primitives becomes RMSNormalization (opset ≥ 23).
//                                                                                        class 1
//   v = ReduceMean(Pow(x, 2) | Mul(x, x))
//   n = Div(x, Sqrt(Add(v, eps))) | Mul(x, Reciprocal(·)) | Mul(x, Div(1, ·))
//   y = n · scale                 (scale optional; Gemma's scale (1 + w) folded into one constant)
// The Llama export (HF LlamaRMSNorm through torch.onnx at opset 14) reads
//   Cast(float) → Pow → ReduceMean → Add → Sqrt → Div(1, ·) → Mul → Cast(input type) → Mul(w, ·)
// In a float32 model both Casts are to float32 and disappear into the op. In a float16/bfloat16
// model (X16 → Cast(float) → chain → Cast(X16's type) → scale in X16's type) this is the
// definition of RMSNormalization with stash_type=1, so it becomes one op on X16. A chain computed
// in float16 itself is a Miss (the fused op's float statistics would change the outputs).
//
// RMSNormalization's Y takes the scale's type; the scale is taken over only when it has the
// input's type (and is constant and varies only along the normalized dims), so Y keeps the type
// the block's output had. Otherwise the op gets a ones scale and the Mul stays.
//
// Anchor: the ReduceMean of the mean square. A LayerNorm's variance ReduceMean has the same shape
// (the mean square of X − mean(X)); it is not an RMSNorm block and is left to fuse_layer_norm.
#include <cmath>

#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

using namespace pattern;

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "Pow/ReduceMean/Add/Sqrt/Div or Reciprocal (+ scale, Gemma's 1 + w) over the trailing axes becomes "
    "RMSNormalization (float16 with Casts: stash_type=1)";

// x = Sub(X, ReduceMean(X)): the block is a LayerNorm's variance.
bool centered(const Graph& g, ValueId x) {
  NodeId sub = producer_op(g, x, "Sub");
  if (!sub.valid()) return false;
  NodeId mean = input_op(g, sub, 1, "ReduceMean");
  return mean.valid() && g.input(mean, 0) == g.input(sub, 0);
}

Found<NormMatch> match(const Graph& g, const Uses& u, NodeId reduce, const PassOptions&) {
  const Hop square = prev(g, g.input(reduce, 0), squared());
  if (!square) return {};
  const NodeId sq = square.node;
  const ValueId x = square.in;
  auto tail = match_inv_rms(g, u, g.output(reduce, 0), x);
  if (!tail || centered(g, x)) return {};

  NormMatch r{.op = "RMSNormalization", .nodes = {sq, reduce}};
  const Found<int64_t> k = norm_checks(g, u, r, square, *tail, std::span<const NodeId>(&reduce, 1), x);
  if (!k) return k.failure();
  ValueId n = tail->normalized;
  const NodeId square_and_scale[] = {sq, tail->scale};
  // A Cast in front whose output only the block reads: to the same type it is a no-op the op
  // absorbs; from float16/bfloat16 to float it is the stash when the normalized value is cast back.
  const NodeId up = producer_op(g, x, "Cast");
  if (up.valid() && dtype_of(g, g.input(up, 0)) == r.type && read_only_by(g, u, x, square_and_scale)) {
    r.x = g.input(up, 0);
    r.nodes.push_back(up);
  } else {
    n = stash_casts(g, u, r, n, square_and_scale);
  }
  // A Cast back to the same type after the normalization (float32 Llama: Cast(float) of float).
  if (NodeId down = only_reader(g, u, n, "Cast");
      !r.stash && down.valid() && g.attr_int(down, "to", 0) == static_cast<int64_t>(r.type)) {
    r.nodes.push_back(down);
    n = g.output(down, 0);
  }
  return finish_norm(g, u, std::move(r), x, *k, n, /*with_bias=*/false);
}

}  // namespace

ONNXFORGE_FUSION(fuse_rms_norm, NormMatch, match, apply_norm, .op = "RMSNormalization", .min_opset = 23,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"ReduceMean"}, .summary = kSummary);

}  // namespace onnxforge::passes
