// No growth (issue 25): fold_constants' folded copy of a constant that stays read elsewhere counts
// in full against --fold-size, a Transpose read as MatMul's B is never copied while its source
// stays read (tied embeddings stay one tensor), and the report names the passes that made an
// output larger.
#include <gtest/gtest.h>

#include <filesystem>

#include "numeric.h"
#include "passes/pipeline.h"

namespace onnxforge::test {
namespace {

std::vector<float> ramp(size_t n, float scale = 1e-3f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int64_t>(i % 97) - 48);
  return v;
}

// GPT-2's tied LM head: the embedding Gather and the head's MatMul(h, Transpose(wte)) read one
// [vocab, hidden] table. `gather`: whether the Gather reads it (false: only the Transpose does,
// as an untied lm_head). `scale`: a Mul between the Transpose and the MatMul (a folded chain).
MakeModel tied_head(int64_t vocab, int64_t hidden, bool gather, bool scale = false) {
  return [=] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 3, hidden});
    ValueId w = b.f32("wte", {vocab, hidden}, ramp(static_cast<size_t>(vocab * hidden)));
    ValueId h = x;
    if (gather) h = b.node("Add", {b.node("Gather", {w, b.input("ids", {2, 3}, DType::Int64)}), x});
    ValueId wt = b.node("Transpose", {w}, {NewAttr::Ints("perm", {1, 0})});
    if (scale) wt = b.node("Mul", {wt, b.f32("two", {}, {2.0f})});
    b.output(b.node("MatMul", {h, wt}));
    return std::move(b.m);
  };
}

int64_t initializer_bytes(const Model& m) { return passes::measure(m).stored_bytes(); }

const std::vector<std::string> kFold = {"fold_constants", "eliminate_dead_nodes", "eliminate_unused_initializers"};

// Folds (checked against the original through the runtime) and expects `transposes` Transposes
// left, one initializer and the stored bytes unchanged.
void fold_expecting(const MakeModel& make, size_t transposes) {
  const int64_t before = initializer_bytes(*make());
  auto m = optimize_and_check(make, kFold);
  EXPECT_EQ(count_op(m->main(), "Transpose"), transposes);
  EXPECT_EQ(m->main().initializers().size(), 1u);
  EXPECT_EQ(initializer_bytes(*m), before);
}

TEST(NoGrowth, TiedEmbeddingStaysOneTensor) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  // 512 x 1024 floats: 2 MiB, over the 1 MiB --fold-size, so an allowance of max(inputs,
  // fold-size) alone would let the 2 MiB copy through.
  auto make = tied_head(512, 1024, true);
  fold_expecting(make, 1);
  // Also under a --fold-size above the table: a Transpose read as MatMul's B is packed by the
  // runtime from the initializer, a copy gains nothing.
  auto big = make();
  const int64_t before = initializer_bytes(*big);
  optimize(*big, {"fold_constants", "eliminate_dead_nodes"}, uint64_t{64} << 20);
  EXPECT_EQ(count_op(big->main(), "Transpose"), 1u);
  EXPECT_EQ(initializer_bytes(*big), before);
}

TEST(NoGrowth, EveryPassTogetherKeepsTheTiedTableSingle) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  auto make = tied_head(512, 1024, true);
  const int64_t before = initializer_bytes(*make());
  auto m = optimize_and_check(make);
  EXPECT_LE(initializer_bytes(*m), before);
}

TEST(NoGrowth, SourceReadOnlyByTheTransposeStillFolds) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  // An untied head: wte dies with the fold, the transposed table replaces it (same bytes).
  fold_expecting(tied_head(512, 1024, false), 0);
}

