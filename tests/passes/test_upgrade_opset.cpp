// upgrade_opset: one test per adapter (the model built at its old opset and upgraded, both run
// through the runtime on the same inputs: bit-identical outputs, and the new form checked), the
// refusals, subgraphs and local functions, the IR version on disk, the CLI flags, every
// backend-suite model the runtime passes (upgraded to 23, still matching its shipped outputs),
// and zoo models upgraded to 23 in ONNX Runtime 1.30.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>

#include "analysis/shapes.h"
#include "tests/common/graph_builder.h"
#include "optimize.h"
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"
#include "io/model_io.h"
#include "ir/match.h"
#include "passes/upgrade_opset.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/tensor_io.h"
#include "tests/common/models.h"
#include "tests/common/python_model.h"
#include "tests/runtime/ort_run.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;
using passes::upgrade_opset;

namespace {

rt::Tensor randn(DType t, std::vector<int64_t> shape, uint32_t seed) {
  rt::Tensor f = rt::Tensor::alloc(DType::Float, shape);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < f.numel(); ++i) f.ptr<float>()[i] = d(gen);
  return t == DType::Float ? f : rt::cast(f, t);
}

template <class T>
rt::Tensor tensor(DType t, std::vector<int64_t> shape, std::vector<T> v) {
  rt::Tensor x = rt::Tensor::alloc(t, shape);
  std::memcpy(x.data, v.data(), v.size() * sizeof(T));
  return x;
}

bool bit_equal(const rt::Tensor& a, const rt::Tensor& b, std::string* why) {
  if (a.dtype != b.dtype || a.shape != b.shape) {
    *why = std::string(dtype_name(a.dtype)) + rt::shape_str(a.shape) + " vs " + std::string(dtype_name(b.dtype)) +
           rt::shape_str(b.shape);
    return false;
  }
  if (a.bytes() && std::memcmp(a.data, b.data, a.bytes()) != 0) {
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.get_f64(i) != b.get_f64(i) && !(std::isnan(a.get_f64(i)) && std::isnan(b.get_f64(i)))) {
        *why = "element " + std::to_string(i) + ": " + std::to_string(a.get_f64(i)) + " vs " +
               std::to_string(b.get_f64(i));
        return false;
      }
  }
  return true;
}

std::vector<rt::Tensor> run(const Model& m, const std::vector<rt::Tensor>& ins) {
  rt::Session s(m);
  return s.run(ins);
}

// Builds the model twice, upgrades one to `target`, runs both on `inputs`: every output must be
// bit-identical. Returns the upgraded model.
std::unique_ptr<Model> upgrade_same(const std::function<std::unique_ptr<Model>()>& make, int64_t target,
                                    const std::vector<rt::Tensor>& inputs) {
  auto before = make();
  auto after = make();
  passes::UpgradeReport rep = upgrade_opset(*after, target);
  EXPECT_EQ(after->opset(""), target);
  EXPECT_EQ(rep.to, target);
  EXPECT_GE(after->ir_version, passes::min_ir_version(target));
  auto want = run(*before, inputs);
  auto got = run(*after, inputs);
  EXPECT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    std::string why;
    EXPECT_TRUE(bit_equal(want[i], got[i], &why)) << "output " << i << ": " << why;
  }
  return after;
}

NodeId only(const Graph& g, std::string_view op) {
  NodeId found;
  for (NodeId n : g.nodes())
    if (g.is_op(n, op)) {
      EXPECT_FALSE(found.valid()) << "more than one " << op;
      found = n;
    }
  EXPECT_TRUE(found.valid()) << "no " << op;
  return found;
}

std::vector<int64_t> const_input(const Graph& g, NodeId n, size_t i) {
  auto v = constant_ints(g, g.input(n, i));
  return v ? *v : std::vector<int64_t>{-999};
}

}  // namespace

// ------------------------------------------------------------------ attributes that became inputs

TEST(UpgradeOpset, SliceAndTopKAttributesBecomeInputs) {
  auto make = [] {
    GraphBuilder b(9);
    ValueId x = b.input("x", {4, 6});
    b.output(
        b.node("Slice", {x},
               {NewAttr::Ints("starts", {1, -4}), NewAttr::Ints("ends", {3, 100}), NewAttr::Ints("axes", {0, 1})}));
    auto tk = b.node_n("TopK", {x}, {NewAttr::Int("k", 2), NewAttr::Int("axis", 1)}, 2);
    b.output(tk[0]);
    b.output(tk[1], DType::Int64);
    return std::move(b.m);
  };
  auto m = upgrade_same(make, 10, {randn(DType::Float, {4, 6}, 1)});
  const Graph& g = m->main();
  NodeId s = only(g, "Slice");
  EXPECT_EQ(g.inputs(s).size(), 4u);
  EXPECT_EQ(g.attr(s, "starts"), nullptr);
  EXPECT_EQ(const_input(g, s, 1), (std::vector<int64_t>{1, -4}));
  EXPECT_EQ(const_input(g, s, 2), (std::vector<int64_t>{3, 100}));
  NodeId t = only(g, "TopK");
  EXPECT_EQ(const_input(g, t, 1), (std::vector<int64_t>{2}));
  upgrade_same(make, 23, {randn(DType::Float, {4, 6}, 1)});
}

