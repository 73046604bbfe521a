// If / Loop / Scan with outer-scope values, on models written by onnx's Python helper.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "io/model_io.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
namespace fs = std::filesystem;
using test::python_model;

TEST(Control, IfBranchesReadOuterScopeValues) {
  fs::path p = python_model("if", R"PY(
then_g = h.make_graph([h.make_node('Add', ['x', 'k'], ['t'])], 'then', [], [h.make_tensor_value_info('t', T.FLOAT, [2])])
else_g = h.make_graph([h.make_node('Mul', ['x', 'k'], ['e'])], 'else', [], [h.make_tensor_value_info('e', T.FLOAT, [2])])
g = h.make_graph([h.make_node('Relu', ['x0'], ['x']),
                  h.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=else_g)], 'g',
                 [h.make_tensor_value_info('c', T.BOOL, []), h.make_tensor_value_info('x0', T.FLOAT, [2])],
                 [h.make_tensor_value_info('y', T.FLOAT, [2])],
                 [h.make_tensor('k', T.FLOAT, [2], [10, 20])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY");
  auto model = load_model(p);
  rt::Session s(*model);
  for (int run = 0; run < 2; ++run) {
    auto x = test::make<float>(DType::Float, {2}, {1, -2});
    auto t = s.run({test::make<uint8_t>(DType::Bool, {}, {1}), x});
    auto e = s.run({test::make<uint8_t>(DType::Bool, {}, {0}), x});
    EXPECT_EQ(test::values<float>(t[0]), (std::vector<float>{11, 20}));
    EXPECT_EQ(test::values<float>(e[0]), (std::vector<float>{10, 0}));
  }
}

TEST(Control, LoopCarriesStateScansOutputsAndReadsOuterValues) {
  fs::path p = python_model("loop", R"PY(
body = h.make_graph(
  [h.make_node('Identity', ['cond_in'], ['cond_out']),
   h.make_node('Add', ['acc_in', 'step'], ['acc_out']),
   h.make_node('Cast', ['i'], ['i_f'], to=T.FLOAT),
   h.make_node('Mul', ['acc_out', 'i_f'], ['scan'])],
  'body',
  [h.make_tensor_value_info('i', T.INT64, []), h.make_tensor_value_info('cond_in', T.BOOL, []),
   h.make_tensor_value_info('acc_in', T.FLOAT, [2])],
  [h.make_tensor_value_info('cond_out', T.BOOL, []), h.make_tensor_value_info('acc_out', T.FLOAT, [2]),
   h.make_tensor_value_info('scan', T.FLOAT, [2])])
g = h.make_graph([h.make_node('Neg', ['s0'], ['step']),
                  h.make_node('Loop', ['M', '', 'a0'], ['acc', 'scans'], body=body)], 'g',
                 [h.make_tensor_value_info('M', T.INT64, []), h.make_tensor_value_info('a0', T.FLOAT, [2]),
                  h.make_tensor_value_info('s0', T.FLOAT, [2])],
                 [h.make_tensor_value_info('acc', T.FLOAT, [2]), h.make_tensor_value_info('scans', T.FLOAT, [None, 2])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY");
  auto model = load_model(p);
  rt::Session s(*model);
  for (int run = 0; run < 2; ++run) {
    auto o = s.run({test::make<int64_t>(DType::Int64, {}, {3}), test::make<float>(DType::Float, {2}, {0, 1}),
                    test::make<float>(DType::Float, {2}, {1, 2})});
    EXPECT_EQ(test::values<float>(o[0]), (std::vector<float>{-3, -5}));
    EXPECT_EQ(o[1].shape, (rt::Shape{3, 2}));
    EXPECT_EQ(test::values<float>(o[1]), (std::vector<float>{-0.f, -0.f, -2, -3, -6, -10}));
  }
}

// A scan output of a Loop or Scan that ran no iteration has the type the body would have given
// it, traced through the body to the node input it comes from when nothing declares it (before:
// float32, while the same model with inferred types gave int32, so `optimize` failed to verify
// a mutated Range-as-Loop model from the fuzz campaign). Declared types still win.
TEST(Control, EmptyScanOutputsTakeTheBodysTypeWithoutDeclarations) {
  fs::path p = python_model("empty_scans", R"PY(
def vi(name, t=None):
  return h.make_tensor_value_info(name, t, None) if t else h.ValueInfoProto(name=name)
loop_body = h.make_graph(
  [h.make_node('Identity', ['cond_in'], ['cond_out']),
   h.make_node('Add', ['acc_in', 'd'], ['acc_out']),
   h.make_node('Identity', ['acc_in'], ['scan'])],
  'loop_body', [vi('i', T.INT64), vi('cond_in', T.BOOL), vi('acc_in')], [vi('cond_out'), vi('acc_out'), vi('scan')])
scan_body = h.make_graph(
  [h.make_node('Add', ['s_in', 'x_in'], ['s_out']), h.make_node('Identity', ['s_out'], ['y'])],
  'scan_body', [vi('s_in'), vi('x_in')], [vi('s_out'), vi('y')])
g = h.make_graph([h.make_node('Loop', ['M', '', 'a0'], ['acc', 'scans'], body=loop_body),
                  h.make_node('Scan', ['s0', 'xs'], ['s', 'ys'], body=scan_body, num_scan_inputs=1)], 'g',
                 [h.make_tensor_value_info('M', T.INT64, []), h.make_tensor_value_info('a0', T.INT32, [1]),
                  h.make_tensor_value_info('d', T.INT32, [1]), h.make_tensor_value_info('s0', T.INT64, [2]),
                  h.make_tensor_value_info('xs', T.INT64, [None, 2])],
                 [vi('acc'), vi('scans'), vi('s'), vi('ys')])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)])
)PY");
  auto model = load_model(p);
  rt::Session s(*model);
  auto o = s.run({test::make<int64_t>(DType::Int64, {}, {0}), test::make<int32_t>(DType::Int32, {1}, {5}),
                  test::make<int32_t>(DType::Int32, {1}, {2}), test::make<int64_t>(DType::Int64, {2}, {1, 2}),
                  test::make<int64_t>(DType::Int64, {0, 2}, {})});
  EXPECT_EQ(o[1].dtype, DType::Int32);  // Loop: traced to a0
  EXPECT_EQ(o[1].numel(), 0);
  EXPECT_EQ(o[3].dtype, DType::Int64);  // Scan: traced to s0
  EXPECT_EQ(o[3].numel(), 0);
}
