// decompose_gelu — Gelu back into primitives, for a --target that lacks it.        class 1
//   approximate="none":  Y = x · (1 + Erf(x / √2)) · 0.5
//   approximate="tanh":  Y = x · 0.5 · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))
// The spellings torch exports (F.gelu and gelu_new), so a decomposed model reads like the
// original export. float16/bfloat16 are computed in float between two Casts (one rounding at the
// end, at least as accurate as the op in T). Left alone: float64 (no Erf kernel to check
// against) and an unknown `approximate`.
#include <cmath>
#include <numbers>

#include "passes/decompose.h"
#include "passes/fusion_patterns.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId gelu;
  DType type = DType::Undefined;
  bool tanh = false;
};

std::optional<Match> match(const Graph& g, const Uses&, NodeId n) {
  const std::string_view approx = g.attr_string(n, "approximate", "none");
  if (approx != "none" && approx != "tanh") return {};
  const DType t = dtype_of(g, g.input(n, 0));
  if (t != DType::Float && !decompose::is_half_type(t)) return {};
  return Match{n, t, approx == "tanh"};
}

bool apply(Edits& e, const Match& m) {
  if (e.touched(m.gelu)) return false;
  Builder c(e, m.gelu);
  const bool half = m.type != DType::Float;
  ValueId x = e.g.input(m.gelu, 0);
  if (half) x = c.cast(x, DType::Float);
  const ValueId one = c.scalar("one", DType::Float, 1.0), half_c = c.scalar("half", DType::Float, 0.5);
  ValueId y;
  if (m.tanh) {
    const ValueId x3 = c.node("Mul", {c.node("Mul", {x, x}), x});
    const ValueId inner = c.node("Add", {x, c.node("Mul", {x3, c.scalar("k", DType::Float, 0.044715)})});
    const ValueId t = c.node(
        "Tanh", {c.node("Mul", {inner, c.scalar("sqrt_2_over_pi", DType::Float, std::sqrt(2.0 / std::numbers::pi))})});
    const ValueId xh = c.node("Mul", {x, half_c});
    if (!half) {
      c.finish("Mul", {xh, c.node("Add", {t, one})});
      return true;
    }
    y = c.node("Mul", {xh, c.node("Add", {t, one})});
  } else {
    const ValueId erf = c.node("Erf", {c.node("Div", {x, c.scalar("sqrt_2", DType::Float, std::sqrt(2.0))})});
    const ValueId xe = c.node("Mul", {x, c.node("Add", {erf, one})});
    if (!half) {
      c.finish("Mul", {xe, half_c});
      return true;
    }
    y = c.node("Mul", {xe, half_c});
  }
  c.finish("Cast", {y}, {NewAttr::Int("to", static_cast<int64_t>(m.type))});
  return true;
}

}  // namespace

ONNXFORGE_DECOMPOSITION(decompose_gelu, Match, AccuracyClass::FloatBounded, "Gelu", match, apply,
                        "Gelu becomes x·(1+Erf(x/√2))·0.5, or its tanh form (for a --target without the op)");

}  // namespace onnxforge::passes
