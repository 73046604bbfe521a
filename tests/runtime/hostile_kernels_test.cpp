// Kernels given what a hostile model can give (issue 14): shapes, types and attribute values
// outside the op's schema. Each must be refused with an onnxforge::Error naming what is wrong,
// never read or write past a buffer, trap (SIGFPE) or loop for hours. The graphs feed the
// offending values as graph inputs, so they reach the kernel at run time (not constant folding).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>

#include "io/budget.h"
#include "ir/error.h"
#include "runtime/runtime.h"
#include "tests/common/graph_builder.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using onnxforge::test::GraphBuilder;
using onnxforge::test::make;
using onnxforge::test::values;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

std::vector<rt::Tensor> run(GraphBuilder& m, const std::vector<rt::Tensor>& ins) {
  rt::Session s(m.model());
  return s.run(ins);
}

// The run fails with an onnxforge::Error whose message contains `what` (and the node's name).
void expect_refused(GraphBuilder& m, const std::vector<rt::Tensor>& ins, const std::string& what) {
  try {
    run(m, ins);
    ADD_FAILURE() << "no error; expected one containing '" << what << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_NE(msg.find("_node"), std::string::npos) << "the message should name the node: " << msg;
  }
}

rt::Tensor f32(std::vector<int64_t> shape, float v = 1.f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return make<float>(DType::Float, shape, std::vector<float>(static_cast<size_t>(n), v));
}
rt::Tensor f64(std::vector<int64_t> shape, double v = 1.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return make<double>(DType::Double, shape, std::vector<double>(static_cast<size_t>(n), v));
}
rt::Tensor i64(std::vector<int64_t> v) { return make<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v); }

// A Loop(M, cond, a0) -> acc whose body adds 1 to acc and passes its condition through
// (Identity, as torch exports it), so it runs all M trips; no scan outputs, so it allocates
// nothing per iteration and the memory budget never stops it. M and cond are graph inputs (an
// absent M: a loop on the condition alone).
struct CountingLoop {
  GraphBuilder b{13};
  explicit CountingLoop(bool with_m = true) {
    Graph& g = b.g();
    ValueId m = with_m ? b.input("M", {}, DType::Int64) : ValueId{};
    ValueId cond = b.input("cond", {}, DType::Bool);
    ValueId a0 = b.input("a0", {1});
    ValueId acc = g.add_value(intern("acc"));
    const GraphId body_id(static_cast<uint32_t>(b.m->graph_count()));
    NodeId loop = g.add_node(intern("Loop"), Sym{}, intern("loop_node"), std::vector<ValueId>{m, cond, a0},
                             std::vector<ValueId>{acc}, std::vector<NewAttr>{NewAttr::Graph("body", body_id)});
    Graph& body = b.m->graph(b.m->add_graph(g.id(), loop));
    ValueId i = body.add_value(intern("i")), c_in = body.add_value(intern("cond_in")),
            a_in = body.add_value(intern("acc_in"));
    body.set_dtype(i, DType::Int64);
    body.set_dtype(c_in, DType::Bool);
    body.set_dtype(a_in, DType::Float);
    body.set_graph_inputs({i, c_in, a_in});
    ValueId one = body.add_value(intern("one"));
    const float v = 1.f;
    const int64_t dim = 1;
    body.set_initializer(one,
                         b.m->tensors.add_owned(intern("one"), DType::Float, std::span<const int64_t>(&dim, 1),
                                                std::span<const std::byte>(reinterpret_cast<const std::byte*>(&v), 4)));
    ValueId c_out = body.add_value(intern("cond_out")), a_out = body.add_value(intern("acc_out"));
    body.add_node(intern("Identity"), Sym{}, intern("keep_going_node"), std::vector<ValueId>{c_in},
                  std::vector<ValueId>{c_out}, {});
    body.add_node(intern("Add"), Sym{}, intern("count_node"), std::vector<ValueId>{a_in, one},
                  std::vector<ValueId>{a_out}, {});
    body.set_dtype(c_out, DType::Bool);
    body.set_dtype(a_out, DType::Float);
    body.set_graph_outputs({c_out, a_out});
    b.outputs({acc});
  }
  std::vector<rt::Tensor> inputs(std::optional<int64_t> trips) const {
    std::vector<rt::Tensor> ins;
    if (trips) ins.push_back(make<int64_t>(DType::Int64, {}, {*trips}));
    ins.push_back(make<uint8_t>(DType::Bool, {}, {1}));
    ins.push_back(make<float>(DType::Float, {1}, {0.f}));
    return ins;
  }
};

