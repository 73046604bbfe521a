// Shape inference on hand-built graphs, one op family per test, symbolic cases included.
#include <gtest/gtest.h>

#include "analysis/shapes.h"
#include "ir/error.h"
#include "tests/analysis/shape_builder.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

// x[batch, seq, 768] and its Shape -> Gather -> Unsqueeze pieces, as BERT exports them.
void bert_prefix(ModelProtoBuilder& b) {
  b.input("x", F, "batch,seq,768");
  b.ints("i0", {0}, {}).ints("i1", {1}, {}).ints("ax0", {0}).ints("c12", {12}).ints("c64", {64});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"b"});
  b.node("Gather", {"s", "i1"}, {"q"});
  b.node("Unsqueeze", {"b", "ax0"}, {"ub"});
  b.node("Unsqueeze", {"q", "ax0"}, {"uq"});
}

}  // namespace

TEST(ShapeOps, BertReshapeChainResolvesSymbolically) {
  ModelProtoBuilder b(14);
  bert_prefix(b);
  attr_i(b.node("Concat", {"ub", "uq", "c12", "c64"}, {"target"}), "axis", 0);
  b.node("Reshape", {"x", "target"}, {"r"});
  attr_ints(b.node("Transpose", {"r"}, {"t"}), "perm", {0, 2, 1, 3});
  b.output("t");
  auto r = run(b);
  expect_types(r, {{"s", "int64[3]"},
                   {"q", "int64[]"},
                   {"uq", "int64[1]"},
                   {"target", "int64[4]"},
                   {"r", "float32[batch, seq, 12, 64]"},
                   {"t", "float32[batch, 12, seq, 64]"}});
  ASSERT_TRUE(r.value("target"));
  EXPECT_EQ(to_string(*r.value("target")), "[batch, seq, 12, 64]");
  EXPECT_EQ(to_string(*r.value("q")), "[seq]");
  EXPECT_EQ(r.report.fresh_symbols, 0u);
  EXPECT_TRUE(r.report.conflicts.empty());
}

TEST(ShapeOps, ReshapeZeroMinusOneAndAllowZero) {
  ModelProtoBuilder b(14);
  b.input("x", F, "batch,seq,768");
  b.ints("s1", {0, 0, 12, -1}).ints("s2", {-1, 768}).ints("s3", {0, -1}).ints("s4", {-1});
  b.node("Reshape", {"x", "s1"}, {"a"});
  b.node("Reshape", {"x", "s2"}, {"b"});
  b.node("Reshape", {"b", "s3"}, {"c"});
  b.node("Reshape", {"x", "s4"}, {"d"});
  b.input("e", F, "0,3");
  b.ints("s5", {0, 3});
  attr_i(b.node("Reshape", {"e", "s5"}, {"f"}), "allowzero", 1);
  auto r = run(b);
  expect_types(r, {{"a", "float32[batch, seq, 12, 64]"},
                   {"b", "float32[batch*seq, 768]"},
                   {"c", "float32[batch*seq, 768]"},
                   {"d", "float32[batch*seq*768]"},
                   {"f", "float32[0, 3]"}});
}

TEST(ShapeOps, MatMulGemmEinsum) {
  ModelProtoBuilder b;
  b.input("q", F, "batch,12,seq,64").input("k", F, "batch,12,64,seq").input("w", F, "64,10").input("v", F, "64");
  b.input("m", F, "seq,64").input("wt", F, "10,64");
  b.node("MatMul", {"q", "k"}, {"qk"});
  b.node("MatMul", {"q", "w"}, {"qw"});
  b.node("MatMul", {"q", "v"}, {"qv"});
  b.node("MatMul", {"v", "w"}, {"vw"});
  auto& g = b.node("Gemm", {"m", "wt"}, {"gm"});
  attr_i(g, "transB", 1);
  attr_s(b.node("Einsum", {"q", "k"}, {"es"}), "equation", "bhqd,bhdk->bhqk");
  attr_s(b.node("Einsum", {"m"}, {"et"}), "equation", "ij->ji");
  attr_s(b.node("Einsum", {"q", "k"}, {"ee"}), "equation", "...qd,...dk");
  auto r = run(b);
  expect_types(r, {{"qk", "float32[batch, 12, seq, seq]"},
                   {"qw", "float32[batch, 12, seq, 10]"},
                   {"qv", "float32[batch, 12, seq]"},
                   {"vw", "float32[10]"},
                   {"gm", "float32[seq, 10]"},
                   {"es", "float32[batch, 12, seq, seq]"},
                   {"et", "float32[64, seq]"},
                   {"ee", "float32[batch, 12, seq, seq]"}});
}

