// Model-local functions (ir/inline_functions.h) on hand-built graphs: attribute references bound
// to the caller's attribute or the function's default (attribute_proto) or left out, nested
// calls, a function used twice, a call in an If branch and an If in a function body (its
// captures and a reference inside it), a formal input returned as an output, an omitted optional
// output, opset imports, recursion built in memory, and the runtime running such a model (on
// its own expanded copy) as the expanded model runs, and as ONNX Runtime 1.30 runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "io/model_io.h"
#include "ir/error.h"
#include "ir/inline_functions.h"
#include "passes/inline.h"
#include "runtime/runtime.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"
#include "tests/runtime/ort_run.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
namespace fs = std::filesystem;

namespace {

// Functions of domain "local" (opset 15 like the model):
//   Scale(x; alpha)        = x * Constant(value_float=@alpha)
//   Act(x; slope=0.25)     = LeakyRelu(x, alpha=@slope)         (default in attribute_proto)
//   Block(x, b; alpha)     = (Act(Scale(x; alpha=@alpha) + b), x)  nested calls; x returned as is
//   Branchy(x, c; alpha)   = If(c, then: x * Constant(@alpha), else: -x)  an If in a body
// main: (y1, xc) = Block(x, b; 2), (y2, -) = Block(y1, b; -1.5), y3 = Act(y2; slope 0.5),
//       y4 = Branchy(y3, c; 3), z = If(c, then: Scale(y4; 10), else: Identity(y4))
const char* kModel = R"PY(
A = onnx.AttributeProto
def ref(node, name, ref_name, typ):
    a = A(); a.name = name; a.ref_attr_name = ref_name; a.type = typ; node.attribute.append(a); return node
def fn(name, ins, outs, nodes, attrs, defaults=()):
    f = h.make_function('local', name, ins, outs, nodes, [h.make_opsetid('', 15), h.make_opsetid('local', 1)], attrs)
    raw = f.SerializeToString()
    for d in defaults:  # attribute_proto (field 11, IR 9): onnx 1.12 has no field for it, so as raw bytes
        b = d.SerializeToString()
        raw += bytes([0x5a]) + bytes([len(b)]) + b
    g = onnx.FunctionProto(); g.ParseFromString(raw); return g
scale = fn('Scale', ['x'], ['y'], [ref(h.make_node('Constant', [], ['k']), 'value_float', 'alpha', A.FLOAT),
                                   h.make_node('Mul', ['x', 'k'], ['y'])], ['alpha'])
act = fn('Act', ['x'], ['y'], [ref(h.make_node('LeakyRelu', ['x'], ['y']), 'alpha', 'slope', A.FLOAT)], ['slope'],
         [h.make_attribute('slope', 0.25)])
block = fn('Block', ['x', 'b'], ['y', 'x'],
           [ref(h.make_node('Scale', ['x'], ['s'], domain='local'), 'alpha', 'alpha', A.FLOAT),
            h.make_node('Add', ['s', 'b'], ['t']), h.make_node('Act', ['t'], ['y'], domain='local')], ['alpha'])
then_b = h.make_graph([ref(h.make_node('Constant', [], ['k2']), 'value_float', 'alpha', A.FLOAT),
                       h.make_node('Mul', ['x', 'k2'], ['tt'])], 'then', [], [h.make_tensor_value_info('tt', T.FLOAT, None)])
else_b = h.make_graph([h.make_node('Neg', ['x'], ['ee'])], 'else', [], [h.make_tensor_value_info('ee', T.FLOAT, None)])
branchy = fn('Branchy', ['x', 'c'], ['y'], [h.make_node('If', ['c'], ['y'], then_branch=then_b, else_branch=else_b)],
             ['alpha'])
main_then = h.make_graph([h.make_node('Scale', ['y4'], ['zt'], domain='local', alpha=10.0, name='scale_in_if')],
                         'main_then', [], [h.make_tensor_value_info('zt', T.FLOAT, None)])
main_else = h.make_graph([h.make_node('Identity', ['y4'], ['ze'])], 'main_else', [],
                         [h.make_tensor_value_info('ze', T.FLOAT, None)])
nodes = [h.make_node('Block', ['x', 'b'], ['y1', 'xc'], domain='local', alpha=2.0, name='block1'),
         h.make_node('Block', ['y1', 'b'], ['y2', ''], domain='local', alpha=-1.5, name='block2'),
         h.make_node('Act', ['y2'], ['y3'], domain='local', slope=0.5, name='act'),
         h.make_node('Branchy', ['y3', 'c'], ['y4'], domain='local', alpha=3.0, name='br'),
         h.make_node('If', ['c'], ['z'], then_branch=main_then, else_branch=main_else, name='main_if')]
g = h.make_graph(nodes, 'main', [h.make_tensor_value_info('x', T.FLOAT, [2, 3]), h.make_tensor_value_info('b', T.FLOAT, [3]),
                                 h.make_tensor_value_info('c', T.BOOL, [])],
                 [h.make_tensor_value_info('z', T.FLOAT, [2, 3]), h.make_tensor_value_info('xc', T.FLOAT, [2, 3])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)],
                 functions=[scale, act, block, branchy])