// Sets the runtime's limits for one test and restores the defaults after it.
struct Limits {
  Limits(double seconds, uint64_t loop_iterations) {
    set_time_budget(seconds);
    set_loop_iteration_limit(loop_iterations);
  }
  ~Limits() {
    set_time_budget(0);
    set_loop_iteration_limit(kDefaultLoopIterations);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(HostileKernels, LoopIterationsAreLimited) {
  // 2^62 trips with nothing per iteration ran until killed: the memory budget never saw it. The
  // limit is in node steps: each iteration of this body costs 4 (Identity, Add, and 2 for the
  // iteration itself).
  CountingLoop loop;
  {
    Limits limits(0, 4000);
    // Trips within the limit run.
    EXPECT_EQ(values<float>(run(loop.b, loop.inputs(1000))[0]), std::vector<float>{1000});
    expect_refused(loop.b, loop.inputs(1001), "would run all 1001 iterations of its trip count at 4 node steps each");
    // The body's condition is its input passed through, so all 2^62 trips would run: refused
    // before the first iteration, not after the limit's worth of them.
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused(loop.b, loop.inputs(int64_t{1} << 62),
                   "would run all 4611686018427387904 iterations of its trip count at 4 node steps each (the body's "
                   "condition is always true): over the limit of 4000 node steps per Loop (iterations x the body's "
                   "nodes + 2; raise it with --max-loop-iterations N)");
    EXPECT_LT(seconds_since(t0), 5);
  }
  // The default limit (2^23) stops it too, the same way.
  expect_refused(loop.b, loop.inputs(int64_t{1} << 62), "over the limit of 8388608 node steps per Loop");
  // A Loop on its condition alone (no M) is counted as it runs.
  CountingLoop open(false);
  Limits limits(0, 4000);
  expect_refused(open.b, open.inputs(std::nullopt),
                 "ran 1000 iterations of its trip count (none) at 4 node steps each and its condition is still true");
}

TEST(HostileKernels, TimeBudgetStopsAnUnboundedLoop) {
  // No iteration limit to speak of: the time budget is what stops it, at a Loop iteration or a
  // body step, with the node named.
  CountingLoop loop;
  Limits limits(0.2, std::numeric_limits<uint64_t>::max());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run(loop.b, loop.inputs(int64_t{1} << 60));  // 2^62 node steps
    ADD_FAILURE() << "the Loop ended by itself";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("node 'loop_node' (Loop)", 0), 0u) << msg;
    EXPECT_NE(msg.find("over the time budget of 200.0 ms (raise it with --max-time SECONDS)"), std::string::npos)
        << msg;
  }
  EXPECT_LT(seconds_since(t0), 10);
}

TEST(HostileKernels, TimeBudgetIsCheckedBeforeEachNode) {
  GraphBuilder m;
  ValueId x = m.input("x", {2});
  m.outputs({m.node("Relu", {m.node("Neg", {x})})});
  {
    Limits limits(3600, kDefaultLoopIterations);
    EXPECT_EQ(values<float>(run(m, {f32({2})})[0]), (std::vector<float>{0, 0}));
  }
  Limits limits(1e-9, kDefaultLoopIterations);  // spent before the first node
  expect_refused(m, {f32({2})}, "node 'Neg_0_node' (Neg): stopped after");
}

TEST(HostileKernels, PReluOnIntegersWraps) {
  // x * slope for negative x overflowed int32/int64 (undefined; UBSan stops there). It wraps,
  // as Mul does: INT32_MIN * 3 = INT32_MIN (mod 2^32), -2^62 * 4 = 0 (mod 2^64).
  for (DType t : {DType::Int32, DType::Int64}) {
    GraphBuilder m;
    ValueId x = m.input("x", {3}, t);
    ValueId s = m.input("s", {1}, t);
    m.outputs({m.node("PRelu", {x, s})});
    if (t == DType::Int32) {
      auto y =
          run(m, {make<int32_t>(t, {3}, {std::numeric_limits<int32_t>::min(), -5, 7}), make<int32_t>(t, {1}, {3})});
      EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -15, 7}));
    } else {
      auto y = run(m, {make<int64_t>(t, {3}, {-(int64_t{1} << 62), -5, 7}), make<int64_t>(t, {1}, {4})});
      EXPECT_EQ(values<int64_t>(y[0]), (std::vector<int64_t>{0, -20, 7}));
    }
  }
}

