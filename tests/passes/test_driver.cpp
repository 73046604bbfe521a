// The driver's anchored skipping: local passes that found nothing sit out rounds whose changes
// are away from their op types, and the result is the same fixed point as analyzing everything.
#include <gtest/gtest.h>

#include <map>

#include "io/model_io.h"
#include "numeric.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

passes::RunResult run_all(Model& m, bool skip_quiet) {
  passes::RunOptions o;
  o.pass.evaluator = passes::runtime_evaluator();
  o.skip_quiet = skip_quiet;
  return passes::run_passes(m, passes::all_passes(), o);
}

std::map<std::string, size_t> op_histogram(const Model& m) {
  std::map<std::string, size_t> h;
  for (NodeId n : m.main().nodes()) ++h[std::string(str(m.main().op_type(n)))];
  return h;
}

const passes::PassStats& stats_of(const passes::RunResult& r, std::string_view name) {
  for (const auto& s : r.passes)
    if (s.name == name) return s;
  throw std::runtime_error("no pass " + std::string(name));
}

// Identity chains take several rounds to clear; nothing here is a Conv or a BatchNormalization.
std::unique_ptr<Model> identity_chain() {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3});
  ValueId v = x;
  for (int i = 0; i < 4; ++i) v = b.node("Relu", {b.node("Identity", {v})});
  b.output(b.node("Transpose", {b.node("Transpose", {v}, {NewAttr::Ints("perm", {1, 0})})},
                  {NewAttr::Ints("perm", {1, 0})}));
  return std::move(b.m);
}

TEST(Driver, QuietAnchoredPassesSitOutUnrelatedRounds) {
  auto m = identity_chain();
  passes::RunResult r = run_all(*m, true);
  ASSERT_GE(r.rounds, 1);
  const auto& bn = stats_of(r, "fuse_conv_batchnorm");
  EXPECT_GT(bn.skipped, 0) << "no Conv/BatchNormalization ever changes, so after round 1 it is skipped";
  EXPECT_EQ(bn.applied, 0u);
  // Whole-graph passes are never skipped.
  EXPECT_EQ(stats_of(r, "eliminate_dead_nodes").skipped, 0);
  EXPECT_EQ(count_op(m->main(), "Identity"), 0u);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 0u);
}

TEST(Driver, SkippingReachesTheSameFixedPointOnEveryZooModel) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const auto& path : zoo_models()) {
    SCOPED_TRACE(path.filename().string());
    auto skipped = load_model(path);
    auto full = load_model(path);
    passes::RunResult a = run_all(*skipped, true);
    passes::RunResult b = run_all(*full, false);
    EXPECT_EQ(a.after.nodes, b.after.nodes);
    EXPECT_EQ(a.after.initializers, b.after.initializers);
    EXPECT_EQ(a.after.bytes, b.after.bytes);
    EXPECT_EQ(op_histogram(*skipped), op_histogram(*full));
    passes::Reference ref(*full, passes::VerifyOptions{1, {}});
    passes::VerifyResult v = ref.check(*skipped, passes::tolerance_of(passes::AccuracyClass::Lossless));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
    int analyses_a = 0, analyses_b = 0;
    for (const auto& s : a.passes) analyses_a += s.analyzed;
    for (const auto& s : b.passes) analyses_b += s.analyzed;
    EXPECT_LE(analyses_a, analyses_b + static_cast<int>(a.passes.size())) << "at most one confirmation round more";
  }
}

}  // namespace
}  // namespace onnxforge::test
