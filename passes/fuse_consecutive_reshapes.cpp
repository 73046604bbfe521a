// fuse_consecutive_reshapes — Reshape chains (exporters write them around attention heads, but
// nothing here is attention-specific):                                                class 0
//  - Reshape(R(x), s2) → Reshape(x, s2) when R is a Reshape/Flatten/Squeeze/Unsqueeze (all keep
//    element order) and s2 is a constant WITHOUT 0: a 0 copies a dim of the second Reshape's own
//    input, which composing would change (the onnxoptimizer bug). When R has other consumers it
//    stays for them and only this Reshape reads x directly.
//  - a Reshape whose output shape equals its input's (static shapes) is removed.
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId reshape;
  NodeId inner;  // invalid: remove `reshape` (same shape)
};

bool order_preserving(const Graph& g, NodeId n) {
  return is_one_of(g, n, {"Reshape", "Flatten", "Squeeze", "Unsqueeze"});
}

// The output dims of Reshape(x, target) for a static input shape, or nullopt (also for a target
// the Reshape itself would reject: a dim below -1, or a product past int64, which a fuzzed
// [90, 2^63 - 1] target overflowed here).
std::optional<std::vector<int64_t>> reshaped(const std::vector<int64_t>& in, std::vector<int64_t> target,
                                             bool allowzero) {
  int64_t total = 1, known = 1, minus = -1;
  for (int64_t d : in)
    if (d < 0 || __builtin_mul_overflow(total, d, &total)) return std::nullopt;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) {
      if (i >= in.size()) return std::nullopt;
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (minus >= 0) return std::nullopt;
      minus = static_cast<int64_t>(i);
    } else if (target[i] < 0 || __builtin_mul_overflow(known, target[i], &known)) {
      return std::nullopt;
    }
  }
  if (minus >= 0) {
    if (known == 0 || total % known) return std::nullopt;
    target[minus] = total / known;
  }
  return target;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes()) {
    if (!is(g, n, "Reshape")) continue;
    auto target = constant_ints(g, g.input(n, 1));
    if (!target) continue;
    bool allowzero = g.attr_int(n, "allowzero", 0) != 0;
    ValueId x = g.input(n, 0);
    // Same shape in and out: the Reshape does nothing.
    if (auto in = static_shape(g, x)) {
      auto res = reshaped(*in, *target, allowzero);
      if (res && *res == *in && can_forward(g, uses, g.output(n, 0), x)) {
        out.push_back({n, {}});
        continue;
      }
    }
    NodeId inner = g.producer(x);
    if (!inner.valid() || !order_preserving(g, inner)) continue;
    bool has_zero = false;
    for (int64_t d : *target) has_zero |= (d == 0);
    if (has_zero && !allowzero) continue;  // 0 would copy a dim of x instead of R(x)
    out.push_back({n, inner});
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (!m.inner.valid()) return e.forward(m.reshape, g.input(m.reshape, 0));
  if (e.any_touched(m.reshape, m.inner)) return false;
  e.set_input(m.reshape, 0, g.input(m.inner, 0));
  e.drop_if_unshared(m.inner);
  return true;
}

}  // namespace

ONNXFORGE_PASS(fuse_consecutive_reshapes, Match, AccuracyClass::Lossless, analyze, apply,
               {"Reshape", "Flatten", "Squeeze", "Unsqueeze"},
               "compose Reshape chains (never across a 0 in the target), drop no-op Reshapes");

}  // namespace onnxforge::passes
