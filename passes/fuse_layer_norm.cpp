// fuse_layer_norm — a LayerNorm written out in primitives becomes LayerNormalization (opset ≥ 17).
//                                                                                        class 1
//   m = ReduceMean(X)  d = Sub(X, m)  v = ReduceMean(Pow(d, 2) | Mul(d, d))
//   n = Div(d, Sqrt(Add(v, eps))) | Mul(d, Reciprocal(·)) | Mul(d, Div(1, ·))
//   y = n · scale + bias          (scale and bias optional; either operand order)
// This is torch's spelling before opset 17 (every BERT/GPT-2/ViT/Whisper export at opset ≤ 16)
// and the hand-written one (ConvNeXt's LayerNorm between Permutes is one over the last axis).
//
// Checks (a failed one is the census's reason): both ReduceMeans reduce the same axes and those
// are the trailing ones (a norm over axis 1 of NCHW is not a LayerNormalization: onnxruntime#4293
// fused without looking at the axes), keepdims, Sub and the variance read the same mean of the
// same X, a scalar constant epsilon, nothing outside the block reads an intermediate. The scale
// and bias are taken over only when constant, of X's type and varying only along the normalized
// dims; otherwise the block ends before them (the LayerNormalization gets a ones scale and the
// Mul stays): adaLN-style modulation after a plain LayerNorm is such a case.
//
// float16/bfloat16: X16 → Cast(float) → chain → Cast(X16's type) → scale/bias in X16's type is
// the definition of LayerNormalization with stash_type=1 (statistics in float, normalized value
// rounded to T, then scale and bias in T), so it becomes one LayerNormalization on X16. A chain
// computed in float16 itself is a Miss: the fused op would compute the statistics in float and
// the outputs could differ beyond the class's bound (a float16 Pow overflows above 255).
// When the Cast back comes after the scale and bias, the float LayerNormalization sits between the
// kept Casts (rounding once at the end, as before).
#include <cmath>

#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (+ scale, bias) over the trailing axes becomes LayerNormalization "
    "(float16 with Casts: stash_type=1)";

using namespace pattern;

Found<NormMatch> match(const Graph& g, const Uses& u, NodeId mean, const PassOptions&) {
  const ValueId x = g.input(mean, 0), m = g.output(mean, 0);
  const Hop sub = next(g, u, m, {Link::second("Sub", Operand::is_value(x))});  // d = x - m
  const Hop square = sub ? next(g, u, sub.out, squared()) : Hop{};
  const Hop var = square ? next(g, u, square.out, {Link::unary("ReduceMean")}) : Hop{};
  if (!var) return {};
  const ValueId d = sub.out;
  const NodeId sq = square.node;
  auto tail = match_inv_rms(g, u, var.out, d);
  if (!tail) return {};

  // A LayerNorm block from here on: what fails is a Miss.
  NormMatch r{.op = "LayerNormalization", .nodes = {mean, sub.node, sq, var.node}};
  const NodeId reduces[] = {mean, var.node};
  const Found<int64_t> k = norm_checks(g, u, r, square, *tail, reduces, x);
  if (!k) return k.failure();
  const NodeId readers[] = {mean, sub.node};
  const ValueId n = stash_casts(g, u, r, tail->normalized, readers);
  return finish_norm(g, u, std::move(r), x, *k, n, /*with_bias=*/true);
}

}  // namespace

ONNXFORGE_FUSION(fuse_layer_norm, NormMatch, match, apply_norm, .op = "LayerNormalization", .min_opset = 17,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"ReduceMean"}, .summary = kSummary);

}  // namespace onnxforge::passes
