#pragma once
// Test support for the attention/rotary/QKV fusion tests: zoo models at opset 23 and the census.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "ir/rewrite.h"
#include "passes/fusion.h"
#include "passes/graph_util.h"
#include "tests/common/graph_builder.h"
#include "optimize.h"
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"
#include "tests/common/models.h"

namespace onnxforge::test {

// Raises a zoo model (opset 14) to opset 23 where nothing else changes meaning on the way for
// the ops these exports use: the only signature change between 14 and 23 in them is the
// Reduce* `axes` attribute becoming an input (18). (Until the upgrade pass lands on this
// branch; the zoo has no Split/Pad/Resize/GroupNormalization/Dropout.)
inline void raise_to_opset_23(Model& m) {
  Graph& g = m.main();
  for (NodeId n : g.nodes()) {
    const std::string op(str(g.op_type(n)));
    if (op == "Split" && g.input(n, 1).valid()) continue;  // sizes as an input: the same at 13 and 18
    ASSERT_TRUE(op != "Split" && op != "Pad" && op != "Resize" && op != "GroupNormalization" && op != "Dropout" &&
                op != "Upsample" && op != "Scatter")
        << op << " changes meaning by opset 23: the fixture cannot raise this model";
  }
  Rewrite rw(g);
  for (NodeId n : g.nodes()) {
    const std::string op(str(g.op_type(n)));
    if (!op.starts_with("Reduce") || op == "ReduceSum") continue;
    auto axes = g.attr_ints(n, "axes");
    if (axes.empty()) continue;
    std::vector<int64_t> a(axes.begin(), axes.end());
    const int64_t k = static_cast<int64_t>(a.size());
    TensorId t = m.tensors.add_owned(intern("axes"), DType::Int64, std::span<const int64_t>(&k, 1), passes::to_bytes(a));
    ValueId av = rw.new_initializer("axes", t);
    std::vector<NewAttr> attrs;
    for (const Attr& at : g.attrs(n))
      if (str(at.name) == "keepdims") attrs.push_back(NewAttr::Int("keepdims", at.i));
    ValueId out = rw.new_value("reduced");
    rw.add_node(op, {g.input(n, 0), av}, {out}, attrs, std::span<const NodeId>(&n, 1));
    rw.replace_uses(g.output(n, 0), out);
    rw.kill(n);
  }
  rw.commit();
  for (auto& o : m.opsets)
    if (str(o.domain).empty() || str(o.domain) == "ai.onnx") o.version = 23;
  m.ir_version = 11;
}

inline std::unique_ptr<Model> zoo_at_23(const std::string& name) {
  auto m = load_model(zoo_model(name));
  raise_to_opset_23(*m);
  return m;
}

inline const passes::CensusRow* census_row(const std::vector<passes::CensusRow>& rows, const std::string& fusion) {
  for (const auto& r : rows)
    if (r.fusion == fusion) return &r;
  return nullptr;
}

inline std::string census_text(const std::vector<passes::CensusRow>& rows) {
  std::ostringstream os;
  for (const auto& r : rows) {
    os << r.fusion << ": found " << r.found << ", here " << r.fusable_here << ", after upgrade " << r.fusable_after_upgrade;
    for (const auto& [why, n] : r.missed) os << ", missed " << n << " (" << why << ")";
    os << "\n";
  }
  return os.str();
}

// The census of `m` as the fusions see it in the pipeline: after the clean-ups that run before
// them (every pass but the fusions named), with shapes inferred.
inline std::vector<passes::CensusRow> census_after_cleanups(Model& m, const std::vector<std::string>& fusions) {
  std::vector<const passes::Pass*> list;
  for (const passes::Pass* p : passes::all_passes())
    if (std::find(fusions.begin(), fusions.end(), p->name()) == fusions.end()) list.push_back(p);
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  passes::run_passes(m, list, o);
  infer_shapes(m);
  return passes::fusion_census(m, o.pass);
}

}  // namespace onnxforge::test
