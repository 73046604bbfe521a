// fuse_pad_into_conv: the Pad spellings of tf2onnx and of the opsets (attribute, input, Constant
// node, opset-18 axes), into Conv, ConvInteger, QLinearConv and AveragePool, each checked through
// the runtime (the integer convs bit for bit); and every Pad it must leave alone.
#include <gtest/gtest.h>

#include "ir/match.h"
#include "numeric.h"
#include "tests/common/random.h"

namespace onnxforge::test {
namespace {

using passes::AccuracyClass;  // class 1: the conv kernels are chosen by padding (see the pass)

std::vector<int64_t> pads_of(const Graph& g, std::string_view op) {
  for (NodeId n : g.nodes())
    if (g.is_op(n, op)) {
      auto p = g.attr_ints(n, "pads");
      return {p.begin(), p.end()};
    }
  return {};
}

ValueId conv_weight(GraphBuilder& b, int64_t co, int64_t ci, int64_t k, unsigned seed) {
  return b.f32("w" + std::to_string(seed), {co, ci, k, k}, noise(static_cast<size_t>(co * ci * k * k), seed));
}

// tf2onnx's "SAME" stride-2 conv: Pad(pads as an initializer, bottom/right by one) -> Conv(pads 0).
TEST(FusePadIntoConv, Tf2onnxSameStrideTwoConv) {
  auto make = [] {
    GraphBuilder b(11);
    ValueId x = b.input("x", {1, 4, 9, 9});
    ValueId p = b.node("Pad", {x, b.i64("pads", {0, 0, 0, 0, 0, 0, 1, 1}), b.f32("zero", {}, {0.f})});
    ValueId c = b.node("Conv", {p, conv_weight(b, 6, 4, 3, 1), b.f32("bias", {6}, noise(6, 2))},
                       {NewAttr::Ints("strides", {2, 2}), NewAttr::Ints("pads", {0, 0, 0, 0})});
    b.output(b.node("Relu", {c}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_pad_into_conv"}, AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  EXPECT_EQ(pads_of(m->main(), "Conv"), (std::vector<int64_t>{0, 0, 1, 1}));
}

// Added to the conv's own pads; the attribute form (opset 10), a Constant node (opset 13) and
// the opset-18 axes input; 1-D and 3-D convs.
TEST(FusePadIntoConv, EveryPadSpellingAddsToTheConvPads) {
  auto attr_form = [] {
    GraphBuilder b(10);
    ValueId x = b.input("x", {1, 3, 8, 8});
    ValueId p = b.node("Pad", {x}, {NewAttr::Ints("pads", {0, 0, 2, 1, 0, 0, 0, 3})});
    b.output(b.node("Conv", {p, conv_weight(b, 5, 3, 3, 3)}, {NewAttr::Ints("pads", {1, 1, 1, 1})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(attr_form, {"fuse_pad_into_conv"}, AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  EXPECT_EQ(pads_of(m->main(), "Conv"), (std::vector<int64_t>{3, 2, 1, 4}));

  auto constant_node = [] {
    GraphBuilder b(13);
    ValueId x = b.input("x", {2, 3, 7});
    ValueId p = b.node("Pad", {x, b.constant_i64("pads", {0, 0, 2, 0, 0, 1})});
    b.output(b.node("Conv", {p, b.f32("w", {4, 3, 3}, noise(36, 4))}, {NewAttr::Ints("dilations", {2})}));
    return std::move(b.m);
  };
  m = optimize_and_check(constant_node, {"fuse_pad_into_conv"}, AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  EXPECT_EQ(pads_of(m->main(), "Conv"), (std::vector<int64_t>{2, 1}));

  auto axes_input = [] {
    GraphBuilder b(18);
    ValueId x = b.input("x", {1, 2, 4, 5, 6});
    ValueId p = b.node("Pad", {x, b.i64("pads", {1, 2, 0, 1}), b.f32("zero", {}, {0.f}), b.i64("axes", {-1, 2})});
    b.output(b.node("Conv", {p, b.f32("w", {3, 2, 2, 2, 2}, noise(48, 5))}));
    return std::move(b.m);
  };
  m = optimize_and_check(axes_input, {"fuse_pad_into_conv"}, AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  EXPECT_EQ(pads_of(m->main(), "Conv"), (std::vector<int64_t>{2, 0, 1, 1, 0, 0}));
}

// Integer convs pad with their input zero point: a Pad filling the zero point folds.
TEST(FusePadIntoConv, IntegerConvsWhenTheValueIsTheZeroPoint) {
  auto conv_integer = [](uint8_t value) {
    GraphBuilder b(11);
    ValueId x = b.input("x", {1, 2, 6, 6}, DType::Uint8);
    ValueId zp = b.init<uint8_t>("xzp", {}, {128}, DType::Uint8);
    ValueId p =
        b.node("Pad", {x, b.i64("pads", {0, 0, 1, 1, 0, 0, 1, 1}), b.init<uint8_t>("v", {}, {value}, DType::Uint8)});
    std::vector<uint8_t> w(2 * 2 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 37) % 251);
    b.output(b.node("ConvInteger", {p, b.init<uint8_t>("w", {2, 2, 3, 3}, w, DType::Uint8), zp}), DType::Int32);
    return std::move(b.m);
  };
  auto m = optimize_and_check([&] { return conv_integer(128); }, {"fuse_pad_into_conv"}, AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  auto other = conv_integer(0);  // pads with 0, the conv with 128: not the same
  optimize(*other, {"fuse_pad_into_conv"});
  EXPECT_EQ(count_op(other->main(), "Pad"), 1u);

  auto qlinear = [] {
    GraphBuilder b(13);
    ValueId x = b.input("x", {1, 3, 7, 7}, DType::Uint8);
    ValueId xs = b.f32("xs", {}, {0.05f}), xzp = b.init<uint8_t>("xzp", {}, {100}, DType::Uint8);
    ValueId p = b.node("Pad", {x, b.i64("pads", {0, 0, 0, 1, 0, 0, 2, 1}), xzp});
    std::vector<int8_t> w(4 * 3 * 3 * 3);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 53) % 200) - 100);
    b.output(b.node("QLinearConv",
                    {p, xs, xzp, b.init<int8_t>("w", {4, 3, 3, 3}, w, DType::Int8), b.f32("ws", {}, {0.01f}),
                     b.init<int8_t>("wzp", {}, {0}, DType::Int8), b.f32("ys", {}, {0.2f}),
                     b.init<uint8_t>("yzp", {}, {120}, DType::Uint8)},
                    {NewAttr::Ints("strides", {2, 2})}),
             DType::Uint8);
    return std::move(b.m);
  };
  m = optimize_and_check(qlinear, {"fuse_pad_into_conv"}, AccuracyClass::Lossless);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  EXPECT_EQ(pads_of(m->main(), "QLinearConv"), (std::vector<int64_t>{0, 1, 2, 1}));
}

// AveragePool counts the Pad's zeros only with count_include_pad=1, and keeps the same windows
// only without ceil_mode.
TEST(FusePadIntoConv, AveragePoolOnlyWhenItCountsThePads) {
  auto make = [](int64_t include, int64_t ceil) {
    GraphBuilder b(11);
    ValueId x = b.input("x", {1, 3, 8, 8});
    ValueId p = b.node("Pad", {x, b.i64("pads", {0, 0, 1, 1, 0, 0, 2, 2})});
    b.output(b.node("AveragePool", {p},
                    {NewAttr::Ints("kernel_shape", {3, 3}), NewAttr::Ints("strides", {2, 2}),
                     NewAttr::Int("count_include_pad", include), NewAttr::Int("ceil_mode", ceil)}));
    return std::move(b.m);
  };
  auto m = optimize_and_check([&] { return make(1, 0); }, {"fuse_pad_into_conv"}, AccuracyClass::FloatBounded);
  EXPECT_EQ(count_op(m->main(), "Pad"), 0u);
  for (auto [include, ceil] : {std::pair<int64_t, int64_t>{0, 0}, {1, 1}}) {
    auto kept = make(include, ceil);
    optimize(*kept, {"fuse_pad_into_conv"});
    EXPECT_EQ(count_op(kept->main(), "Pad"), 1u) << include << " " << ceil;
  }
}

// What must stay: each case a Pad that a fold would change the result of (or could not express).
TEST(FusePadIntoConv, LeavesAlonePadsItCannotFold) {
  struct Case {
    const char* what;
    std::function<void(GraphBuilder&, ValueId x)> build;
  };
  auto conv = [](GraphBuilder& b, ValueId in, std::vector<NewAttr> attrs = {}) {
    return b.node("Conv", {in, conv_weight(b, 4, 3, 3, 9)}, std::move(attrs));
  };
  const std::vector<int64_t> hw{0, 0, 1, 1, 0, 0, 1, 1};
  const std::vector<Case> cases = {
      {"non-zero value",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw), b.f32("v", {}, {1.f})})));
       }},
      {"negative zero value",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw), b.f32("v", {}, {-0.f})})));
       }},
      {"reflect",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw)}, {NewAttr::String("mode", "reflect")})));
       }},
      {"edge",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw)}, {NewAttr::String("mode", "edge")})));
       }},
      {"channel pads",
       [&](GraphBuilder& b, ValueId x) {
         ValueId p = b.node("Pad", {x, b.i64("p", {0, 1, 1, 1, 0, 0, 1, 1})});
         b.output(b.node("Conv", {p, conv_weight(b, 4, 4, 3, 9)}));
       }},
      {"batch pads",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", {1, 0, 1, 1, 0, 0, 1, 1})})));
       }},
      {"negative pads",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", {0, 0, -1, 1, 0, 0, 1, 1})})));
       }},
      {"other readers",
       [&](GraphBuilder& b, ValueId x) {
         ValueId p = b.node("Pad", {x, b.i64("p", hw)});
         b.output(conv(b, p));
         b.output(b.node("Relu", {p}));
       }},
      {"graph output",
       [&](GraphBuilder& b, ValueId x) {
         ValueId p = b.node("Pad", {x, b.i64("p", hw)});
         b.output(conv(b, p));
         b.output(p);
       }},
      {"pads at run time",
       [&](GraphBuilder& b, ValueId x) {
         ValueId pads = b.input("pads", {8}, DType::Int64);
         b.output(conv(b, b.node("Pad", {x, pads})));
       }},
      {"value at run time",
       [&](GraphBuilder& b, ValueId x) {
         ValueId v = b.input("v", {}, DType::Float);
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw), v})));
       }},
      {"auto_pad SAME_UPPER",
       [&](GraphBuilder& b, ValueId x) {
         b.output(conv(b, b.node("Pad", {x, b.i64("p", hw)}), {NewAttr::String("auto_pad", "SAME_UPPER")}));
       }},
      {"MaxPool (pads with -inf)",
       [&](GraphBuilder& b, ValueId x) {
         ValueId p = b.node("Pad", {x, b.i64("p", hw)});
         b.output(b.node("MaxPool", {p}, {NewAttr::Ints("kernel_shape", {3, 3})}));
       }},
      {"read as the weight",
       [&](GraphBuilder& b, ValueId x) {
         ValueId w = b.node("Pad", {b.f32("w0", {3, 3, 1, 1}, noise(9, 3)), b.i64("p", hw)});
         b.output(b.node("Conv", {x, w}));
       }},
  };
  for (const Case& c : cases) {
    GraphBuilder b(11);
    ValueId x = b.input("x", {1, 3, 8, 8});
    c.build(b, x);
    const size_t before = b.g().node_count();
    optimize(*b.m, {"fuse_pad_into_conv"});
    EXPECT_EQ(count_op(b.g(), "Pad"), 1u) << c.what;
    EXPECT_EQ(b.g().node_count(), before) << c.what;
  }
}