TEST(ShapeOps, ConvPoolSymbolicOutputSizes) {
  ModelProtoBuilder b;
  b.input("x", F, "N,3,H,W");
  b.floats("w", {16, 3, 3, 3}).floats("wt", {16, 8, 3, 3});
  auto& c = b.node("Conv", {"x", "w"}, {"c"});
  attr_ints(c, "strides", {2, 2});
  attr_ints(c, "pads", {1, 1, 1, 1});
  auto& p = b.node("MaxPool", {"c"}, {"p", "pi"});
  attr_ints(p, "kernel_shape", {3, 3});
  attr_ints(p, "strides", {2, 2});
  attr_i(p, "ceil_mode", 1);
  auto& s = b.node("AveragePool", {"x"}, {"sp"});
  attr_ints(s, "kernel_shape", {3, 3});
  attr_ints(s, "strides", {2, 2});
  attr_s(s, "auto_pad", "SAME_UPPER");
  auto& t = b.node("ConvTranspose", {"c", "wt"}, {"ct"});
  attr_ints(t, "strides", {2, 2});
  attr_ints(t, "pads", {1, 1, 1, 1});
  attr_ints(t, "output_padding", {1, 1});
  b.node("GlobalAveragePool", {"c"}, {"gp"});
  b.input("img", F, "1,3,224,224");
  auto& c2 = b.node("Conv", {"img", "w"}, {"c2"});
  attr_ints(c2, "strides", {2, 2});
  attr_ints(c2, "dilations", {2, 2});
  auto r = run(b);
  EXPECT_EQ(r["c"], "float32[N, 16, (H+1)/2, (W+1)/2]");
  // ceil((h-3)/2)+1 = floor(h/2)
  expect_types(r, {{"p", "float32[N, 16, ((H+1)/2)/2, ((W+1)/2)/2]"},
                   {"pi", "int64[N, 16, ((H+1)/2)/2, ((W+1)/2)/2]"},
                   {"sp", "float32[N, 3, (H+1)/2, (W+1)/2]"},
                   {"ct", "float32[N, 8, ((H+1)/2)*2, ((W+1)/2)*2]"},
                   {"gp", "float32[N, 16, 1, 1]"},
                   {"c2", "float32[1, 16, 110, 110]"}});
}

TEST(ShapeOps, BroadcastingComparisonsWhere) {
  ModelProtoBuilder b;
  b.input("a", F, "batch,seq,1").input("c", F, "1,1,768").input("d", F, "seq").input("e", F, "batch,1,seq");
  b.node("Mul", {"a", "c"}, {"ac"});
  b.node("Add", {"e", "d"}, {"ed"});
  b.node("Equal", {"a", "c"}, {"eq"});
  b.node("Where", {"eq", "a", "c"}, {"wh"});
  b.node("Sum", {"a", "c", "e"}, {"sum"});
  b.node("Not", {"eq"}, {"ne"});
  b.input("u", F, "?,4");
  b.node("Add", {"u", "u"}, {"uu"});
  auto r = run(b);
  expect_types(r, {{"ac", "float32[batch, seq, 768]"},
                   {"ed", "float32[batch, 1, seq]"},
                   {"eq", "bool[batch, seq, 768]"},
                   {"wh", "float32[batch, seq, 768]"},
                   {"sum", "float32[batch, seq, 768]"},
                   {"ne", "bool[batch, seq, 768]"}});
  // An unknown input dim becomes a fresh symbol that still propagates.
  EXPECT_EQ(r["uu"], "float32[unk__0, 4]");
  EXPECT_EQ(r.report.fresh_symbols, 1u);
}

