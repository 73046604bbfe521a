// `--json` errors name the node at fault (docs/cli.md, "Errors"): an op without a kernel, a
// kernel refusing its inputs, the innermost node of an If body, a node inlined from a local
// function (named after its call); the message stays one line on stderr.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"

namespace fs = std::filesystem;
using namespace onnxforge::test;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

// The error of `run MODEL --json`: exit 2, one line on stderr, the JSON object on stdout.
json run_error(const fs::path& model, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", model.string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  CliResult r = run_cli(args);
  EXPECT_EQ(r.code, 2) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("onnxforge: error: "));
  return json::parse(r.out)["error"];
}

TEST(CliErrorNode, MissingKernelNamesTheNodeAndTheFile) {
  auto n = make_node("Mystery", {"x"}, {"y"}, "mystery0");
  n.set_domain("com.example");
  auto m = make_model({n}, {tensor_info("x", kFloat, {2})}, {tensor_info("y", kFloat, {2})});
  auto* imp = m.add_opset_import();
  imp->set_domain("com.example");
  imp->set_version(1);
  const fs::path p = temp_dir("err_node_kernel") / "m.onnx";
  write_model(m, p);
  json e = run_error(p);
  EXPECT_EQ(e["kind"], "input");
  EXPECT_EQ(e["node"], "mystery0");
  EXPECT_EQ(e["file"], p.string());
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("com.example::Mystery"));
}

TEST(CliErrorNode, AKernelRefusingItsShapesNamesTheNode) {
  auto m =
      make_model({make_node("Add", {"x", "y"}, {"z"}, "add0")},
                 {tensor_info("x", kFloat, {2, 3}), tensor_info("y", kFloat, {4})}, {tensor_info("z", kFloat, {})});
  const fs::path p = temp_dir("err_node_shape") / "m.onnx";
  write_model(m, p);
  json e = run_error(p);
  EXPECT_EQ(e["node"], "add0");
  EXPECT_EQ(e["file"], p.string());  // the model whose node refused
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("node 'add0' (Add)"));
  // bench names the model too; a usage error names no file.
  CliResult b = run_cli({"bench", p.string(), "--json"});
  EXPECT_EQ(b.code, 2) << b.describe();
  EXPECT_EQ(json::parse(b.out)["error"]["file"], p.string());
  CliResult u = run_cli({"run", p.string(), "--json", "--dim", "nonsense"});
  EXPECT_EQ(u.code, 2) << u.describe();
  EXPECT_TRUE(json::parse(u.out)["error"]["file"].is_null()) << u.out;
  // An unnamed node is named by its op and index.
  m.mutable_graph()->mutable_node(0)->clear_name();
  write_model(m, p);
  EXPECT_EQ(run_error(p)["node"], "Add#0");
  // An error about no node has none.
  EXPECT_TRUE(run_error("/nonexistent/model.onnx")["node"].is_null());
}

TEST(CliErrorNode, TheInnermostNodeOfABodyAndAnInlinedFunctionsNode) {
  const fs::path in_if = python_model("err_node_if", R"PY(
then_g = h.make_graph([h.make_node('Add', ['x', 'w'], ['t'], name='inner_add')], 'then', [],
                      [h.make_tensor_value_info('t', T.FLOAT, None)])
else_g = h.make_graph([h.make_node('Identity', ['x'], ['e'], name='inner_id')], 'else', [],
                      [h.make_tensor_value_info('e', T.FLOAT, None)])
g = h.make_graph([h.make_node('Constant', [], ['c'], value=h.make_tensor('c', T.BOOL, [], [True]), name='cond'),
                  h.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=else_g, name='if0')], 'main',
                 [h.make_tensor_value_info('x', T.FLOAT, [2, 3]), h.make_tensor_value_info('w', T.FLOAT, [5])],
                 [h.make_tensor_value_info('y', T.FLOAT, None)])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15)])
)PY");
  json e = run_error(in_if);
  EXPECT_EQ(e["node"], "inner_add");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("node 'if0' (If)"));
  // A node of a local function, expanded by the runtime, is named after the call.
  const fs::path fn = python_model("err_node_fn", R"PY(
f = h.make_function('local', 'Block', ['x', 'w'], ['y'], [h.make_node('Add', ['x', 'w'], ['y'], name='add')],
                    [h.make_opsetid('', 15)])
g = h.make_graph([h.make_node('Block', ['x', 'w'], ['y'], domain='local', name='layer0')], 'main',
                 [h.make_tensor_value_info('x', T.FLOAT, [2, 3]), h.make_tensor_value_info('w', T.FLOAT, [5])],
                 [h.make_tensor_value_info('y', T.FLOAT, None)])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 15), h.make_opsetid('local', 1)], functions=[f])
)PY");
  e = run_error(fn);
  EXPECT_EQ(e["node"], "layer0/add");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("node 'layer0/add' (Add)"));
}

}  // namespace
