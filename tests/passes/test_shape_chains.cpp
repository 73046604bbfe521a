// simplify_shape_chains: shape-engine values become constants, Reshape targets 0/-1, Expand
// targets 1, Slice ends INT64_MAX, equal chains merged; and what it must leave alone. Results are
// checked through the runtime with symbolic dims other than the verifier's defaults.
#include <gtest/gtest.h>

#include <limits>

#include "io/model_io.h"
#include "numeric.h"
#include "passes/graph_util.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

const std::vector<std::string> kChains{"simplify_shape_chains", "eliminate_dead_nodes"};
const std::map<std::string, int64_t> kDims{{"batch", 3}, {"seq", 7}, {"sequence", 7}};

// Optimizes a fresh build, compares it with the original at kDims, returns it.
std::unique_ptr<Model> optimize_at_dims(const MakeModel& make, const std::vector<std::string>& names = kChains) {
  auto original = make();
  auto model = make();
  optimize(*model, names);
  if (passes::runtime_available()) {
    passes::Reference ref(*original, passes::VerifyOptions{2, kDims});
    passes::VerifyResult v = ref.check(*model, passes::tolerance_of(passes::AccuracyClass::Lossless));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
  return model;
}

// The node whose first output is named `name`.
NodeId producer_named(const Graph& g, std::string_view name) {
  for (NodeId n : g.nodes())
    if (g.outputs(n).size() && str(g.value_name(g.output(n, 0))) == name) return n;
  ADD_FAILURE() << "no node makes " << name;
  return {};
}

// Input `slot` of the node making `name` when it is a constant, else nullopt.
std::optional<std::vector<int64_t>> const_input(const Graph& g, std::string_view name, size_t slot) {
  NodeId n = producer_named(g, name);
  if (!n.valid()) return std::nullopt;
  return constant_ints(g, g.input(n, slot));
}

std::string fresh(const std::string& base) {
  static int counter = 0;
  return base + "_" + std::to_string(counter++);
}

// Element i of a shape as a 1-D value, the exporters' way: Unsqueeze(Gather(shape, i), [0]).
ValueId dim_of(GraphBuilder& b, ValueId shape, int64_t i) {
  ValueId scalar = b.node("Gather", {shape, b.i64(fresh("idx"), {i}, true)});
  return b.node("Unsqueeze", {scalar, b.i64(fresh("axes"), {0})});
}
ValueId scalar_dim(GraphBuilder& b, ValueId shape, int64_t i) {
  return b.node("Gather", {shape, b.i64(fresh("idx"), {i}, true)});
}
ValueId vec(GraphBuilder& b, std::vector<int64_t> v) { return b.i64(fresh("c"), std::move(v)); }
ValueId cat(GraphBuilder& b, std::vector<ValueId> parts, const std::string& name = {}) {
  return b.node("Concat", std::move(parts), {NewAttr::Int("axis", 0)}, name);
}
ValueId unsqueeze(GraphBuilder& b, ValueId scalar) { return b.node("Unsqueeze", {scalar, b.i64(fresh("axes"), {0})}); }

TEST(ShapeChainsEngine, StaticChainsBecomeInitializers) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {2, 8, 4});
    ValueId s = b.node("Shape", {x});
    ValueId rows = unsqueeze(b, b.node("Mul", {scalar_dim(b, s, 0), scalar_dim(b, s, 1)}));
    b.output(b.node("Reshape", {x, cat(b, {rows, dim_of(b, s, 2)})}, {}, "flat"));
    ValueId one = b.i64("one", {1}, true), zero = b.i64("zero", {0}, true);
    b.output(b.node("Range", {zero, scalar_dim(b, s, 1), one}, {}, "range"), DType::Int64);
    b.output(b.node("ConstantOfShape", {cat(b, {dim_of(b, s, 2), vec(b, {3})})}, {}, "zeros"));
    b.output(b.node("Tile", {x, cat(b, {vec(b, {1, 1}), dim_of(b, s, 0)})}, {}, "tiled"));
    ValueId as_i32 = b.node("Cast", {scalar_dim(b, s, 1)}, {NewAttr::Int("to", 6)});
    b.output(b.node("Add", {as_i32, b.init<int32_t>("i32_one", {}, {1}, DType::Int32)}, {}, "i32"), DType::Int32);
    ValueId is_two = b.node("Equal", {scalar_dim(b, s, 0), b.i64("two", {2}, true)});
    b.output(b.node("Not", {is_two}, {}, "not_two"), DType::Bool);
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  for (const char* op : {"Shape", "Gather", "Unsqueeze", "Concat", "Mul"}) EXPECT_EQ(count_op(g, op), 0u) << op;
  EXPECT_EQ(const_input(g, "flat", 1), (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(const_input(g, "range", 1), (std::vector<int64_t>{8}));
  EXPECT_EQ(const_input(g, "zeros", 0), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(const_input(g, "tiled", 1), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(const_input(g, "i32", 0), (std::vector<int64_t>{8}));                     // an int32 initializer
  EXPECT_TRUE(constant_tensor(g, g.input(producer_named(g, "not_two"), 0)).valid());  // bool
}

// BERT's head split [batch, seq, 32] → [batch, seq, 4, 8], the merge back → [batch, seq, 32], a
// flatten → [batch*seq, 32], and Whisper's [batch, 4, 6, 8] → [batch*4, -1, 8], whose -1 the shape
// engine resolves to 6 so that batch*4 can take the -1.
TEST(ShapeChainsEngine, DynamicReshapeTargetsGetZerosAndOneMinusOne) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "seq"});
    ValueId s = b.node("Shape", {x});
    ValueId heads =
        b.node("Reshape", {x, cat(b, {dim_of(b, s, 0), dim_of(b, s, 1), vec(b, {4}), vec(b, {8})})}, {}, "split");
    ValueId s2 = b.node("Shape", {heads});
    b.output(b.node("Reshape", {heads, cat(b, {dim_of(b, s2, 0), dim_of(b, s2, 1), vec(b, {32})})}, {}, "merge"));
    ValueId rows = unsqueeze(b, b.node("Mul", {scalar_dim(b, s, 0), scalar_dim(b, s, 1)}));
    b.output(b.node("Reshape", {x, cat(b, {rows, dim_of(b, s, 2)})}, {}, "flatten"));
    ValueId w = b.input("w", {-1, 6, 4, 8}, DType::Float, {"batch"});
    ValueId bh = unsqueeze(b, b.node("Mul", {scalar_dim(b, b.node("Shape", {w}), 0), b.i64("four", {4}, true)}));
    b.output(b.node(
        "Reshape",
        {b.node("Transpose", {w}, {NewAttr::Ints("perm", {0, 2, 1, 3})}), cat(b, {bh, vec(b, {-1}), vec(b, {8})})}, {},
        "per_head"));
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  EXPECT_EQ(count_op(g, "Shape"), 0u);
  EXPECT_EQ(count_op(g, "Concat"), 0u);
  EXPECT_EQ(const_input(g, "split", 1), (std::vector<int64_t>{0, 0, 4, 8}));
  EXPECT_EQ(const_input(g, "merge", 1), (std::vector<int64_t>{0, 0, 32}));
  EXPECT_EQ(const_input(g, "flatten", 1), (std::vector<int64_t>{-1, 32}));
  EXPECT_EQ(const_input(g, "per_head", 1), (std::vector<int64_t>{-1, 6, 8}));
}