TEST(ShapeOps, ShapeValuesFeedExpandRangeConstantOfShapeSliceTile) {
  ModelProtoBuilder b(14);
  bert_prefix(b);
  b.ints("zero", {0}, {}).ints("one", {1}, {}).ints("big", {INT64_MAX}).ints("ax1", {1}).ints("neg1", {-1});
  b.ints("shape1", {1, 1, 768}).ints("rep", {1, 2, 1});
  b.node("Range", {"zero", "q", "one"}, {"pos"});
  b.node("ConstantOfShape", {"s"}, {"ones"});
  b.node("Expand", {"shape1", "s"}, {"ex"});  // values as data
  b.input("y", F, "1,1,768");
  b.node("Expand", {"y", "s"}, {"ey"});
  b.node("Slice", {"x", "ax1", "big", "ax1"}, {"sl"});    // x[:, 1:]
  b.node("Slice", {"x", "ax0", "uq", "ax1"}, {"sl2"});    // x[:, 0:seq]
  b.node("Slice", {"x", "ax0", "neg1", "ax1"}, {"sl3"});  // x[:, :-1]
  b.node("Tile", {"x", "rep"}, {"ti"});
  b.node("Size", {"x"}, {"sz"});
  b.node("Mul", {"b", "q"}, {"bq"});
  b.node("Div", {"q", "one"}, {"qd"});
  attr_i(b.node("Cast", {"s"}, {"sc"}), "to", I64);
  auto r = run(b);
  expect_types(r, {{"pos", "int64[seq]"},
                   {"ones", "float32[batch, seq, 768]"},
                   {"ey", "float32[batch, seq, 768]"},
                   {"sl", "float32[batch, seq-1, 768]"},
                   {"sl2", "float32[batch, seq, 768]"},
                   {"sl3", "float32[batch, seq-1, 768]"},
                   {"ti", "float32[batch, seq*2, 768]"}});
  EXPECT_EQ(to_string(*r.value("sz")), "[batch*seq*768]");
  EXPECT_EQ(to_string(*r.value("bq")), "[batch*seq]");
  EXPECT_EQ(to_string(*r.value("qd")), "[seq]");
  EXPECT_EQ(to_string(*r.value("sc")), "[batch, seq, 768]");
}

TEST(ShapeOps, ConcatSplitSqueezeUnsqueezeFlattenTransposePad) {
  ModelProtoBuilder b(18);
  b.input("x", F, "batch,seq,768").input("past", F, "batch,past,768");
  attr_i(b.node("Concat", {"past", "x"}, {"kv"}), "axis", 1);
  b.ints("sp", {256, 512});
  attr_i(b.node("Split", {"x", "sp"}, {"s0", "s1"}), "axis", 2);
  auto& s3 = b.node("Split", {"x"}, {"t0", "t1", "t2"});
  attr_i(s3, "axis", -1);
  attr_i(s3, "num_outputs", 3);
  b.ints("a0", {0}).ints("a13", {1, 3});
  b.node("Unsqueeze", {"x", "a13"}, {"un"});
  b.node("Squeeze", {"un", "a13"}, {"sq"});
  b.node("Flatten", {"x"}, {"fl"});
  attr_i(b.node("Flatten", {"x"}, {"fl0"}), "axis", 0);
  b.node("Transpose", {"x"}, {"tr"});
  b.ints("pads", {0, 1, 0, 0, 2, 0});
  b.node("Pad", {"x", "pads"}, {"pd"});
  auto r = run(b);
  expect_types(r, {{"kv", "float32[batch, past+seq, 768]"},
                   {"s1", "float32[batch, seq, 512]"},
                   {"t2", "float32[batch, seq, 256]"},
                   {"un", "float32[batch, 1, seq, 1, 768]"},
                   {"sq", "float32[batch, seq, 768]"},
                   {"fl", "float32[batch, seq*768]"},
                   {"fl0", "float32[1, batch*seq*768]"},
                   {"tr", "float32[768, seq, batch]"},
                   {"pd", "float32[batch, seq+3, 768]"}});
}

