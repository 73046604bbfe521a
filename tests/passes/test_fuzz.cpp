// Differential fuzzing: random valid graphs (tools/fuzz/random_graph.h); every pass alone and
// the whole pipeline on each; outputs compared through the runtime within the pass's class
// tolerance; the optimized model must also survive save + load. Seeded and reproducible:
//   ONNXFORGE_FUZZ_GRAPHS=N ONNXFORGE_FUZZ_SEED=S [ONNXFORGE_FUZZ_DUMP=DIR] ./test_passes --gtest_filter='Fuzz*'
// (tools/fuzz/soak.sh runs many more).
#include <gtest/gtest.h>

#include <cstdlib>

#include "io/model_io.h"
#include "numeric.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"
#include "tools/fuzz/random_graph.h"

namespace onnxforge::test {
namespace {

uint64_t env(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// ONNXFORGE_FUZZ_DUMP=DIR keeps a failing seed's graph (and what a pass made of it) as .onnx files.
void dump(const Model& m, uint64_t seed, const std::string& what) {
  const char* dir = std::getenv("ONNXFORGE_FUZZ_DUMP");
  if (dir == nullptr) return;
  std::filesystem::create_directories(dir);
  save_model(m, std::filesystem::path(dir) / ("seed" + std::to_string(seed) + "_" + what + ".onnx"));
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
        dump(*original, seed, "original");
        dump(*model, seed, what);
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

// The runtime's channels-last plans against its plain NCHW plans on the same random graphs: conv
// stems start chains through BatchNormalization, pools, broadcasting elementwise ops and
// squeeze-excitation products, ended by reshapes, transposes, MatMuls, fan-out and graph outputs
// in the middle. Only summation order may differ: |plain - fast| <= 1e-5 * max(1, max|plain|).
TEST(Fuzz, ChannelsLastPlansMatchThePlainPlanOnRandomGraphs) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  const uint64_t graphs = env("ONNXFORGE_FUZZ_GRAPHS", 1000), first = env("ONNXFORGE_FUZZ_SEED", 1);
  size_t failures = 0, with_chains = 0;
  for (uint64_t seed = first; seed < first + graphs && failures < 5; ++seed) {
    auto model = fuzz::RandomGraph(seed).build();
    rt::Session fast(*model), plain(*model, rt::comparison_options());
    if (fast.channels_last_count() == 0) continue;
    ++with_chains;
    auto inputs = rt::make_inputs(rt::plan_inputs(model->main(), fast.input_values(), {}), seed);
    auto a = plain.run(inputs), b = fast.run(inputs);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].shape, b[i].shape) << "seed " << seed;
      ASSERT_FALSE(b[i].nhwc) << "seed " << seed << ": outputs are returned in NCHW";
      const float *pa = a[i].ptr<float>(), *pb = b[i].ptr<float>();
      float scale = 1;  // rounding grows with the tensor's magnitude, not each element's (cancellation)
      for (int64_t j = 0; j < a[i].numel(); ++j) scale = std::max(scale, std::abs(pa[j]));
      for (int64_t j = 0; j < a[i].numel(); ++j)
        if (!(std::abs(pa[j] - pb[j]) <= 1e-5f * scale)) {
          ADD_FAILURE() << "seed " << seed << " output " << i << " element " << j << ": " << pa[j] << " vs " << pb[j];
          ++failures;
          dump(*model, seed, "layout");
          break;
        }
    }
  }
  EXPECT_GT(with_chains, graphs / 20);  // the generator gives the layout work (1 graph in 12)
}

}  // namespace
}  // namespace onnxforge::test
