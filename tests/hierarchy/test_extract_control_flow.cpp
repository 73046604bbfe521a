// extract with If/Loop/Scan bodies: the extracted in-memory model is complete (every outer-scope
// read is a capture of the copied outer value, every graph is named), it runs in the reference
// runtime without a save/load round trip, and the saved file passes onnx.checker and runs in
// ONNX Runtime with max_diff 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <sys/wait.h>

#include "hierarchy/extract.h"
#include "api/extract_verify.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

// x -> /pre/Relu -> r, then module `enc`:
//   /enc/If(ReduceSum(x) > 0) { then: Neg(r) ; else: Abs(x) } -> y
//   /enc/Loop(3, true, y) body(i, c, v) { a = v + x ; b = If(i < one) { a * r } else { a } ;
//                                          scan out b * w }  -> yl, scans
//   /enc/Scan(yl, scans) body(st, xi) { st + xi ; xi * r } -> sf, so_all
// then /post/Sigmoid(sf) -> z, /post/Relu(so_all) -> z2.
// The bodies read a main-graph input (x), a value computed outside the module (r), a constant
// initializer (one), a pooled Constant node (w, outside any module) and, from the nested If, a
// loop-body value (a) and a main-graph value through the loop body (r).
const char* kMakeModel = R"PY(
import onnx, sys
from onnx import helper as h, TensorProto as T
f, vi = T.FLOAT, h.make_tensor_value_info
then_g = h.make_graph([h.make_node('Neg', ['r'], ['t'])], 'then', [], [vi('t', f, [2])])
else_g = h.make_graph([h.make_node('Abs', ['x'], ['e'])], 'else', [], [vi('e', f, [2])])
inner_then = h.make_graph([h.make_node('Mul', ['a', 'r'], ['it'])], 'inner_then', [], [vi('it', f, [2])])
inner_else = h.make_graph([h.make_node('Identity', ['a'], ['ie'])], 'inner_else', [], [vi('ie', f, [2])])
body = h.make_graph([h.make_node('Add', ['v_in', 'x'], ['a']),
                     h.make_node('Less', ['i', 'one'], ['lt']),
                     h.make_node('If', ['lt'], ['b'], then_branch=inner_then, else_branch=inner_else),
                     h.make_node('Identity', ['c_in'], ['c_out']),
                     h.make_node('Mul', ['b', 'w'], ['sc'])],
                    'loop_body', [vi('i', T.INT64, []), vi('c_in', T.BOOL, []), vi('v_in', f, [2])],
                    [vi('c_out', T.BOOL, []), vi('b', f, [2]), vi('sc', f, [2])])
scan_body = h.make_graph([h.make_node('Add', ['st', 'xi'], ['st_out']), h.make_node('Mul', ['xi', 'r'], ['so'])],
                         'scan_body', [vi('st', f, [2]), vi('xi', f, [2])], [vi('st_out', f, [2]), vi('so', f, [2])])
nodes = [h.make_node('Relu', ['x'], ['r'], name='/pre/Relu'),
         h.make_node('ReduceSum', ['x'], ['s'], name='/enc/ReduceSum', keepdims=0),
         h.make_node('Constant', [], ['zero'], name='Constant_3', value=h.make_tensor('zero', f, [], [0.0])),
         h.make_node('Greater', ['s', 'zero'], ['cond'], name='/enc/Greater'),
         h.make_node('If', ['cond'], ['y'], name='/enc/If', then_branch=then_g, else_branch=else_g),
         h.make_node('Constant', [], ['w'], name='Constant_7', value=h.make_tensor('w', f, [2], [0.5, -2.0])),
         h.make_node('Loop', ['trip', 'true', 'y'], ['yl', 'scans'], name='/enc/Loop', body=body),
         h.make_node('Scan', ['yl', 'scans'], ['sf', 'so_all'], name='/enc/Scan', body=scan_body, num_scan_inputs=1),
         h.make_node('Sigmoid', ['sf'], ['z'], name='/post/Sigmoid'),
         h.make_node('Relu', ['so_all'], ['z2'], name='/post/Relu')]
inits = [h.make_tensor('trip', T.INT64, [], [3]), h.make_tensor('true', T.BOOL, [], [True]),
         h.make_tensor('one', T.INT64, [], [1])]
info = [vi('r', f, [2]), vi('s', f, []), vi('zero', f, []), vi('cond', T.BOOL, []), vi('y', f, [2]),
        vi('w', f, [2]), vi('yl', f, [2]), vi('scans', f, [3, 2]), vi('sf', f, [2]), vi('so_all', f, [3, 2])]
