#pragma once
// Deployment targets for `optimize --target generic|ort|tensorrt|tflite`: which of the standard
// ops the fusions emit a target accepts, and the highest default-domain opset it takes.
//
// With a target, a fusion whose op the target lacks does not run, a model that already holds
// such an op gets it decomposed back into primitives (decompose_*: the inverse of each fusion),
// `--target-opset` above the target's maximum is refused, and the upgrade hint names only what
// the target could run. `generic` (the default) accepts every op our runtime runs and keeps the
// model's opset: it changes nothing against the pipeline without a target.
//
// Sources (the table in targets.cpp; passes/README.md "Targets and decompositions" says how they are used):
//  - ort: ONNX Runtime 1.30 CPU EP, our npm peer — LayerNormalization-17, Gelu-20,
//    RMSNormalization-23, RotaryEmbedding-23, Attention-23 (4-D GQA/is_causal, 3-D with a mask)
//    and Swish-24 each checked to run here (issue 13); highest opset 24.
//  - tensorrt: TensorRT 10's ONNX parser (onnx-tensorrt docs/operators.md): LayerNormalization
//    (since 8.6) and Gelu are supported; RMSNormalization-23 is rejected before 10.15
//    (NVIDIA/TensorRT#4639); RotaryEmbedding-23 and Attention-23 are not in the 10.x table we
//    could check, Swish-24 is above its opset. Conservative: a 10.x engine builds from the
//    decomposed form whatever its minor version. Highest opset 23 (the parser imports opset-23
//    graphs; #4639 is a rejection of one op in such a graph, not of the opset).
//  - tflite: onnx2tf-style ONNX→TFLite converters (their supported-op table): LayerNormalization
//    and Gelu convert; Attention, RMSNormalization, RotaryEmbedding and Swish are listed under
//    "official ONNX operators not yet supported". Highest opset 20 (Gelu-20 is the newest op of
//    the table we emit; nothing newer is needed).
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace onnxforge::passes {

struct TargetProfile {
  std::string name;
  int64_t max_opset = 0;           // highest default-domain opset the target accepts
  std::vector<std::string> lacks;  // standard ops (of the fusions' six) it does not accept
  std::string source;              // one line: where the row comes from
  bool accepts(std::string_view op) const;
};

// generic, ort, tensorrt, tflite (in that order).
const std::vector<TargetProfile>& all_targets();
// The profile named `name`; an Error listing the known targets when there is none.
const TargetProfile& target_profile(std::string_view name);

// Refuses (Error) a --target-opset the target cannot take.
void check_target_max_opset(const TargetProfile& t, int64_t target_opset);

// What a target changes in a pass list.
struct TargetPlan {
  std::vector<const Pass*> passes;            // the list to run
  std::vector<std::string> dropped;           // fusions left out: the target lacks their op
  std::vector<std::string> decompositions;    // decompose_* passes added (they run first)
  std::vector<std::string> no_decomposition;  // ops the target lacks that no pass decomposes yet
};
// Nodes of an op `t` lacks still in the model (main graph and subgraphs), one line per op and
// reason: "2 Attention left: Attention-24's nonpad_kv_seqlen ... (first: 'node name')". Empty
// when the model holds nothing the target lacks. optimize reports it (report.target.left) and
// says it as a note.
std::vector<std::string> left_for_target(const Model& m, const TargetProfile& t);

// `passes` (pipeline order) adjusted for `t`: fusions whose op it lacks removed, the
// decomposition of each such op put in front.
TargetPlan plan_for_target(const std::vector<const Pass*>& passes, const TargetProfile& t);

}  // namespace onnxforge::passes