m.ir_version = 9
)PY";

float leaky(float v, float a) { return v < 0 ? v * a : v; }

// z and xc of kModel, computed by hand.
std::vector<float> expected_z(const std::vector<float>& x, const std::vector<float>& b, bool c) {
  std::vector<float> z(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float bb = b[i % 3];
    const float y1 = leaky(x[i] * 2.0f + bb, 0.25f);
    const float y2 = leaky(y1 * -1.5f + bb, 0.25f);
    const float y3 = leaky(y2, 0.5f);
    const float y4 = c ? y3 * 3.0f : -y3;
    z[i] = c ? y4 * 10.0f : y4;
  }
  return z;
}

struct Inputs {
  std::vector<float> x = {0.5f, -1.0f, 2.0f, -0.25f, 1.5f, -3.0f}, b = {0.1f, -0.2f, 0.3f};
  std::vector<rt::Tensor> tensors(bool c) const {
    return {test::make<float>(DType::Float, {2, 3}, x), test::make<float>(DType::Float, {3}, b),
            test::make<uint8_t>(DType::Bool, {}, {c})};
  }
};

size_t count_op(const Model& m, std::string_view op) {
  size_t n = 0;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId k : g.nodes()) n += str(g.op_type(k)) == op;
  }
  return n;
}

const Graph* graph_named(const Model& m, std::string_view name) {
  for (size_t gi = 0; gi < m.graph_count(); ++gi)
    if (const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi))); !g.detached() && str(g.name()) == name) return &g;
  return nullptr;
}

}  // namespace

