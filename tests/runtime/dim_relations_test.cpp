// Verification sizes that fit the model by themselves (analysis/dim_relations.h): the relations
// shape inference records between symbolic dims, the solver on them, and plan_inputs using it so
// a decoder-with-past graph runs with no --dim.
#include <gtest/gtest.h>

#include "analysis/dim_relations.h"
#include "tests/common/graph_builder.h"
#include "ir/error.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace onnxforge {
namespace {

using test::GraphBuilder;

DimRelation rel(const char* a, const char* b, bool broadcast = true) {
  return DimRelation{SymDim::parse(a), SymDim::parse(b), GraphId{}, NodeId{}, broadcast};
}

TEST(DimRelations, DefaultsThatFitAreKept) {
  auto s = solve_dims({rel("seq", "seq2")}, {{"seq", 128}, {"seq2", 128}}, {});
  EXPECT_EQ(s.values.at("seq"), 128);
  EXPECT_EQ(s.values.at("seq2"), 128);
  EXPECT_TRUE(s.notes.empty());
}

TEST(DimRelations, TheSumIsRederivedAndThePartsKeepTheirDefaults) {
  // A decoder with past: the mask's total_sequence meets the scores' past_sequence+sequence.
  for (const auto& [a, b] :
       {std::pair{"total_sequence", "past_sequence+sequence"}, std::pair{"past_sequence+sequence", "total_sequence"}}) {
    auto s = solve_dims({rel(a, b)}, {{"past_sequence", 128}, {"sequence", 128}, {"total_sequence", 128}}, {});
    EXPECT_EQ(s.values.at("past_sequence"), 128);
    EXPECT_EQ(s.values.at("sequence"), 128);
    EXPECT_EQ(s.values.at("total_sequence"), 256);
    ASSERT_EQ(s.notes.size(), 1u);
    EXPECT_NE(s.notes[0].find("total_sequence"), std::string::npos) << s.notes[0];
    EXPECT_NE(s.notes[0].find("--verify-dim"), std::string::npos) << s.notes[0];
  }
}

TEST(DimRelations, TheUsersSizesAreNeverChanged) {
  // sequence=1 (a decode step) fixed: total follows.
  auto s =
      solve_dims({rel("total_sequence", "past_sequence+sequence")},
                 {{"past_sequence", 127}, {"sequence", 1}, {"total_sequence", 128}}, {"sequence", "past_sequence"});
  EXPECT_EQ(s.values.at("total_sequence"), 128);
  // total fixed by the user, the sum of the parts is not: a part moves, never the given one.
  s = solve_dims({rel("total_sequence", "past_sequence+sequence")},
                 {{"past_sequence", 128}, {"sequence", 128}, {"total_sequence", 200}}, {"total_sequence", "sequence"});
  EXPECT_EQ(s.values.at("total_sequence"), 200);
  EXPECT_EQ(s.values.at("sequence"), 128);
  EXPECT_EQ(s.values.at("past_sequence"), 72);
}

TEST(DimRelations, FreshSymbolsAreDerivedThroughChains) {
  // unk__0 (a value inference could not name) links the two sides.
  auto s = solve_dims({rel("unk__0", "past+seq", false), rel("total", "unk__0")},
                      {{"past", 128}, {"seq", 128}, {"total", 128}}, {});
  EXPECT_EQ(s.values.at("total"), 256);
}

TEST(DimRelations, ABroadcastAgainstOneHolds) {
  auto s = solve_dims({rel("a", "b")}, {{"a", 1}, {"b", 128}}, {});
  EXPECT_EQ(s.values.at("a"), 1);
  EXPECT_EQ(s.values.at("b"), 128);
  // A contraction (not a broadcast) has no such escape: the free side follows.
  s = solve_dims({rel("a", "b", false)}, {{"a", 1}, {"b", 128}}, {"b"});
  EXPECT_EQ(s.values.at("a"), 128);
}

TEST(DimRelations, ConflictingGivenSizesNameBothSidesAndTheFlag) {
  try {
    solve_dims({rel("total_sequence", "past_sequence+sequence")},
               {{"past_sequence", 3}, {"sequence", 1}, {"total_sequence", 9}},
               {"past_sequence", "sequence", "total_sequence"},
               [](const DimRelation&) { return std::string("node 'mask_add'"); });
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), Error::Kind::Usage);
    EXPECT_NE(m.find("total_sequence = past_sequence+sequence"), std::string::npos) << m;
    EXPECT_NE(m.find("mask_add"), std::string::npos) << m;
    EXPECT_NE(m.find("9 and 4"), std::string::npos) << m;
    EXPECT_NE(m.find("--verify-dim"), std::string::npos) << m;
  }
}

