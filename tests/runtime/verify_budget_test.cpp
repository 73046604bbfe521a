// Verification's progress reports and time budget (runtime/verify.h): a progress call per seed
// with a consistent count, and a budget no seed fits makes the model over budget after one seed
// (never zero seeds), with a note, instead of running the rest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/verify.h"
#include "tests/common/graph_builder.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

std::unique_ptr<Model> small_model() {
  GraphBuilder b;
  ValueId x = b.input("x", {4, 8});
  std::vector<float> w(64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
  b.output(b.node("Relu", {b.node("MatMul", {x, b.f32("w", {8, 8}, w)})}));
  return std::move(b.m);
}

}  // namespace

TEST(VerifyBudget, ProgressAfterEverySeed) {
  auto m = small_model();
  std::vector<rt::VerifyProgress> seen;
  rt::VerifyOptions o;
  o.seeds = 4, o.parallel = 1;
  o.progress = [&](const rt::VerifyProgress& p) { seen.push_back(p); };
  rt::Reference ref(*m, o, /*keep_runs=*/true);
  ASSERT_EQ(seen.size(), 4u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_STREQ(seen[i].phase, "original");
    EXPECT_EQ(seen[i].done, static_cast<int>(i + 1));
    EXPECT_EQ(seen[i].total, 4);
  }
  EXPECT_EQ(seen.back().eta(), 0);
  EXPECT_NE(seen[0].line().find("original model, seed 1/4"), std::string::npos) << seen[0].line();
  EXPECT_NE(seen[0].line().find("left"), std::string::npos) << seen[0].line();
  seen.clear();
  rt::VerifyReport rep = ref.check(*m);
  EXPECT_TRUE(rep.pass);
  EXPECT_EQ(rep.seeds, 4);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_STREQ(seen[0].phase, "check");
  EXPECT_FALSE(ref.over_budget());
  EXPECT_TRUE(ref.budget_notes().empty());
}

TEST(VerifyBudget, ModelOverBudgetRunsOneSeedAndSaysSo) {
  auto m = small_model();
  rt::VerifyOptions o;
  o.seeds = 5;
  o.budget_seconds = 1e-12;  // no run is that fast
  rt::Reference ref(*m, o, /*keep_runs=*/true);
  EXPECT_TRUE(ref.over_budget());
  EXPECT_EQ(ref.options().seeds, 1);
  ASSERT_EQ(ref.budget_notes().size(), 1u);
  EXPECT_NE(ref.budget_notes()[0].find("cannot be verified within"), std::string::npos) << ref.budget_notes()[0];
  rt::VerifyReport rep = ref.check(*m);
  EXPECT_EQ(rep.seeds, 1);
  EXPECT_TRUE(rep.over_budget);
  EXPECT_TRUE(rep.pass);
}

// Without kept runs (the verify command), the budget applies to check() itself.
TEST(VerifyBudget, BudgetAppliesToUnkeptChecks) {
  auto m = small_model();
  rt::VerifyOptions o;
  o.seeds = 3;
  o.budget_seconds = 1e-12;
  rt::VerifyReport rep = rt::verify(*m, *m, o);
  EXPECT_EQ(rep.seeds, 1);
  EXPECT_TRUE(rep.over_budget);
  o.budget_seconds = 1e6;
  rep = rt::verify(*m, *m, o);
  EXPECT_EQ(rep.seeds, 3);
  EXPECT_FALSE(rep.over_budget);
}
