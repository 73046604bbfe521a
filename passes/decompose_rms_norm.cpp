// decompose_rms_norm — RMSNormalization back into primitives, for a --target that lacks it
// (TensorRT before 10.15 rejects it: NVIDIA/TensorRT#4639).                          class 1
//   Y = X / Sqrt(ReduceMean(X · X) + eps) · scale          reduction over axis..rank-1, keepdims
// The ONNX function body of RMSNormalization-23 with stash_type=1 (the default): statistics and
// the normalized value in float (X cast up when it is float16/bfloat16), the normalized value cast
// to the scale's type (Y takes the scale's type), then the scale. Left alone: stash_type=0 on half
// types, float64, a positive axis on an input of unknown rank.
#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId rms;
  std::vector<int64_t> axes;
  DType x_type = DType::Undefined, scale_type = DType::Undefined;
};

bool float_or_half(DType t) { return t == DType::Float || decompose::is_half_type(t); }

std::optional<Match> match(const Graph& g, const Uses&, NodeId n) {
  if (g.inputs(n).size() < 2) return {};
  Match m{n, decompose::trailing_axes_of(g, g.input(n, 0), g.attr_int(n, "axis", -1)), dtype_of(g, g.input(n, 0)),
          dtype_of(g, g.input(n, 1))};
  if (m.axes.empty() || !float_or_half(m.x_type) || !float_or_half(m.scale_type)) return {};
  if (g.attr_int(n, "stash_type", 1) != 1 && m.x_type != DType::Float) return {};
  return m;
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.rms)) return false;
  const Graph& g = e.g;
  Builder c(e, m.rms);
  ValueId x = g.input(m.rms, 0);
  if (m.x_type != DType::Float) x = c.cast(x, DType::Float);
  const ValueId var = c.reduce_mean(c.node("Mul", {x, x}), m.axes);
  const ValueId eps = c.scalar("epsilon", DType::Float, g.attr_float(m.rms, "epsilon", 1e-5f));
  ValueId n = c.node("Div", {x, c.node("Sqrt", {c.node("Add", {var, eps})})});
  if (m.scale_type != DType::Float) n = c.cast(n, m.scale_type);
  c.finish("Mul", {n, g.input(m.rms, 1)});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(decompose_rms_norm, Match, AccuracyClass::FloatBounded, "RMSNormalization", match, apply,
                        "RMSNormalization becomes X/Sqrt(ReduceMean(X·X)+eps)·scale (for a --target without the op)");

}  // namespace onnxforge::passes
