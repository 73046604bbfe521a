// Differential fuzzing: random valid graphs (tools/fuzz/random_graph.h); every pass alone and
// the whole pipeline on each; outputs compared through the runtime within the pass's class
// tolerance; the optimized model must also survive save + load. Seeded and reproducible:
//   ONNXFORGE_FUZZ_GRAPHS=N ONNXFORGE_FUZZ_SEED=S ./test_passes --gtest_filter='Fuzz*'
// (tools/fuzz/soak.sh runs many more).
#include <gtest/gtest.h>

#include <cstdlib>

#include "io/model_io.h"
#include "numeric.h"
#include "tests/common/models.h"
#include "tools/fuzz/random_graph.h"

namespace onnxforge::test {
namespace {

uint64_t env(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(Fuzz, EveryPassPreservesOutputsOnRandomGraphs) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const uint64_t graphs = env("ONNXFORGE_FUZZ_GRAPHS", 1000), first = env("ONNXFORGE_FUZZ_SEED", 1);
  auto dir = temp_dir("passes_fuzz");
  size_t failures = 0, changed = 0;
  std::vector<std::vector<std::string>> runs;
  for (const passes::Pass* p : passes::all_passes()) runs.push_back({p->name()});
  runs.push_back({});  // the whole pipeline
  for (uint64_t seed = first; seed < first + graphs && failures < 5; ++seed) {
    auto original = fuzz::RandomGraph(seed).build();
    passes::Reference ref(*original, passes::VerifyOptions{1, {}});
    for (const auto& names : runs) {
      auto model = fuzz::RandomGraph(seed).build();
      passes::RunResult r;
      std::string what = names.empty() ? "pipeline" : names[0];
      try {
        r = optimize(*model, names);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "seed " << seed << " " << what << ": " << e.what();
        ++failures;
        continue;
      }
      if (r.after.nodes != r.before.nodes) ++changed;
      auto v = ref.check(*model, passes::tolerance_of(r.worst));
      if (!v.ok) {
        ADD_FAILURE() << "seed " << seed << " " << what << ": max_diff " << v.max_diff << " " << v.error;
        ++failures;
      }
      if (names.empty()) {
        try {
          save_model(*model, dir / "fuzz.onnx");
          auto back = load_model(dir / "fuzz.onnx");
          std::filesystem::remove(dir / "fuzz.onnx");
        } catch (const std::exception& e) {
          ADD_FAILURE() << "seed " << seed << " pipeline result does not save/load: " << e.what();
          ++failures;
        }
      }
    }
  }
  EXPECT_GT(changed, graphs);  // the generator gives the passes work
}

}  // namespace
}  // namespace onnxforge::test