TEST(InlineFunctions, RuntimeRunsLocalFunctionsOnACopy) {
  auto model = load_model(test::python_model("fn_runtime", kModel));
  const size_t nodes_before = model->main().node_count();
  rt::Session s(*model);
  const Inputs in;
  for (bool c : {true, false}) {
    auto out = s.run(in.tensors(c));
    ASSERT_EQ(out.size(), 2u);
    const auto want = expected_z(in.x, in.b, c);
    const auto got = test::values<float>(out[0]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "c=" << c << " i=" << i;
    EXPECT_EQ(test::values<float>(out[1]), in.x);  // a formal input returned as an output
  }
  // The user's model is as it was: its calls and functions are still there.
  EXPECT_EQ(model->main().node_count(), nodes_before);
  EXPECT_EQ(model->functions.size(), 4u);
  EXPECT_TRUE(calls_functions(*model));
}

TEST(InlineFunctions, ExpandsEveryCallWithAttributesNamesAndOutputs) {
  auto model = load_model(test::python_model("fn_inline", kModel));
  const InlineReport r = inline_functions(*model);
  // block1, block2 (each: Block, Scale, Act), act, br, scale_in_if.
  EXPECT_EQ(r.calls, 9u);
  EXPECT_EQ(r.dropped, 4u);
  EXPECT_TRUE(model->functions.empty());
  EXPECT_FALSE(calls_functions(*model));
  EXPECT_EQ(model->opset("local"), 0);  // no node uses the functions' domain any more
  EXPECT_EQ(model->opset(""), 15);
  const Graph& g = model->main();
  // Graph outputs keep their names and producers; the pass-through output is an Identity's.
  for (const char* name : {"z", "xc"}) {
    auto v = g.find_value(name);
    ASSERT_TRUE(v);
    EXPECT_TRUE(g.is_graph_output(*v));
    EXPECT_TRUE(g.producer(*v).valid()) << name;
  }
  EXPECT_TRUE(g.is_op(g.producer(*g.find_value("xc")), "Identity"));
  // Names: the caller's node name prefixes every inlined node, nested calls chain.
  std::vector<std::string> leaky_names;
  std::vector<float> leaky_alpha;
  for (NodeId n : g.nodes())
    if (g.is_op(n, "LeakyRelu")) {
      leaky_names.emplace_back(str(g.node_name(n)));
      leaky_alpha.push_back(g.attr_float(n, "alpha", -1));
    }
  std::sort(leaky_names.begin(), leaky_names.end());
  ASSERT_EQ(leaky_names.size(), 3u);
  EXPECT_TRUE(leaky_names[0].starts_with("act/")) << leaky_names[0];
  EXPECT_TRUE(leaky_names[1].starts_with("block1/")) << leaky_names[1];
  EXPECT_NE(leaky_names[1].find("/Act_"), std::string::npos) << leaky_names[1];
  EXPECT_TRUE(leaky_names[2].starts_with("block2/")) << leaky_names[2];
  // slope given at the call (0.5), the default (0.25) twice.
  std::sort(leaky_alpha.begin(), leaky_alpha.end());
  EXPECT_EQ(leaky_alpha, (std::vector<float>{0.25f, 0.25f, 0.5f}));
  // No attribute reference survives, in any graph.
  for (size_t gi = 0; gi < model->graph_count(); ++gi) {
    const Graph& sg = model->graph(GraphId(static_cast<uint32_t>(gi)));
    if (sg.detached()) continue;
    for (NodeId n : sg.nodes())
      for (const Attr& a : sg.attrs(n)) EXPECT_TRUE(a.ref_attr_name.empty()) << str(sg.node_name(n));
  }
  // The If from Branchy's body is now in the main graph; its then branch holds the Constant
  // bound to br's alpha (3) and reads the inlined x through a capture.
  const Graph* then_b = graph_named(*model, "then");
  ASSERT_NE(then_b, nullptr);
  EXPECT_EQ(then_b->parent(), g.id());
  bool bound = false;
  for (NodeId n : then_b->nodes())
    if (then_b->is_op(n, "Constant")) bound = then_b->attr_float(n, "value_float", 0) == 3.0f;
  EXPECT_TRUE(bound);
  ASSERT_EQ(then_b->captures().size(), 1u);
  EXPECT_EQ(str(g.value_name(then_b->outer(then_b->captures()[0]))), "y3");
  // Scale in main_if's then branch: expanded inside the branch, alpha 10 bound there.
  const Graph* main_then = graph_named(*model, "main_then");
  ASSERT_NE(main_then, nullptr);
  EXPECT_EQ(count_op(*model, "Scale"), 0u);
  bool ten = false;
  for (NodeId n : main_then->nodes())
    if (main_then->is_op(n, "Constant")) {
      ten = main_then->attr_float(n, "value_float", 0) == 10.0f;
      EXPECT_TRUE(str(main_then->node_name(n)).starts_with("scale_in_if/"));
    }
  EXPECT_TRUE(ten);
  // It runs as the functions did, and survives a save and a load.
  const fs::path out = test::temp_dir("fn_inline_save") / "inlined.onnx";
  save_model(*model, out);
  auto back = load_model(out);
  EXPECT_TRUE(back->functions.empty());
  rt::Session s(*back);
  const Inputs in;
  for (bool c : {true, false}) {
    const auto got = test::values<float>(s.run(in.tensors(c))[0]);
    const auto want = expected_z(in.x, in.b, c);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]);
  }
}

