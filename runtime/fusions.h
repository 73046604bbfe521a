#pragma once
// Internal: the plan's own fusions (runtime/README.md, "How a model runs"). A fusion turns the
// step being planned plus the nodes after it into one step. Each is a read-only matcher written
// on the pattern vocabulary (ir/match.h) that returns what the step becomes, or the first check
// that failed; the plan installs the result (Plan::Plan). They are the runtime's execution
// choices, not graph rewrites: the graph is never changed, and all of them are off with
// SessionOptions::fuse_activations = false (the tests' reference plans).
//
// Adding a fusion: write its matcher in fusions.cpp and add a row to the table there.
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ir/match.h"
#include "ir/uses.h"
#include "runtime/plan.h"

namespace onnxforge::rt {

// What a matcher may read while the plan is built.
struct FusionSite {
  const Graph& g;
  const Uses& uses;
  std::span<const uint8_t> available;     // per value: computed before the step being planned
  std::span<const uint8_t> is_const;      // per value: known before any run
  std::span<const uint8_t> graph_output;  // per value
  // The model computes in a float narrower than float32 somewhere (narrowest_float_bits < 23):
  // then a value of undeclared type is float32 only where known_dtype proves it.
  bool narrow_floats = false;
};

// What the step becomes.
struct FusedStep {
  const KernelDef* kernel = nullptr;            // replaces the step's kernel when set
  NodeId node;                                  // when valid: the step runs this node (attributes, messages)
  std::optional<std::vector<ValueId>> inputs;   // replaces the step's inputs when set
  ValueId output;                               // the step's new output 0 (the last absorbed node's)
  std::optional<std::vector<ValueId>> outputs;  // replaces all the step's outputs when set ([0] == output)
  std::optional<simd::Unary> act;               // fused activation epilogue
  std::shared_ptr<const void> state;            // replaces the step's state when set
  bool round_half = false;                      // sets Step::round_half
  std::vector<NodeId> absorbed;                 // nodes the step now computes (the plan skips them)
  size_t fused = 1;                             // added to Plan::fused (Session::fused_count)
};

struct Fusion {
  const char* name;
  Found<FusedStep> (*match)(const FusionSite&, const Step&);
};

// The fusions in the order the plan tries them on every step; each sees the step as the earlier
// ones left it (a Conv that took a residual Add then takes the Relu after it).
std::span<const Fusion> fusions();

}  // namespace onnxforge::rt
