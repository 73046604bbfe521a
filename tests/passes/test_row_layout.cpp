// sink_transposes and unflatten_gemm: layout ops around row-wise ops (ViT's seq-first
// nn.MultiheadAttention, GPT-2's Conv1D).
#include <gtest/gtest.h>

#include "analysis/shapes.h"
#include "attention_fixture.h"
#include "numeric.h"

namespace onnxforge::test {
namespace {

NewAttr perm(std::vector<int64_t> p) { return NewAttr::Ints("perm", std::move(p)); }

std::vector<float> noise(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(((i * 2654435761u + seed * 40503u) % 2001) / 1000.0 - 1.0);
  return v;
}

// ---- sink_transposes ----------------------------------------------------------------------

struct ProjSpec {
  std::vector<int64_t> perm{1, 0, 2};  // the seq-first transpose
  int64_t slice_axis = -1;
  bool bias_rank2 = false;  // a [S,24] bias broadcasts over the leading axes: not row-wise
  bool leak = false;        // one slice is read directly (no inverse Transpose)
};

// x [B=2, S=5, E=8] → Transpose → MatMul [8,24] → + bias → three Slices → each back through the
// inverse Transpose → combined: nn.MultiheadAttention's in-projection as torch exports it.
std::unique_ptr<Model> projection_model(const ProjSpec& s) {
  GraphBuilder b(17);
  ValueId x = b.input("x", {2, 5, 8});
  ValueId t = b.node("Transpose", {x}, {perm(s.perm)});
  ValueId mm = b.node("MatMul", {t, b.f32("w", {8, 24}, noise(8 * 24, 1))});
  ValueId bias = s.bias_rank2 ? b.f32("bias", {2, 24}, noise(48, 2)) : b.f32("bias", {24}, noise(24, 2));
  ValueId y = b.node("Add", {bias, mm});
  std::vector<int64_t> inv(s.perm.size());
  for (size_t i = 0; i < s.perm.size(); ++i) inv[size_t(s.perm[i])] = int64_t(i);
  std::vector<ValueId> parts;
  for (int i = 0; i < 3; ++i) {
    int64_t lo = s.slice_axis == -1 ? 8 * i : 0, hi = s.slice_axis == -1 ? 8 * (i + 1) : 1 + i;
    ValueId sl = b.node("Slice", {y, b.i64("st" + std::to_string(i), {lo}), b.i64("en" + std::to_string(i), {hi}),
                                  b.i64("ax" + std::to_string(i), {s.slice_axis})});
    if (s.leak && i == 2) {
      b.output(b.node("Relu", {sl}));
      continue;
    }
    parts.push_back(b.node("Transpose", {sl}, {perm(inv)}));
  }
  ValueId out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out = b.node(i == 1 ? "Mul" : "Add", {out, parts[i]});
  b.output(b.node("Sigmoid", {out}));
  return std::move(b.m);
}

TEST(SinkTransposes, SeqFirstInProjectionLosesAllFourTransposes) {
  auto m = optimize_and_check([] { return projection_model({}); }, {"sink_transposes", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  EXPECT_EQ(count_op(g, "Transpose"), 0u);
  EXPECT_EQ(count_op(g, "MatMul"), 1u);
  EXPECT_EQ(count_op(g, "Slice"), 3u);
  infer_shapes(*m);
  EXPECT_EQ(static_shape(g, g.graph_outputs()[0]), (std::vector<int64_t>{2, 5, 8}));
}

TEST(SinkTransposes, LeftAloneWhenNotEveryPathCancelsOrAnOpIsNotRowWise) {
  struct Case {
    const char* why;
    ProjSpec spec;
  };
  const Case cases[] = {
      {"a slice leaves without the inverse Transpose", {{1, 0, 2}, -1, false, true}},
      {"a slice along a permuted axis", {{1, 0, 2}, 0, false, false}},
      {"a bias broadcast over the leading axes", {{1, 0, 2}, -1, true, false}},
      {"a Transpose that moves the last axis", {{0, 2, 1}, 1, false, false}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    auto m = projection_model(c.spec);
    infer_shapes(*m);
    const size_t before = count_op(m->main(), "Transpose");
    auto r = optimize(*m, {"sink_transposes"});
    EXPECT_EQ(r.passes[0].applied, 0u);
    EXPECT_EQ(count_op(m->main(), "Transpose"), before);
  }
}

// ---- unflatten_gemm -----------------------------------------------------------------------

struct GemmSpec {
  std::vector<int64_t> flat{-1, 8};  // Reshape x [B,5,8] to this
  std::vector<int64_t> unflat{-1, 5, 16};
  int64_t trans_a = 0;
  bool bias_rows = false;  // a [M,N] bias (per row)
  bool trans_b = true;
};

std::unique_ptr<Model> gemm_model(const GemmSpec& s) {
  GraphBuilder b(17);
  ValueId x = b.input("x", {-1, 5, 8}, DType::Float, {"batch", "", ""});
  ValueId flat = b.node("Reshape", {x, b.i64("flat", s.flat)});
  const int64_t k = s.flat.back();
  ValueId w = s.trans_b ? b.f32("w", {16, k}, noise(size_t(16 * k), 3)) : b.f32("w", {k, 16}, noise(size_t(16 * k), 3));
  ValueId bias = s.bias_rows ? b.f32("bias", {10, 16}, noise(160, 4)) : b.f32("bias", {16}, noise(16, 4));
  ValueId y =
      b.node("Gemm", {flat, w, bias}, {NewAttr::Int("transB", s.trans_b ? 1 : 0), NewAttr::Int("transA", s.trans_a)});
  b.output(b.node("Relu", {b.node("Reshape", {y, b.i64("unflat", s.unflat)})}));
  return std::move(b.m);
}

TEST(UnflattenGemm, ReshapeGemmReshapeBecomesMatMulAndBias) {
  for (bool trans_b : {true, false}) {
    SCOPED_TRACE(trans_b);
    GemmSpec s;
    s.trans_b = trans_b;
    auto make = [s] {
      auto m = gemm_model(s);
      return m;
    };
    auto m = optimize_and_check(
        make, {"unflatten_gemm", "fold_constants", "eliminate_dead_nodes", "eliminate_unused_initializers"});
    const Graph& g = m->main();
    EXPECT_EQ(count_op(g, "Gemm"), 0u);
    EXPECT_EQ(count_op(g, "Reshape"), 0u);
    EXPECT_EQ(count_op(g, "MatMul"), 1u);
    EXPECT_EQ(count_op(g, "Add"), 1u);
    EXPECT_EQ(count_op(g, "Transpose"), 0u);  // the weight's transpose folded
  }
}

TEST(UnflattenGemm, LeftAloneWhenTheReshapesMoveRowsOrTheGemmIsNotRowWise) {
  struct Case {
    const char* why;
    GemmSpec spec;
  };
  const Case cases[] = {
      {"the flattening splits the last axis", {{-1, 4}, {-1, 5, 16}, 0, false, true}},
      {"the unflattening regroups the rows", {{-1, 8}, {5, -1, 16}, 0, false, true}},
      {"a per-row bias", {{-1, 8}, {-1, 5, 16}, 0, true, true}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    auto m = gemm_model(c.spec);
    if (c.spec.bias_rows) {  // a [M,N] bias needs a static M
      GraphBuilder b(17);
      ValueId x = b.input("x", {2, 5, 8});
      ValueId flat = b.node("Reshape", {x, b.i64("flat", {-1, 8})});
      ValueId y = b.node("Gemm", {flat, b.f32("w", {16, 8}, noise(128, 3)), b.f32("bias", {10, 16}, noise(160, 4))},
                         {NewAttr::Int("transB", 1)});
      b.output(b.node("Reshape", {y, b.i64("unflat", {2, 5, 16})}));
      m = std::move(b.m);
    }
    auto r = optimize(*m, {"unflatten_gemm"});
    EXPECT_EQ(r.passes[0].applied, 0u);
    EXPECT_EQ(count_op(m->main(), "Gemm"), 1u);
  }
  {
    SCOPED_TRACE("transA");
    GraphBuilder b(17);
    ValueId x = b.input("x", {8, 2, 5});
    ValueId flat = b.node("Reshape", {x, b.i64("flat", {8, 10})});
    ValueId y = b.node("Gemm", {flat, b.f32("w", {16, 8}, noise(128, 3))},
                       {NewAttr::Int("transA", 1), NewAttr::Int("transB", 1)});
    b.output(b.node("Reshape", {y, b.i64("unflat", {2, 5, 16})}));
    auto r = optimize(*b.m, {"unflatten_gemm"});
    EXPECT_EQ(r.passes[0].applied, 0u);
  }
}

// ---- the zoo: torchvision ViT's seq-first attention -----------------------------------------

TEST(RowLayoutZoo, VitKeepsOnlyThePatchTransposeAndAgrees) {
  auto m = zoo_at_23("vit_small");
  passes::RunResult r = optimize(*m);
  const Graph& g = m->main();
  // The patch embedding's [B,E,N] → [B,N,E] is the one Transpose left; before these passes each
  // block kept six (4 around the in-projection, 2 around the out-projection) and a Reshape-Gemm-
  // Reshape.
  EXPECT_EQ(count_op(g, "Transpose"), 1u);
  EXPECT_EQ(count_op(g, "Attention"), 2u);
  EXPECT_EQ(count_op(g, "Gemm"), 1u);  // the classifier head
  if (passes::runtime_available()) {
    auto original = load_model(zoo_model("vit_small"));
    passes::Reference ref(*original, passes::VerifyOptions{2, {}});
    auto v = ref.check(*m, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
}

}  // namespace
}  // namespace onnxforge::test
