// Generated inputs of a decoder with past (run/bench/verify without --inputs): the new tokens'
// position_ids continue after the cached ones, as optimum's exports number them, so a step on a
// past of P tokens rotates its queries and keys at P.., not again at 0...
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "io/model_io.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"

namespace onnxforge {
namespace {

using test::GraphBuilder;

const rt::InputSpec& spec_of(const rt::InputPlan& plan, const std::string& name) {
  auto it = std::find_if(plan.inputs.begin(), plan.inputs.end(), [&](const auto& s) { return s.name == name; });
  EXPECT_NE(it, plan.inputs.end()) << name;
  return *it;
}

size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

std::vector<int64_t> values_i64(const rt::Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

// position_ids [batch, sequence] read through a table, beside a past [batch, h, past_sequence, d]
// concatenated with the new keys, and (optionally) attention_mask [batch, total_sequence].
std::unique_ptr<Model> toy(bool with_mask) {
  GraphBuilder b;
  const std::vector<std::string> q_syms = {"batch", "h", "sequence", "d"};
  ValueId k = b.input("k", {-1, 2, -1, 4}, DType::Float, q_syms);
  ValueId past = b.input("past_key_values.0.key", {-1, 2, -1, 4}, DType::Float, {"batch", "h", "past_sequence", "d"});
  ValueId pos = b.input("position_ids", {-1, -1}, DType::Int64, {"batch", "sequence"});
  std::vector<float> table(64 * 4);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  ValueId rows = b.node("Gather", {b.f32("table", {64, 4}, table), pos});  // [batch, sequence, 4]
  ValueId keys = b.node("Concat", {past, b.node("Add", {k, b.node("Unsqueeze", {rows, b.i64("axes", {1})})})},
                        {NewAttr::Int("axis", 2)});
  b.output(keys);
  if (with_mask) {
    ValueId mask = b.input("attention_mask", {-1, -1}, DType::Int64, {"batch", "total_sequence"});
    ValueId m = b.node("Cast", {mask}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float))});
    // the mask meets the keys' past + sequence axis: total_sequence = past_sequence + sequence
    b.output(b.node("Mul", {keys, b.node("Unsqueeze", {m, b.i64("axes2", {1, 3})})}));
  }
  return std::move(b.m);
}

TEST(PastPositions, PositionsStartAfterThePast) {
  for (bool with_mask : {true, false}) {
    SCOPED_TRACE(with_mask ? "with attention_mask" : "past input only");
    auto m = toy(with_mask);
    rt::Session s(*m);
    // defaults: past 128, sequence 128 -> positions 128..255
    rt::InputPlan plan = rt::plan_inputs(m->main(), s.input_values(), {{"past_sequence", 6}, {"sequence", 3}});
    EXPECT_EQ(spec_of(plan, "position_ids").first, 6);
    auto in = rt::make_inputs(plan, 0);
    EXPECT_EQ(values_i64(in[index_of(s.input_names(), "position_ids")]), (std::vector<int64_t>{6, 7, 8}));
    bool noted = false;
    for (const std::string& n : plan.notes) noted = noted || n.find("positions 6..8") != std::string::npos;
    EXPECT_TRUE(noted);
    // the table rows the new keys read are those of positions 6..8
    auto out = s.run(in);
    EXPECT_EQ(out[0].shape, (rt::Shape{1, 2, 9, 4}));
    // a first step (no past): from 0
    plan = rt::plan_inputs(m->main(), s.input_values(), {{"past_sequence", 0}, {"sequence", 3}});
    EXPECT_EQ(values_i64(rt::make_inputs(plan, 0)[index_of(s.input_names(), "position_ids")]),
              (std::vector<int64_t>{0, 1, 2}));
  }
}

