// decompose_swish — Swish back into x · Sigmoid(α·x), for a --target that lacks it.   class 1
// torch's SiLU spelling (Mul(x, Sigmoid(x)); α ≠ 1 adds the Mul by α before the Sigmoid), which
// every runtime takes. float16/bfloat16 stay in their type, as the op computes (Sigmoid and Mul
// are elementwise; the chain rounds where the op's definition does). Left alone: float64.
#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId swish;
  DType type = DType::Undefined;
};

std::optional<Match> match(const Graph& g, const Uses&, NodeId n) {
  const DType t = dtype_of(g, g.input(n, 0));
  if (t != DType::Float && !decompose::is_half_type(t)) return {};
  return Match{n, t};
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.swish)) return false;
  Builder c(e, m.swish);
  const ValueId x = e.g.input(m.swish, 0);
  const float alpha = e.g.attr_float(m.swish, "alpha", 1.0f);
  const ValueId z = alpha == 1.0f ? x : c.node("Mul", {c.scalar("alpha", m.type, alpha), x});
  c.finish("Mul", {x, c.node("Sigmoid", {z})});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(decompose_swish, Match, AccuracyClass::FloatBounded, "Swish", match, apply,
                        "Swish becomes x·Sigmoid(α·x) (for a --target without the op)");

}  // namespace onnxforge::passes