TEST(UpgradeOpset, ClipAndPadAttributesBecomeInputs) {
  for (DType t : {DType::Float, DType::Double, DType::Float16}) {
    auto make = [t] {
      GraphBuilder b(7);
      ValueId x = b.input("x", {2, 3, 4}, t);
      b.output(b.node("Clip", {x}, {NewAttr::Float("min", -0.5f), NewAttr::Float("max", 0.75f)}), t);
      b.output(b.node("Clip", {x}, {NewAttr::Float("max", 0.25f)}), t);
      b.output(b.node("Pad", {x}, {NewAttr::Ints("pads", {0, 1, 2, 0, 2, 1}), NewAttr::Float("value", 1.5f)}), t);
      b.output(b.node("Pad", {x}, {NewAttr::Ints("pads", {0, 0, 1, 0, 0, 2}), NewAttr::String("mode", "reflect")}), t);
      return std::move(b.m);
    };
    SCOPED_TRACE(dtype_name(t));
    auto m = upgrade_same(make, 11, {randn(t, {2, 3, 4}, 2)});
    for (NodeId n : m->main().nodes()) {
      EXPECT_EQ(m->main().attr(n, "min"), nullptr);
      EXPECT_EQ(m->main().attr(n, "pads"), nullptr);
    }
    upgrade_same(make, 23, {randn(t, {2, 3, 4}, 2)});
  }
}

TEST(UpgradeOpset, SqueezeUnsqueezeReduceSumSplitAxesBecomeInputs) {
  auto make = [] {
    GraphBuilder b(11);
    ValueId x = b.input("x", {2, 1, 6});
    ValueId sq = b.node("Squeeze", {x}, {NewAttr::Ints("axes", {1})});
    b.output(b.node("Unsqueeze", {sq}, {NewAttr::Ints("axes", {0, -1})}));
    b.output(b.node("ReduceSum", {x}, {NewAttr::Ints("axes", {0, 2}), NewAttr::Int("keepdims", 0)}));
    b.output(b.node("ReduceSum", {x}));
    auto parts = b.node_n("Split", {x}, {NewAttr::Int("axis", 2), NewAttr::Ints("split", {1, 2, 3})}, 3);
    for (ValueId p : parts) b.output(p);
    auto halves = b.node_n("Split", {x}, {NewAttr::Int("axis", -1)}, 2);
    for (ValueId p : halves) b.output(p);
    b.output(b.node("ReduceMean", {x}, {NewAttr::Ints("axes", {-1})}));
    b.output(b.node("ReduceMax", {x}, {NewAttr::Ints("axes", {0}), NewAttr::Int("keepdims", 0)}));
    b.output(b.node("ReduceLogSumExp", {x}));
    return std::move(b.m);
  };
  const rt::Tensor x = randn(DType::Float, {2, 1, 6}, 3);
  auto m13 = upgrade_same(make, 13, {x});
  for (NodeId n : m13->main().nodes()) EXPECT_EQ(m13->main().attr(n, "split"), nullptr);
  auto m = upgrade_same(make, 18, {x});
  const Graph& g = m->main();
  for (NodeId n : g.nodes()) {
    EXPECT_EQ(g.attr(n, "axes"), nullptr) << str(g.op_type(n));
    if (g.is_op(n, "Split") && !g.input(n, 1).valid()) { EXPECT_EQ(g.attr_int(n, "num_outputs", 0), 2); }
    if (g.is_op(n, "Split") && g.input(n, 1).valid()) {
      EXPECT_EQ(const_input(g, n, 1), (std::vector<int64_t>{1, 2, 3}));
    }
    if (g.is_op(n, "ReduceMean")) { EXPECT_EQ(const_input(g, n, 1), (std::vector<int64_t>{-1})); }
    if (g.is_op(n, "ReduceLogSumExp")) {  // no axes: reduce all
      EXPECT_EQ(g.inputs(n).size(), 1u);
    }
  }
  upgrade_same(make, 24, {x});
}

TEST(UpgradeOpset, DropoutRatioAndMask) {
  // Dropout-7's mask has the input's type; from 10 it is bool (a Cast keeps the float mask).
  auto make = [] {
    GraphBuilder b(7);
    ValueId x = b.input("x", {3, 4});
    auto d = b.node_n("Dropout", {x}, {NewAttr::Float("ratio", 0.3f)}, 2);
    b.output(d[0]);
    b.output(d[1]);
    return std::move(b.m);
  };
  auto m = upgrade_same(make, 12, {randn(DType::Float, {3, 4}, 4)});
  const Graph& g = m->main();
  NodeId d = only(g, "Dropout");
  EXPECT_EQ(g.attr(d, "ratio"), nullptr);
  ASSERT_EQ(g.inputs(d).size(), 2u);
  NodeId cast = only(g, "Cast");
  EXPECT_EQ(g.input(cast, 0), g.output(d, 1));
  upgrade_same(make, 23, {randn(DType::Float, {3, 4}, 4)});
}

// ------------------------------------------------------------------ Softmax's meaning (13)

TEST(UpgradeOpset, SoftmaxFlattenSemantics) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;  // -100: attribute absent (default 1)
    bool expect_flatten;
  };
  const Case cases[] = {{{2, 3, 4}, 1, true},   {{2, 3, 4}, -100, true},  {{2, 3, 4}, 0, true},  {{2, 3, 4}, 2, false},
                        {{2, 3, 4}, -1, false}, {{2, 3, 1, 1}, 1, false}, {{2, 3, 4}, -2, true}, {{5, 7}, -100, false}};
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(op) + " " + rt::shape_str(c.shape) + " axis " + std::to_string(c.axis));
      auto make = [&] {
        GraphBuilder b(11);
        ValueId x = b.input("x", c.shape);
        std::vector<NewAttr> attrs;
        if (c.axis != -100) attrs.push_back(NewAttr::Int("axis", c.axis));
        b.output(b.node(op, {x}, attrs));
        return std::move(b.m);
      };
      auto m = upgrade_same(make, 13, {randn(DType::Float, c.shape, 5)});
      const Graph& g = m->main();
      EXPECT_EQ(count_op(g, "Flatten"), c.expect_flatten ? 1u : 0u);
      EXPECT_EQ(count_op(g, "Reshape"), c.expect_flatten ? 1u : 0u);
      NodeId s = only(g, op);
      if (c.expect_flatten) { EXPECT_EQ(g.attr_int(s, "axis", 0), -1); }
    }
  // Rank unknown: the flattening form, unless the axis is -1.
  for (int64_t axis : {1, -1}) {
    auto make = [axis] {
      GraphBuilder b(12);
      ValueId x = b.g().add_value(intern("x"));
      b.g().set_dtype(x, DType::Float);
      b.g().set_graph_inputs({x});
      b.output(b.node("Softmax", {x}, {NewAttr::Int("axis", axis)}));
      return std::move(b.m);
    };
    auto m = upgrade_same(make, 23, {randn(DType::Float, {2, 3, 5}, 6)});
    EXPECT_EQ(count_op(m->main(), "Flatten"), axis == 1 ? 1u : 0u);
  }
}

