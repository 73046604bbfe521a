// The zoo's function exports (bert_small_fn, llama_small_fn: torch's export_modules_as_functions,
// the flat twins' weights) against their flat twins: the runtime runs them bit for bit as the
// flat models, `optimize --inline-functions` writes the flat twin's optimized node count (also
// at --target-opset 24, with every fusion), and without it the passes work inside the function
// bodies (fusions there at opset 24), the census counting each body once per call. ONNX Runtime
// 1.30 loads every output and agrees with the flat original.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "api/engine.h"
#include "io/model_io.h"
#include "ir/inline_functions.h"
#include "analysis/shapes.h"
#include "passes/fusion.h"
#include "passes/verification.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"
#include "tests/passes/optimize.h"

namespace onnxforge::test {
namespace {

namespace fs = std::filesystem;

struct Twin {
  const char* fn;
  const char* flat;
};
const Twin kTwins[] = {{"bert_small_fn", "bert_small"}, {"llama_small_fn", "llama_small"}};

api::OptimizeSettings settings(bool inline_functions, std::optional<int64_t> opset = {}) {
  api::OptimizeSettings s;
  s.inline_functions = inline_functions;
  s.target_opset = opset;
  s.seeds = 2;
  return s;
}

int64_t all_nodes(const Model& m) {
  int64_t n = 0;
  for (size_t gi = 0; gi < m.graph_count(); ++gi)
    if (const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi))); !g.detached()) n += g.node_count();
  return n;
}

int64_t function_nodes(const Model& m) {
  int64_t n = 0;
  for (const Function& f : m.functions) n += m.graph(f.body).node_count();
  return n;
}

// ORT 1.30 on `written` agrees with ORT on the flat original (tests/passes/ort_agree.py).
void expect_ort_agrees(const Twin& t, const fs::path& written) {
  if (!ort_peer_installed()) return;
  const fs::path log = written.parent_path() / "ort.json";
  const std::string cmd = "cd '" ONNXFORGE_SOURCE_DIR "' && /usr/bin/python3 tests/passes/ort_agree.py '" +
                          zoo_model(t.flat).string() + "' '" + written.string() +
                          "' --dim batch=2 --dim sequence=12 --pad 3 > '" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  EXPECT_EQ(rc, 0) << written << ": " << std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FunctionsZoo, RunLikeTheirFlatTwinsBitForBit) {
  for (const Twin& t : kTwins) {
    SCOPED_TRACE(t.fn);
    auto fn = load_model(zoo_model(t.fn));
    ASSERT_FALSE(fn->functions.empty());
    ASSERT_TRUE(calls_functions(*fn));
    auto flat = load_model(zoo_model(t.flat));
    passes::Reference ref(*flat, passes::VerifyOptions{3, {}});
    const passes::VerifyResult v = ref.check(*fn, passes::Tolerance{0, 0});
    EXPECT_TRUE(v.ok) << v.error;
    EXPECT_EQ(v.max_diff, 0.0);
  }
}

TEST(FunctionsZoo, InlineFunctionsGivesTheFlatTwinsOptimizedModel) {
  for (const Twin& t : kTwins) {
    for (std::optional<int64_t> opset : {std::optional<int64_t>{}, std::optional<int64_t>{24}}) {
      SCOPED_TRACE(std::string(t.fn) + " opset " + (opset ? std::to_string(*opset) : "as exported"));
      api::OptimizeOutcome flat = api::optimize(zoo_model(t.flat), settings(false, opset));
      api::OptimizeOutcome fn = api::optimize(zoo_model(t.fn), settings(true, opset));
      ASSERT_TRUE(flat.ok() && fn.ok()) << fn.verification.error;
      EXPECT_TRUE(fn.verified);
      EXPECT_TRUE(fn.model->functions.empty());
      EXPECT_EQ(fn.model->opset("hf_models"), 0);
      EXPECT_GT(fn.report["inline_functions"]["calls"].get<int>(), 0);
      // Same nodes as the flat twin's output (the _fn export is at opset 15, the flat at 14:
      // neither's passes leave anything the opsets tell apart).
      EXPECT_EQ(fn.model->main().node_count(), flat.model->main().node_count());
      EXPECT_EQ(all_nodes(*fn.model), all_nodes(*flat.model));
      const fs::path out = temp_dir("fn_zoo_inline") / "inlined.onnx";
      api::write_optimized(fn, out, false);
      expect_ort_agrees(t, out);
    }
  }
}

TEST(FunctionsZoo, PassesWorkInsideFunctionBodies) {
  for (const Twin& t : kTwins) {
    SCOPED_TRACE(t.fn);
    auto original = load_model(zoo_model(t.fn));
    const int64_t body_nodes = function_nodes(*original);
    api::OptimizeOutcome o = api::optimize(zoo_model(t.fn), settings(false));
    ASSERT_TRUE(o.ok()) << o.verification.error;
    EXPECT_EQ(o.model->functions.size(), original->functions.size());
    EXPECT_LT(function_nodes(*o.model), body_nodes);  // cleanups ran in the bodies
    for (const Function& f : o.model->functions)      // a FunctionProto has no initializers
      EXPECT_TRUE(o.model->graph(f.body).initializers().empty()) << str(f.name);
    // At opset 24 the fusions run inside the bodies: a body holds its layer's Attention.
    api::OptimizeOutcome o24 = api::optimize(zoo_model(t.fn), settings(false, 24));
    ASSERT_TRUE(o24.ok()) << o24.verification.error;
    int64_t attention_in_bodies = 0;
    for (const Function& f : o24.model->functions) {
      const Graph& b = o24.model->graph(f.body);
      for (NodeId n : b.nodes()) attention_in_bodies += b.is_op(n, "Attention");
    }
    EXPECT_EQ(attention_in_bodies, 2);  // one per layer: torch wrote one attention function per layer
    for (api::OptimizeOutcome* r : {&o, &o24}) {
      const fs::path out = temp_dir("fn_zoo_bodies") / "bodies.onnx";
      api::write_optimized(*r, out, false);
      auto back = load_model(out);
      EXPECT_EQ(back->functions.size(), original->functions.size());
      expect_ort_agrees(t, out);
    }
  }
}