TEST(InlineFunctions, OnnxRuntimeAgreesOnTheInlinedModel) {
  if (!test::ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer not installed (tools/peers/install.sh)";
  const fs::path src = test::python_model("fn_ort", kModel);
  auto model = load_model(src);
  passes::inline_model_functions(*model);
  const fs::path out = src.parent_path() / "inlined.onnx";
  save_model(*model, out);
  const Inputs in;
  for (bool c : {true, false}) {
    auto t = in.tensors(c);
    // Only the inlined model: ORT refuses the original's call with an omitted output ("ONNX
    // Schema Block: failed validating the check: !(it.GetName().empty())"), which ONNX allows.
    for (const fs::path& file : {out}) {
      std::string error;
      auto got = test::ort_run(file, {{"x", t[0]}, {"b", t[1]}, {"c", t[2]}}, &error);
      ASSERT_TRUE(error.empty()) << file << ": " << error;
      const auto z = test::values<float>(got.at("z"));
      const auto want = expected_z(in.x, in.b, c);
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(z[i], want[i], 1e-5) << file << " c=" << c;
      EXPECT_EQ(test::values<float>(got.at("xc")), in.x);
    }
  }
}

TEST(InlineFunctions, AReferenceWithoutValueOrDefaultLeavesTheAttributeOut) {
  auto model = load_model(test::python_model("fn_noattr", R"PY(
A = onnx.AttributeProto
lr = h.make_node('LeakyRelu', ['x'], ['y'])
a = A(); a.name = 'alpha'; a.ref_attr_name = 'slope'; a.type = A.FLOAT; lr.attribute.append(a)
f = h.make_function('local', 'Act', ['x'], ['y'], [lr], [h.make_opsetid('', 15)], ['slope'])
g = h.make_graph([h.make_node('Act', ['x'], ['y'], domain='local', name='a')], 'main',
                 [h.make_tensor_value_info('x', T.FLOAT, [4])], [h.make_tensor_value_info('y', T.FLOAT, [4])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)], functions=[f])
)PY"));
  rt::Session s(*model);  // LeakyRelu's own default alpha, 0.01
  auto y = test::values<float>(s.run({test::make<float>(DType::Float, {4}, {-1.f, 2.f, -100.f, 0.f})})[0]);
  const std::vector<float> want = {-0.01f, 2.f, -1.f, 0.f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6);
  inline_functions(*model);
  const Graph& g = model->main();
  ASSERT_EQ(g.node_count(), 1u);
  EXPECT_EQ(g.attr(g.nodes()[0], "alpha"), nullptr);
}

TEST(InlineFunctions, AnotherOpsetOfTheDefaultDomainIsRefusedNamingBoth) {
  const fs::path p = test::python_model("fn_opset", R"PY(
f = h.make_function('local', 'Sq', ['x'], ['y'], [h.make_node('Mul', ['x', 'x'], ['y'])], [h.make_opsetid('', 13)])
g = h.make_graph([h.make_node('Sq', ['x'], ['y'], domain='local', name='sq')], 'main',
                 [h.make_tensor_value_info('x', T.FLOAT, [4])], [h.make_tensor_value_info('y', T.FLOAT, [4])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)], functions=[f])
)PY");
  auto model = load_model(p);
  try {
    rt::Session s(*model);
    FAIL() << "a function at opset 13 in a model at 15 ran";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("function local::Sq"), std::string::npos) << m;
    EXPECT_NE(m.find("node 'sq'"), std::string::npos) << m;
    EXPECT_NE(m.find("opset 13"), std::string::npos) << m;
    EXPECT_NE(m.find("opset 15"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(e.file(), p.string());
  }
  // optimize --inline-functions raises the function to the model's opset first (upgrade_opset).
  passes::inline_model_functions(*model);
  EXPECT_TRUE(model->functions.empty());
  rt::Session s(*model);
  auto y = s.run({test::make<float>(DType::Float, {4}, {1.f, -2.f, 3.f, 0.5f})});
  EXPECT_EQ(test::values<float>(y[0]), (std::vector<float>{1.f, 4.f, 9.f, 0.25f}));
}

TEST(InlineFunctions, RecursionBuiltInMemoryStopsWithAnError) {
  auto model = load_model(test::python_model("fn_recursive", R"PY(
f = h.make_function('local', 'F', ['x'], ['y'], [h.make_node('Relu', ['x'], ['y'])], [h.make_opsetid('', 15)])
g = h.make_graph([h.make_node('F', ['x'], ['y'], domain='local', name='f')], 'main',
                 [h.make_tensor_value_info('x', T.FLOAT, [4])], [h.make_tensor_value_info('y', T.FLOAT, [4])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)], functions=[f])
)PY"));
  // The reader refuses recursive functions; make F call itself after loading.
  Graph& body = model->graph(model->functions[0].body);
  const NodeId relu = body.nodes()[0];
  const ValueId x = body.input(relu, 0), y = body.output(relu, 0);
  body.kill_node(relu);
  const ValueId t = body.add_value(intern("t"));
  const ValueId in[] = {x}, mid[] = {t}, out[] = {y};
  body.add_node(intern("F"), intern("local"), intern("self"), in, mid);
  body.add_node(intern("Relu"), Sym{}, intern("relu"), mid, out);
  auto copy = model->clone();
  try {
    inline_functions(*copy);
    FAIL() << "a recursive function was expanded";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("recursive"), std::string::npos) << e.what(); }
  EXPECT_THROW(rt::Session{*model}, Error);
}

TEST(InlineFunctions, CloneIsIndependentOfItsSource) {
  auto model = load_model(test::python_model("fn_clone", kModel));
  auto copy = model->clone();
  inline_functions(*copy);
  EXPECT_EQ(model->functions.size(), 4u);
  EXPECT_TRUE(calls_functions(*model));
  EXPECT_EQ(count_op(*model, "Block"), 2u);
  EXPECT_EQ(count_op(*copy, "Block"), 0u);
  EXPECT_EQ(count_op(*model, "LeakyRelu"), 1u);  // in Act's body only
  EXPECT_EQ(count_op(*copy, "LeakyRelu"), 3u);
}