TEST(HostileKernels, TransposePermMustBeAPermutation) {
  GraphBuilder m;
  ValueId x = m.input("x", {2, 3});
  m.outputs({m.node("Transpose", {x}, {NewAttr::Ints("perm", {0, 0})})});
  expect_refused(m, {f32({2, 3})}, "is not a permutation");
}

TEST(HostileKernels, ConcatInputsMustAgreeOutsideTheAxis) {
  GraphBuilder m;
  ValueId a = m.input("a", {2, 3});
  ValueId b = m.input("b", {2, 4});
  m.outputs({m.node("Concat", {a, b}, {NewAttr::Int("axis", 0)})});
  expect_refused(m, {f32({2, 3}), f32({2, 4})}, "differ outside axis 0");
}

TEST(HostileKernels, SliceListsOfDifferentLengths) {
  GraphBuilder m;
  ValueId x = m.input("x", {4});
  ValueId st = m.input("st", {1}, DType::Int64);
  ValueId en = m.input("en", {2}, DType::Int64);
  m.outputs({m.node("Slice", {x, st, en})});
  expect_refused(m, {f32({4}), i64({0}), i64({1, 2})}, "starts, ends, axes and steps");
}

TEST(HostileKernels, SliceExtremeStepsTakeAtMostOneElement) {
  // steps of +-2^63 overflowed the output-size arithmetic and the stride (UBSan).
  for (int64_t step : {kMax, kMin}) {
    GraphBuilder m(13);
    ValueId x = m.input("x", {5});
    ValueId st = m.input("st", {1}, DType::Int64);
    ValueId en = m.input("en", {1}, DType::Int64);
    ValueId ax = m.input("ax", {1}, DType::Int64);
    ValueId sp = m.input("sp", {1}, DType::Int64);
    m.outputs({m.node("Slice", {x, st, en, ax, sp})});
    auto y = run(m, {make<float>(DType::Float, {5}, {0, 1, 2, 3, 4}), i64({step > 0 ? 1 : 3}),
                     i64({step > 0 ? 5 : -10}), i64({0}), i64({step})});
    ASSERT_EQ(y[0].shape, (rt::Shape{1})) << step;
    EXPECT_EQ(values<float>(y[0])[0], step > 0 ? 1.f : 3.f);
  }
}

TEST(HostileKernels, SplitSizesMustMatchTheOutputs) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {4});
  ValueId sz = m.input("sz", {3}, DType::Int64);
  auto o = m.node_n("Split", {x, sz}, {}, 2);
  m.outputs(o);
  expect_refused(m, {f32({4}), i64({1, 1, 2})}, "3 sizes for 2 outputs");
}

TEST(HostileKernels, TriluKMustHoldOneValue) {
  GraphBuilder m(14);
  ValueId x = m.input("x", {2, 2});
  ValueId k = m.input("k", {0}, DType::Int64);
  m.outputs({m.node("Trilu", {x, k})});
  expect_refused(m, {f32({2, 2}), i64({})}, "k must hold one value");
}

TEST(HostileKernels, TriluExtremeK) {
  // i + k overflowed for k near int64's limits.
  for (int64_t k : {kMax, kMin}) {
    GraphBuilder m(14);
    ValueId x = m.input("x", {2, 2});
    ValueId kk = m.input("k", {1}, DType::Int64);
    m.outputs({m.node("Trilu", {x, kk})});
    auto y = values<float>(run(m, {f32({2, 2}), i64({k})})[0]);
    EXPECT_EQ(y, std::vector<float>(4, k > 0 ? 0.f : 1.f)) << k;  // upper: nothing / everything kept
  }
}

TEST(HostileKernels, ReshapeNegativeDimsWhoseProductMatches) {
  GraphBuilder m;
  ValueId x = m.input("x", {6});
  ValueId s = m.input("s", {2}, DType::Int64);
  m.outputs({m.node("Reshape", {x, s})});
  expect_refused(m, {f32({6}), i64({-2, -3})}, "negative dimension");
}

