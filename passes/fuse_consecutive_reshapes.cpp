// fuse_consecutive_reshapes — Reshape chains (exporters write them around attention heads, but
// nothing here is attention-specific):                                                class 0
//  - Reshape(R(x), s2) → Reshape(x, s2) when R is a Reshape/Flatten/Squeeze/Unsqueeze (all keep
//    element order) and s2 is a constant. A 0 in s2 copies a dim of R(x), not of x (composing it
//    blindly is the onnxoptimizer bug): it is kept only where R is a Reshape whose own target
//    copies the same dim of x (a 0 there too), replaced by R's constant at that position, and
//    otherwise the pair is left. When R has other consumers it stays for them and only this
//    Reshape reads x directly.
//  - a Reshape whose output shape equals its input's is removed: static shapes, or a target of
//    0s (copies) and the input's own static dims at the same rank, which holds for symbolic
//    batch and sequence dims too (the head split Reshape(x, [0, 0, H, D]) undone by
//    Reshape(·, [0, 0, H·D]) leaves x).
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId reshape;
  NodeId inner;                 // invalid: remove `reshape` (same shape)
  std::vector<int64_t> target;  // non-empty: the composed target (s2 with its 0s resolved)
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

// Reshape(x, target) keeps x's shape whatever its symbolic dims are: the same rank, and every
// position a copy (0) or x's own static dim there, with at most one -1 (which then resolves to
// the one dim left, x's own).
bool keeps_shape(const Graph& g, ValueId x, const std::vector<int64_t>& target, bool allowzero) {
  if (!g.has_shape(x) || static_cast<size_t>(g.rank(x)) != target.size()) return false;
  const auto dims = g.shape(x);
  int minus = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowzero) continue;
    if (target[i] == -1 && ++minus == 1) continue;
    if (!dims[i].known() || dims[i].value != target[i]) return false;
  }
  return true;
}

// s2 applied to R(x) as a target for x itself: each 0 of s2 (copy dim i of R(x)) becomes R's own
// target at i — a 0 (R copies dim i of x), or R's positive constant there. nullopt when one is
// R's -1 or R is not a constant, non-allowzero Reshape.
std::optional<std::vector<int64_t>> compose_zeros(const Graph& g, NodeId inner, std::vector<int64_t> s2) {
  if (!is(g, inner, "Reshape") || g.attr_int(inner, "allowzero", 0) != 0) return std::nullopt;
  auto s1 = constant_ints(g, g.input(inner, 1));
  if (!s1) return std::nullopt;
  for (size_t i = 0; i < s2.size(); ++i) {
    if (s2[i] != 0) continue;
    if (i >= s1->size() || (*s1)[i] < 0) return std::nullopt;
    s2[i] = (*s1)[i];
  }
  return s2;
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
    bool same = keeps_shape(g, x, *target, allowzero);
    if (auto in = static_shape(g, x); !same && in) {
      auto res = reshaped(*in, *target, allowzero);
      same = res && *res == *in;
    }
    if (same && can_forward(g, uses, g.output(n, 0), x)) {
      out.push_back({n, {}, {}});
      continue;
    }
    NodeId inner = g.producer(x);
    if (!inner.valid() || !order_preserving(g, inner)) continue;
    bool has_zero = false;
    for (int64_t d : *target) has_zero |= (d == 0);
    if (!has_zero || allowzero) {
      out.push_back({n, inner, {}});
    } else if (auto composed = compose_zeros(g, inner, *target)) {  // 0 would copy a dim of R(x), not of x
      out.push_back({n, inner, std::move(*composed)});
    }
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (!m.inner.valid()) return e.forward(m.reshape, g.input(m.reshape, 0));
  if (e.any_touched(m.reshape, m.inner)) return false;
  e.set_input(m.reshape, 0, g.input(m.inner, 0));
  if (!m.target.empty()) e.set_input(m.reshape, 1, e.ints_constant("shape", m.target));
  e.drop_if_unshared(m.inner);
  return true;
}

}  // namespace

ONNXFORGE_PASS(fuse_consecutive_reshapes, Match, AccuracyClass::Lossless, analyze, apply,
               {"Reshape", "Flatten", "Squeeze", "Unsqueeze"},
               "compose Reshape chains (a 0 in the target only where both copy the same dim), drop Reshapes "
               "that keep their input's shape");

}  // namespace onnxforge::passes
