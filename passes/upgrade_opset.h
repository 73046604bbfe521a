#pragma once
// upgrade_opset: the default-domain opset of a whole model (main graph, If/Loop/Scan bodies,
// local functions) raised to a target, one version step at a time, with an adapter for every op
// whose signature or meaning changes on the way (attributes that became inputs, Softmax's 2-D
// coercion before 13, GroupNormalization's per-group scale before 21, ...). Class 0: the upgraded
// model computes the same outputs, bit for bit, in onnxforge's runtime (tests/passes/
// test_upgrade_opset.cpp, and every backend-suite model the runtime passes, upgraded to 23).
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace onnxforge::passes {

// The highest default-domain opset whose every op the runtime implements as specified
// (Attention-24's nonpad_kv_seqlen and Swish-24 included; Attention-25's windows are not).
inline constexpr int64_t kMaxRuntimeOpset = 24;
// The lowest target: older opsets have no numpy broadcasting and are not worth emitting.
inline constexpr int64_t kMinTargetOpset = 7;

// The IR version an opset needs (ONNX's release table: opset 23 -> IR 11, 24 -> 12, ...).
int64_t min_ir_version(int64_t opset);

struct UpgradeReport {
  int64_t requested = 0;                     // the opset asked for (--target-opset)
  std::string refused;                       // why `to` stops below `requested` ("" when it does not)
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

// The highest opset a deployment target loads, and why (passes/ort_ops.h for ONNX Runtime):
// the step stops there and says so in its report.
struct OpsetCap {
  int64_t opset = kMaxRuntimeOpset;
  std::string why;
};

// The opset upgrade as the step before the pipeline (optimize, convert, and the fresh loads a
// bisection replays): the model raised to min(target, cap.opset), never below its own opset.
// Without a target nothing happens and there is no report. Throws as upgrade_opset does, and
// check_target_opset's errors for a target outside the range or below the model's opset.
std::optional<UpgradeReport> upgrade_step(Model& m, std::optional<int64_t> target, const OpsetCap& cap = {});

// What `optimize --json` and `convert --json` print under "upgrade", and the line they print:
// "opset 14 -> 23, IR 7 -> 11 (12 nodes adapted, 3 added)".
nlohmann::json upgrade_json(const UpgradeReport& r);
std::string upgrade_text(const UpgradeReport& r);

}  // namespace onnxforge::passes