// The tf2onnx-style zoo models (tools/models/tf2onnx_models.py): after `optimize`, no Pad that
// the pass could fold is left (BlazeFace keeps the Pads of its residuals' channels, read by an
// Add), and the result verifies against the original.
TEST(FusePadIntoConv, Tf2onnxZooModelsKeepNoFoldablePad) {
  if (!passes::runtime_available()) GTEST_SKIP() << "needs the runtime";
  for (auto [name, pads_left] : {std::pair<const char*, size_t>{"tf2onnx_linedet", 0}, {"tf2onnx_blazeface", 11}}) {
    SCOPED_TRACE(name);
    auto original = load_model(zoo_model(name));
    auto model = load_model(zoo_model(name));
    const size_t pads_before = count_op(model->main(), "Pad");
    passes::RunResult r = optimize(*model);
    EXPECT_EQ(count_op(model->main(), "Pad"), pads_left);
    EXPECT_GT(pads_before, pads_left);
    for (NodeId n : model->main().nodes()) {  // what is left pads channels
      if (!model->main().is_op(n, "Pad")) continue;
      auto pads = constant_ints(model->main(), model->main().input(n, 1));
      ASSERT_TRUE(pads && pads->size() == 8);
      EXPECT_NE((*pads)[1] + (*pads)[5], 0);
    }
    passes::Reference ref(*original, passes::VerifyOptions{2, {}});
    auto v = ref.check(*model, passes::tolerance_of(r.worst));
    EXPECT_TRUE(v.ok) << "max_diff " << v.max_diff << " " << v.error;
  }
}

}  // namespace
}  // namespace onnxforge::test
