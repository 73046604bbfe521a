// The decoders of issue 25 in the zoo (tools/models/export_zoo.py): GPT-2 with its tied LM head,
// Phi (parallel attention/MLP, partial rotary, cached rotary tables), Gemma (MQA, head_dim 256,
// (1 + w) RMSNorm, GeGLU, tied head), and the KV-cache exports in optimum's layout. Each one is
// upgraded to opset 23, optimized by every pass and verified against the export through the
// runtime; the cache exports at consistent sizes given as dims (decode: sequence 1 after a past of
// 127; prefill: no past; chunked prefill: 16 after 32).
#include <gtest/gtest.h>

#include "numeric.h"
#include "passes/pipeline.h"

namespace onnxforge::test {
namespace {

struct Optimized {
  passes::RunResult run;
  passes::VerifyResult verify;
  int64_t stored_before = 0;
};

// `dims` fixed in both models (what --dim does), then the original is the reference.
Optimized optimize_verified(const std::string& name, const std::map<std::string, int64_t>& dims = {}) {
  auto original = load_model(zoo_model(name));
  auto model = load_model(zoo_model(name));
  passes::specialise_dims(*original, dims);
  passes::specialise_dims(*model, dims);
  Optimized o;
  o.stored_before = passes::measure(*model).stored_bytes();
  passes::upgrade_opset(*model, 23);
  o.run = optimize(*model);
  passes::Reference ref(*original, passes::VerifyOptions{2, {}});
  o.verify = ref.check(*model, passes::tolerance_of(o.run.worst));
  return o;
}

TEST(LlmZoo, DecodersWithoutCacheOptimizeAndVerifyAtOpset23) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"gpt2_small_lm", "phi_small", "gemma_small"}) {
    SCOPED_TRACE(name);
    const Optimized o = optimize_verified(name);
    EXPECT_TRUE(o.verify.ok) << "max_diff " << o.verify.max_diff << " " << o.verify.error;
    EXPECT_LT(o.run.after.nodes, o.run.before.nodes);
    EXPECT_LE(o.run.after.stored_bytes(), o.stored_before);
  }
}

TEST(LlmZoo, CacheExportsVerifyAtDecodeAndPrefillSizes) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  struct Step {
    int64_t sequence, past;
  };
  for (const char* name : {"llama_small_past", "gpt2_small_past", "phi_small_past", "gemma_small_past"}) {
    for (const Step s : {Step{1, 127}, Step{16, 0}, Step{16, 32}}) {
      SCOPED_TRACE(std::string(name) + " sequence " + std::to_string(s.sequence) + " past " + std::to_string(s.past));
      const Optimized o = optimize_verified(
          name,
          {{"batch", 2}, {"sequence", s.sequence}, {"past_sequence", s.past}, {"total_sequence", s.past + s.sequence}});
      EXPECT_TRUE(o.verify.ok) << "max_diff " << o.verify.max_diff << " " << o.verify.error;
      EXPECT_LT(o.run.after.nodes, o.run.before.nodes);
      // With every dim fixed the causal masks fold into constants ([sequence, total] floats, a
      // few KiB): growth the size guard allows, and the note names it.
      const int64_t grew = o.run.after.stored_bytes() - o.stored_before;
      EXPECT_LE(grew, (s.past + s.sequence) * s.sequence * 4 * 2) << passes::growth_note(o.run);
    }
  }
}

// As deployed (every dim symbolic) the cache exports come out no larger than they went in.
TEST(LlmZoo, CacheExportsWithDynamicAxesAreNoLargerOptimized) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"llama_small_past", "gpt2_small_past", "phi_small_past", "gemma_small_past"}) {
    SCOPED_TRACE(name);
    auto model = load_model(zoo_model(name));
    const int64_t before = passes::measure(*model).stored_bytes();
    passes::upgrade_opset(*model, 23);
    const passes::RunResult r = optimize(*model);
    EXPECT_LE(r.after.stored_bytes(), before) << passes::growth_note(r);
    EXPECT_LT(r.after.nodes, r.before.nodes);
  }
}

}  // namespace
}  // namespace onnxforge::test
