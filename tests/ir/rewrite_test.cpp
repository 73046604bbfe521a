// The Rewrite batch: output names stay, captures follow replacements, tags are unioned,
// dangling reads are caught, tables compact.
#include <gtest/gtest.h>

#include "io/model_io.h"
#include "ir/error.h"
#include "ir/rewrite.h"
#include "ir/topo.h"
#include "ir/uses.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;

namespace {

// x -> Relu(a) -> Neg(b) -> Identity(y) ; y is the graph output.
std::unique_ptr<Model> chain_model(const fs::path& dir) {
  auto m = tiny_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_output(0, "a");
  *g->add_node() = make_node("Neg", {"a"}, {"b"}, "neg");
  *g->add_node() = make_node("Identity", {"b"}, {"y"}, "id");
  write_model(m, dir / "chain.onnx");
  return load_model(dir / "chain.onnx");
}

NodeId find_node(const Graph& g, std::string_view name) {
  for (NodeId n : g.nodes())
    if (str(g.node_name(n)) == name) return n;
  return NodeId{};
}

}  // namespace

TEST(Rewrite, ReplacingAGraphOutputKeepsItsName) {
  fs::path dir = temp_dir("rw_out");
  auto model = chain_model(dir);
  Graph& g = model->main();
  NodeId id = find_node(g, "id");
  Rewrite rw(g);
  rw.replace_uses(g.output(id, 0), g.input(id, 0));
  rw.kill(id);
  EXPECT_EQ(rw.commit(), 1);
  ASSERT_EQ(g.graph_outputs().size(), 1u);
  ValueId out = g.graph_outputs()[0];
  EXPECT_EQ(str(g.value_name(out)), "y");
  EXPECT_EQ(str(g.op_type(g.producer(out))), "Neg");
  EXPECT_EQ(g.node_count(), 2u);
  save_model(*model, dir / "out.onnx");
  auto again = load_model(dir / "out.onnx");
  EXPECT_EQ(again->main().node_count(), 2u);
}

TEST(Rewrite, ReplacingAnOutputWithAGraphInputInsertsIdentity) {
  fs::path dir = temp_dir("rw_ident");
  auto model = chain_model(dir);
  Graph& g = model->main();
  Rewrite rw(g);
  ValueId x = *g.find_value("x");
  for (NodeId n : g.nodes()) rw.kill(n);
  rw.replace_uses(*g.find_value("y"), x);
  rw.replace_uses(*g.find_value("b"), x);
  rw.replace_uses(*g.find_value("a"), x);
  rw.commit();
  ASSERT_EQ(g.node_count(), 1u);
  NodeId only = g.nodes()[0];
  EXPECT_EQ(str(g.op_type(only)), "Identity");
  EXPECT_EQ(str(g.value_name(g.graph_outputs()[0])), "y");
  EXPECT_EQ(str(g.value_name(g.graph_inputs()[0])), "x");
}

TEST(Rewrite, KillingANodeWhoseOutputIsStillReadIsAnError) {
  fs::path dir = temp_dir("rw_dangle");
  auto model = chain_model(dir);
  Graph& g = model->main();
  Rewrite rw(g);
  rw.kill(find_node(g, "neg"));
  EXPECT_THROW(rw.commit(), Error);
}

TEST(Rewrite, NewNodesCarryTheUnionOfTags) {
  fs::path dir = temp_dir("rw_tags");
  auto model = chain_model(dir);
  Graph& g = model->main();
  NodeId relu = find_node(g, "relu"), neg = find_node(g, "neg");
  g.set_scope(relu, model->tag_set({intern("/M/A")}));
  g.set_scope(neg, model->tag_set({intern("/M/B")}));
  Rewrite rw(g);
  ValueId fused = rw.new_value("fused");
  NodeId n = rw.add_node("Abs", {*g.find_value("x")}, {fused}, {}, std::vector<NodeId>{relu, neg});
  auto tags = model->tags(g.scope(n));
  ASSERT_EQ(tags.size(), 2u);
  rw.replace_uses(*g.find_value("b"), fused);
  rw.kill(relu);
  rw.kill(neg);
  rw.commit();
  EXPECT_EQ(g.node_count(), 2u);
  for (NodeId k : g.nodes())
    if (str(g.op_type(k)) == "Abs") { EXPECT_EQ(model->tags(g.scope(k)).size(), 2u); }
  EXPECT_NO_THROW(topological_order(g));
}

TEST(Rewrite, SubgraphCapturesFollowReplacements) {
  fs::path dir = temp_dir("rw_capture");
  // x -> Neg -> a ; If(cond) { then: Identity(a) -> t } else { Identity(x) -> e } -> y
  auto m = tiny_model();
  auto* g = m.mutable_graph();
  g->clear_node();
  *g->add_node() = make_node("Neg", {"x"}, {"a"}, "neg");
  add_value_info(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  auto* n = g->add_node();
  *n = make_node("If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* body = a->mutable_g();
    body->set_name(branch);
    *body->add_node() =
        make_node("Identity", {std::string(branch) == "then_branch" ? "a" : "x"}, {std::string(branch) + "_out"});
    add_value_info(body->add_output(), std::string(branch) + "_out", onnx::TensorProto::FLOAT, {1, 4});
  }
  write_model(m, dir / "if.onnx");
  auto model = load_model(dir / "if.onnx");
  Graph& main = model->main();
  ValueId a = *main.find_value("a");
  Uses uses(main);
  ASSERT_EQ(uses.count(a), 1u);  // read implicitly by the If node
  EXPECT_EQ(uses.of(a)[0].slot, Use::kImplicit);
  // Replace a by x: the then-branch capture must now read x.
  Rewrite rw(main);
  rw.replace_uses(a, *main.find_value("x"));
  rw.kill(find_node(main, "neg"));
  rw.commit();
  save_model(*model, dir / "out.onnx");
  auto again = load_model(dir / "out.onnx");
  EXPECT_EQ(again->main().node_count(), 1u);
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(read_bytes(dir / "out.onnx")));
  EXPECT_EQ(proto.graph().node(0).attribute(0).g().node(0).input(0), "x");
}
