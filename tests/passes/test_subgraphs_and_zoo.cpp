// Passes inside If bodies and around subgraph captures; every zoo model end to end.
#include <gtest/gtest.h>

#include "io/model_io.h"
#include "numeric.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

std::filesystem::path data(const std::string& name) {
  return std::filesystem::path(ONNXFORGE_SOURCE_DIR) / "tests/passes/data" / name;
}

size_t body_nodes(const Model& m) {
  size_t n = 0;
  for (size_t i = 1; i < m.graph_count(); ++i) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(i)));
    if (!g.detached()) n += g.node_count();
  }
  return n;
}

TEST(Subgraphs, CapturedValuesStayBodiesAreOptimized) {
  auto m = load_model(data("if_capture.onnx"));
  ASSERT_EQ(body_nodes(*m), 5u);
  optimize(*m);
  EXPECT_EQ(count_op(m->main(), "Exp"), 1u);      // read by the then-branch
  EXPECT_EQ(count_op(m->main(), "Sigmoid"), 0u);  // dead
  EXPECT_EQ(count_op(m->main(), "If"), 1u);
  EXPECT_EQ(body_nodes(*m), 2u);  // then: Add (Identity + Transpose pair gone); else: Neg
  // The result is still a valid model that runs like the original, both branches.
  auto dir = temp_dir("passes_subgraphs");
  save_model(*m, dir / "out.onnx");
  auto again = load_model(dir / "out.onnx");
  if (passes::runtime_available()) {
    auto original = load_model(data("if_capture.onnx"));
    passes::Reference ref(*original, passes::VerifyOptions{4, {}});
    auto v = ref.check(*again, passes::tolerance_of(passes::AccuracyClass::Lossless));
    EXPECT_TRUE(v.ok) << v.max_diff << " " << v.error;
  }
}

// Every zoo model: optimize, verify numerically, no BatchNormalization left in CNNs.
TEST(Zoo, EveryModelOptimizesAndVerifies) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const auto& path : zoo_models()) {
    if (std::filesystem::file_size(path) > (uint64_t{200} << 20)) continue;  // full-size models: perf scripts
    SCOPED_TRACE(path.string());
    auto original = load_model(path);
    auto model = load_model(path);
    passes::RunResult r = optimize(*model);
    EXPECT_LE(r.after.nodes, r.before.nodes);
    EXPECT_EQ(count_op(model->main(), "BatchNormalization"), 0u);
    EXPECT_EQ(count_op(model->main(), "Constant"), 0u);
    passes::Reference ref(*original, passes::VerifyOptions{1, {}});
    auto v = ref.check(*model, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
    auto dir = temp_dir("passes_zoo");
    save_model(*model, dir / "out.onnx");
    EXPECT_NO_THROW(load_model(dir / "out.onnx"));
  }
}

}  // namespace
}  // namespace onnxforge::test
