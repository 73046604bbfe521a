#pragma once
// A pass: a name, an accuracy class, a read-only `analyze` that returns matches and an `apply`
// that turns one match into edits. Each pass lives in its own file and is listed in registry.cpp.
// Matchers are written on the pattern vocabulary of ir/match.h (is, single_consumer,
// other_input, scalar, constant_near...); edits on the actions of Edits (edits.h), which own the
// rules every rewrite needs:
//   - Edits::replace_with(group, op, inputs, attrs): stale check over the group, the new
//     output named after the replaced one, tags = union of the group's, readers moved, the
//     group killed (a member still read outside the group stays);
//   - Edits::forward(node, kept): the node goes, its readers read `kept` — refused when that
//     would only move a graph output's Identity around (check can_forward in analyze too).
//
//   // x * 1 → x and MatMul + Add → Gemm, in ten lines:
//   struct Match { NodeId first, second; };
//   std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {  // parallel-safe
//     std::vector<Match> out;
//     for (NodeId n : g.nodes()) {
//       const ValueId y = g.output(n, 0), x = g.input(n, 0);
//       if (is(g, n, "Mul") && constant_all_equal(g, g.input(n, 1), 1) && can_forward(g, uses, y, x))
//         out.push_back({n, {}});
//       else if (NodeId add = single_consumer(g, uses, n); is(g, n, "MatMul") && is(g, add, "Add"))
//         out.push_back({n, add});
//     }
//     return out;
//   }
//   bool apply(Edits& e, const Match& m) {  // serial; false when the match went stale
//     if (!m.second.valid()) return e.forward(m.first, e.g.input(m.first, 0));
//     ValueId bias = other_input(e.g, m.second, e.g.output(m.first, 0));
//     return e.replace_with({m.first, m.second}, "Gemm", {e.g.input(m.first, 0), e.g.input(m.first, 1), bias}).valid();
//   }
//   ONNXFORGE_PASS(example, Match, AccuracyClass::FloatBounded, analyze, apply, {"Mul", "MatMul", "Add"},
//                  "x * 1 becomes x, MatMul + Add Gemm");
//
// `analyze` runs on a snapshot of the graph taken at the start of a round, concurrently with the
// other passes' analyses. `apply` runs serially in pipeline order; a match whose nodes an earlier
// match of the same round touched must return false (Edits::touched; replace_with and forward
// check it) and is found again next round. (The real MatMul + Add pass also checks ranks and the
// bias shape: fuse_matmul_add.cpp.)
#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/uses.h"
#include "passes/evaluator.h"

namespace onnxforge {
struct ShapeReport;
}

namespace onnxforge::passes {

// 0: provably lossless (bit-identical outputs); 1: float-bounded (rounding differences only);
// 2: empirically safe.
enum class AccuracyClass : int { Lossless = 0, FloatBounded = 1, EmpiricallySafe = 2 };
const char* accuracy_name(AccuracyClass c);
// Tolerance of a pass class for verification: max |a-b| <= abs + rel*|a|.
struct Tolerance {
  double abs = 0, rel = 0;
  double floor = 0;  // magnitude floor as a fraction of the output's largest |ref| (rt::kMagnitudeFloor)
};
Tolerance tolerance_of(AccuracyClass c);

struct PassOptions {
  uint64_t fold_size = uint64_t{1} << 20;          // folds may grow a constant up to max(inputs, this)
  std::map<std::string, int64_t> dims;             // --dim name=N: symbolic dims fixed to a value
  const NodeEvaluator* evaluator = nullptr;        // constant folding; null = no numeric folding
  const onnxforge::ShapeReport* shapes = nullptr;  // the round's shape inference (set by the driver)
};

class Edits;

class Pass {
 public:
  Pass(std::string name, AccuracyClass accuracy, std::string summary, std::vector<std::string> anchors = {})
      : name_(std::move(name)), summary_(std::move(summary)), anchors_(std::move(anchors)), accuracy_(accuracy) {}
  virtual ~Pass() = default;
  const std::string& name() const { return name_; }
  const std::string& summary() const { return summary_; }
  AccuracyClass accuracy() const { return accuracy_; }
  // Op types every match contains (empty: the pass looks at the whole graph). A pass that found
  // nothing is not analyzed again until a round changes a node of these types or a neighbour
  // of one; the driver confirms the fixed point with one full round at the end.
  const std::vector<std::string>& anchors() const { return anchors_; }

  // Read-only: the matches, type-erased. Must not modify anything (runs concurrently).
  virtual std::any analyze(const Graph& g, const Uses& uses, const PassOptions& o) const = 0;
  virtual size_t match_count(const std::any& matches) const = 0;
  // Serial: applies every still-valid match; returns how many were applied.
  virtual size_t apply(Edits& e, const std::any& matches) const = 0;

 private:
  std::string name_, summary_;
  std::vector<std::string> anchors_;
  AccuracyClass accuracy_;
};

template <class M>
class PassOf final : public Pass {
 public:
  using AnalyzeFn = std::vector<M> (*)(const Graph&, const Uses&, const PassOptions&);
  using ApplyFn = bool (*)(Edits&, const M&);
  PassOf(std::string name, AccuracyClass c, AnalyzeFn a, ApplyFn f, std::vector<std::string> anchors,
         std::string summary)
      : Pass(std::move(name), c, std::move(summary), std::move(anchors)), analyze_(a), apply_(f) {}
  std::any analyze(const Graph& g, const Uses& uses, const PassOptions& o) const override {
    return std::any(analyze_(g, uses, o));
  }
  size_t match_count(const std::any& m) const override { return std::any_cast<const std::vector<M>&>(m).size(); }
  size_t apply(Edits& e, const std::any& m) const override {
    size_t n = 0;
    for (const M& match : std::any_cast<const std::vector<M>&>(m)) n += apply_(e, match) ? 1 : 0;
    return n;
  }

 private:
  AnalyzeFn analyze_;
  ApplyFn apply_;
};

// The line that ends a pass file: defines `const Pass& NAME_pass()` (declared in registry.h), the
// pass named "NAME", built on first use (a function-local static: no initialization order across
// files). The arguments after Match are PassOf's after the name: accuracy class, analyze, apply,
// anchors ({} for the whole graph), summary. One definer instead of a six-line accessor per file
// keeps the name and the accessor from drifting apart (grep `ONNXFORGE_PASS(NAME` to find one).
#define ONNXFORGE_PASS(NAME, Match, ...)                 \
  const Pass& NAME##_pass() {                            \
    static const PassOf<Match> pass{#NAME, __VA_ARGS__}; \
    return pass;                                         \
  }                                                      \
  static_assert(true, "the definer is written as a statement: ONNXFORGE_PASS(...);")

}  // namespace onnxforge::passes