TEST(HostileKernels, RangeOperandsOfOtherTypes) {
  GraphBuilder m(11);
  ValueId a = m.input("a", {}, DType::Int64);
  ValueId b = m.input("b", {}, DType::Int8);
  ValueId d = m.input("d", {}, DType::Int64);
  m.outputs({m.node("Range", {a, b, d})});
  expect_refused(
      m,
      {make<int64_t>(DType::Int64, {}, {0}), make<int8_t>(DType::Int8, {}, {5}), make<int64_t>(DType::Int64, {}, {1})},
      "limit needs 1 int64");
}

TEST(HostileKernels, RangeOfNaNIsRefused) {
  GraphBuilder m(11);
  ValueId a = m.input("a", {});
  ValueId b = m.input("b", {});
  ValueId d = m.input("d", {});
  m.outputs({m.node("Range", {a, b, d})});
  expect_refused(m, {f32({}, 0.f), f32({}, std::numeric_limits<float>::quiet_NaN()), f32({}, 1.f)},
                 "is not finite or has too many elements");
}

TEST(HostileKernels, IntegerModAndPowNeverTrap) {
  // INT_MIN % -1 raises SIGFPE on x86; pow's double past int8's range converted is undefined.
  GraphBuilder m;
  ValueId a = m.input("a", {2}, DType::Int32);
  ValueId b = m.input("b", {2}, DType::Int32);
  ValueId c8 = m.input("c", {1}, DType::Int8);
  ValueId e8 = m.input("e", {1}, DType::Int8);
  m.outputs({m.node("Mod", {a, b}), m.node("Pow", {c8, e8})});
  auto y = run(m, {make<int32_t>(DType::Int32, {2}, {std::numeric_limits<int32_t>::min(), 7}),
                   make<int32_t>(DType::Int32, {2}, {-1, -1}), make<int8_t>(DType::Int8, {1}, {3}),
                   make<int8_t>(DType::Int8, {1}, {100})});
  EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{0, 0}));
  ASSERT_EQ(y[1].numel(), 1);
}

TEST(HostileKernels, GemmCMustBroadcast) {
  GraphBuilder m;
  ValueId a = m.input("a", {2, 3});
  ValueId b = m.input("b", {3, 4});
  ValueId cc = m.input("c", {3});
  m.outputs({m.node("Gemm", {a, b, cc})});
  expect_refused(m, {f32({2, 3}), f32({3, 4}), f32({3})}, "does not broadcast to [2, 4]");
}

TEST(HostileKernels, GemmOperandsOfOtherTypes) {
  GraphBuilder m;
  ValueId a = m.input("a", {2, 3});
  ValueId b = m.input("b", {3, 4}, DType::Int8);
  m.outputs({m.node("Gemm", {a, b})});
  expect_refused(m, {f32({2, 3}), make<int8_t>(DType::Int8, {3, 4}, std::vector<int8_t>(12, 1))},
                 "must have the same type");
}

TEST(HostileKernels, GatherFloatIndices) {
  GraphBuilder m;
  ValueId x = m.input("x", {3});
  ValueId i = m.input("i", {1});
  m.outputs({m.node("Gather", {x, i})});
  expect_refused(m, {f32({3}), f32({1}, 1e30f)}, "indices must be int32 or int64");
}

TEST(HostileKernels, InstanceNormShortScale) {
  GraphBuilder m;
  ValueId x = m.input("x", {1, 4, 2});
  ValueId s = m.input("s", {2});
  ValueId b = m.input("b", {4});
  m.outputs({m.node("InstanceNormalization", {x, s, b})});
  expect_refused(m, {f32({1, 4, 2}), f32({2}), f32({4})}, "scale needs 4 float32 elements");
}

TEST(HostileKernels, GroupNormGroupsMustDivideChannels) {
  GraphBuilder m(18);
  ValueId x = m.input("x", {1, 4, 2});
  ValueId s = m.input("s", {4});
  ValueId b = m.input("b", {4});
  m.outputs({m.node("GroupNormalization", {x, s, b}, {NewAttr::Int("num_groups", 0)})});
  expect_refused(m, {f32({1, 4, 2}), f32({4}), f32({4})}, "num_groups 0 does not divide");
}

