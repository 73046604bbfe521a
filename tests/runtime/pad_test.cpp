// Pad through the runtime: the opset forms (attribute, input, opset-18 axes), negative pads
// cropping first as ONNX Runtime does, element types by size, channels-last input between
// convs against the plain plan, and the bad inputs that must be a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "runtime/runtime.h"
#include "tests/common/random.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

template <class T = float>
std::vector<T> run_pad(GraphBuilder& m, const rt::Tensor& x, rt::Shape* shape = nullptr) {
  rt::Session s(m.model());
  auto o = s.run({x});
  if (shape) *shape = o[0].shape;
  return values<T>(o[0]);
}

std::string pad_error(GraphBuilder& m, const rt::Tensor& x) {
  try {
    rt::Session s(m.model());
    s.run({x});
  } catch (const std::exception& e) { return e.what(); }
  return "";
}

}  // namespace

TEST(Pad, NegativePadsCropBeforeTheModeMirrors) {
  // [1..6] cropped by one at the start, then reflected by two at the end of what is left: ONNX
  // Runtime's order (slice, then pad), not a mirror over the uncropped input.
  GraphBuilder m(13);
  ValueId x = m.input("x", {6});
  m.outputs({m.node("Pad", {x, m.i64("p", {-1, 2})}, {NewAttr::String("mode", "reflect")})});
  EXPECT_EQ(run_pad(m, make<float>(DType::Float, {6}, {1, 2, 3, 4, 5, 6})), (std::vector<float>{2, 3, 4, 5, 6, 5, 4}));

  GraphBuilder e(13);
  ValueId y = e.input("y", {2, 3});
  e.outputs({e.node("Pad", {y, e.i64("p", {0, -1, 1, 2})}, {NewAttr::String("mode", "edge")})});
  rt::Shape s;
  EXPECT_EQ(run_pad(e, make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6}), &s),
            (std::vector<float>{2, 3, 3, 3, 5, 6, 6, 6, 5, 6, 6, 6}));
  EXPECT_EQ(s, (rt::Shape{3, 4}));
}

TEST(Pad, WrapModeAndTheOpset18AxesInput) {
  GraphBuilder m(19);
  ValueId x = m.input("x", {2, 3});
  m.outputs({m.node("Pad", {x, m.i64("p", {2, 1}), m.f32("v", {}, {0.f}), m.i64("axes", {-1})},
                    {NewAttr::String("mode", "wrap")})});
  EXPECT_EQ(run_pad(m, make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6})),
            (std::vector<float>{2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4}));
}

TEST(Pad, ElementTypesBySize) {
  GraphBuilder m(13);
  ValueId x = m.input("x", {2, 2}, DType::Uint8);
  m.outputs({m.node("Pad", {x, m.i64("p", {0, 1, 1, 0}), m.init<uint8_t>("v", {}, {7}, DType::Uint8)})});
  EXPECT_EQ(run_pad<uint8_t>(m, make<uint8_t>(DType::Uint8, {2, 2}, {1, 2, 3, 4})),
            (std::vector<uint8_t>{7, 1, 2, 7, 3, 4, 7, 7, 7}));

  GraphBuilder h(13);
  ValueId y = h.input("y", {3}, DType::Float16);
  h.outputs({h.node("Pad", {y, h.i64("p", {1, 1})}, {NewAttr::String("mode", "edge")})});
  const std::vector<uint16_t> halves{0x3c00, 0x4000, 0x4200};  // 1, 2, 3
  EXPECT_EQ(run_pad<uint16_t>(h, make<uint16_t>(DType::Float16, {3}, halves)),
            (std::vector<uint16_t>{0x3c00, 0x3c00, 0x4000, 0x4200, 0x4200}));

  GraphBuilder l(13);
  ValueId z = l.input("z", {2}, DType::Int64);
  l.outputs({l.node("Pad", {z, l.i64("p", {1, 0}), l.i64("v", {-5}, true)})});
  EXPECT_EQ(run_pad<int64_t>(l, make<int64_t>(DType::Int64, {2}, {10, 20})), (std::vector<int64_t>{-5, 10, 20}));
}

