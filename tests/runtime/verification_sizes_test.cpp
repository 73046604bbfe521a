// The default sequence length of verification scales with the weights (runtime/inputs.h
// verification_sequence): an LLM's seeds do not cost minutes of matmuls, small models keep 128.
#include <gtest/gtest.h>

#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"

namespace onnxforge {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;

TEST(VerificationSizes, TokensHalveAsTheWeightsDouble) {
  EXPECT_EQ(rt::verification_sequence(0), rt::kDefaultSequence);
  EXPECT_EQ(rt::verification_sequence(418 * MiB), 128);  // BERT-base
  EXPECT_EQ(rt::verification_sequence(GiB), 128);
  EXPECT_EQ(rt::verification_sequence(GiB + 1), 64);
  EXPECT_EQ(rt::verification_sequence(2 * GiB), 64);
  EXPECT_EQ(rt::verification_sequence(3 * GiB), 32);
  EXPECT_EQ(rt::verification_sequence(4 * GiB), 32);
  EXPECT_EQ(rt::verification_sequence(4 * GiB + 4 * MiB), 16);  // TinyLlama-1.1B (4.1 GiB), Phi-1.5 (5.3)
  EXPECT_EQ(rt::verification_sequence(1000 * GiB), 16);         // never below 16
}

TEST(VerificationSizes, OnlySequenceLikeDimsShrinkAndTheNoteSaysWhy) {
  test::GraphBuilder b;
  ValueId ids = b.input("input_ids", {-1, -1}, DType::Int64, {"batch", "sequence"});
  ValueId img = b.input("image", {-1, -1}, DType::Float, {"batch", "width"});
  b.output(b.node("Cast", {ids}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))}));
  b.output(img);
  rt::Session s(b.model());
  rt::InputPlan plan = rt::plan_inputs(b.g(), s.input_values(), {}, 16);
  EXPECT_EQ(plan.inputs[0].shape, (rt::Shape{1, 16}));
  EXPECT_EQ(plan.inputs[1].shape, (rt::Shape{1, 128}));  // not a sequence: the usual default
  bool noted = false;
  for (const std::string& n : plan.notes)
    noted = noted || n == "dim 'sequence' = 16 (default for a model of this size; set with --dim sequence=N)";
  EXPECT_TRUE(noted);
  // The user's size wins.
  plan = rt::plan_inputs(b.g(), s.input_values(), {{"sequence", 100}}, 16);
  EXPECT_EQ(plan.inputs[0].shape, (rt::Shape{1, 100}));
}

}  // namespace
}  // namespace onnxforge