// ------------------------------------------------------------------ Resize and Upsample

TEST(UpgradeOpset, ResizeAndUpsample) {
  for (const char* mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    const rt::Tensor x = randn(DType::Float, {1, 2, 3, 5}, 7);
    // op(x) at `opset` in `mode`: the scales an attribute (Upsample-7) or a constant input.
    auto scaled = [&](int64_t opset, const char* op, std::vector<float> scales) {
      return [=] {
        GraphBuilder b(opset);
        ValueId in = b.input("x", {1, 2, 3, 5});
        if (opset < 9)
          b.output(b.node(op, {in}, {NewAttr::String("mode", mode), NewAttr::Floats("scales", scales)}));
        else
          b.output(b.node(op, {in, b.f32("scales", {4}, scales)}, {NewAttr::String("mode", mode)}));
        return std::move(b.m);
      };
    };
    auto m = upgrade_same(scaled(7, "Upsample", {1, 1, 2, 3}), 23, {x});
    NodeId r = only(m->main(), "Resize");
    EXPECT_EQ(m->main().attr_string(r, "coordinate_transformation_mode"), "asymmetric");
    EXPECT_EQ(count_op(m->main(), "Upsample"), 0u);
    upgrade_same(scaled(9, "Upsample", {1, 1, 1.5f, 2.5f}), 11, {x});
    upgrade_same(scaled(9, "Upsample", {1, 1, 1.5f, 2.5f}), 23, {x});
    upgrade_same(scaled(10, "Resize", {1, 1, 0.6f, 1.7f}), 13, {x});
  }
}

// ------------------------------------------------------------------ normalizations

TEST(UpgradeOpset, BatchNormalizationIsTestSpatialAndTraining) {
  const rt::Tensor x = randn(DType::Float, {2, 3, 4}, 8);
  auto make = [](int64_t opset, bool training) {
    return [opset, training] {
      GraphBuilder b(opset);
      ValueId in = b.input("x", {2, 3, 4});
      std::vector<ValueId> p;
      for (const char* n : {"s", "b", "m"}) p.push_back(b.f32(n, {3}, {0.5f, -1.f, 2.f}));
      p.push_back(b.f32("v", {3}, {1.f, 0.25f, 4.f}));
      std::vector<NewAttr> attrs = {NewAttr::Float("epsilon", 1e-3f)};
      if (opset < 9) attrs.push_back(NewAttr::Int("spatial", 1));
      if (opset < 7) attrs.push_back(NewAttr::Int("is_test", 1));
      auto o = b.node_n("BatchNormalization", {in, p[0], p[1], p[2], p[3]}, attrs, training ? 3 : 1);
      for (ValueId v : o) b.output(v);
      return std::move(b.m);
    };
  };
  auto m = upgrade_same(make(6, false), 23, {x});
  NodeId bn = only(m->main(), "BatchNormalization");
  EXPECT_EQ(m->main().attr(bn, "is_test"), nullptr);
  EXPECT_EQ(m->main().attr(bn, "spatial"), nullptr);
  // Training (running mean/var outputs) before 14 becomes training_mode=1.
  auto t = upgrade_same(make(9, true), 15, {x});
  EXPECT_EQ(t->main().attr_int(only(t->main(), "BatchNormalization"), "training_mode", 0), 1);
  // spatial=0 has no later form.
  auto bad = make(8, false)();
  bad->main().add_node(
      intern("BatchNormalization"), Sym{}, intern("bn_spatial0"),
      std::vector<ValueId>{bad->main().graph_inputs()[0], *bad->main().find_value("s"), *bad->main().find_value("b"),
                           *bad->main().find_value("m"), *bad->main().find_value("v")},
      std::vector<ValueId>{bad->main().add_value(intern("y0"))}, std::vector<NewAttr>{NewAttr::Int("spatial", 0)});
  EXPECT_THROW(upgrade_opset(*bad, 9), Error);
}

TEST(UpgradeOpset, GroupNormalizationPerGroupBecomesPerChannel) {
  const rt::Tensor x = randn(DType::Float, {2, 6, 5}, 9);
  // Constant scale/bias: expanded to one value per channel.
  auto constant = [] {
    GraphBuilder b(18);
    ValueId in = b.input("x", {2, 6, 5});
    b.output(b.node("GroupNormalization", {in, b.f32("s", {3}, {0.5f, 2.f, -1.f}), b.f32("b", {3}, {0.f, 1.f, -2.f})},
                    {NewAttr::Int("num_groups", 3)}));
    return std::move(b.m);
  };
  auto m = upgrade_same(constant, 21, {x});
  NodeId gn = only(m->main(), "GroupNormalization");
  auto s = constant_values(m->main(), m->main().input(gn, 1));
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, (std::vector<double>{0.5, 0.5, 2, 2, -1, -1}));
  // Scale/bias from graph inputs and a symbolic channel count: expanded by ops.
  auto dynamic = [] {
    GraphBuilder b(18);
    ValueId in = b.input("x", {2, -1, 5}, DType::Float, {"n", "channels"});
    b.output(b.node("GroupNormalization", {in, b.input("s", {3}), b.input("b", {3})}, {NewAttr::Int("num_groups", 3)}));
    return std::move(b.m);
  };
  auto d = upgrade_same(dynamic, 21, {x, randn(DType::Float, {3}, 10), randn(DType::Float, {3}, 11)});
  EXPECT_EQ(count_op(d->main(), "Expand"), 2u);
  upgrade_same(dynamic, 24, {x, randn(DType::Float, {3}, 10), randn(DType::Float, {3}, 11)});
}