TEST(ShapeOps, GatherFamilyReductionsTopKResize) {
  ModelProtoBuilder b(13);
  b.input("emb", F, "1000,64").input("ids", I64, "batch,seq").input("x", F, "batch,seq,64");
  b.input("idx", I64, "batch,seq,2").input("img", F, "N,3,H,W");
  b.node("Gather", {"emb", "ids"}, {"g"});
  attr_i(b.node("GatherElements", {"x", "ids"}, {"ge"}), "axis", 1);
  b.node("GatherND", {"x", "idx"}, {"gn"});
  b.ints("axes", {1});
  b.node("ReduceSum", {"x", "axes"}, {"rs"});
  auto& rm = b.node("ReduceMean", {"x"}, {"rm"});
  attr_ints(rm, "axes", {-1});
  attr_i(rm, "keepdims", 0);
  attr_i(b.node("ArgMax", {"x"}, {"am"}), "axis", 2);
  b.ints("k", {5});
  b.node("TopK", {"x", "k"}, {"tv", "ti"});
  b.proto()->add_initializer()->CopyFrom(float_tensor("scales", {4}, {1, 1, 2, 2}));
  b.node("Resize", {"img", "", "scales"}, {"rz"});
  b.ints("sizes", {1, 3, 32, 32});
  b.node("Resize", {"img", "", "", "sizes"}, {"rz2"});
  auto r = run(b);
  expect_types(r, {{"g", "float32[batch, seq, 64]"},
                   {"ge", "float32[batch, seq]"},
                   {"gn", "float32[batch, seq, 64]"},
                   {"rs", "float32[batch, 1, 64]"},
                   {"rm", "float32[batch, seq]"},
                   {"am", "int64[batch, seq, 1]"},
                   {"tv", "float32[batch, seq, 5]"},
                   {"ti", "int64[batch, seq, 5]"},
                   {"rz", "float32[N, 3, H*2, W*2]"},
                   {"rz2", "float32[1, 3, 32, 32]"}});
}

TEST(ShapeOps, NormalizationDropoutCastQuantize) {
  ModelProtoBuilder b(17);
  b.input("x", F, "batch,seq,64").input("g", F, "64").input("bb", F, "64");
  b.node("LayerNormalization", {"x", "g", "bb"}, {"ln", "mean", "istd"});
  b.node("Dropout", {"x"}, {"dr", "mask"});
  attr_i(b.node("Cast", {"x"}, {"h"}), "to", onnx::TensorProto::FLOAT16);
  b.node("CastLike", {"x", "mask"}, {"cl"});
  b.node("Softmax", {"x"}, {"sm"});
  b.node("Gelu", {"x"}, {"ge"});
  b.proto()->add_initializer()->CopyFrom(float_tensor("scale", {}, {0.1f}));
  b.node("QuantizeLinear", {"x", "scale"}, {"qx"});
  b.node("DequantizeLinear", {"qx", "scale"}, {"dq"});
  b.node("DynamicQuantizeLinear", {"x"}, {"dy", "dys", "dyz"});
  auto r = run(b);
  expect_types(r, {{"ln", "float32[batch, seq, 64]"},
                   {"mean", "float32[batch, seq, 1]"},
                   {"dr", "float32[batch, seq, 64]"},
                   {"mask", "bool[batch, seq, 64]"},
                   {"h", "float16[batch, seq, 64]"},
                   {"cl", "bool[batch, seq, 64]"},
                   {"sm", "float32[batch, seq, 64]"},
                   {"ge", "float32[batch, seq, 64]"},
                   {"qx", "uint8[batch, seq, 64]"},
                   {"dq", "float32[batch, seq, 64]"},
                   {"dys", "float32[]"}});
}

TEST(ShapeOps, IfMergesBranchesLoopStacksScanOutputs) {
  ModelProtoBuilder b(14);
  bert_prefix(b);
  b.input("cond", B, "");
  auto& iff = b.node("If", {"cond"}, {"br"});
  GraphProtoBuilder then_g(attr_g(iff, "then_branch"));
  then_g.ints("s4", {0, 0, 4, -1});
  then_g.node("Reshape", {"x", "s4"}, {"then_out"});
  then_g.output("then_out");
  GraphProtoBuilder else_g(attr_g(iff, "else_branch"));
  else_g.ints("s5", {0, 0, 3, 256});
  else_g.node("Reshape", {"x", "s5"}, {"else_out"});
  else_g.output("else_out");
  // Loop seq times; carries a [batch, 768] sum, stacks a [batch] row per iteration.
  b.ints("ax", {1});
  b.input("acc0", F, "batch,768");
  auto& loop = b.node("Loop", {"q", "", "acc0"}, {"acc", "rows"});
  GraphProtoBuilder body(attr_g(loop, "body"));
  body.input("i", I64, "").input("c", B, "").input("acc_in", F, "*");
  body.node("Identity", {"c"}, {"c_out"});
  body.node("Add", {"acc_in", "acc_in"}, {"acc_out"});
  body.node("ReduceSum", {"acc_out", "ax"}, {"row_out"});
  body.output("c_out").output("acc_out").output("row_out");
  auto r = run(b);
  expect_types(r, {{"then_out", "float32[batch, seq, 4, 192]"},
                   {"br", "float32[batch, seq, unk__0, unk__1]"},
                   {"acc", "float32[batch, 768]"},
                   {"acc_out", "float32[batch, 768]"},
                   {"rows", "float32[seq, batch, 1]"}});
}