g = h.make_graph(nodes, 'main', [vi('x', f, [2])], [vi('z', f, [2]), vi('z2', f, [3, 2])], inits, value_info=info)
m = h.make_model(g, opset_imports=[h.make_opsetid('', 14)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
)PY";

std::filesystem::path make_control_flow_model() {
  static std::filesystem::path out;
  if (!out.empty()) return out;
  auto dir = test::temp_dir("extract_control_flow");
  auto script = dir / "make.py";
  { std::ofstream(script) << kMakeModel; }
  std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + (dir / "cf.onnx").string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  out = dir / "cf.onnx";
  return out;
}

int run(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// onnx.checker on the file as loaded (not check_model(path, full_check=True): onnx 1.12 rewrites
// the file then).
int onnx_check(const std::filesystem::path& p) {
  return run("/usr/bin/python3 -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]))' '" + p.string() +
             "'");
}

// tests/hierarchy/verify_extract_ort.py: exit 0 only when every sub-model output equals ORT's
// value of the source tensor exactly (checked where the ORT peer is installed).
int ort_verify(const std::filesystem::path& full, const std::filesystem::path& sub) {
  return run("cd '" ONNXFORGE_SOURCE_DIR "' && /usr/bin/python3 tests/hierarchy/verify_extract_ort.py '" +
             full.string() + "' '" + sub.string() + "' > '" + sub.string() + ".ort.json' 2>&1");
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every value a node or graph output reads is defined in its graph: a node output, a graph input,
// an initializer or a capture whose outer value lives in the parent graph.
void expect_complete(const Model& m) {
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    EXPECT_FALSE(g.name().empty()) << "graph " << gi << " has no name";
    auto defined = [&](ValueId v) {
      return g.producer(v).valid() || g.is_graph_input(v) || g.is_initializer(v) || g.outer(v).valid();
    };
    for (NodeId n : g.nodes())
      for (ValueId v : g.inputs(n))
        if (v.valid()) {
          EXPECT_TRUE(defined(v)) << str(g.name()) << ": '" << str(g.value_name(v)) << "' is read by name only";
        }
    for (ValueId v : g.graph_outputs()) EXPECT_TRUE(defined(v)) << str(g.name()) << ": output " << str(g.value_name(v));
    for (ValueId c : g.captures()) {
      ASSERT_TRUE(g.parent().valid());
      ASSERT_TRUE(g.outer(c).valid());
      EXPECT_EQ(m.graph(g.parent()).value_name(g.outer(c)), g.value_name(c));
    }
  }
}

std::vector<std::string> capture_names(const Graph& g) {
  std::vector<std::string> out;
  for (ValueId c : g.captures()) out.emplace_back(str(g.value_name(c)));
  std::sort(out.begin(), out.end());
  return out;
}

const Graph* graph_named(const Model& m, std::string_view name) {
  for (size_t gi = 0; gi < m.graph_count(); ++gi)
    if (str(m.graph(GraphId(static_cast<uint32_t>(gi))).name()) == name)
      return &m.graph(GraphId(static_cast<uint32_t>(gi)));
  return nullptr;
}

TEST(ExtractControlFlow, InMemoryModelIsCompleteAndNamed) {
  auto model = load_model(make_control_flow_model());
  read_tags(*model);
  Extraction cut = extract_module(*model, "enc");
  const Model& sub = *cut.model;
  EXPECT_EQ(str(sub.main().name()), "main_enc");
  EXPECT_EQ(cut.inputs, (std::vector<std::string>{"x", "r"}));
  EXPECT_EQ(cut.outputs, (std::vector<std::string>{"sf", "so_all"}));
  ASSERT_EQ(sub.graph_count(), 7u);  // main + then, else, loop_body, inner_then, inner_else, scan_body
  expect_complete(sub);
  // subgraphs keep their names; outer reads are captures, nested ones chained through loop_body
  for (auto [name, captures] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{{"then", {"r"}},
                                                                     {"else", {"x"}},
                                                                     {"loop_body", {"one", "r", "w", "x"}},
                                                                     {"inner_then", {"a", "r"}},
                                                                     {"inner_else", {"a"}},
                                                                     {"scan_body", {"r"}}}) {
    const Graph* g = graph_named(sub, name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(capture_names(*g), captures) << name;
  }
  const Graph& inner = *graph_named(sub, "inner_then");
  for (ValueId c : inner.captures())
    if (str(inner.value_name(c)) == "r") {
      const Graph& body = sub.graph(inner.parent());
      EXPECT_EQ(str(body.name()), "loop_body");
      EXPECT_TRUE(body.outer(inner.outer(c)).valid()) << "r reaches inner_then through a loop_body capture";
    }
  // the Constant read only by the loop body and the initializers came along
  EXPECT_TRUE(sub.main().find_value("w") && sub.main().producer(*sub.main().find_value("w")).valid());
  for (const char* init : {"trip", "true", "one"}) {
    auto v = sub.main().find_value(init);
    ASSERT_TRUE(v) << init;
    EXPECT_TRUE(sub.main().is_initializer(*v)) << init;
  }
  // runs as is, no save/load in between
  auto checks = verify_extraction(*model, cut, 3);
  ASSERT_EQ(checks.size(), 2u);
  for (const OutputCheck& c : checks) {
    EXPECT_EQ(c.max_diff, 0.0) << c.name;
    EXPECT_TRUE(c.bit_exact) << c.name;
  }
  // the source copy with the cuts exposed is complete and named too
  auto full = with_cuts_exposed(*model, cut);
  EXPECT_EQ(str(full->main().name()), "main");
  expect_complete(*full);
}

TEST(ExtractControlFlow, SavedModelPassesOnnxCheckerAndRunsInOrt) {
  auto model = load_model(make_control_flow_model());
  read_tags(*model);
  auto dir = test::temp_dir("extract_control_flow_ort");
  Extraction cut = extract_module(*model, "enc");
  auto sub = dir / "enc.onnx", full = dir / "full.onnx";
  save_model(*cut.model, sub);
  save_model(*with_cuts_exposed(*model, cut), full);
  EXPECT_EQ(onnx_check(sub), 0);
  EXPECT_EQ(onnx_check(full), 0);
  if (test::ort_peer_installed()) { EXPECT_EQ(ort_verify(full, sub), 0) << slurp(sub.string() + ".ort.json"); }
  // the saved file reads back to the same structure
  auto back = load_model(sub);
  EXPECT_EQ(back->graph_count(), cut.model->graph_count());
  for (size_t gi = 0; gi < back->graph_count(); ++gi) {
    const Graph& g = back->graph(GraphId(static_cast<uint32_t>(gi)));
    const Graph* orig = graph_named(*cut.model, str(g.name()));
    ASSERT_NE(orig, nullptr) << str(g.name());
    EXPECT_EQ(capture_names(g), capture_names(*orig)) << str(g.name());
  }
}

TEST(ExtractControlFlow, UnnamedSubgraphsGetNamedAfterTheirOwner) {
  auto model = load_model(make_control_flow_model());
  read_tags(*model);
  for (size_t gi = 0; gi < model->graph_count(); ++gi) model->graph(GraphId(static_cast<uint32_t>(gi))).set_name(Sym{});
  Extraction cut = extract_module(*model, "enc");
  EXPECT_EQ(str(cut.model->main().name()), "enc");
  expect_complete(*cut.model);
  EXPECT_NE(graph_named(*cut.model, "/enc/If_then_branch"), nullptr);
  EXPECT_NE(graph_named(*cut.model, "/enc/Loop_body"), nullptr);
  EXPECT_NE(graph_named(*cut.model, "If_else_branch"), nullptr);  // the unnamed If in the loop body
  auto dir = test::temp_dir("extract_control_flow_unnamed");
  save_model(*cut.model, dir / "enc.onnx");
  save_model(*with_cuts_exposed(*model, cut), dir / "full.onnx");
  EXPECT_EQ(onnx_check(dir / "enc.onnx"), 0);
  EXPECT_EQ(onnx_check(dir / "full.onnx"), 0);
  if (test::ort_peer_installed()) {
    EXPECT_EQ(ort_verify(dir / "full.onnx", dir / "enc.onnx"), 0) << slurp(dir / "enc.onnx.ort.json");
  }
}

TEST(ExtractControlFlow, BertLayerPassesOnnxCheckerAndRunsInOrt) {
  auto model = load_model(test::zoo_model("bert_small"));
  read_tags(*model);
  Extraction cut = extract_module(*model, "encoder.layer.0");
  EXPECT_FALSE(cut.model->main().name().empty());
  auto dir = test::temp_dir("extract_bert_ort");
  save_model(*cut.model, dir / "layer0.onnx");
  save_model(*with_cuts_exposed(*model, cut), dir / "full.onnx");
  EXPECT_EQ(onnx_check(dir / "layer0.onnx"), 0);
  if (test::ort_peer_installed()) {
    EXPECT_EQ(ort_verify(dir / "full.onnx", dir / "layer0.onnx"), 0) << slurp(dir / "layer0.onnx.ort.json");
  }
}

}  // namespace
}  // namespace onnxforge::hier