// ------------------------------------------------------------------ opset 6 -> 7 and odd ones

TEST(UpgradeOpset, LegacyBroadcastGemmPReluScatterOneHot) {
  auto make = [] {
    GraphBuilder b(6);
    ValueId a = b.input("a", {2, 3, 4});
    ValueId c = b.input("c", {3, 4});
    b.output(b.node("Add", {a, c}, {NewAttr::Int("broadcast", 1), NewAttr::Int("axis", 1)}));
    b.output(b.node("Mul", {a, b.f32("k", {}, {2.f})}, {NewAttr::Int("broadcast", 1)}));
    ValueId m = b.input("m", {2, 4});
    b.output(b.node("Gemm", {m, b.f32("w", {4, 3}, std::vector<float>(12, 0.5f)), b.f32("bias", {3}, {1, 2, 3})},
                    {NewAttr::Int("broadcast", 1)}));
    b.output(b.node("PRelu", {a, b.f32("slope", {3}, {0.1f, 0.2f, 0.3f})}));
    return std::move(b.m);
  };
  auto m = upgrade_same(
      make, 23, {randn(DType::Float, {2, 3, 4}, 12), randn(DType::Float, {3, 4}, 13), randn(DType::Float, {2, 4}, 14)});
  for (NodeId n : m->main().nodes()) EXPECT_EQ(m->main().attr(n, "broadcast"), nullptr);
  // PRelu's per-channel slope became [3, 1].
  NodeId pr = only(m->main(), "PRelu");
  EXPECT_TRUE(m->main().producer(m->main().input(pr, 1)).valid());

  // B aligned at axis 1 of a rank-3 A: an Unsqueeze gives it a trailing 1 (numpy alignment).
  GraphBuilder b(6);
  ValueId a = b.input("a", {2, 3, 4});
  b.output(b.node("Add", {a, b.f32("c3", {3}, {10, 20, 30})}, {NewAttr::Int("broadcast", 1), NewAttr::Int("axis", 1)}));
  upgrade_opset(*b.m, 23);
  EXPECT_EQ(count_op(b.m->main(), "Unsqueeze"), 1u);
  const rt::Tensor xa = randn(DType::Float, {2, 3, 4}, 15);
  auto y = run(*b.m, {xa});
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(y[0].ptr<float>()[i], xa.ptr<float>()[i] + 10.f * static_cast<float>(1 + (i / 4) % 3));

  // Scatter -> ScatterElements; OneHot-9's negative indices stay all-off.
  auto odd = [] {
    GraphBuilder b(9);
    ValueId d = b.input("d", {3, 3});
    ValueId idx = b.input("i", {1, 2}, DType::Int64);
    b.output(b.node("Scatter", {d, idx, b.f32("u", {1, 2}, {7, 8})}, {NewAttr::Int("axis", 1)}));
    ValueId oh = b.input("oh", {4}, DType::Int64);
    b.output(b.node("OneHot", {oh, b.init<int64_t>("depth", {1}, {3}, DType::Int64), b.f32("vals", {2}, {0, 1})}));
    return std::move(b.m);
  };
  auto o = upgrade_same(odd, 23,
                        {randn(DType::Float, {3, 3}, 16), tensor<int64_t>(DType::Int64, {1, 2}, {2, 0}),
                         tensor<int64_t>(DType::Int64, {4}, {0, -1, 2, 5})});
  EXPECT_EQ(count_op(o->main(), "Scatter"), 0u);
  EXPECT_EQ(count_op(o->main(), "ScatterElements"), 1u);
  EXPECT_EQ(count_op(o->main(), "Where"), 1u);
  auto oy = run(*o, {randn(DType::Float, {3, 3}, 16), tensor<int64_t>(DType::Int64, {1, 2}, {2, 0}),
                     tensor<int64_t>(DType::Int64, {4}, {0, -1, 2, 5})});
  EXPECT_EQ(oy[1].ptr<float>()[1 * 3 + 2], 0.f) << "index -1 at opset 9 is all off";
}

