#include "passes/audit.h"

#include <chrono>

#include "analysis/shapes.h"
#include "ir/error.h"
#include "io/model_io.h"
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"

namespace onnxforge::passes {

// A census row as audit's JSON prints it: its fields by their names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CensusRow, fusion, op, min_opset, found, fusable_here, fusable_after_upgrade, missed)

namespace {

constexpr uint64_t kSmallConstant = 64u << 10;

// A Transpose of one stored constant: the Linear layers' MatMul(x, Transpose(W)).
bool weight_transpose(const Graph& g, NodeId n) {
  return g.is_op(n, "Transpose") && g.inputs(n).size() == 1 && g.initializer(g.input(n, 0)).valid();
}

// The runtime's evaluator, refusing nodes that would read a large constant (a weight), except
// weight transposes, folded as recipes that read nothing (transpose_recipe). Without them the
// census saw MatMul(x, Transpose(W)) where `optimize` sees MatMul(x, W'): fuse_qkv_projections
// was "found 0" on TinyLlama and Whisper although optimize fuses 22 and 4 (weights above 64 KiB;
// small ones were folded and counted).
const NodeEvaluator* small_constant_evaluator() {
  static const NodeEvaluator ev = [] {
    const NodeEvaluator* base = runtime_evaluator();
    NodeEvaluator e;
    e.supports = [base](const Graph& g, NodeId n) {
      if (!base || !base->supports(g, n)) return false;
      if (weight_transpose(g, n)) return true;
      for (ValueId v : g.inputs(n)) {
        if (!v.valid()) continue;
        TensorId t = g.initializer(v);
        if (t.valid() && g.model().tensors.byte_size(t) > kSmallConstant) return false;
      }
      return true;
    };
    if (base)
      e.evaluate = [base](const Graph& g, NodeId n, std::span<const ConstTensor> ins) {
        if (weight_transpose(g, n) && !ins.empty() && ins[0].size > kSmallConstant) {
          auto t = transpose_recipe(g, n, ins[0]);
          // Never computed here (that would read the weight): fold_constants leaves the node.
          if (!t) fail("audit: no transpose recipe for this weight");
          return std::vector<ConstTensor>{std::move(*t)};
        }
        return base->evaluate(g, n, ins);
      };
    return e;
  }();
  return &ev;
}

// The passes that expose fusion patterns without reading weights (no Conv+BN folding, no
// duplicate-constant hashing).
std::vector<const Pass*> exposing_passes() {
  std::vector<const Pass*> out;
  for (const char* name : {"fold_constants", "simplify_shape_chains", "eliminate_identity_ops",
                           "eliminate_redundant_transposes", "fuse_consecutive_reshapes", "eliminate_dead_nodes"})
    if (const Pass* p = find_pass(name)) out.push_back(p);
  return out;
}

}  // namespace

nlohmann::json AuditResult::to_json() const {
  return {{"model", path},
          {"opset", opset},
          {"nodes", nodes},
          {"nodes_simplified", nodes_simplified},
          {"forensics", forensics.to_json()},
          {"fingerprint", fingerprint.to_json()},
          {"census", census},
          {"upgrade_hint", upgrade_hint(census)},
          {"seconds", seconds}};
}

AuditResult audit_model(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  AuditResult a;
  a.path = path;
  auto model = load_model(path);
  a.opset = model->opset("");
  a.nodes = static_cast<int64_t>(model->main().node_count());
  infer_shapes(*model);  // ranks and static dims for the forensics (tables only, no weights)
  a.forensics = forensics(*model);
  a.fingerprint = fingerprint(*model);
  RunOptions ro;
  ro.pass.evaluator = small_constant_evaluator();
  ro.pass.fold_size = kSmallConstant;
  const auto exposing = exposing_passes();
  run_passes(*model, exposing, ro);
  const ShapeReport shapes = infer_shapes(*model);
  ro.pass.shapes = &shapes;
  a.nodes_simplified = static_cast<int64_t>(model->main().node_count());
  a.census = fusion_census(*model, ro.pass);
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

}  // namespace onnxforge::passes
