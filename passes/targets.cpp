#include "passes/targets.h"

#include <algorithm>

#include "ir/error.h"
#include "passes/decompose.h"
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
      {"tensorrt",
       23,
       {"RMSNormalization", "RotaryEmbedding", "Attention", "Swish"},
       "TensorRT 10 ONNX parser: LayerNormalization, Gelu; RMSNormalization rejected before 10.15 "
       "(NVIDIA/TensorRT#4639); RotaryEmbedding, Attention not in its 10.x table; opset <= 23"},
      {"tflite",
       20,
       {"RMSNormalization", "RotaryEmbedding", "Attention", "Swish"},
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
    fail("--target-opset ", target_opset, " is above what target '", t.name, "' accepts (opset <= ", t.max_opset, "; ",
         t.source, "); use --target-opset ", t.max_opset, " or lower, or another --target");
}

std::vector<std::string> left_for_target(const Model& m, const TargetProfile& t) {
  struct Left {
    std::string op, reason, first;
    int64_t count = 0;
  };
  std::vector<Left> rows;
  if (t.lacks.empty()) return {};
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes()) {
      if (!g.domain(n).empty() && str(g.domain(n)) != "ai.onnx") continue;
      const std::string op(str(g.op_type(n)));
      if (t.accepts(op)) continue;
      const Pass* inv = inverse_of(op);
      std::string reason;
      if (!inv)
        reason = "no pass decomposes it";
      else if (op == "Attention")
        reason = decompose::attention_refusal(g, n);
      else if (op == "RotaryEmbedding")
        reason = decompose::rotary_refusal(g, n);
      if (reason.empty()) reason = inv->name() + " does not take this form (see passes/" + inv->name() + ".cpp)";
      auto row =
          std::find_if(rows.begin(), rows.end(), [&](const Left& l) { return l.op == op && l.reason == reason; });
      if (row == rows.end()) row = rows.insert(rows.end(), Left{op, reason, std::string(str(g.node_name(n))), 0});
      ++row->count;
    }
  }
  std::vector<std::string> out;
  for (const Left& l : rows)
    out.push_back(std::to_string(l.count) + " " + l.op + " left for target '" + t.name + "': " + l.reason +
                  " (first: '" + l.first + "')");
  return out;
}

TargetPlan plan_for_target(const std::vector<const Pass*>& passes, const TargetProfile& t) {
  TargetPlan plan;
  for (const std::string& op : t.lacks) {
    const Pass* p = inverse_of(op);
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
