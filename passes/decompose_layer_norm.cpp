// decompose_layer_norm — LayerNormalization back into primitives, for a --target that lacks it.
//                                                                                        class 1
//   m = ReduceMean(X)  d = Sub(X, m)  v = ReduceMean(Mul(d, d))  n = Div(d, Sqrt(Add(v, eps)))
//   Y = n · Scale (+ B)                       reductions over axis..rank-1, keepdims
// The ONNX function body of LayerNormalization-17 with the same order of operations (a mean, the
// centred square, its mean, eps, the root, a division, then scale and bias), ReduceMean in the
// model's opset form. float16/bfloat16 X (stash_type=1, the default): X is cast to float for the
// statistics and the normalized value cast back before scale and bias, which is the op's
// definition (and the spelling fuse_layer_norm turns back into stash_type=1).
// Left alone: a LayerNormalization whose Mean/InvStdDev outputs are read (no target we list
// lacks the op and needs them), float64 or stash_type=0 on half types (no runtime kernel to check
// against), a positive axis on an input of unknown rank. Class 1: the chain rounds where the
// kernel does (max_diff within 1e-4 + 1e-3·|ref| on the zoo, test_decompositions).
#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId ln;
  std::vector<int64_t> axes;
  DType type = DType::Undefined;
};

std::optional<Match> match(const Graph& g, const Uses& u, NodeId n) {
  if (g.inputs(n).size() < 2) return {};
  for (size_t i = 1; i < g.outputs(n).size(); ++i)  // Mean and InvStdDev: the chain has no such values
    if (decompose::output_read(g, u, n, i)) return {};
  Match m{n, decompose::trailing_axes_of(g, g.input(n, 0), g.attr_int(n, "axis", -1)), dtype_of(g, g.input(n, 0))};
  if (m.axes.empty()) return {};
  const bool stash = g.attr_int(n, "stash_type", 1) == 1;
  if (m.type != DType::Float && !(decompose::is_half_type(m.type) && stash)) return {};
  return m;
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.ln)) return false;
  const Graph& g = e.g;
  Builder c(e, m.ln);
  const bool half = m.type != DType::Float;
  ValueId x = g.input(m.ln, 0);
  if (half) x = c.cast(x, DType::Float);
  const ValueId mean = c.reduce_mean(x, m.axes);
  const ValueId d = c.node("Sub", {x, mean});
  const ValueId var = c.reduce_mean(c.node("Mul", {d, d}), m.axes);
  const ValueId eps = c.scalar("epsilon", DType::Float, g.attr_float(m.ln, "epsilon", 1e-5f));
  ValueId n = c.node("Div", {d, c.node("Sqrt", {c.node("Add", {var, eps})})});
  if (half) n = c.cast(n, m.type);
  const ValueId bias = g.inputs(m.ln).size() > 2 ? g.input(m.ln, 2) : ValueId{};
  if (!bias.valid()) {
    c.finish("Mul", {n, g.input(m.ln, 1)});
    return true;
  }
  c.finish("Add", {c.node("Mul", {n, g.input(m.ln, 1)}), bias});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(decompose_layer_norm, Match, AccuracyClass::FloatBounded, "LayerNormalization", match, apply,
                        "LayerNormalization becomes ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div, scale and bias (for a "
                        "--target without the op)");

}  // namespace onnxforge::passes
