// Decoders with a KV cache as they are deployed (optimum's layout, every length dynamic): the
// zoo's Llama (grouped-query) and GPT-2 (tied LM head) with past. The attention fusion absorbs the
// past Concat into Attention-23's past_key/past_value and present outputs, the model verifies with
// no --dim (sizes from the dim relations), and generation through each model's own cache agrees
// step by step (rt::verify_decode), which a corrupted cache path fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attention_fixture.h"
#include "ir/match.h"
#include "passes/verification.h"
#include "runtime/decode.h"
#include "runtime/kernel.h"

namespace onnxforge::test {
namespace {

struct PastCase {
  const char* name;
  int layers;
};
// Llama (grouped-query), GPT-2 (tied LM head, 3-D from its Split), Phi (parallel blocks, partial
// rotary), Gemma (one key/value head).
const PastCase kPast[] = {
    {"llama_small_past", 2}, {"gpt2_small_past", 2}, {"phi_small_past", 2}, {"gemma_small_past", 2}};

bool have(const char* name) { return std::filesystem::exists(zoo_model(name)); }
bool kernel(const char* op) { return rt::Registry::get().find("", op) != nullptr; }

// Every graph input and output dim that is symbolic in the export is symbolic (same name) after.
void expect_same_interface(const Graph& before, const Graph& after) {
  auto dims = [](const Graph& g, const std::vector<ValueId>& vs) {
    std::vector<std::string> out;
    for (ValueId v : vs) {
      std::string s = std::string(str(g.value_name(v))) + ":";
      if (g.has_shape(v))
        for (const Dim& d : g.shape(v)) s += (d.known() ? std::to_string(d.value) : std::string(str(d.param))) + ",";
      out.push_back(s);
    }
    return out;
  };
  EXPECT_EQ(dims(before, before.graph_inputs()), dims(after, after.graph_inputs()));
  EXPECT_EQ(dims(before, before.graph_outputs()), dims(after, after.graph_outputs()));
}

TEST(AttentionWithPast, ThePastConcatGoesIntoAttention) {
  for (const PastCase& z : kPast) {
    SCOPED_TRACE(z.name);
    if (!have(z.name)) GTEST_SKIP() << "zoo model " << z.name << " not exported";
    auto original = load_model(zoo_model(z.name));
    auto m = zoo_at_23(z.name);
    passes::RunResult r = optimize(*m);
    const Graph& g = m->main();
    EXPECT_EQ(count_op(g, "Attention"), size_t(z.layers));
    EXPECT_EQ(count_op(g, "Softmax"), 0u);
    // No Concat reads a past input: Attention takes the cache and returns the present.
    for (NodeId n : g.nodes()) {
      if (!is(g, n, "Concat")) continue;
      for (ValueId in : g.inputs(n))
        EXPECT_FALSE(g.is_graph_input(in) && str(g.value_name(in)).starts_with("past_key_values."))
            << str(g.node_name(n));
    }
    for (NodeId n : g.nodes()) {
      if (!is(g, n, "Attention")) continue;
      ASSERT_EQ(g.inputs(n).size(), 6u);
      EXPECT_TRUE(g.is_graph_input(g.input(n, 4)));
      EXPECT_TRUE(g.is_graph_input(g.input(n, 5)));
      ASSERT_EQ(g.outputs(n).size(), 3u);
      EXPECT_TRUE(g.is_graph_output(g.output(n, 1)));
      EXPECT_TRUE(g.is_graph_output(g.output(n, 2)));
      // Keys and values reach the op as the projections made them: the head split the export
      // wrote and the merge into the op's 3-D form cancel (fuse_consecutive_reshapes), also with
      // a symbolic batch and sequence.
      for (size_t i : {1, 2})
        EXPECT_FALSE(is(g, g.producer(g.input(n, i)), "Reshape")) << str(g.node_name(n)) << " " << i;
    }
    expect_same_interface(original->main(), g);
    if (ort_peer_installed()) {  // ONNX Runtime 1.30 agrees with the original at a decode and a prefill shape
      auto dir = temp_dir("attention_past");
      save_model(*m, dir / "fused.onnx");
      for (const char* dims : {"--dim sequence=1 --dim past_sequence=127 --dim total_sequence=128",
                               "--dim sequence=16 --dim past_sequence=0 --dim total_sequence=16"}) {
        const std::string cmd = "cd '" ONNXFORGE_SOURCE_DIR "' && /usr/bin/python3 tests/passes/ort_agree.py '" +
                                zoo_model(z.name).string() + "' '" + (dir / "fused.onnx").string() +
                                "' --dim batch=1 " + dims + " > '" + (dir / "ort.json").string() + "' 2>&1";
        const int rc = std::system(cmd.c_str());
        std::ifstream in(dir / "ort.json");
        EXPECT_EQ(rc, 0) << dims << ": " << std::string(std::istreambuf_iterator<char>(in), {});
      }
    }
    if (!kernel("Attention")) continue;
    // Verified with no --dim: total_sequence follows past_sequence + sequence.
    passes::Reference ref(*original, passes::VerifyOptions{2, {}});
    auto v = ref.check(*m, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
    // A decode step (sequence 1 after a past of 127) and a chunked prefill (8 after 5).
    for (auto dims : {std::map<std::string, int64_t>{{"sequence", 1}, {"past_sequence", 127}},
                      std::map<std::string, int64_t>{{"sequence", 8}, {"past_sequence", 5}}}) {
      passes::Reference at(*original, passes::VerifyOptions{1, dims});
      auto va = at.check(*m, passes::tolerance_of(r.worst));
      EXPECT_TRUE(va.ok) << "max_diff " << va.max_diff << " " << va.error;
    }
  }
}

TEST(AttentionWithPast, GenerationThroughEachModelsOwnCacheAgrees) {
  for (const PastCase& z : kPast) {
    SCOPED_TRACE(z.name);
    if (!have(z.name)) GTEST_SKIP() << "zoo model " << z.name << " not exported";
    if (!kernel("Attention")) GTEST_SKIP();
    auto original = load_model(zoo_model(z.name));
    auto m = zoo_at_23(z.name);
    passes::RunResult r = optimize(*m);
    const auto tol = passes::tolerance_of(r.worst);
    rt::DecodeReport d = rt::verify_decode(
        *original, *m, {.steps = 6, .prompt = 5, .seed = 0, .atol = tol.abs, .rtol = tol.rel, .dims = {}});
    EXPECT_TRUE(d.pass) << d.to_text();
    ASSERT_EQ(d.steps.size(), 7u);
    EXPECT_EQ(d.steps[0].past, 0);
    EXPECT_EQ(d.steps[0].sequence, 5);
    EXPECT_EQ(d.steps[6].past, 10);
    EXPECT_EQ(d.layers, size_t(z.layers));
  }
}

// The optimized model with its cache path broken so that a single run cannot tell: each
// Attention reads its past multiplied by 0. Every run with an empty past (a prefill) agrees;
// the first decode step does not.
TEST(AttentionWithPast, ACacheThatIgnoresThePastFailsTheDecodeLoop) {
  const char* name = "llama_small_past";
  if (!have(name)) GTEST_SKIP() << "zoo model " << name << " not exported";
  if (!kernel("Attention")) GTEST_SKIP();
  auto original = load_model(zoo_model(name));
  auto m = zoo_at_23(name);
  optimize(*m);
  Graph& g = m->main();
  const float zero = 0;
  TensorId zt = m->tensors.add_owned(intern("zero"), DType::Float, {},
                                     std::span<const std::byte>(reinterpret_cast<const std::byte*>(&zero), 4));
  ValueId z = g.add_value(intern("zero"));
  g.set_initializer(z, zt);
  std::vector<NodeId> attentions;
  for (NodeId n : g.nodes())
    if (is(g, n, "Attention")) attentions.push_back(n);
  ASSERT_FALSE(attentions.empty());
  for (NodeId n : attentions) {
    ValueId past = g.input(n, 4);
    ValueId scaled = g.add_value(intern(std::string(str(g.value_name(past))) + "_zeroed"));
    g.add_node(intern("Mul"), Sym{}, intern(std::string(str(g.node_name(n))) + "_zero_past"),
               std::vector<ValueId>{past, z}, std::vector<ValueId>{scaled}, {});
    g.set_input(n, 4, scaled);
  }
  rt::DecodeReport d =
      rt::verify_decode(*original, *m, {.steps = 3, .prompt = 4, .seed = 0, .atol = 1e-4, .rtol = 1e-3, .dims = {}});
  EXPECT_FALSE(d.pass) << d.to_text();
  ASSERT_GE(d.steps.size(), 2u);
  EXPECT_TRUE(d.steps[0].pass) << "the prefill has an empty past: " << d.to_text();
  EXPECT_FALSE(d.steps[1].pass) << d.to_text();
}

TEST(AttentionWithPast, ANoCacheModelIsNamedNotADecoderWithACache) {
  if (!have("llama_small")) GTEST_SKIP();
  auto a = load_model(zoo_model("llama_small"));
  try {
    rt::verify_decode(*a, *a, {});
    FAIL() << "no error";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("past_key_values"), std::string::npos) << e.what(); }
}

// Every zoo LLM verifies at a decode shape, sequence 1 (a one-row MatMul whose same-shape residual
// is also a bias row once failed: "MatMul output overlaps its bias").
TEST(AttentionWithPast, EveryZooLlmVerifiesAtSequenceOne) {
  for (const char* name : {"llama_small", "gpt2_small_cfg", "gpt2_small_lm", "phi_small", "gemma_small",
                           "llama_small_past", "gpt2_small_past", "phi_small_past", "gemma_small_past"}) {
    SCOPED_TRACE(name);
    if (!have(name)) continue;
    if (!kernel("Attention") || !kernel("RotaryEmbedding")) GTEST_SKIP();
    auto original = load_model(zoo_model(name));
    auto m = zoo_at_23(name);
    passes::RunResult r = optimize(*m);
    passes::Reference ref(*original, passes::VerifyOptions{2, {{"sequence", 1}}});
    auto v = ref.check(*m, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
}

// The audit's census counts every attention block of a cache export as found and fusable here
// (none missed), and its rotary blocks, as it does for the exports without a cache.
TEST(AttentionWithPast, CensusFindsEveryBlockAndMissesNone) {
  struct Case {
    const char* name;
    int attention, rotary;
  };
  for (const Case& z : {Case{"llama_small_past", 2, 4}, Case{"gpt2_small_past", 2, 0}, Case{"phi_small_past", 2, 4},
                        Case{"gemma_small_past", 2, 4}}) {
    SCOPED_TRACE(z.name);
    if (!have(z.name)) continue;
    auto m = zoo_at_23(z.name);
    auto rows = census_after_cleanups(*m, {"fuse_attention", "fuse_rotary_embedding"});
    const auto* a = census_row(rows, "fuse_attention");
    const auto* r = census_row(rows, "fuse_rotary_embedding");
    ASSERT_TRUE(a && r) << census_text(rows);
    EXPECT_EQ(a->found, z.attention) << census_text(rows);
    EXPECT_EQ(a->fusable_here, z.attention) << census_text(rows);
    EXPECT_TRUE(a->missed.empty()) << census_text(rows);
    EXPECT_EQ(r->found, z.rotary) << census_text(rows);
    EXPECT_EQ(r->fusable_here, z.rotary) << census_text(rows);
  }
}

}  // namespace
}  // namespace onnxforge::test
