// MatMul weights read in place (SessionOptions::pack_weights off, what verification of a model
// above 512 MiB of weights uses) against packed weights: the same bits on every path of the GEMM
// driver (1-2 rows, one row of tiles, several, K and N tails, bias, residual, activation), for a
// stored weight, an export's Transpose(W) and a fused QKV weight; and a session that holds no
// copy of its weights and drops their mapped pages after each step.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "tests/common/proc_status.h"
#include "io/model_io.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/common/models.h"
#include "tests/passes/optimize.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::status_bytes;

namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

rt::SessionOptions in_place() {
  rt::SessionOptions o = rt::comparison_options();
  o.pack_weights = false;
  return o;
}

// Both sessions on the same inputs: every output bit for bit.
void expect_same_bits(const Model& m, const std::vector<rt::Tensor>& in, const std::string& what) {
  rt::Session packed(m, rt::comparison_options()), direct(m, in_place());
  EXPECT_EQ(packed.in_place_count(), 0u) << what;
  EXPECT_GT(direct.in_place_count(), 0u) << what << ": no weight read in place";
  for (int run = 0; run < 2; ++run) {  // the second run reads the weights again after their pages were dropped
    auto a = packed.run(in), b = direct.run(in);
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].shape, b[i].shape) << what;
      EXPECT_EQ(std::memcmp(a[i].data, b[i].data, a[i].bytes()), 0) << what << ", output " << i << ", run " << run;
    }
  }
}

}  // namespace

// rows 1 and 2 run the wide kernels, up to 128 one row of tiles (panels packed per tile or read in
// place), above it whole column blocks packed per call; from 16 rows a transposed weight without
// an activation is multiplied as C^T = W A^T (a bias becomes per-row); K past one 384-step block
// and N past whole 48-column panels leave tails.
TEST(InPlaceWeights, MatMulMatchesPackedBitForBit) {
  const int64_t rows[] = {1, 2, 7, 64, 130, 300};
  const int64_t ks[] = {5, 401, 1000};
  const int64_t ns[] = {1, 47, 100, 517};
  uint32_t seed = 1;
  for (int64_t m : rows)
    for (int64_t k : ks)
      for (int64_t n : ns)
        for (int form = 0; form < 4; ++form) {  // 0: stored [K, N]; 1: Transpose(W [N, K]); 2: + bias, Relu; 3: + bias
          GraphBuilder b;
          ValueId x = b.input("x", {m, k});
          ValueId w =
              form == 0 ? b.f32("w", {k, n}, random_floats(static_cast<size_t>(k * n), seed++))
                        : b.node("Transpose", {b.f32("w", {n, k}, random_floats(static_cast<size_t>(k * n), seed++))});
          ValueId y = b.node("MatMul", {x, w});
          if (form >= 2) y = b.node("Add", {y, b.f32("bias", {n}, random_floats(static_cast<size_t>(n), seed++))});
          if (form == 2) y = b.node("Relu", {y});
          b.output(y);
          const auto in = make<float>(DType::Float, {m, k}, random_floats(static_cast<size_t>(m * k), seed++));
          expect_same_bits(b.model(), {in},
                           "M " + std::to_string(m) + " K " + std::to_string(k) + " N " + std::to_string(n) + " form " +
                               std::to_string(form));
        }
}

// A residual of the product's shape accumulates onto the output (the GEMM's beta = 1).
TEST(InPlaceWeights, ResidualAccumulationMatchesPacked) {
  for (int64_t m : {3, 129}) {
    GraphBuilder b;
    ValueId x = b.input("x", {m, 200});
    ValueId r = b.input("r", {m, 70});
    ValueId w = b.node("Transpose", {b.f32("w", {70, 200}, random_floats(14000, 5))});
    b.output(b.node("Add", {b.node("MatMul", {x, w}), r}));
    expect_same_bits(b.model(),
                     {make<float>(DType::Float, {m, 200}, random_floats(static_cast<size_t>(m * 200), 6)),
                      make<float>(DType::Float, {m, 70}, random_floats(static_cast<size_t>(m * 70), 7))},
                     "residual, M " + std::to_string(m));
  }
}