TEST(HostileKernels, LayerNormScaleMustBroadcast) {
  GraphBuilder m(17);
  ValueId x = m.input("x", {2, 4});
  ValueId s = m.input("s", {3});
  m.outputs({m.node("LayerNormalization", {x, s})});
  expect_refused(m, {f32({2, 4}), f32({3})}, "do not broadcast to the normalized shape");
}

TEST(HostileKernels, PoolWithAHugeKernelDoesNotHang) {
  // A 2^40-tap window (pads as large, stride as large) was stepped through tap by tap per output.
  const int64_t k = int64_t{1} << 40;
  GraphBuilder m;
  ValueId x = m.input("x", {1, 1, 4});
  m.outputs({m.node(
      "MaxPool", {x},
      {NewAttr::Ints("kernel_shape", {k}), NewAttr::Ints("pads", {k - 1, k - 1}), NewAttr::Ints("strides", {k})})});
  auto y = run(m, {make<float>(DType::Float, {1, 1, 4}, {1, 5, 2, 3})});
  ASSERT_EQ(y[0].shape, (rt::Shape{1, 1, 2}));
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 5}));  // windows ending at x[0], from x[1]
}

TEST(HostileKernels, ConvDilationsThatOverflow) {
  GraphBuilder m;
  ValueId x = m.input("x", {1, 1, 4});
  ValueId w = m.input("w", {1, 1, 2});
  m.outputs({m.node("Conv", {x, w}, {NewAttr::Ints("dilations", {kMax})})});
  expect_refused(m, {f32({1, 1, 4}), f32({1, 1, 2})}, "out of range");
}

TEST(HostileKernels, ConvShortBias) {
  GraphBuilder m;
  ValueId x = m.input("x", {1, 1, 4});
  ValueId w = m.input("w", {3, 1, 2});
  ValueId b = m.input("b", {1});
  m.outputs({m.node("Conv", {x, w, b})});
  expect_refused(m, {f32({1, 1, 4}), f32({3, 1, 2}), f32({1})}, "B needs 3 float32 elements");
}

TEST(HostileKernels, EinsumTermLongerThanTheOperand) {
  GraphBuilder m(12);
  ValueId x = m.input("x", {3});
  m.outputs({m.node("Einsum", {x}, {NewAttr::String("equation", "...ab->...")})});
  expect_refused(m, {f32({3})}, "does not fit an operand of rank 1");
}

TEST(HostileKernels, EinsumTooManyCombinations) {
  // The generic loop (types other than float32) over 2^32 label combinations is refused with
  // the count; float32 contracts on the GEMM, where the same equation is two sums and a product.
  GraphBuilder m(12);
  ValueId a = m.input("a", {65536}, DType::Double);
  ValueId b = m.input("b", {65537}, DType::Double);
  m.outputs({m.node("Einsum", {a, b}, {NewAttr::String("equation", "i,j->")})});
  expect_refused(m, {f64({65536}), f64({65537})},
                 "sums over 4295032832 label combinations (i=65536, j=65537) for each of its 2 operands: more than "
                 "2^30 operand reads, the limit of the generic Einsum");
  GraphBuilder f(12);
  ValueId fa = f.input("a", {65536}), fb = f.input("b", {65537});
  f.outputs({f.node("Einsum", {fa, fb}, {NewAttr::String("equation", "i,j->")})});
  auto y = run(f, {f32({65536}, 0.5f), f32({65537}, 2.f)});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{65536.f * 65537.f}));
}

TEST(HostileKernels, EinsumWorkCountsEveryOperand) {
  // 2^29 label combinations of three operands each: 1.5 * 2^30 reads, refused at once (a cap on
  // combinations alone, 2^32, let it run for minutes). The message says which labels. (The
  // generic loop: float64; float32 contracts on the GEMM.)
  GraphBuilder m(12);
  ValueId a = m.input("a", {8192}, DType::Double);
  ValueId b = m.input("b", {256}, DType::Double);
  ValueId c = m.input("c", {256}, DType::Double);
  m.outputs({m.node("Einsum", {a, b, c}, {NewAttr::String("equation", "i,j,k->")})});
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(m, {f64({8192}), f64({256}), f64({256})}, "(i=8192, j=256, k=256) for each of its 3 operands");
  EXPECT_LT(seconds_since(t0), 5);
  // A small one still computes: sum_ij a_i b_j c_j.
  GraphBuilder ok(12);
  ValueId p = ok.input("p", {2}), q = ok.input("q", {3}), r = ok.input("r", {3});
  ok.outputs({ok.node("Einsum", {p, q, r}, {NewAttr::String("equation", "i,j,j->i")})});
  auto y = run(ok, {make<float>(DType::Float, {2}, {1, 2}), make<float>(DType::Float, {3}, {1, 2, 3}),
                    make<float>(DType::Float, {3}, {4, 5, 6})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{32, 64}));
}