TEST(Pad, BadPadsAreErrorsNamingTheNode) {
  auto with_pads = [](std::vector<int64_t> pads, const char* mode, std::vector<int64_t> axes = {}) {
    auto m = std::make_unique<GraphBuilder>(18);
    ValueId x = m->input("x", {2, 3});
    std::vector<ValueId> ins{x, m->i64("p", pads)};
    if (!axes.empty()) ins.insert(ins.end(), {m->f32("v", {}, {0.f}), m->i64("axes", axes)});
    m->outputs({m->node("Pad", ins, {NewAttr::String("mode", mode)})});
    return m;
  };
  const auto x = make<float>(DType::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_NE(pad_error(*with_pads({-3, 0, 2, 0}, "constant"), x).find("crop more than axis 0"), std::string::npos);
  EXPECT_NE(pad_error(*with_pads({0, -4, 0, 0}, "constant"), x).find("crop more than axis 1"), std::string::npos);
  EXPECT_NE(pad_error(*with_pads({0, -3, 0, 1}, "edge"), x).find("which is empty"), std::string::npos);
  EXPECT_NE(pad_error(*with_pads({1, 1, 1, 1}, "constant", {1, -1}), x).find("listed twice"), std::string::npos);
  EXPECT_NE(pad_error(*with_pads({1, 1, 1}, "constant"), x).find("pads has 3 values"), std::string::npos);
  EXPECT_NE(pad_error(*with_pads({0, 0, 0, 0}, "mirror"), x).find("unknown mode"), std::string::npos);
  // An output the model's pads make enormous is refused before it is allocated.
  const std::string big = pad_error(*with_pads({0, 0, 0, int64_t{1} << 50}, "constant"), x);
  EXPECT_NE(big.find("Pad"), std::string::npos) << big;
  EXPECT_NE(big.find("budget"), std::string::npos) << big;
}

// Between two group-1 convs the Pad runs on channels-last bytes and stays channels-last; the
// results equal the plain plan's (the same convs, NCHW, and a Pad on plain bytes). A zero Pad
// is folded into the second conv instead (pad_into_conv), which reads the first's NHWC output.
TEST(Pad, ChannelsLastBetweenConvsMatchesThePlainPlan) {
  for (const char* mode : {"constant", "reflect", "edge", "zero"}) {
    const bool zero = std::string_view(mode) == "zero";
    GraphBuilder m(13);
    ValueId x = m.input("x", {1, 3, 12, 10});
    auto conv = [&](ValueId in, int64_t ci, int64_t co, unsigned seed) {
      return m.node("Conv", {in, m.f32("w" + std::to_string(seed), {co, ci, 3, 3},
                                       noise(static_cast<size_t>(co * ci * 9), seed))});
    };
    std::vector<ValueId> pad_ins{m.node("Relu", {conv(x, 3, 8, 1)}), m.i64("p", {0, 0, 2, 1, 0, 0, 1, 2})};
    if (!zero) pad_ins.push_back(m.f32("v", {}, {0.5f}));
    ValueId p = m.node("Pad", pad_ins, {NewAttr::String("mode", zero ? "constant" : mode)});
    m.outputs({conv(p, 8, 4, 2)});
    rt::SessionOptions plain_opts;
    plain_opts.channels_last = false;
    rt::Session nhwc(m.model()), plain(m.model(), plain_opts);
    // The first conv and the Pad, or the first conv and the folded Pad + Relu fused.
    EXPECT_GE(nhwc.channels_last_count(), zero ? 1u : 2u) << mode;
    if (zero) { EXPECT_EQ(nhwc.fused_count(), 2u); }
    const auto in = make<float>(DType::Float, {1, 3, 12, 10}, noise(360, 3));
    auto want = values<float>(plain.run({in})[0]);
    for (int run = 0; run < 2; ++run) {
      auto got = values<float>(nhwc.run({in})[0]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << mode << " " << i;
    }
  }
}

// ---------------------------------------------------------------- the plan's Pad -> Conv fusion

namespace {

// One Pad (its inputs and attributes given) read by a 3x3 Conv with a bias (and the extra reader
// `other`, an Identity, when asked), or by two: the fused plan (default options) against the
// reference plan (fuse_activations off). Returns the fused plan's fused_count().
struct PadConvCase {
  int64_t opset = 13;
  std::vector<int64_t> x_shape{1, 4, 9, 11};
  int64_t group = 1;
  std::vector<int64_t> strides{2, 2};
  std::vector<int64_t> conv_pads{};  // the Conv's own
  std::string auto_pad;              // empty: not set
  bool relu = false;                 // an activation after the conv (fuses into the folded step)
  bool second_reader = false;        // the padded value is also a graph output through an Identity
  bool pads_input = false;           // the pads are a graph input (known at run time only)
  std::vector<int64_t> pads_value;   // for pads_input
  int64_t conv_channels = 0;         // the Conv's input channels when the Pad changes them
};

size_t check_pad_conv(const PadConvCase& pc, const std::function<std::vector<ValueId>(GraphBuilder&, ValueId)>& pad_ins,
                      std::vector<NewAttr> pad_attrs = {}) {
  GraphBuilder m(pc.opset);
  ValueId x = m.input("x", pc.x_shape);
  ValueId pads_in;
  std::vector<ValueId> ins = pad_ins(m, x);
  if (pc.pads_input) {
    pads_in = m.input("pads_rt", {static_cast<int64_t>(pc.pads_value.size())}, DType::Int64);
    ins[1] = pads_in;
  }
  ValueId p = m.node("Pad", ins, std::move(pad_attrs));
  const int64_t C = pc.conv_channels ? pc.conv_channels : pc.x_shape[1];
  const int64_t out_c = pc.group > 1 ? C : 6;
  std::vector<NewAttr> ca{NewAttr::Ints("strides", pc.strides), NewAttr::Int("group", pc.group)};
  if (!pc.conv_pads.empty()) ca.push_back(NewAttr::Ints("pads", pc.conv_pads));
  if (!pc.auto_pad.empty()) ca.push_back(NewAttr::String("auto_pad", pc.auto_pad));
  const int64_t cin = C / pc.group;
  ValueId y = m.node("Conv",
                     {p, m.f32("w", {out_c, cin, 3, 3}, noise(static_cast<size_t>(out_c * cin * 9), 7)),
                      m.f32("b", {out_c}, noise(static_cast<size_t>(out_c), 8))},
                     std::move(ca));
  if (pc.relu) y = m.node("Relu", {y});
  std::vector<ValueId> outs{y};
  if (pc.second_reader) outs.push_back(m.node("Identity", {p}));
  m.outputs(outs);
  int64_t n = 1;
  for (int64_t d : pc.x_shape) n *= d;
  std::vector<rt::Tensor> feeds{make<float>(DType::Float, pc.x_shape, noise(static_cast<size_t>(n), 9))};
  if (pc.pads_input)
    feeds.push_back(make<int64_t>(DType::Int64, {static_cast<int64_t>(pc.pads_value.size())}, pc.pads_value));
  rt::SessionOptions off;
  off.fuse_activations = false;
  rt::Session fused(m.model()), plain(m.model(), off);
  const auto want = plain.run(feeds);
  for (int run = 0; run < 2; ++run) {  // the second run on the recorded arena layout
    const auto got = fused.run(feeds);
    EXPECT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size() && o < want.size(); ++o) {
      EXPECT_EQ(got[o].shape, want[o].shape);
      const auto a = values<float>(got[o]), b = values<float>(want[o]);
      EXPECT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << "output " << o << " element " << i;
    }
  }
  return fused.fused_count();
}

auto with_pads(std::vector<int64_t> pads, std::optional<float> value = std::nullopt) {
  return [pads, value](GraphBuilder& m, ValueId x) {
    std::vector<ValueId> ins{x, m.i64("pads", pads)};
    if (value) ins.push_back(m.f32("value", {}, {*value}));
    return ins;
  };
}

}  // namespace

// tf2onnx's spelling (constant pads as an input, explicit zero value): the Pad's pads join the
// Conv's, with or without pads of its own, strided, depthwise, with an activation fused after.
TEST(PadIntoConv, ZeroSpatialPadsJoinTheConvsPadsAsTheUnfusedPlanComputes) {
  PadConvCase pc;
  EXPECT_EQ(check_pad_conv(pc, with_pads({0, 0, 0, 0, 0, 0, 1, 1}, 0.f)), 1u);  // TF SAME, stride 2
  pc.conv_pads = {1, 0, 0, 2};
  EXPECT_EQ(check_pad_conv(pc, with_pads({0, 0, 2, 1, 0, 0, 1, 3})), 1u);  // asymmetric, value absent
  pc.group = 4;
  pc.strides = {1, 1};
  pc.relu = true;
  EXPECT_EQ(check_pad_conv(pc, with_pads({0, 0, 1, 1, 0, 0, 1, 1}, 0.f)), 2u);  // depthwise + Relu
  pc.x_shape = {2, 4, 7, 5};
  EXPECT_EQ(check_pad_conv(pc, with_pads({0, 0, 1, 0, 0, 0, 0, 1}, 0.f)), 2u);  // a batch of two
}

// The other spellings: the attribute (opset < 11) and the opset-18 axes input.
TEST(PadIntoConv, AttributePadsAndTheAxesInputFoldToo) {
  PadConvCase pc;
  pc.opset = 10;
  EXPECT_EQ(check_pad_conv(pc, [](GraphBuilder&, ValueId x) { return std::vector<ValueId>{x}; },
                           {NewAttr::Ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}), NewAttr::Float("value", 0.f)}),
            1u);
  pc.opset = 18;
  EXPECT_EQ(check_pad_conv(pc,
                           [](GraphBuilder& m, ValueId x) {
                             return std::vector<ValueId>{x, m.i64("pads", {2, 1, 0, 1}), m.f32("value", {}, {0.f}),
                                                         m.i64("axes", {-1, 2})};
                           }),
            1u);
}

