// Shape inference of the standard transformer ops: Attention-23 (all four outputs, 3-D and 4-D,
// GQA, past caches), Swish-24, RMSNormalization-23 (Y takes the scale's type),
// RotaryEmbedding-23 (X's type and shape).
#include <gtest/gtest.h>

#include "analysis/shapes.h"
#include "tests/analysis/shape_builder.h"

using namespace onnxforge;
using namespace onnxforge::test;

TEST(ShapeTransformer, Attention4dWithPastAndGqa) {
  ModelProtoBuilder b(23);
  b.input("q", F, "batch,8,seq,64").input("k", F, "batch,2,seq,64").input("v", F, "batch,2,seq,32");
  b.input("mask", B, "seq,total").input("pk", F, "batch,2,past,64").input("pv", F, "batch,2,past,32");
  b.node("Attention", {"q", "k", "v", "mask", "pk", "pv"}, {"y", "present_k", "present_v", "qk"});
  b.output("y");
  auto r = run(b);
  expect_types(r, {{"y", "float32[batch, 8, seq, 32]"},
                   {"present_k", "float32[batch, 2, past+seq, 64]"},
                   {"present_v", "float32[batch, 2, past+seq, 32]"},
                   {"qk", "float32[batch, 8, seq, past+seq]"}});
  EXPECT_TRUE(r.report.conflicts.empty());
}

TEST(ShapeTransformer, Attention3d) {
  ModelProtoBuilder b(23);
  b.input("q", F16, "batch,seq,768").input("k", F16, "batch,kv,192").input("v", F16, "batch,kv,192");
  auto& n = b.node("Attention", {"q", "k", "v"}, {"y", "present_k", "present_v", "qk"});
  attr_i(n, "q_num_heads", 12);
  attr_i(n, "kv_num_heads", 3);
  b.output("y");
  auto r = run(b);
  expect_types(r, {{"y", "float16[batch, seq, 768]"},
                   {"present_k", "float16[batch, 3, kv, 64]"},
                   {"present_v", "float16[batch, 3, kv, 64]"},
                   {"qk", "float16[batch, 12, seq, kv]"}});
  // Missing head counts for 3-D inputs: a conflict, not a guess.
  ModelProtoBuilder c(23);
  c.input("q", F, "1,4,16").input("k", F, "1,4,16").input("v", F, "1,4,16");
  c.node("Attention", {"q", "k", "v"}, {"y"});
  c.output("y");
  auto bad = run(c);
  EXPECT_FALSE(bad.report.conflicts.empty());
}

TEST(ShapeTransformer, SwishRmsNormRotary) {
  ModelProtoBuilder b(24);
  b.input("x", F16, "batch,seq,64").input("scale", F, "64").input("cos", F, "512,16").input("pos", I64, "batch,seq");
  b.node("Swish", {"x"}, {"s"});
  b.node("RMSNormalization", {"x", "scale"}, {"n"});
  attr_i(b.node("RotaryEmbedding", {"x", "cos", "cos", "pos"}, {"rope"}), "num_heads", 2);
  b.output("s").output("n").output("rope");
  auto r = run(b);
  EXPECT_EQ(r["s"], "float16[batch, seq, 64]");
  EXPECT_EQ(r["n"], "float32[batch, seq, 64]") << "RMSNormalization's Y takes the scale's type";
  EXPECT_EQ(r["rope"], "float16[batch, seq, 64]");
}