TEST(ShapeOps, SpecialisationFixesNamedDims) {
  ModelProtoBuilder b(14);
  bert_prefix(b);
  b.ints("s2", {-1, 768});
  b.node("Reshape", {"x", "s2"}, {"flat"});
  b.output("flat", F, "batch*seq,768");
  ShapeOptions o;
  o.dims["batch"] = 1;
  auto r = run(b, o);
  expect_types(r, {{"x", "float32[1, seq, 768]"}, {"flat", "float32[seq, 768]"}});
  EXPECT_EQ(to_string(*r.value("s")), "[1, seq, 768]");
  EXPECT_TRUE(r.report.unmatched_dims.empty());
  o.dims["seq"] = 8;
  o.dims["sequence"] = 8;  // not in this model
  auto r2 = run(b, o);
  EXPECT_EQ(r2["flat"], "float32[8, 768]");
  EXPECT_EQ(r2.report.unmatched_dims, std::vector<std::string>{"sequence"});
}

TEST(ShapeOps, DeclaredShapesRefineOrConflict) {
  ModelProtoBuilder b;
  b.input("x", F, "batch,?,768");
  b.node("Relu", {"x"}, {"a"});
  b.node("Relu", {"a"}, {"c"});
  b.value_info("a", F, "batch,128,768");  // more specific: wins
  b.value_info("c", F, "batch,128,512");  // contradicts
  b.output("c");
  auto r = run(b);
  EXPECT_EQ(r["a"], "float32[batch, 128, 768]");
  EXPECT_EQ(r["c"], "float32[batch, 128, 512]");  // the declaration is kept
  ASSERT_EQ(r.report.conflicts.size(), 1u);
  EXPECT_NE(r.report.conflicts[0].message.find("Relu"), std::string::npos);
  EXPECT_NE(r.report.conflicts[0].message.find("'c'"), std::string::npos);
  ShapeOptions strict;
  strict.strict = true;
  auto m = b.load();
  EXPECT_THROW(infer_shapes(*m, strict), Error);
}

TEST(ShapeOps, UnknownOpsAreListedNotFatal) {
  ModelProtoBuilder b;
  b.input("x", F, "batch,4");
  auto& n = b.node("Frobnicate", {"x"}, {"y"});
  n.set_domain("com.example");
  b.proto_model().add_opset_import()->set_domain("com.example");
  b.proto_model().mutable_opset_import(1)->set_version(1);
  b.node("Relu", {"y"}, {"z"});
  b.output("z");
  auto r = run(b);
  EXPECT_EQ(r.report.unknown_ops.at("com.example::Frobnicate"), 1);
  expect_types(r, {{"y", "?"}, {"z", "?"}});
}

TEST(ShapeOps, ValueInfoAndExpressionsSurviveSaveLoad) {
  ModelProtoBuilder b(14);
  bert_prefix(b);
  b.ints("s2", {-1, 64});
  b.node("Reshape", {"x", "s2"}, {"flat"});
  b.output("flat");
  auto m = b.load();
  ShapeOptions o;
  o.add_value_info = true;
  infer_shapes(*m, o);
  EXPECT_EQ(m->main().value_infos().size(), 5u);  // s, b, q, ub, uq (flat is an output)
  auto dir = temp_dir("shape_save");
  save_model(*m, dir / "out.onnx");
  auto back = load_model(dir / "out.onnx");
  EXPECT_EQ(type_of(*back, "flat"), "float32[batch*seq*12, 64]");
  // Re-inference on the written model agrees with itself (no conflicts, same expressions).
  auto rep = infer_shapes(*back);
  EXPECT_TRUE(rep.conflicts.empty());
  EXPECT_EQ(type_of(*back, "flat"), "float32[batch*seq*12, 64]");
}