TEST(FunctionsZoo, CensusCountsBodiesOncePerCall) {
  for (const Twin& t : kTwins) {
    SCOPED_TRACE(t.fn);
    auto fn = load_model(zoo_model(t.fn));
    auto flat = load_model(zoo_model(t.flat));
    infer_shapes(*fn);
    infer_shapes(*flat);
    const auto a = passes::fusion_census(*fn, {});
    const auto b = passes::fusion_census(*flat, {});
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE(a[i].op);
      // Found as often as in the flat export (BERT's BertOutput body, called by both layers,
      // counts its LayerNorm twice).
      if (a[i].op == "MatMul") {
        // The QKV projections' weights are formal inputs of the attention function: not
        // constants, so the block is not even a candidate there (inline to fuse it).
        EXPECT_EQ(a[i].found, 0);
        continue;
      }
      EXPECT_EQ(a[i].found, b[i].found);
      if (a[i].op == "RotaryEmbedding" && a[i].found > 0) {
        // The cos/sin caches are computed in the main graph and passed in: not constant there.
        EXPECT_EQ(a[i].missed.at("rotary cache not constant"), a[i].found);
        continue;
      }
      EXPECT_EQ(a[i].fusable_after_upgrade + a[i].fusable_here, b[i].fusable_after_upgrade + b[i].fusable_here);
    }
  }
}

// What the driver does in function bodies, on a hand-built model: F (an Identity before a Relu)
// is cleaned and typed from its two agreeing calls; G (the same with LeakyRelu's alpha a
// reference to the caller's attribute) is left as it is; H, called with [2,3] and [4], keeps
// untyped inputs. The optimized model computes what the original does.
TEST(FunctionBodies, CleanedWhereReadableTypedOnlyWhenCallsAgree) {
  const fs::path p = python_model("fn_bodies", R"PY(
A = onnx.AttributeProto
ops = [h.make_opsetid('', 15)]
f = h.make_function('local', 'F', ['x'], ['z'], [h.make_node('Identity', ['x'], ['y']), h.make_node('Relu', ['y'], ['z'])], ops)
lr = h.make_node('LeakyRelu', ['y'], ['z'])
a = A(); a.name = 'alpha'; a.ref_attr_name = 'a'; a.type = A.FLOAT; lr.attribute.append(a)
g_fn = h.make_function('local', 'G', ['x'], ['z'], [h.make_node('Identity', ['x'], ['y']), lr], ops, ['a'])
hh = h.make_function('local', 'H', ['x'], ['z'], [h.make_node('Relu', ['x'], ['z'])], ops)
nodes = [h.make_node('F', ['x'], ['f1'], domain='local', name='f1'), h.make_node('F', ['f1'], ['f2'], domain='local', name='f2'),
         h.make_node('G', ['f2'], ['g'], domain='local', a=0.5, name='g'),
         h.make_node('H', ['g'], ['h1'], domain='local', name='h1'), h.make_node('H', ['w'], ['h2'], domain='local', name='h2')]
graph = h.make_graph(nodes, 'main', [h.make_tensor_value_info('x', T.FLOAT, [2, 3]), h.make_tensor_value_info('w', T.FLOAT, [4])],
                     [h.make_tensor_value_info('h1', T.FLOAT, [2, 3]), h.make_tensor_value_info('h2', T.FLOAT, [4])])
m = h.make_model(graph, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)], functions=[f, g_fn, hh])
)PY");
  auto original = load_model(p);
  auto m = load_model(p);
  optimize(*m);
  auto body = [&](const char* name) -> const Graph& {
    for (const Function& f : m->functions)
      if (str(f.name) == name) return m->graph(f.body);
    ADD_FAILURE() << "no function " << name;
    return m->main();
  };
  EXPECT_EQ(body("F").node_count(), 1u);  // the Identity went
  EXPECT_EQ(body("G").node_count(), 2u);  // an attribute reference: not read by the passes
  const Graph& F = body("F");
  ASSERT_TRUE(F.has_shape(F.graph_inputs()[0]));
  EXPECT_EQ(F.rank(F.graph_inputs()[0]), 2);
  const Graph& H = body("H");
  EXPECT_FALSE(H.has_shape(H.graph_inputs()[0]));
  EXPECT_FALSE(H.has_shape(H.graph_outputs()[0]));
  rt::Session a(*original), b(*m);
  const std::vector<float> x = {-1, 2, -3, 4, -5, 6}, w = {1, -2, 3, -4};
  auto in = [&] {
    rt::Tensor tx = rt::Tensor::alloc(DType::Float, {2, 3}), tw = rt::Tensor::alloc(DType::Float, {4});
    std::copy(x.begin(), x.end(), tx.ptr<float>());
    std::copy(w.begin(), w.end(), tw.ptr<float>());
    return std::vector<rt::Tensor>{tx, tw};
  };
  auto ya = a.run(in()), yb = b.run(in());
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < ya[k].numel(); ++i) EXPECT_EQ(ya[k].ptr<float>()[i], yb[k].ptr<float>()[i]);
}

}  // namespace
}  // namespace onnxforge::test