TEST(ShapeChainsEngine, ExpandTargetsGetOnesAndSliceEndsTheFullDim) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, 1, -1}, DType::Float, {"batch", "", "seq"});
    ValueId s = b.node("Shape", {x});
    b.output(b.node("Expand", {x, cat(b, {dim_of(b, s, 0), vec(b, {4}), dim_of(b, s, 2)})}, {}, "wide"));
    b.output(b.node("Expand", {x, cat(b, {vec(b, {2}), dim_of(b, s, 2)})}, {}, "short"));  // [batch, 2, seq]
    b.output(b.node("Slice", {x, vec(b, {1}), dim_of(b, s, 2), vec(b, {2})}, {}, "tail"));
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  EXPECT_EQ(count_op(g, "Shape"), 0u);
  EXPECT_EQ(const_input(g, "wide", 1), (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(const_input(g, "short", 1), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(const_input(g, "tail", 2), (std::vector<int64_t>{std::numeric_limits<int64_t>::max()}));
}

// Shape(x) and Shape(Relu(x)) are both [batch, seq, 8]: the second chain reads the first.
TEST(ShapeChainsEngine, EqualChainsAreMerged) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, -1, 8}, DType::Float, {"batch", "seq"});
    ValueId y = b.node("Relu", {x});
    ValueId sx = b.node("Shape", {x}), sy = b.node("Shape", {y});
    b.output(b.node("ConstantOfShape", {cat(b, {dim_of(b, sx, 0), dim_of(b, sx, 1)})}, {}, "mx"));
    b.output(b.node("ConstantOfShape", {cat(b, {dim_of(b, sy, 0), dim_of(b, sy, 1)})}, {}, "my"));
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make, {"simplify_shape_chains", "eliminate_duplicate_constants", "eliminate_dead_nodes"});
  EXPECT_EQ(count_op(m->main(), "Shape"), 1u);
  EXPECT_EQ(count_op(m->main(), "Concat"), 1u);
  EXPECT_EQ(count_op(m->main(), "ConstantOfShape"), 2u);
}