// fuse_qkv_projections' weight is a deferred ConcatColumns of three deferred transposes: read in
// place, its parts are multiplied one column block at a time into the one output, never
// concatenated, and give the bits of the packed concatenation (and of the unfused model, so the
// optimizer's verification of the fusion sees max_diff 0 either way).
TEST(InPlaceWeights, FusedQkvWeightIsReadAsItsPartsAndMatches) {
  auto make_model = [] {
    GraphBuilder b;
    ValueId x = b.input("x", {1, 37, 256});
    for (int i = 0; i < 3; ++i) {
      const int64_t rows = i == 0 ? 256 : 64;  // q wider than k and v, as with GQA
      ValueId wt =
          b.node("Transpose",
                 {b.f32("W" + std::to_string(i), {rows, 256}, random_floats(static_cast<size_t>(rows * 256), 10 + i))});
      b.output(b.node("MatMul", {x, wt}));
    }
    return std::move(b.m);
  };
  auto original = make_model();
  auto fused = make_model();
  test::optimize(*fused,
                 {"fold_constants", "fuse_qkv_projections", "eliminate_dead_nodes", "eliminate_unused_initializers"});
  size_t matmuls = 0;
  for (NodeId n : fused->main().nodes()) matmuls += fused->main().is_op(n, "MatMul");
  ASSERT_EQ(matmuls, 1u) << "fuse_qkv_projections did not fuse";
  const auto in = make<float>(DType::Float, {1, 37, 256}, random_floats(37 * 256, 3));
  expect_same_bits(*fused, {in}, "fused qkv");
  rt::Session a(*original, in_place()), b(*fused, in_place());
  EXPECT_EQ(a.in_place_count(), 3u);
  EXPECT_EQ(b.in_place_count(), 1u) << "the ConcatColumns weight was not read in place";
  auto ya = a.run({in}), yb = b.run({in});
  ASSERT_EQ(ya.size(), yb.size());
  for (size_t i = 0; i < ya.size(); ++i)
    EXPECT_EQ(std::memcmp(ya[i].data, yb[i].data, ya[i].bytes()), 0) << "output " << i;
}

// A model of 4 x 16 MiB Transpose(W) weights, saved and mapped back: with packing the session
// holds a packed copy of each (64 MiB); in place it holds none, and after a run none of the
// weights' pages stay mapped (each step drops its weight's pages).
TEST(InPlaceWeights, SessionHoldsNoCopyAndDropsPagesAfterEachStep) {
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr int64_t d = 2048;
  GraphBuilder b;
  ValueId y = b.input("x", {4, d});
  for (int i = 0; i < 4; ++i)
    y = b.node("MatMul", {y, b.node("Transpose", {b.f32("w" + std::to_string(i), {d, d},
                                                        random_floats(static_cast<size_t>(d * d), 20 + i))})});
  b.output(y);
  const auto dir = test::temp_dir("in_place_weights");
  save_model(b.model(), dir / "m.onnx");
  auto m = load_model(dir / "m.onnx");
  const auto in = make<float>(DType::Float, {4, d}, random_floats(4 * d, 1));
  auto resident_after = [&](rt::SessionOptions o, double& after_plan) {
    const double base = status_bytes("VmRSS");
    rt::Session s(*m, o);
    after_plan = status_bytes("VmRSS") - base;
    s.run({in});
    return status_bytes("VmRSS") - base;
  };
  double plan_packed = 0, plan_in_place = 0;
  resident_after(rt::comparison_options(), plan_packed);
  const double run_in_place = resident_after(in_place(), plan_in_place);
  EXPECT_GT(plan_packed, 60 * kMiB) << "the packed session should hold 64 MiB of packed weights";
  EXPECT_LT(plan_in_place, 8 * kMiB) << "in place, the session holds " << plan_in_place / kMiB << " MiB after planning";
  EXPECT_LT(run_in_place, 8 * kMiB) << "in place, " << run_in_place / kMiB << " MiB stay resident after a run";
}
