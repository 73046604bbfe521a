// Edits' actions (passes/edits.h): replace_with and forward own the rules every rewrite needs —
// staleness, output naming, tags, which members die, graph-output names.
#include <gtest/gtest.h>

#include "ir/match.h"
#include "passes/edits.h"
#include "tests/common/graph_builder.h"

using namespace onnxforge;
using namespace onnxforge::passes;
using onnxforge::test::GraphBuilder;

namespace {

NodeId named(const Graph& g, std::string_view name) {
  for (NodeId n : g.nodes())
    if (str(g.node_name(n)) == name) return n;
  return {};
}

uint32_t tag(Model& m, const char* t) { return m.tag_set({intern(t)}); }

}  // namespace

TEST(Edits, ReplaceWithNamesTagsAndKillsTheGroup) {
  GraphBuilder b;
  ValueId a = b.input("a", {2, 3});
  ValueId w = b.f32("w", {3, 4}, std::vector<float>(12, 1.f));
  ValueId bias = b.f32("bias", {4}, {1, 2, 3, 4});
  ValueId mm = b.node("MatMul", {a, w}, {}, "mm");
  ValueId y = b.node("Add", {mm, bias}, {}, "add");
  ValueId z = b.node("Relu", {y}, {}, "relu");
  b.output(z);
  Graph& g = b.g();
  NodeId n_mm = g.producer(mm), n_add = g.producer(y);
  g.set_scope(n_mm, tag(*b.m, "layer.0"));
  g.set_scope(n_add, tag(*b.m, "layer.1"));
  Uses uses(g);
  PassOptions o;
  Edits e(g, uses, o);
  NodeId gemm = e.replace_with({n_mm, n_add}, "Gemm", {a, w, bias});
  ASSERT_TRUE(gemm.valid());
  EXPECT_TRUE(e.killed(n_mm));
  EXPECT_TRUE(e.killed(n_add));
  // A second rewrite of a member in the same round is stale: nothing happens.
  EXPECT_FALSE(e.replace_with({n_add}, "Identity", {mm}).valid());
  e.commit();
  EXPECT_EQ(g.node_count(), 2u);
  NodeId relu = named(g, "relu_node");
  NodeId fused = g.producer(g.input(relu, 0));
  ASSERT_TRUE(is(g, fused, "Gemm"));
  EXPECT_TRUE(str(g.value_name(g.output(fused, 0))).starts_with("add__"));  // named after the replaced output
  auto tags = b.m->tags(g.scope(fused));
  ASSERT_EQ(tags.size(), 2u);  // the union of the group's
}

TEST(Edits, ReplaceWithKeepsAMemberOthersStillRead) {
  GraphBuilder b;
  ValueId x = b.input("x", {2, 3, 4});
  ValueId t1 = b.node("Transpose", {x}, {NewAttr::Ints("perm", {1, 0, 2})}, "t1");
  ValueId t2 = b.node("Transpose", {t1}, {NewAttr::Ints("perm", {0, 2, 1})}, "t2");
  ValueId other = b.node("Neg", {t1}, {}, "other");
  b.output(t2);
  b.output(other);
  Graph& g = b.g();
  NodeId n1 = g.producer(t1), n2 = g.producer(t2);
  Uses uses(g);
  PassOptions o;
  Edits e(g, uses, o);
  ASSERT_TRUE(e.replace_with({n1, n2}, "Transpose", {x}, {NewAttr::Ints("perm", {1, 2, 0})}).valid());
  EXPECT_FALSE(e.killed(n1));  // Neg still reads it
  EXPECT_TRUE(e.killed(n2));
  e.commit();
  EXPECT_EQ(g.node_count(), 3u);
  EXPECT_EQ(str(g.value_name(g.graph_outputs()[0])), "t2");  // graph output names never change
}

TEST(Edits, ForwardRefusesToMoveAnIdentityAround) {
  GraphBuilder b;
  ValueId x = b.input("x", {4});
  ValueId r = b.node("Relu", {x}, {}, "r");
  ValueId keep = b.node("Identity", {r}, {}, "keep");    // graph output onto a node output: fine
  ValueId stays = b.node("Identity", {x}, {}, "stays");  // graph output onto a graph input: no
  ValueId inner = b.node("Identity", {r}, {}, "inner");
  ValueId n = b.node("Neg", {inner}, {}, "n");
  b.output(keep);
  b.output(stays);
  b.output(n);
  Graph& g = b.g();
  Uses uses(g);
  PassOptions o;
  Edits e(g, uses, o);
  EXPECT_FALSE(e.forward(g.producer(stays), x));
  EXPECT_TRUE(e.forward(g.producer(keep), r));
  EXPECT_TRUE(e.forward(g.producer(inner), r));
  EXPECT_FALSE(e.forward(g.producer(inner), r));  // touched: already gone
  e.commit();
  EXPECT_EQ(g.node_count(), 3u);  // Relu, Identity(stays), Neg
  EXPECT_EQ(str(g.value_name(g.graph_outputs()[0])), "keep");
  EXPECT_TRUE(is(g, g.producer(g.graph_outputs()[0]), "Relu"));
  EXPECT_TRUE(is(g, g.producer(g.graph_outputs()[1]), "Identity"));
}

TEST(Edits, ForwardRefusesANodeWhoseOtherOutputsAreRead) {
  GraphBuilder b(11);
  ValueId x = b.input("x", {4});
  auto outs = b.node_n("Dropout", {x}, {}, 2, "drop");
  ValueId y = b.node("Neg", {outs[0]});
  ValueId mask = b.node("Not", {outs[1]});
  b.output(y);
  b.output(mask, DType::Bool);
  Graph& g = b.g();
  Uses uses(g);
  PassOptions o;
  Edits e(g, uses, o);
  EXPECT_FALSE(e.forward(g.producer(outs[0]), x));
  EXPECT_TRUE(e.empty());
}