// The toy decoder step: K = Concat(past_key, new_key) on the sequence axis, scores = Q @ K^T,
// plus the additive mask built from attention_mask [batch, total_sequence], Softmax, @ V.
struct ToyDecoder {
  GraphBuilder b;
  ToyDecoder() {
    const std::vector<std::string> q_syms = {"batch", "h", "sequence", "d"};
    const std::vector<std::string> p_syms = {"batch", "h", "past_sequence", "d"};
    ValueId q = b.input("q", {-1, 2, -1, 4}, DType::Float, q_syms);
    ValueId k = b.input("k", {-1, 2, -1, 4}, DType::Float, q_syms);
    ValueId past = b.input("past_key", {-1, 2, -1, 4}, DType::Float, p_syms);
    ValueId mask = b.input("attention_mask", {-1, -1}, DType::Float, {"batch", "total_sequence"});
    ValueId keys = b.node("Concat", {past, k}, {NewAttr::Int("axis", 2)});
    ValueId kt = b.node("Transpose", {keys}, {NewAttr::Ints("perm", {0, 1, 3, 2})});
    ValueId scores = b.node("MatMul", {q, kt});
    ValueId m4 = b.node("Unsqueeze", {mask, b.i64("axes", {1, 2})});
    ValueId masked = b.node("Add", {scores, m4}, {}, "mask_add");
    ValueId probs = b.node("Softmax", {masked}, {NewAttr::Int("axis", -1)});
    b.output(b.node("MatMul", {probs, keys}));
    b.output(keys);
  }
};

TEST(DimRelations, ShapeInferenceRecordsTheDecodersRelation) {
  ToyDecoder t;
  bool found = false;
  for (const DimRelation& r : dim_relations(t.b.model())) {
    const std::string a = r.a.str(), b = r.b.str();
    found = found || (a == "past_sequence+sequence" && b == "total_sequence") ||
            (b == "past_sequence+sequence" && a == "total_sequence");
  }
  EXPECT_TRUE(found);
}

TEST(DimRelations, GeneratedInputsOfADecoderWithPastRun) {
  ToyDecoder t;
  rt::Session s(t.b.model());
  rt::InputPlan plan = rt::plan_inputs(t.b.g(), s.input_values(), {});
  ASSERT_EQ(plan.inputs.size(), 4u);
  EXPECT_EQ(plan.inputs[2].shape, (rt::Shape{1, 2, 128, 4}));  // past_key keeps its default
  EXPECT_EQ(plan.inputs[3].shape, (rt::Shape{1, 256}));        // total = past + sequence
  auto out = s.run(rt::make_inputs(plan, 0));
  EXPECT_EQ(out[1].shape, (rt::Shape{1, 2, 256, 4}));
  // A decode step: sequence 1, the past as the defaults give it.
  plan = rt::plan_inputs(t.b.g(), s.input_values(), {{"sequence", 1}});
  EXPECT_EQ(plan.inputs[3].shape, (rt::Shape{1, 129}));
  out = s.run(rt::make_inputs(plan, 0));
  EXPECT_EQ(out[0].shape, (rt::Shape{1, 2, 1, 4}));
  // The user's contradicting sizes are an error naming the node, not a broadcast failure later.
  EXPECT_THROW(
      rt::plan_inputs(t.b.g(), s.input_values(), {{"sequence", 1}, {"past_sequence", 4}, {"total_sequence", 9}}),
      Error);
}

// A Reshape without -1 must keep its input's elements: packed [n] values reshaped to the [2, m]
// of another input need n = 2·m. The generated sizes satisfy it (n re-derived), the model runs,
// and sizes given against it are an error naming the Reshape, not a kernel failure later.
TEST(DimRelations, AReshapeRelatesTheElementCounts) {
  GraphBuilder b(14);
  ValueId x = b.input("x", {-1}, DType::Float, {"n"});
  ValueId y = b.input("y", {2, -1}, DType::Float, {"", "m"});
  ValueId r = b.node("Reshape", {x, b.node("Shape", {y})}, {}, "unpack");
  b.output(b.node("Add", {r, y}));
  bool found = false;
  for (const DimRelation& rel : dim_relations(b.model())) {
    const std::string a = rel.a.str(), c = rel.b.str();
    found = found || (a == "n" && c == "2*m") || (a == "2*m" && c == "n") || (a == "n" && c == "m*2");
  }
  EXPECT_TRUE(found);
  rt::Session s(b.model());
  rt::InputPlan plan = rt::plan_inputs(b.g(), s.input_values(), {{"m", 5}});
  ASSERT_EQ(plan.inputs.size(), 2u);
  EXPECT_EQ(plan.inputs[0].shape, (rt::Shape{10}));
  EXPECT_EQ(s.run(rt::make_inputs(plan, 0))[0].shape, (rt::Shape{2, 5}));
  try {
    rt::plan_inputs(b.g(), s.input_values(), {{"m", 5}, {"n", 7}});
    ADD_FAILURE() << "contradicting sizes were accepted";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("unpack"), std::string::npos) << e.what(); }
}

}  // namespace
}  // namespace onnxforge
