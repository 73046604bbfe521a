#pragma once
// upgrade_opset: the default-domain opset of a whole model (main graph, If/Loop/Scan bodies,
// local functions) raised to a target, one version step at a time, with an adapter for every op
// whose signature or meaning changes on the way (attributes that became inputs, Softmax's 2-D
// coercion before 13, GroupNormalization's per-group scale before 21, ...). Class 0: the upgraded
// model computes the same outputs, bit for bit, in onnxforge's runtime (tests/passes/
// test_upgrade_opset.cpp, and every backend-suite model the runtime passes, upgraded to 23).
#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"

namespace onnxforge::passes {

// The highest default-domain opset whose every op the runtime implements as specified
// (Attention-24's nonpad_kv_seqlen and Swish-24 included; Attention-25's windows are not).
inline constexpr int64_t kMaxRuntimeOpset = 24;
// The lowest target: older opsets have no numpy broadcasting and are not worth emitting.
inline constexpr int64_t kMinTargetOpset = 7;

// The IR version an opset needs (ONNX's release table: opset 23 -> IR 11, 24 -> 12, ...).
int64_t min_ir_version(int64_t opset);

struct UpgradeReport {
  int64_t from = 0, to = 0;                  // default-domain opset of the model
  int64_t ir_from = 0, ir_to = 0;            // IR version
  size_t adapted = 0;                        // nodes rewritten (an adapter changed them)
  size_t added = 0;                          // helper nodes added (Flatten/Shape/Reshape, Unsqueeze, ...)
  std::map<std::string, size_t> by_adapter;  // "Softmax-13" -> nodes
};

// Throws onnxforge::Error (exit 2) when `target` would downgrade the model or is outside
// [kMinTargetOpset, kMaxRuntimeOpset].
void check_target_opset(const Model& m, int64_t target);
// Upgrades in place; a no-op (report.from == report.to) when the model is already at `target`.
// Throws onnxforge::Error naming the node when an op has no faithful form at the target (Scan-8,
// BatchNormalization with spatial=0, Resize's tf_half_pixel_for_nn, ...): nothing is written then.
UpgradeReport upgrade_opset(Model& m, int64_t target);

// The same as a pass (class 0) for the driver: runs when PassOptions::target_opset is above the
// model's opset. Not in the default pipeline (registry.h: pre_passes()).
const Pass& upgrade_opset_pass();

}  // namespace onnxforge::passes
