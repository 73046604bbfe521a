#include "passes/targets.h"

#include <algorithm>

#include "ir/error.h"
#include "passes/fusion.h"
#include "passes/registry.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::passes {

bool TargetProfile::accepts(std::string_view op) const {
  return std::find(lacks.begin(), lacks.end(), op) == lacks.end();
}

const std::vector<TargetProfile>& all_targets() {
  // Sources and the reasoning behind each row: targets.h.
  static const std::vector<TargetProfile> list = {
      {"generic", kMaxRuntimeOpset, {}, "every op onnxforge's runtime runs; keeps the model's opset"},
      {"ort", 24, {}, "ONNX Runtime 1.30 CPU EP (npm peer): all six ops checked to run, opset <= 24"},
      {"tensorrt", 23, {"RMSNormalization", "RotaryEmbedding", "Attention", "Swish"},
       "TensorRT 10 ONNX parser: LayerNormalization, Gelu; RMSNormalization rejected before 10.15 "
       "(NVIDIA/TensorRT#4639); RotaryEmbedding, Attention not in its 10.x table; opset <= 23"},
      {"tflite", 20, {"RMSNormalization", "RotaryEmbedding", "Attention", "Swish"},
       "onnx2tf-style ONNX->TFLite converters: LayerNormalization, Gelu; the others listed as not yet "
       "supported; opset <= 20"},
  };
  return list;
}

const TargetProfile& target_profile(std::string_view name) {
  std::string known;
  for (const TargetProfile& t : all_targets()) {
    if (t.name == name) return t;
    known += (known.empty() ? "" : ", ") + t.name;
  }
  fail("unknown target '", name, "'; targets are: ", known);
}

void check_target_max_opset(const TargetProfile& t, int64_t target_opset) {
  if (target_opset > t.max_opset)
    fail("--target-opset ", target_opset, " is above what target '", t.name, "' accepts (opset <= ", t.max_opset,
         "; ", t.source, "); use --target-opset ", t.max_opset, " or lower, or another --target");
}

namespace {

// The inverse of each fusion, by the standard op it undoes (the op's name is what a target lacks).
struct Inverse {
  const char* op;
  const char* pass;
};
constexpr Inverse kInverses[] = {
    {"LayerNormalization", "decompose_layer_norm"}, {"RMSNormalization", "decompose_rms_norm"},
    {"Gelu", "decompose_gelu"},                     {"Swish", "decompose_swish"},
    {"RotaryEmbedding", "decompose_rotary_embedding"}, {"Attention", "decompose_attention"},
};

}  // namespace

TargetPlan plan_for_target(const std::vector<const Pass*>& passes, const TargetProfile& t) {
  TargetPlan plan;
  for (const std::string& op : t.lacks) {
    const Inverse* inv = std::find_if(std::begin(kInverses), std::end(kInverses), [&](const Inverse& i) { return op == i.op; });
    const Pass* p = inv != std::end(kInverses) ? find_pass(inv->pass) : nullptr;
    if (!p) {
      plan.no_decomposition.push_back(op);
      continue;
    }
    plan.passes.push_back(p);
    plan.decompositions.push_back(p->name());
  }
  for (const Pass* p : passes) {
    if (std::find(plan.passes.begin(), plan.passes.end(), p) != plan.passes.end()) continue;  // already in front
    if (const auto* f = dynamic_cast<const Fusion*>(p); f && !t.accepts(f->info().op)) {
      plan.dropped.push_back(p->name());
      continue;
    }
    plan.passes.push_back(p);
  }
  return plan;
}

}  // namespace onnxforge::passes