// Attributes renamed or re-typed (runtime lacks some of these ops: structure only).
TEST(UpgradeOpset, RenamedAndRetypedAttributes) {
  GraphBuilder b(1);
  ValueId x = b.input("x", {2, 3});
  b.output(b.node("Cast", {x}, {NewAttr::String("to", "INT64")}), DType::Int64);
  b.output(b.node("Reshape", {x}, {NewAttr::Ints("shape", {3, 2}), NewAttr::Ints("consumed_inputs", {0})}));
  b.output(b.node("Concat", {x, x}));
  b.output(b.node("Pad", {x}, {NewAttr::Ints("paddings", {0, 1, 0, 1})}));
  upgrade_opset(*b.m, 23);
  const Graph& g = b.m->main();
  EXPECT_EQ(g.attr_int(only(g, "Cast"), "to", 0), 7);
  NodeId r = only(g, "Reshape");
  EXPECT_EQ(const_input(g, r, 1), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(g.attr(r, "consumed_inputs"), nullptr);
  EXPECT_EQ(g.attr_int(only(g, "Concat"), "axis", -1), 1);
  EXPECT_EQ(const_input(g, only(g, "Pad"), 1), (std::vector<int64_t>{0, 1, 0, 1}));
  auto y = run(*b.m, {randn(DType::Float, {2, 3}, 17)});
  EXPECT_EQ(y[1].shape, (rt::Shape{3, 2}));
  EXPECT_EQ(y[2].shape, (rt::Shape{2, 6}));

  GraphBuilder c(17);
  ValueId img = c.input("img", {1, 1, 4, 4});
  ValueId grid = c.input("grid", {1, 2, 2, 2});
  c.output(c.node("GridSample", {img, grid}, {NewAttr::String("mode", "bilinear")}));
  ValueId sig = c.input("sig", {1, 8, 1});
  c.output(c.node("DFT", {sig}, {NewAttr::Int("axis", 1)}));
  upgrade_opset(*c.m, 24);
  const Graph& h = c.m->main();
  EXPECT_EQ(h.attr_string(only(h, "GridSample"), "mode"), "linear");
  NodeId dft = only(h, "DFT");
  EXPECT_EQ(h.attr(dft, "axis"), nullptr);
  EXPECT_EQ(const_input(h, dft, 2), (std::vector<int64_t>{1}));
  GraphBuilder d(11);
  ValueId fm = d.input("fm", {1, 1, 4, 4});
  d.output(d.node("RoiAlign", {fm, d.input("rois", {1, 4}), d.input("bi", {1}, DType::Int64)}));
  upgrade_opset(*d.m, 16);
  EXPECT_EQ(d.m->main().attr_string(only(d.m->main(), "RoiAlign"), "coordinate_transformation_mode"),
            "output_half_pixel");
}

// ------------------------------------------------------------------ refusals

TEST(UpgradeOpset, RefusesDowngradesAndOpsetsTheRuntimeCannotRun) {
  GraphBuilder b(14);
  b.output(b.node("Relu", {b.input("x", {2})}));
  try {
    upgrade_opset(*b.m, 13);
    ADD_FAILURE() << "downgrade accepted";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("downgrade"), std::string::npos) << e.what(); }
  EXPECT_THROW(upgrade_opset(*b.m, passes::kMaxRuntimeOpset + 1), Error);
  EXPECT_THROW(upgrade_opset(*b.m, 6), Error);
  EXPECT_EQ(b.m->opset(""), 14) << "a refused upgrade changes nothing";
  // Same opset: nothing changes but a too-low IR version is raised.
  b.m->ir_version = 3;
  auto r = upgrade_opset(*b.m, 14);
  EXPECT_EQ(r.adapted, 0u);
  EXPECT_EQ(b.m->ir_version, 7);

  // Resize's tf_half_pixel_for_nn: an equivalent half_pixel form for floor and
  // round_prefer_floor rounding, none for the other two.
  for (const char* nearest : {"floor", "round_prefer_floor", "ceil"}) {
    SCOPED_TRACE(nearest);
    auto make = [nearest] {
      GraphBuilder s(11);
      ValueId x = s.input("x", {1, 1, 5, 7});
      s.output(s.node("Resize", {x, s.f32("roi", {0}, {}), s.f32("sc", {4}, {1, 1, 1.7f, 0.45f})},
                      {NewAttr::String("coordinate_transformation_mode", "tf_half_pixel_for_nn"),
                       NewAttr::String("nearest_mode", nearest)}));
      return std::move(s.m);
    };
    if (std::string_view(nearest) != "ceil") {
      auto m = upgrade_same(make, 13, {randn(DType::Float, {1, 1, 5, 7}, 19)});
      EXPECT_EQ(m->main().attr_string(only(m->main(), "Resize"), "coordinate_transformation_mode"), "half_pixel");
      continue;
    }
    auto m = make();
    try {
      upgrade_opset(*m, 13);
      ADD_FAILURE() << "tf_half_pixel_for_nn with ceil accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tf_half_pixel_for_nn"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Resize"), std::string::npos) << e.what();
    }
  }
}

// ------------------------------------------------------------------ subgraphs, functions, IR on disk

TEST(UpgradeOpset, SubgraphsAreUpgradedWithTheMainGraph) {
  fs::path p = python_model("upgrade_if", R"PY(
then_g = h.make_graph([h.make_node('Softmax', ['x'], ['t'], axis=1)], 'then', [], [h.make_tensor_value_info('t', T.FLOAT, [2, 1, 3])])
body = h.make_graph([h.make_node('Squeeze', ['x'], ['s'], axes=[1]), h.make_node('Unsqueeze', ['s'], ['e'], axes=[1])],
                    'else', [], [h.make_tensor_value_info('e', T.FLOAT, [2, 1, 3])])
g = h.make_graph([h.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=body)], 'g',
                 [h.make_tensor_value_info('c', T.BOOL, []), h.make_tensor_value_info('x', T.FLOAT, [2, 1, 3])],
                 [h.make_tensor_value_info('y', T.FLOAT, [2, 1, 3])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 11)])
)PY");
  auto make = [&] { return load_model(p); };
  const rt::Tensor x = randn(DType::Float, {2, 1, 3}, 20);
  for (uint8_t c : {0, 1}) {
    auto m = upgrade_same(make, 23, {tensor<uint8_t>(DType::Bool, {}, {c}), x});
    size_t squeezes = 0, flattens = 0;
    for (size_t i = 1; i < m->graph_count(); ++i) {
      const Graph& body = m->graph(GraphId(static_cast<uint32_t>(i)));
      for (NodeId n : body.nodes()) {
        EXPECT_EQ(body.attr(n, "axes"), nullptr);
        squeezes += body.is_op(n, "Squeeze");
        flattens += body.is_op(n, "Flatten");
      }
    }
    EXPECT_EQ(squeezes, 1u);
    EXPECT_EQ(flattens, 1u) << "Softmax over axis 1 of [2, 1, 3] flattens";
  }
}

