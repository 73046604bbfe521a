// Float16 models (the zoo through tools/models/to_fp16.py: onnxconverter-common's keep_io_types
// form, float16 initializers, a Cast after each float32 input and before each output) through
// `optimize --target-opset 23`: every block the float32 export fuses fuses in float16 too — QKV
// projections on float16 weights, rotary embeddings with constant float16 cache tables (a
// static-shape Llama, where fold_constants turns the in-graph cos/sin into tables) — so the fused
// float16 model is the fused float32 model plus the keep_io_types Casts, op for op. The census
// shows every block fusable and none missed, verification passes in float16 ulps (the project's
// rule for such models, runtime/verify.cpp), and ONNX Runtime 1.30 loads the fused model and
// agrees with the original.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "analysis/shapes.h"
#include "api/engine.h"
#include "attention_fixture.h"
#include "fp16_fixture.h"
#include "io/model_io.h"
#include "passes/driver.h"
#include "passes/upgrade_opset.h"

namespace onnxforge::test {
namespace {

struct Fp16Case {
  const char* name;
  std::map<std::string, int64_t> dims;  // fixed symbolic dims (--dim); empty: dynamic
  uint32_t nodes;                       // after optimize --target-opset 23
  int attention, rotary, qkv;           // blocks fused
  int io_casts;                         // keep_io_types Casts (float32 inputs and outputs)
};

// Node counts as measured: each the float32 count plus the keep_io_types Casts. A QKV fusion
// that takes float32 weights only, or a float16 cache table left a Miss, shows as bert_small 60,
// llama_small 72, whisper 43, static llama 84.
const Fp16Case kCases[] = {
    {"bert_small", {}, 54, 2, 0, 2, 2},
    {"distilbert_small", {}, 44, 2, 0, 2, 1},
    {"gpt2_small_cfg", {}, 49, 2, 0, 0, 1},  // c_attn is one Conv1D already: no QKV block
    {"vit_small", {}, 50, 2, 0, 0, 2},       // nn.MultiheadAttention's packed in_proj: no QKV block
    {"whisper_small_enc", {}, 39, 2, 0, 2, 2},
    {"llama_small", {}, 70, 2, 4, 2, 1},
    // Static shapes: cos/sin fold into constant float16 tables [1, 16, 16].
    {"llama_small", {{"batch", 2}, {"sequence", 16}}, 42, 2, 4, 2, 1},
};

std::string label(const Fp16Case& c) {
  std::string s = c.name;
  for (const auto& [k, v] : c.dims) s += " " + k + "=" + std::to_string(v);
  return s;
}

std::map<std::string, int> histogram(const Graph& g) {
  std::map<std::string, int> h;
  for (NodeId n : g.nodes()) ++h[std::string(str(g.op_type(n)))];
  return h;
}

// Casts reading a graph input or writing a graph output.
int boundary_casts(const Graph& g) {
  int n = 0;
  for (NodeId c : g.nodes()) {
    if (!g.is_op(c, "Cast")) continue;
    const ValueId in = g.input(c, 0), out = g.output(c, 0);
    bool io = false;
    for (ValueId v : g.graph_inputs()) io |= v == in;
    for (ValueId v : g.graph_outputs()) io |= v == out;
    n += io ? 1 : 0;
  }
  return n;
}

api::OptimizeSettings at_23(const Fp16Case& c, bool verify) {
  api::OptimizeSettings s;
  s.target_opset = 23;
  s.dims = c.dims;
  s.verify = verify;
  s.seeds = 3;
  return s;
}

TEST(Float16Zoo, CensusFindsEveryBlockFusableAndNoneMissed) {
  std::vector<std::string> fusions;
  for (const passes::Fusion* f : passes::all_fusions()) fusions.push_back(f->info().name);
  for (const Fp16Case& c : kCases) {
    SCOPED_TRACE(label(c));
    auto m = load_model(fp16_zoo_model(c.name));
    passes::upgrade_opset(*m, 23);
    passes::specialise_dims(*m, c.dims);
    infer_shapes(*m);
    auto rows = census_after_cleanups(*m, fusions);  // every clean-up, no fusion yet
    for (const auto& r : rows) EXPECT_EQ(r.missed_total(), 0) << census_text(rows);
    for (auto [fusion, n] : {std::pair{"fuse_attention", c.attention}, std::pair{"fuse_rotary_embedding", c.rotary},
                             std::pair{"fuse_qkv_projections", c.qkv}}) {
      EXPECT_EQ(census_row(rows, fusion)->found, n) << fusion << "\n" << census_text(rows);
      EXPECT_EQ(census_row(rows, fusion)->fusable_here, n) << fusion << "\n" << census_text(rows);
    }
  }
}

// Optimizes the converted model at opset 23 with verification and checks it against the float32
// export fused the same way: the same ops but for the keep_io_types Casts, the fused blocks, and
// rotary embeddings whose x and caches are in the model's type `low`.
api::OptimizeOutcome expect_fuses_as_float32(const Fp16Case& c, const std::filesystem::path& path, DType low) {
  api::OptimizeOutcome out = api::optimize(path, at_23(c, true));
  if (!out.model) {
    ADD_FAILURE() << "optimize failed";
    return out;
  }
  // Verification: every output within 8 ulps of its scale in `low` (class 1 on such a model).
  EXPECT_TRUE(out.verified);
  EXPECT_TRUE(out.ok()) << "max_diff " << out.verification.max_diff << " " << out.verification.error
                        << " breaking pass " << out.breaking_pass;
  const Graph& g = out.model->main();
  EXPECT_EQ(g.node_count(), c.nodes);
  EXPECT_EQ(count_op(g, "Attention"), size_t(c.attention));
  EXPECT_EQ(count_op(g, "RotaryEmbedding"), size_t(c.rotary));
  EXPECT_EQ(count_op(g, "Neg") + count_op(g, "Softmax") + count_op(g, "ReduceMean"), 0u);
  for (NodeId n : g.nodes()) {
    if (!g.is_op(n, "RotaryEmbedding")) continue;
    for (size_t i : {0, 1, 2}) EXPECT_EQ(g.dtype(g.input(n, i)), low);
  }
  api::OptimizeOutcome f32 = api::optimize(zoo_model(c.name), at_23(c, false));
  auto h16 = histogram(g), h32 = histogram(f32.model->main());
  EXPECT_EQ(boundary_casts(g), c.io_casts);
  h16["Cast"] -= c.io_casts;
  h32["Cast"] += 0;  // (the key, where the float32 export has no Cast)
  EXPECT_EQ(h16, h32);
  EXPECT_EQ(g.node_count(), f32.model->main().node_count() + uint32_t(c.io_casts));
  return out;
}

TEST(Float16Zoo, FusesAsTheFloat32ExportAndVerifies) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const Fp16Case& c : kCases) {
    SCOPED_TRACE(label(c));
    const auto path = fp16_zoo_model(c.name);
    api::OptimizeOutcome out = expect_fuses_as_float32(c, path, DType::Float16);
    ASSERT_TRUE(out.model);

    if (ort_peer_installed()) {  // ONNX Runtime 1.30 loads the fused float16 model and agrees
      auto dir = temp_dir("fp16_zoo");
      save_model(*out.model, dir / "fused.onnx");
      std::string dims;
      for (const auto& [k, v] :
           c.dims.empty() ? std::map<std::string, int64_t>{{"batch", 2}, {"sequence", 12}} : c.dims)
        dims += " --dim " + k + "=" + std::to_string(v);
      const std::string cmd = "cd '" ONNXFORGE_SOURCE_DIR "' && /usr/bin/python3 tests/passes/ort_agree.py '" +
                              path.string() + "' '" + (dir / "fused.onnx").string() + "'" + dims +
                              " --pad 3 --float16 > '" + (dir / "ort.json").string() + "' 2>&1";
      const int rc = std::system(cmd.c_str());
      std::ifstream in(dir / "ort.json");
      EXPECT_EQ(rc, 0) << std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
}

// bfloat16 (to_fp16.py --bfloat16: the same keep_io_types form in bfloat16, as mixed-precision
// LLM exports write it): the same fusions as the float32 export, verified in bfloat16 ulps.
TEST(Bfloat16Zoo, FusesAsTheFloat32ExportAndVerifies) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const Fp16Case& c : {kCases[0], kCases[5], kCases[6]}) {  // bert_small, llama_small (dynamic, static)
    SCOPED_TRACE(label(c));
    expect_fuses_as_float32(c, fp16_zoo_model(c.name, "", true), DType::BFloat16);
  }
}

}  // namespace
}  // namespace onnxforge::test