TEST(PastPositions, NoPastNoOffset) {
  // An encoder's position_ids next to a mask of the same length start at 0.
  GraphBuilder b;
  ValueId pos = b.input("position_ids", {-1, -1}, DType::Int64, {"batch", "sequence"});
  ValueId mask = b.input("attention_mask", {-1, -1}, DType::Int64, {"batch", "sequence"});
  b.output(b.node("Add", {pos, mask}), DType::Int64);
  rt::Session s(b.model());
  rt::InputPlan plan = rt::plan_inputs(b.g(), s.input_values(), {{"sequence", 4}});
  EXPECT_EQ(spec_of(plan, "position_ids").first, 0);
  EXPECT_EQ(values_i64(rt::make_inputs(plan, 0)[0]), (std::vector<int64_t>{0, 1, 2, 3}));
}

// The zoo's decoders with past: a step with the generated inputs of past P on the cache of a
// prefill of P tokens gives the logits of one prefill of all P + S tokens. Positions from 0 (the
// old inputs) rotate the new tokens as the first ones and the logits differ.
TEST(PastPositions, AStepOnThePrefillsCacheMatchesOnePrefill) {
  constexpr int64_t P = 5, S = 3;
  for (const char* name : {"llama_small_past", "phi_small_past", "gemma_small_past", "gpt2_small_past"}) {
    SCOPED_TRACE(name);
    auto model = load_model(test::zoo_model(name));
    rt::Session s(*model);
    const auto ins = s.input_names(), outs = s.output_names();
    const size_t ids = index_of(ins, "input_ids"), pos = index_of(ins, "position_ids"),
                 mask = index_of(ins, "attention_mask"), logits = index_of(outs, "logits");
    ASSERT_LT(pos, ins.size());

    rt::InputPlan step = rt::plan_inputs(model->main(), s.input_values(), {{"past_sequence", P}, {"sequence", S}});
    EXPECT_EQ(spec_of(step, "position_ids").first, P);
    auto step_in = rt::make_inputs(step, 1);
    EXPECT_EQ(values_i64(step_in[pos]), (std::vector<int64_t>{P, P + 1, P + 2}));

    // One prefill of P + S tokens (past 0): the step's new tokens after P others.
    rt::InputPlan full = rt::plan_inputs(model->main(), s.input_values(), {{"past_sequence", 0}, {"sequence", P + S}});
    auto full_in = rt::make_inputs(full, 1);
    EXPECT_EQ(values_i64(full_in[mask]).size(), static_cast<size_t>(P + S));
    for (int64_t i = 0; i < S; ++i) full_in[ids].ptr<int64_t>()[P + i] = step_in[ids].ptr<int64_t>()[i];
    auto full_out = s.run(full_in);

    // The prefill of the first P tokens gives the cache the step reads.
    rt::InputPlan head = rt::plan_inputs(model->main(), s.input_values(), {{"past_sequence", 0}, {"sequence", P}});
    auto head_in = rt::make_inputs(head, 1);
    std::copy_n(full_in[ids].ptr<int64_t>(), P, head_in[ids].ptr<int64_t>());
    auto head_out = s.run(head_in);
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i].starts_with("past_key_values.")) {
        const std::string present = "present." + ins[i].substr(16);
        step_in[i] = head_out[index_of(outs, present)];
      }
    auto step_out = s.run(step_in);

    const rt::Tensor& a = full_out[logits];
    const rt::Tensor& b = step_out[logits];
    ASSERT_EQ(b.shape, (rt::Shape{1, S, a.shape[2]}));
    const int64_t vocab = a.shape[2];
    double worst = 0, scale = 0;
    for (int64_t t = 0; t < S; ++t)
      for (int64_t v = 0; v < vocab; ++v) {
        const float x = a.ptr<float>()[(P + t) * vocab + v], y = b.ptr<float>()[t * vocab + v];
        worst = std::max(worst, static_cast<double>(std::fabs(x - y)));
        scale = std::max(scale, static_cast<double>(std::fabs(x)));
      }
    EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << "logits of the step differ from the prefill's";
  }
}

}  // namespace
}  // namespace onnxforge