TEST(UpgradeOpset, LocalFunctionsAndTheirOpsetImport) {
  fs::path p = python_model("upgrade_fn", R"PY(
f = h.make_function('custom', 'SoftSq', ['a'], ['b'],
                    [h.make_node('Squeeze', ['a'], ['s'], axes=[0]), h.make_node('Softmax', ['s'], ['b'], axis=0)],
                    [h.make_opsetid('', 12)])
g = h.make_graph([h.make_node('SoftSq', ['x'], ['y'], domain='custom')], 'g',
                 [h.make_tensor_value_info('x', T.FLOAT, [1, 4, 5])], [h.make_tensor_value_info('y', T.FLOAT, [4, 5])])
m = h.make_model(g, opset_imports=[h.make_opsetid('', 12), h.make_opsetid('custom', 1)], functions=[f])
)PY");
  auto m = load_model(p);
  upgrade_opset(*m, 23);
  const fs::path out = temp_dir("upgrade_fn_out") / "up.onnx";
  save_model(*m, out);
  // onnx reads it back: the function imports opset 23, its constants are Constant nodes
  // (functions have no initializers), Softmax flattens at axis 0 and the Squeeze takes axes.
  const std::string check =
      "/usr/bin/python3 -c \"import onnx; m = onnx.load('" + out.string() +
      "'); f = m.functions[0]; "
      "assert m.ir_version == 11, m.ir_version; "
      "assert [(o.domain, o.version) for o in f.opset_import if o.domain in ('', 'ai.onnx')][0][1] == 23, "
      "f.opset_import; "
      "ops = [n.op_type for n in f.node]; assert 'Flatten' in ops and 'Constant' in ops, ops; "
      "sq = [n for n in f.node if n.op_type == 'Squeeze'][0]; assert len(sq.input) == 2 and not sq.attribute, sq\"";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
}

TEST(UpgradeOpset, IrVersionIsWrittenAndReadBack) {
  for (int64_t target : {13, 18, 21, 23, 24}) {
    GraphBuilder b(9);
    b.output(b.node("Unsqueeze", {b.input("x", {3})}, {NewAttr::Ints("axes", {0})}));
    upgrade_opset(*b.m, target);
    const fs::path out = temp_dir("upgrade_ir") / ("m" + std::to_string(target) + ".onnx");
    save_model(*b.m, out);
    auto back = load_model(out);
    EXPECT_EQ(back->opset(""), target);
    EXPECT_EQ(back->ir_version, std::max<int64_t>(8, passes::min_ir_version(target)))
        << "never lowered, raised as needed";
  }
  EXPECT_EQ(passes::min_ir_version(23), 11);
  EXPECT_EQ(passes::min_ir_version(24), 12);
  EXPECT_EQ(passes::min_ir_version(17), 8);
}

// ------------------------------------------------------------------ the step before the pipeline

// A Softmax-12 over axis 1 of [2, 3, 4]: three helper nodes at 13 (Flatten, Shape, Reshape).
std::unique_ptr<Model> softmax12() {
  GraphBuilder b(12);
  ValueId x = b.input("x", {2, 3, 4});
  b.output(b.node("Softmax", {x}));
  return std::move(b.m);
}

TEST(UpgradeStep, NothingAndNoReportWithoutATarget) {
  auto m = softmax12();
  const int64_t ir = m->ir_version;
  EXPECT_FALSE(passes::upgrade_step(*m, std::nullopt).has_value());
  EXPECT_EQ(m->opset(""), 12);
  EXPECT_EQ(m->ir_version, ir);
  EXPECT_EQ(m->main().node_count(), 1u);
}

TEST(UpgradeStep, ReportsWhatItUpgradedAndAdapted) {
  auto m = softmax12();
  const NodeId before = only(m->main(), "Softmax");
  const std::string name(str(m->main().node_name(before)));
  const std::optional<passes::UpgradeReport> r = passes::upgrade_step(*m, 23);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(m->opset(""), 23);
  EXPECT_EQ(r->requested, 23);
  EXPECT_EQ(r->from, 12);
  EXPECT_EQ(r->to, 23);
  EXPECT_EQ(r->ir_to, 11);
  EXPECT_EQ(r->adapted, 1u);
  EXPECT_EQ(r->added, 3u) << "Flatten, Shape, Reshape";
  EXPECT_EQ(r->by_adapter.at("Softmax-13"), 1u);
  EXPECT_TRUE(r->refused.empty());
  EXPECT_EQ(str(m->main().node_name(only(m->main(), "Softmax"))), name) << "an adapted node keeps its name";
  const nlohmann::json j = passes::upgrade_json(*r);
  EXPECT_EQ(j["opset_from"], 12);
  EXPECT_EQ(j["opset_to"], 23);
  EXPECT_EQ(j["nodes_adapted"], 1);
  EXPECT_EQ(j["nodes_added"], 3);
  EXPECT_EQ(j["adapters"]["Softmax-13"], 1);
  EXPECT_FALSE(j.contains("refused")) << "said only when the step stopped short";
  EXPECT_EQ(passes::upgrade_text(*r),
            "opset 12 -> 23, IR " + std::to_string(r->ir_from) + " -> 11 (1 nodes adapted, 3 added)");
}

