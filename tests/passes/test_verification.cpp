// Verification: a pass that changes the outputs is caught and named by bisection.
#include <gtest/gtest.h>

#include "io/model_io.h"
#include "numeric.h"
#include "passes/pipeline.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

// A deliberately wrong pass: Relu becomes Sigmoid.
struct Match {
  NodeId relu;
};
std::vector<Match> analyze(const Graph& g, const Uses&, const passes::PassOptions&) {
  std::vector<Match> out;
  for (NodeId n : g.nodes())
    if (g.is_op(n, "Relu")) out.push_back({n});
  return out;
}
bool apply(passes::Edits& e, const Match& m) {
  if (e.touched(m.relu)) return false;
  ValueId y = e.g.output(m.relu, 0), r = e.new_value("broken");
  NodeId tags[] = {m.relu};
  e.add_node("Sigmoid", {e.g.input(m.relu, 0)}, {r}, {}, tags);
  e.replace_uses(y, r);
  e.kill(m.relu);
  return true;
}
const passes::PassOf<Match> broken{"broken_relu", passes::AccuracyClass::Lossless, "test only", analyze, apply};

TEST(Verification, FirstBreakingPassIsNamed) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  Builder b;
  ValueId x = b.input("x", {2, 3});
  b.output(b.node("Relu", {b.node("Identity", {x})}));
  auto dir = temp_dir("passes_verify");
  save_model(*b.m, dir / "m.onnx");
  auto original = load_model(dir / "m.onnx");
  passes::Reference ref(*original, passes::VerifyOptions{2, {}});
  std::vector<const passes::Pass*> list = {passes::find_pass("eliminate_identity_ops"), &broken,
                                           passes::find_pass("eliminate_dead_nodes")};
  passes::RunOptions ro;
  auto model = load_model(dir / "m.onnx");
  passes::run_passes(*model, list, ro);
  EXPECT_FALSE(ref.check(*model, passes::tolerance_of(passes::AccuracyClass::Lossless)).ok);
  passes::VerifyResult failure;
  EXPECT_EQ(passes::first_breaking_pass(dir / "m.onnx", list, ro, ref, &failure), 1);
  EXPECT_FALSE(failure.ok);
  EXPECT_GT(failure.max_diff, 0.0);
}

}  // namespace
}  // namespace onnxforge::test