// allowzero=1; two dims that no 0/-1 can express (GPT-2's Conv1D: [batch*seq, 32] back to
// [batch, seq, 32]); a target also read by a Reshape of another tensor ([seq, batch, 32]); an
// Expand target with symbolic leading dims.
TEST(ShapeChainsEngine, LeavesAloneWhatItCannotProve) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "seq"});
    ValueId z = b.input("z", {-1, -1, 32}, DType::Float, {"seq", "batch"});
    ValueId s = b.node("Shape", {x});
    ValueId t = cat(b, {dim_of(b, s, 0), dim_of(b, s, 1), vec(b, {4}), vec(b, {8})}, "t");
    b.output(b.node("Reshape", {x, t}, {NewAttr::Int("allowzero", 1)}, "allowzero"));
    b.output(b.node("Reshape", {x, t}, {}, "own"));
    b.output(b.node("Reshape", {z, t}, {}, "other"));
    ValueId flat = b.node("Relu", {b.node("Reshape", {x, vec(b, {-1, 32})})});
    b.output(b.node("Reshape", {flat, cat(b, {dim_of(b, s, 0), dim_of(b, s, 1), vec(b, {32})})}, {}, "unflatten"));
    b.output(b.node("Expand", {b.f32("one", {1}, {1.f}), cat(b, {dim_of(b, s, 0), dim_of(b, s, 1)})}, {}, "mask"));
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  EXPECT_EQ(const_input(g, "own", 1), (std::vector<int64_t>{0, 0, 4, 8}));
  for (const char* name : {"allowzero", "other", "unflatten"}) EXPECT_FALSE(const_input(g, name, 1)) << name;
  EXPECT_FALSE(const_input(g, "mask", 1));
  EXPECT_EQ(count_op(g, "Shape"), 1u);
}

TEST(ShapeChainsEngine, ShapeThatIsAGraphOutputKeepsItsName) {
  auto make = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "seq"});
    ValueId s = b.node("Shape", {x}, {}, "shape_out");
    b.output(s, DType::Int64);
    b.output(b.node("Reshape", {x, cat(b, {dim_of(b, s, 0), dim_of(b, s, 1), vec(b, {4}), vec(b, {8})})}, {}, "split"));
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  EXPECT_EQ(const_input(g, "split", 1), (std::vector<int64_t>{0, 0, 4, 8}));
  EXPECT_EQ(count_op(g, "Shape"), 1u);
  EXPECT_EQ(count_op(g, "Concat"), 0u);
  EXPECT_EQ(str(g.value_name(g.graph_outputs()[0])), "shape_out");
}

// Nodes and int64 initializers inside a body (GraphBuilder writes the main graph only).
ValueId body_node(Graph& body, const std::string& op, std::vector<ValueId> ins, const std::string& out) {
  ValueId o = body.add_value(intern(out));
  body.add_node(intern(op), Sym{}, intern(out + "_node"), ins, std::vector<ValueId>{o});
  return o;
}
ValueId body_i64(Model& m, Graph& body, const std::string& name, std::vector<int64_t> data, bool scalar = false) {
  std::vector<int64_t> dims;
  if (!scalar) dims.push_back(static_cast<int64_t>(data.size()));
  auto bytes = passes::to_bytes(data);
  ValueId v = body.add_value(intern(name));
  body.set_initializer(v, m.tensors.add_owned(intern(name), DType::Int64, dims, bytes));
  return v;
}