TEST(NoGrowth, ChainFromALiveSourceIsNotMaterialised) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  // Transpose -> Mul folds as one chain; its result (2 MiB) would sit beside the table the
  // Gather still reads. Dropping the Mul's fold would leave the Transpose's result read outside
  // the folded set: it is not materialised either (the fixpoint).
  auto make = tied_head(512, 1024, true, true);
  const int64_t before = initializer_bytes(*make());
  auto m = optimize_and_check(make, kFold);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 1u);
  EXPECT_EQ(count_op(m->main(), "Mul"), 1u);
  EXPECT_LE(initializer_bytes(*m), before + 64);  // the scalar only
  // Without the Gather the chain folds: the table dies, its scaled transpose replaces it.
  auto untied = optimize_and_check(tied_head(512, 1024, false, true), kFold);
  EXPECT_EQ(count_op(untied->main(), "Transpose") + count_op(untied->main(), "Mul"), 0u);
}

TEST(NoGrowth, SmallCopyOfALiveSourceFoldsWithinFoldSize) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  // 16 x 8 table read by a Gather and by Transpose -> Mul: the 512-byte copy is within
  // --fold-size (1 MiB) and folds; read as MatMul's B directly it would not (packed_operand).
  auto make = tied_head(16, 8, true, true);
  auto m = optimize_and_check(make, kFold);
  EXPECT_EQ(count_op(m->main(), "Transpose") + count_op(m->main(), "Mul"), 0u);
  EXPECT_EQ(m->main().initializers().size(), 2u);  // the table (Gather) and the folded copy
  // Under --fold-size 256 the copy counts in full and is over it.
  auto tight = tied_head(16, 8, true, true)();
  optimize(*tight, {"fold_constants", "eliminate_dead_nodes"}, 256);
  EXPECT_EQ(count_op(tight->main(), "Mul"), 1u);
}

// GPT-2 with its tied LM head (the zoo export, TorchScript's MatMul(h, Transpose(wte))):
// optimized at opset 23 it is no larger than the export and still agrees with it.
TEST(NoGrowth, Gpt2WithLmHeadIsNoLargerOptimized) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"gpt2_small_lm", "gpt2_small_past", "gemma_small", "llama_small", "phi_small"}) {
    SCOPED_TRACE(name);
    const auto path = zoo_model(name);
    auto original = load_model(path);
    auto m = load_model(path);
    const int64_t before = initializer_bytes(*m);
    passes::upgrade_opset(*m, 23);
    const passes::RunResult r = optimize(*m);
    EXPECT_LE(r.after.stored_bytes(), before) << passes::growth_note(r);
    EXPECT_EQ(passes::growth_note(r), "");
    if (std::string(name).find("_past") != std::string::npos) continue;  // verified in the zoo tests (--dim)
    passes::Reference ref(*original, passes::VerifyOptions{1, {}});
    const passes::VerifyResult v = ref.check(*m, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
}

TEST(NoGrowth, ReportNamesThePassThatMadeTheOutputLarger) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  // ConstantOfShape([1024, 1024]) folds into 4 MiB under --fold-size 8M: a real growth.
  GraphBuilder b;
  ValueId x = b.input("x", {1024, 1024});
  b.output(b.node("Add", {x, b.node("ConstantOfShape", {b.i64("shape", {1024, 1024})})}));
  const passes::RunResult r = optimize(*b.m, kFold, uint64_t{8} << 20);
  ASSERT_GT(r.after.stored_bytes(), r.before.stored_bytes());
  EXPECT_EQ(
      passes::growth_note(r),
      "the output stores 4.00 MiB more than the input: fold_constants +4.00 MiB, eliminate_unused_initializers -16 B");
  const nlohmann::json j = passes::stats_json(r);
  ASSERT_TRUE(j.contains("growth"));
  EXPECT_EQ(j["growth"]["bytes"], r.after.stored_bytes() - r.before.stored_bytes());
  EXPECT_EQ(j["growth"]["passes"][0]["name"], "fold_constants");
  // Not larger: no note, no "growth".
  auto t = tied_head(512, 1024, true)();
  const passes::RunResult same = optimize(*t);
  EXPECT_EQ(passes::growth_note(same), "");
  EXPECT_FALSE(passes::stats_json(same).contains("growth"));
}

}  // namespace
}  // namespace onnxforge::test