TEST(UpgradeStep, StopsAtTheTargetsCapAndSaysWhy) {
  auto m = softmax12();
  const auto r = passes::upgrade_step(*m, 23, {.opset = 17, .why = "the deployment lacks an op at 18"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(m->opset(""), 17);
  EXPECT_EQ(r->to, 17);
  EXPECT_EQ(r->requested, 23);
  EXPECT_EQ(r->refused, "the deployment lacks an op at 18");
  const nlohmann::json j = passes::upgrade_json(*r);
  EXPECT_EQ(j["opset_requested"], 23);
  EXPECT_EQ(j["refused"], "the deployment lacks an op at 18");
  // A cap below the model's own opset: no downgrade, the model stays where it is.
  auto n = softmax12();
  const auto s = passes::upgrade_step(*n, 23, {.opset = 9, .why = "too old"});
  EXPECT_EQ(n->opset(""), 12);
  EXPECT_EQ(s->to, 12);
  EXPECT_EQ(s->refused, "too old");
}

TEST(UpgradeStep, RefusesBadTargetsBeforeAnyChange) {
  auto m = softmax12();
  for (int64_t bad : {int64_t{0}, int64_t{6}, passes::kMaxRuntimeOpset + 1}) {
    try {
      passes::upgrade_step(*m, bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) { EXPECT_EQ(e.kind(), Error::Kind::Usage) << bad << ": " << e.what(); }
  }
  EXPECT_THROW(passes::upgrade_step(*m, 11), Error) << "a downgrade";
  EXPECT_EQ(m->opset(""), 12);
  EXPECT_EQ(m->main().node_count(), 1u);
}

// ------------------------------------------------------------------ the CLI

TEST(UpgradeOpset, OptimizeAndConvertFlags) {
  const fs::path dir = temp_dir("upgrade_cli");
  const fs::path in = zoo_model("bert_small");
  const std::string bin = std::string(ONNXFORGE_BINARY_DIR) + "/onnxforge";
  // `onnxforge COMMAND bert_small -o DIR/OUT ARGS`: its exit code.
  auto cli = [&](const std::string& command, const std::string& out, const std::string& args) {
    const std::string cmd = bin + " " + command + " '" + in.string() + "' -o '" + (dir / out).string() + "' " + args;
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_EQ(cli("optimize", "opt.onnx",
                "--target-opset 23 --verify-seeds 1 --report '" + (dir / "r.json").string() + "' > /dev/null 2>&1"),
            0);
  auto opt = load_model(dir / "opt.onnx");
  EXPECT_EQ(opt->opset(""), 23);
  EXPECT_EQ(opt->ir_version, 11);
  std::ifstream rj(dir / "r.json");
  const auto report = nlohmann::json::parse(rj);
  EXPECT_EQ(report["upgrade"]["opset_from"], 14);
  EXPECT_GT(report["upgrade"]["nodes_adapted"].get<int>(), 0);
  EXPECT_TRUE(report["verification"]["ok"].get<bool>());

  ASSERT_EQ(cli("convert", "conv.onnx", "--target-opset 18 2> /dev/null"), 0);
  EXPECT_EQ(load_model(dir / "conv.onnx")->opset(""), 18);
  // A downgrade and an opset the runtime does not implement: exit 2, nothing written.
  EXPECT_EQ(cli("convert", "down.onnx", "--target-opset 12 2> /dev/null"), 2);
  EXPECT_FALSE(fs::exists(dir / "down.onnx"));
  EXPECT_EQ(cli("optimize", "down.onnx", "--target-opset 12 > /dev/null 2>&1"), 2);
  EXPECT_EQ(cli("optimize", "far.onnx", "--target-opset 30 > /dev/null 2>&1"), 2);
  EXPECT_FALSE(fs::exists(dir / "far.onnx"));
  // One type from the option to the step: 0 is an opset like any other (out of range), not "unset".
  EXPECT_EQ(cli("optimize", "zero.onnx", "--target-opset 0 --no-verify > /dev/null 2>&1"), 2);
  EXPECT_FALSE(fs::exists(dir / "zero.onnx"));
  // convert says what the same step did, in the same JSON.
  ASSERT_EQ(cli("convert", "conv.onnx",
                "--target-opset 23 --overwrite --json > '" + (dir / "c.json").string() + "' 2> /dev/null"),
            0);
  std::ifstream cj(dir / "c.json");
  const auto converted = nlohmann::json::parse(cj);
  EXPECT_EQ(converted["upgrade"]["opset_to"], 23);
  EXPECT_EQ(converted["upgrade"]["nodes_adapted"], report["upgrade"]["nodes_adapted"]);
  EXPECT_EQ(converted["upgrade"]["adapters"], report["upgrade"]["adapters"]);
}

// ------------------------------------------------------------------ the backend suites

namespace {

// onnx's backend runner tolerance (as tests/runtime/backend_test.cpp).
bool close_to_shipped(const rt::Tensor& got, rt::Tensor want, std::string* why) {
  if (got.dtype == DType::BFloat16 && want.dtype == DType::Uint16) want.dtype = DType::BFloat16;
  if (got.dtype != want.dtype || got.shape != want.shape) {
    *why = "type/shape " + std::string(dtype_name(got.dtype)) + rt::shape_str(got.shape) + " vs " +
           std::string(dtype_name(want.dtype)) + rt::shape_str(want.shape);
    return false;
  }
  const bool fp = rt::is_float_dtype(want.dtype);
  for (int64_t i = 0, n = want.numel(); i < n; ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    if (fp) {
      if (std::isnan(a) || std::isnan(b)) {
        if (std::isnan(a) != std::isnan(b)) return *why = "NaN mismatch at " + std::to_string(i), false;
        continue;
      }
      if (a == b || std::fabs(a - b) <= 1e-7 + 1e-3 * std::fabs(b)) continue;
      return *why = "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b), false;
    }
    if (got.get_i64(i) != want.get_i64(i)) return *why = "element " + std::to_string(i), false;
  }
  return true;
}

}  // namespace

// Every backend-suite model the runtime passes (tests/runtime/backend_passing.txt), upgraded from
// its own opset to 23, written and read back: its shipped outputs still match, and the outputs
// are bit-identical to the original model's in the runtime.
TEST(UpgradeOpset, BackendSuiteModelsUpgradedTo23) {
  if (!fs::exists(backend_data_dir() / "node"))
    GTEST_SKIP() << "libonnx-testdata missing (apt install libonnx-testdata)";
  std::ifstream list(ONNXFORGE_SOURCE_DIR "/tests/runtime/backend_passing.txt");
  const fs::path tmp = temp_dir("upgrade_backend");
  int models = 0, changed = 0, refused = 0;
  std::map<std::string, size_t> adapters;
  std::vector<std::string> refusals;
  for (std::string line; std::getline(list, line);) {
    if (line.empty() || line[0] == '#') continue;
    SCOPED_TRACE(line);
    const fs::path dir = backend_data_dir() / line;
    auto original = load_model(dir / "model.onnx");
    auto upgraded = load_model(dir / "model.onnx");
    passes::UpgradeReport rep;
    try {
      rep = upgrade_opset(*upgraded, 23);
    } catch (const Error& e) {
      // Allowed only for forms with no later equivalent; listed below.
      refusals.push_back(line + ": " + e.what());
      ++refused;
      continue;
    }
    ++models;
    changed += rep.adapted > 0;
    for (auto& [k, n] : rep.by_adapter) adapters[k] += n;
    const fs::path file = tmp / (std::to_string(models) + ".onnx");
    save_model(*upgraded, file);
    auto reread = load_model(file);
    ASSERT_EQ(reread->opset(""), 23);
    ASSERT_EQ(reread->ir_version, 11);
    rt::Session before(*original), after(*reread);
    for (auto& ds : fs::directory_iterator(dir)) {
      if (!ds.is_directory() || ds.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      std::vector<rt::Tensor> inputs, expected;
      for (size_t i = 0; fs::exists(ds.path() / ("input_" + std::to_string(i) + ".pb")); ++i)
        inputs.push_back(rt::read_tensor_pb(ds.path() / ("input_" + std::to_string(i) + ".pb")));
      for (size_t i = 0; fs::exists(ds.path() / ("output_" + std::to_string(i) + ".pb")); ++i)
        expected.push_back(rt::read_tensor_pb(ds.path() / ("output_" + std::to_string(i) + ".pb")));
      for (size_t i = 0; i < inputs.size() && i < after.input_values().size(); ++i)
        if (inputs[i].dtype == DType::Uint16 && reread->main().dtype(after.input_values()[i]) == DType::BFloat16)
          inputs[i].dtype = DType::BFloat16;
      std::vector<rt::Tensor> got, want;
      try {
        got = after.run(inputs);
        want = before.run(inputs);
      } catch (const std::exception& e) {
        ADD_FAILURE() << ds.path().filename() << ": " << e.what();
        continue;
      }
      for (size_t i = 0; i < expected.size() && i < got.size(); ++i) {
        std::string why;
        EXPECT_TRUE(close_to_shipped(got[i], expected[i], &why))
            << ds.path().filename() << " output " << i << ": " << why;
        EXPECT_TRUE(bit_equal(got[i], want[i], &why))
            << ds.path().filename() << " output " << i << " vs the original: " << why;
      }
    }
  }
  std::printf("backend models upgraded to 23: %d (%d with adapted nodes), %d refused\n", models, changed, refused);
  for (auto& [k, n] : adapters) std::printf("  %-28s %zu\n", k.c_str(), n);
  for (auto& r : refusals) std::printf("  refused: %s\n", r.c_str());
  EXPECT_GT(models, 900);
  EXPECT_TRUE(refusals.empty());
}

// ------------------------------------------------------------------ ONNX Runtime on upgraded zoo models
// The zoo's PyTorch exports (opset 14) upgraded to 23, written and read back: bit-identical to
// the original in our runtime, and ONNX Runtime 1.30 loads them and agrees
// (|ours - ort| <= 1e-4 max(1, max|ort|), as tests/runtime/ort_crosscheck.py).

TEST(UpgradeOpset, ZooModelsUpgradedTo23RunInOrt) {
  if (!ort_peer_installed()) GTEST_SKIP() << "ONNX Runtime peer missing: tools/peers/install.sh";
  for (const char* name : {"bert_small", "gpt2_small_cfg", "llama_small", "whisper_small_enc"}) {
    SCOPED_TRACE(name);
    auto m = load_model(zoo_model(name));
    auto rep = upgrade_opset(*m, 23);
    EXPECT_GT(rep.adapted, 0u);
    const fs::path file = temp_dir(std::string("upgrade_zoo_") + name) / (std::string(name) + ".onnx");
    save_model(*m, file);
    auto model = load_model(file);
    rt::Session s(*model);
    rt::InputPlan plan = rt::plan_inputs(model->main(), s.input_values(), {});
    auto inputs = rt::make_inputs(plan, 1);
    std::vector<std::pair<std::string, rt::Tensor>> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(plan.inputs[i].name, inputs[i]);
    std::string error;
    auto theirs = ort_run(file, feeds, &error, 2);
    ASSERT_TRUE(error.empty()) << error;
    auto ours = s.run(inputs);
    // Class 0: bit-identical to the original model in our runtime (the plan's own fusions,
    // e.g. the decomposed LayerNorm, must still see the upgraded forms).
    auto original = load_model(zoo_model(name));
    auto before = run(*original, inputs);
    for (size_t i = 0; i < before.size(); ++i) {
      std::string why;
      EXPECT_TRUE(bit_equal(before[i], ours[i], &why)) << "output " << i << " vs the original: " << why;
    }
    auto names = s.output_names();
    ASSERT_EQ(theirs.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      const rt::Tensor& t = theirs.at(names[i]);
      ASSERT_EQ(t.shape, ours[i].shape) << names[i];
      double scale = 1, diff = 0;
      for (int64_t e = 0; e < t.numel(); ++e) scale = std::max(scale, std::fabs(t.get_f64(e)));
      for (int64_t e = 0; e < t.numel(); ++e) diff = std::max(diff, std::fabs(t.get_f64(e) - ours[i].get_f64(e)));
      EXPECT_LE(diff, 1e-4 * scale) << names[i];
    }
  }
}