TEST(HostileKernels, ConvTransposeOutputPaddingBelowStrideOrDilation) {
  // The spec: each output_padding value must be less than its stride or dilation (PyTorch's
  // rule too). 2 with stride 2 and dilation 1 made an output row no tap reaches (bias only).
  GraphBuilder m;
  ValueId x = m.input("x", {1, 1, 3});
  ValueId w = m.input("w", {1, 1, 2});
  m.outputs({m.node("ConvTranspose", {x, w}, {NewAttr::Ints("strides", {2}), NewAttr::Ints("output_padding", {2})})});
  expect_refused(m, {f32({1, 1, 3}), f32({1, 1, 2})}, "output_padding must lie in [0, max(stride, dilation)), got 2");
  // 1 is fine: the last row gets the taps that reach it. x = [1, 2, 3], w = [1, 10].
  GraphBuilder ok;
  ValueId x2 = ok.input("x", {1, 1, 3});
  ValueId w2 = ok.input("w", {1, 1, 2});
  ok.outputs(
      {ok.node("ConvTranspose", {x2, w2}, {NewAttr::Ints("strides", {2}), NewAttr::Ints("output_padding", {1})})});
  auto y = run(ok, {make<float>(DType::Float, {1, 1, 3}, {1, 2, 3}), make<float>(DType::Float, {1, 1, 2}, {1, 10})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 10, 2, 20, 3, 30, 0}));
}

TEST(HostileKernels, OneHotValuesNeedTwoElements) {
  GraphBuilder m(11);
  ValueId i = m.input("i", {2}, DType::Int64);
  ValueId d = m.input("d", {}, DType::Int64);
  ValueId v = m.input("v", {1});
  m.outputs({m.node("OneHot", {i, d, v})});
  expect_refused(m, {i64({0, 1}), make<int64_t>(DType::Int64, {}, {3}), f32({1})}, "values two");
}

TEST(HostileKernels, CastToAnUnknownType) {
  GraphBuilder m;
  ValueId x = m.input("x", {2});
  m.outputs({m.node("Cast", {x}, {NewAttr::Int("to", 999)})});
  expect_refused(m, {f32({2})}, "is not a numeric tensor type");
}

TEST(HostileKernels, ReverseSequenceLengthsPastTheTimeAxis) {
  GraphBuilder m;
  ValueId x = m.input("x", {3, 2});
  ValueId l = m.input("l", {2}, DType::Int64);
  m.outputs({m.node("ReverseSequence", {x, l})});
  expect_refused(m, {f32({3, 2}), i64({3, 9})}, "sequence_lens values must lie in [0, 3]");
}

TEST(HostileKernels, DetOfNonSquareMatrices) {
  GraphBuilder m;
  ValueId x = m.input("x", {2, 3});
  m.outputs({m.node("Det", {x})});
  expect_refused(m, {f32({2, 3})}, "square matrices");
}

TEST(HostileKernels, ClipBoundsOfAnotherType) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {2}, DType::Int64);
  ValueId lo = m.input("lo", {}, DType::Int8);
  m.outputs({m.node("Clip", {x, lo})});
  expect_refused(m, {i64({1, 2}), make<int8_t>(DType::Int8, {}, {0})}, "scalars of the input's type");
}

TEST(HostileKernels, ReduceOverAScalarWithAnAxis) {
  // Axis 0 of a scalar was written past the (empty) shape on the float64 path.
  GraphBuilder m(13);
  ValueId x = m.input("x", {}, DType::Int8);
  m.outputs({m.node("ReduceMax", {x}, {NewAttr::Ints("axes", {0})})});
  auto y = run(m, {make<int8_t>(DType::Int8, {}, {7})});
  EXPECT_EQ(values<int8_t>(y[0]), (std::vector<int8_t>{7}));
}
