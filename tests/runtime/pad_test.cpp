// Pad through the runtime: the opset forms (attribute, input, opset-18 axes), negative pads
// cropping first as ONNX Runtime does, element types by size, channels-last input between
// convs against the plain plan, and the bad inputs that must be a clear error.
#include <gtest/gtest.h>

#include <cmath>

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
// results equal the plain plan's (the same convs, NCHW, and a Pad on plain bytes).
TEST(Pad, ChannelsLastBetweenConvsMatchesThePlainPlan) {
  for (const char* mode : {"constant", "reflect", "edge"}) {
    GraphBuilder m(13);
    ValueId x = m.input("x", {1, 3, 12, 10});
    auto conv = [&](ValueId in, int64_t ci, int64_t co, unsigned seed) {
      return m.node("Conv", {in, m.f32("w" + std::to_string(seed), {co, ci, 3, 3},
                                       noise(static_cast<size_t>(co * ci * 9), seed))});
    };
    ValueId p = m.node("Pad", {m.node("Relu", {conv(x, 3, 8, 1)}), m.i64("p", {0, 0, 2, 1, 0, 0, 1, 2})},
                       {NewAttr::String("mode", mode)});
    m.outputs({conv(p, 8, 4, 2)});
    rt::SessionOptions plain_opts;
    plain_opts.channels_last = false;
    rt::Session nhwc(m.model()), plain(m.model(), plain_opts);
    EXPECT_GE(nhwc.channels_last_count(), 2u) << mode;  // the first conv and the Pad
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