TEST(ShapeOps, LocalFunctionCallsAreInferredThroughTheirBody) {
  ModelProtoBuilder b(14);
  auto* f = b.proto_model().add_functions();
  f->set_name("AddRelu");
  f->set_domain("com.test");
  f->add_input("a");
  f->add_input("b");
  f->add_output("y");
  auto* o = f->add_opset_import();
  o->set_domain("");
  o->set_version(14);
  *f->add_node() = make_node("Add", {"a", "b"}, {"s"});
  *f->add_node() = make_node("Relu", {"s"}, {"y"});
  auto* imp = b.proto_model().add_opset_import();
  imp->set_domain("com.test");
  imp->set_version(1);
  b.input("x", F, "batch,seq,1").input("w", F, "768");
  b.node("AddRelu", {"x", "w"}, {"out"}).set_domain("com.test");
  b.output("out");
  auto r = run(b);
  EXPECT_EQ(r["out"], "float32[batch, seq, 768]");
  EXPECT_TRUE(r.report.unknown_ops.empty());
}

TEST(ShapeOps, ShapeSlicesRangeAndScalarArithmetic) {
  ModelProtoBuilder b(15);
  b.input("x", F, "batch,seq,768");
  auto& sh = b.node("Shape", {"x"}, {"tail"});
  attr_i(sh, "start", -2);
  b.ints("two", {2}, {}).ints("st", {1}).ints("en", {3});
  b.node("Shape", {"x"}, {"s"});
  b.node("Slice", {"s", "st", "en"}, {"ss"});  // [seq, 768]
  b.node("ReduceProd", {"ss"}, {"prod"});
  b.node("Div", {"ss", "two"}, {"half"});
  auto r = run(b);
  EXPECT_EQ(to_string(*r.value("tail")), "[seq, 768]");
  EXPECT_EQ(to_string(*r.value("ss")), "[seq, 768]");
  EXPECT_EQ(to_string(*r.value("half")), "[seq/2, 384]");
  EXPECT_EQ(r["prod"], "int64[1]");
}

TEST(ShapeOps, LoopCarriedShapesThatGrowAreGeneralised) {
  ModelProtoBuilder b(14);
  b.input("x", F, "batch,4").ints("n", {3}, {}).ints("zero", {0}, {});
  b.input("flag", B, "");
  auto& loop = b.node("Loop", {"n", "flag", "x", "zero"}, {"grown", "count"});
  GraphProtoBuilder body(attr_g(loop, "body"));
  body.input("i", I64, "").input("c", B, "").input("acc", F, "*").input("k", I64, "*");
  body.ints("one", {1}, {});
  body.node("Identity", {"c"}, {"c_out"});
  attr_i(body.node("Concat", {"acc", "acc"}, {"acc_out"}), "axis", 1);  // [batch, 4] -> [batch, 8] -> ...
  body.node("Add", {"k", "one"}, {"k_out"});
  body.output("c_out").output("acc_out").output("k_out");
  auto r = run(b);
  EXPECT_EQ(r["grown"], "float32[batch, unk__1]");  // 0 iterations: 4; else unk__0*2
  expect_types(r, {{"acc_out", "float32[batch, unk__0*2]"}, {"count", "int64[]"}});
  EXPECT_EQ(r.value("count"), nullptr);  // the carried counter is not the initial 0
  EXPECT_EQ(r.value("k_out"), nullptr);
}

TEST(ShapeOps, ScanStacksAlongTheScanAxis) {
  ModelProtoBuilder b(16);
  b.input("init", F, "2").input("xs", F, "seq,2");
  auto& scan = b.node("Scan", {"init", "xs"}, {"last", "all"});
  attr_i(scan, "num_scan_inputs", 1);
  GraphProtoBuilder body(attr_g(scan, "body"));
  body.input("s", F, "*").input("x", F, "*");
  body.node("Add", {"s", "x"}, {"s_out"});
  body.node("Identity", {"s_out"}, {"y"});
  body.output("s_out").output("y");
  auto r = run(b);
  expect_types(r, {{"last", "float32[2]"}, {"all", "float32[seq, 2]"}});
}