// What must stay a Pad: a fill that is not +0, another mode, pads on the batch or channel axis, a
// crop, a second reader, pads known only at run time, a Conv that sizes its own pads.
TEST(PadIntoConv, PadsTheConvCannotTakeStayPads) {
  PadConvCase pc;
  const std::vector<int64_t> spatial{0, 0, 1, 1, 0, 0, 1, 1};
  EXPECT_EQ(check_pad_conv(pc, with_pads(spatial, 0.5f)), 0u) << "non-zero value";
  EXPECT_EQ(check_pad_conv(pc, with_pads(spatial, -0.f)), 0u) << "-0";
  for (const char* mode : {"reflect", "edge"})
    EXPECT_EQ(check_pad_conv(pc, with_pads(spatial), {NewAttr::String("mode", mode)}), 0u) << mode;
  // Channel pads change the conv's input channels: the weight [6, 4, 3, 3] fits only the padded
  // input, so a fold would be an error, not only a wrong result.
  PadConvCase ch = pc;
  ch.x_shape = {1, 3, 9, 11};
  ch.conv_channels = 4;
  EXPECT_EQ(check_pad_conv(ch, with_pads({0, 1, 1, 1, 0, 0, 1, 1})), 0u) << "channel pads";
  PadConvCase batch = pc;
  EXPECT_EQ(check_pad_conv(batch, with_pads({1, 0, 1, 1, 0, 0, 1, 1})), 0u) << "batch pads";
  EXPECT_EQ(check_pad_conv(pc, with_pads({0, 0, -1, 1, 0, 0, 1, 1})), 0u) << "a crop";
  PadConvCase two = pc;
  two.second_reader = true;
  EXPECT_EQ(check_pad_conv(two, with_pads(spatial)), 0u) << "two readers";
  PadConvCase run_time = pc;
  run_time.pads_input = true;
  run_time.pads_value = spatial;
  EXPECT_EQ(check_pad_conv(run_time, with_pads(spatial)), 0u) << "pads at run time";
  PadConvCase same = pc;
  same.auto_pad = "SAME_UPPER";
  EXPECT_EQ(check_pad_conv(same, with_pads(spatial)), 0u) << "auto_pad";
}