// A target read by the main graph and, as a capture, by the else branch of an If: the main
// Reshape gets a constant, the chain stays for the body, the body keeps reading the capture. The
// then branch (the one the verifier's cond=true runs) has its own chain, folded inside the body.
TEST(ShapeChainsEngine, SubgraphCaptureKeepsTheChainAndBodyChainsFold) {
  auto make = [] {
    GraphBuilder b;
    Graph& g = b.g();
    ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "seq"});
    ValueId cond = b.input("cond", {}, DType::Bool);
    ValueId s = b.node("Shape", {x});
    ValueId t = cat(b, {dim_of(b, s, 0), dim_of(b, s, 1), vec(b, {4}), vec(b, {8})}, "t");
    b.output(b.node("Reshape", {x, t}, {}, "main_split"));
    const GraphBuilder::If branch = b.add_if(cond, "branch_out");
    Graph& then_g = branch.then_body;
    ValueId xt = then_g.add_capture(g.value_name(x), x);
    ValueId sh = body_node(then_g, "Shape", {xt}, "then_shape");
    ValueId axes = body_i64(*b.m, then_g, "then_axes", {0});
    std::vector<ValueId> parts;
    for (int64_t i : {0, 1}) {
      ValueId d = body_node(then_g, "Gather", {sh, body_i64(*b.m, then_g, "then_i" + std::to_string(i), {i}, true)},
                            "then_g" + std::to_string(i));
      parts.push_back(body_node(then_g, "Unsqueeze", {d, axes}, "then_u" + std::to_string(i)));
    }
    parts.push_back(body_i64(*b.m, then_g, "then_rest", {4, 8}));
    ValueId then_t = body_node(then_g, "Concat", parts, "then_t");
    then_g.set_graph_outputs({body_node(then_g, "Reshape", {xt, then_t}, "then_split")});
    then_g.set_dtype(then_g.graph_outputs()[0], DType::Float);
    Graph& else_g = branch.else_body;
    ValueId xe = else_g.add_capture(g.value_name(x), x), te = else_g.add_capture(g.value_name(t), t);
    else_g.set_graph_outputs(
        {body_node(else_g, "Neg", {body_node(else_g, "Reshape", {xe, te}, "else_split")}, "else_neg")});
    else_g.set_dtype(else_g.graph_outputs()[0], DType::Float);
    b.output(branch.out);
    return std::move(b.m);
  };
  auto m = optimize_at_dims(make);
  const Graph& g = m->main();
  EXPECT_EQ(const_input(g, "main_split", 1), (std::vector<int64_t>{0, 0, 4, 8}));
  EXPECT_EQ(count_op(g, "Concat"), 1u);
  const Graph& then_g = m->graph(GraphId(1));
  const Graph& else_g = m->graph(GraphId(2));
  EXPECT_EQ(const_input(then_g, "then_split", 1), (std::vector<int64_t>{0, 0, 4, 8}));
  EXPECT_EQ(count_op(then_g, "Shape"), 0u);
  EXPECT_TRUE(else_g.outer(else_g.input(producer_named(else_g, "else_split"), 1)).valid());
}

// The real export: every Reshape target constant, at most the one Shape that feeds the token-type
// Expand, and the optimized model equal to the original at batch 3, sequence 7.
TEST(ShapeChainsEngine, BertSmallExportHasNoShapeChainsFeedingReshapes) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  auto original = load_model(zoo_model("bert_small"));
  auto model = load_model(zoo_model("bert_small"));
  passes::RunResult r = optimize(*model);
  const Graph& g = model->main();
  for (NodeId n : g.nodes())
    if (g.is_op(n, "Reshape")) { EXPECT_TRUE(constant_tensor(g, g.input(n, 1)).valid()) << str(g.node_name(n)); }
  EXPECT_LE(count_op(g, "Shape"), 1u);
  EXPECT_EQ(count_op(g, "Concat"), 0u);
  passes::Reference ref(*original, passes::VerifyOptions{1, {{"batch", 3}, {"sequence", 7}}});
  passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
  EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
}

// The other dynamic-axes exports, verified away from the export defaults too.
TEST(ShapeChainsEngine, TransformerExportsVerifyAtOtherDims) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (const char* name : {"distilbert_small", "gpt2_small_cfg", "llama_small", "vit_small", "whisper_small_enc"}) {
    SCOPED_TRACE(name);
    auto original = load_model(zoo_model(name));
    auto model = load_model(zoo_model(name));
    passes::RunResult r = optimize(*model);
    EXPECT_LT(r.after.nodes, r.before.nodes);
    passes::Reference ref(*original, passes::VerifyOptions{1, {{"batch", 3}, {"sequence", 7}}});
    passes::VerifyResult v = ref.check(*model, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
}

}  // namespace
}  // namespace onnxforge::test
