// Channels-last chains through U-Nets (Plan::plan_layouts with float16 values, Concat along the
// channel axis, Resize over the spatial axes): the NHWC plan must give the plain plan's bits.
// The data are small dyadic numbers (integers, weights in quarters or in {-1, 0, 1}), so every
// float32 sum is exact whatever order a kernel adds in: the NHWC and NCHW convs agree bit for bit, and any
// difference left is a layout mistake (a channel or pixel read from the wrong place).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "ir/float16.h"
#include "runtime/runtime.h"
#include "tests/runtime/tensors.h"

using namespace onnxforge;
using namespace onnxforge::test;

namespace {

// n values k / denom with integer k uniform in [-range, range].
std::vector<float> dyadic(size_t n, uint32_t seed, int range, float denom) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-range, range);
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(d(rng)) / denom;
  return v;
}

std::vector<uint16_t> halves(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_half(v[i]);
  return h;
}

// Builds convs with dyadic weights stored as `dt` (float or float16).
struct Net {
  explicit Net(DType dt, int64_t opset = 17) : m(opset), dt(dt) {}
  GraphBuilder m;
  DType dt;
  uint32_t seed = 1;
  ValueId weights(const std::string& name, std::vector<int64_t> dims, int range, float denom) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    auto v = dyadic(n, ++seed, range, denom);
    return dt == DType::Float ? m.f32(name, dims, v) : m.init(name, dims, halves(v), DType::Float16);
  }
  // Weights k / denom, k in [-range, range].
  ValueId conv(ValueId x, int64_t c, int64_t mo, int64_t k, std::vector<NewAttr> extra = {}, int range = 4,
               float denom = 4.f) {
    const std::string n = "w" + std::to_string(seed);
    ValueId w = weights(n, {mo, c, k, k}, range, denom);
    ValueId b = weights(n + "b", {mo}, range, denom);
    std::vector<NewAttr> attrs{NewAttr::Ints("kernel_shape", {k, k})};
    bool pads = false;
    for (auto& a : extra) {
      pads = pads || a.name == "pads";
      attrs.push_back(std::move(a));
    }
    if (!pads) attrs.push_back(NewAttr::Ints("pads", {k / 2, k / 2, k / 2, k / 2}));
    return m.node("Conv", {x, w, b}, attrs);
  }
  rt::Tensor input(std::vector<int64_t> shape, uint32_t s) const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    auto v = dyadic(n, s, 8, 1.f);
    return dt == DType::Float ? make<float>(DType::Float, shape, v) : make<uint16_t>(DType::Float16, shape, halves(v));
  }
};

// Runs the model planned plain and channels-last (three runs: the first records the arena
// layout, the others run in it) and expects the same bytes; returns the NHWC plan's count.
size_t same_bits(const Model& model, const std::vector<rt::Tensor>& inputs, const std::string& what) {
  rt::SessionOptions plain_opts;
  plain_opts.channels_last = false;
  rt::Session nhwc(model), plain(model, plain_opts);
  EXPECT_EQ(plain.channels_last_count(), 0u);
  const auto ref = plain.run(inputs);
  for (int run = 0; run < 3; ++run) {
    const auto got = nhwc.run(inputs);
    EXPECT_EQ(got.size(), ref.size()) << what;
    for (size_t o = 0; o < ref.size() && o < got.size(); ++o) {
      EXPECT_EQ(got[o].shape, ref[o].shape) << what << " output " << o;
      EXPECT_EQ(got[o].dtype, ref[o].dtype) << what << " output " << o;
      EXPECT_FALSE(got[o].nhwc) << what;
      if (got[o].bytes() != ref[o].bytes()) continue;
      size_t diff = 0, first = 0;
      const size_t es = got[o].bytes() / std::max<size_t>(1, static_cast<size_t>(got[o].numel()));
      for (size_t i = 0; i < static_cast<size_t>(got[o].numel()); ++i)
        if (std::memcmp(got[o].data + i * es, ref[o].data + i * es, es) != 0 && diff++ == 0) first = i;
      EXPECT_EQ(diff, 0u) << what << " output " << o << " run " << run << ": first difference at element " << first;
    }
  }
  return nhwc.channels_last_count();
}

class LayoutUNet : public ::testing::TestWithParam<DType> {};

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& p) {
  return p.param == DType::Float ? "float32" : "float16";
}

}  // namespace

TEST_P(LayoutUNet, ConcatAlongChannelsStaysChannelsLast) {
  // A stem starts the chain; Concat joins two NHWC tensors and an NCHW graph input (converted
  // on the way in), then a 3x3 conv reads the concatenation.
  Net n(GetParam());
  GraphBuilder& m = n.m;
  ValueId x = m.input("x", {2, 3, 10, 9}, n.dt);
  ValueId z = m.input("z", {2, 5, 10, 9}, n.dt);
  ValueId a = m.node("Relu", {n.conv(x, 3, 8, 3)});
  ValueId b = m.node("Relu", {n.conv(a, 8, 4, 1)});
  ValueId cat = m.node("Concat", {b, z, a}, {NewAttr::Int("axis", 1)});
  ValueId cat2 = m.node("Concat", {a, cat}, {NewAttr::Int("axis", -3)});  // the channel axis counted from the end
  m.outputs({n.conv(cat2, 25, 6, 3)});
  const size_t count = same_bits(m.model(), {n.input({2, 3, 10, 9}, 3), n.input({2, 5, 10, 9}, 4)}, "concat");
  EXPECT_EQ(count, 4u);  // both convs before the concats, both concats
}

TEST_P(LayoutUNet, ResizeOverSpatialAxesEveryFastMode) {
  // Every interpolation and coordinate mode of the table kernels, upsampling, downsampling and
  // both at once, on a channels-last input read by a channels-last MaxPool (1x1: a copy).
  struct Case {
    const char* mode;
    const char* ctm;
    const char* nearest;
    std::vector<int64_t> sizes;  // empty: scales {1, 1, 2, 2}
  };
  const std::vector<Case> cases = {
      {"nearest", "asymmetric", "floor", {}},
      {"nearest", "half_pixel", "round_prefer_floor", {}},
      {"nearest", "half_pixel", "round_prefer_ceil", {2, 8, 13, 5}},
      {"nearest", "align_corners", "ceil", {2, 8, 7, 20}},
      {"nearest", "tf_half_pixel_for_nn", "round_prefer_floor", {2, 8, 19, 17}},
      {"linear", "half_pixel", "", {}},
      {"linear", "asymmetric", "", {}},
      {"linear", "align_corners", "", {2, 8, 19, 17}},
      {"linear", "pytorch_half_pixel", "", {2, 8, 1, 6}},
      {"linear", "half_pixel_symmetric", "", {2, 8, 14, 4}},
      {"cubic", "half_pixel", "", {}},
      {"cubic", "align_corners", "", {2, 8, 6, 11}},
      {"cubic", "asymmetric", "", {2, 8, 21, 9}},
  };
  for (const Case& cs : cases) {
    for (bool antialias : {false, true}) {
      if (antialias && std::string(cs.mode) == "nearest") continue;
      Net n(GetParam(), 19);
      GraphBuilder& m = n.m;
      ValueId x = m.input("x", {2, 3, 10, 9}, n.dt);
      ValueId a = n.conv(x, 3, 8, 3);
      std::vector<ValueId> ins{a, ValueId{}};  // no roi
      if (cs.sizes.empty())
        ins.push_back(m.f32("scales", {4}, {1, 1, 2, 2}));
      else
        ins.push_back(ValueId{}), ins.push_back(m.i64("sizes", cs.sizes));
      std::vector<NewAttr> attrs{NewAttr::String("mode", cs.mode),
                                 NewAttr::String("coordinate_transformation_mode", cs.ctm),
                                 NewAttr::Int("antialias", antialias)};
      if (*cs.nearest) attrs.push_back(NewAttr::String("nearest_mode", cs.nearest));
      ValueId r = m.node("Resize", ins, attrs);
      m.outputs({m.node("MaxPool", {r}, {NewAttr::Ints("kernel_shape", {1, 1})})});
      const std::string what = std::string(cs.mode) + "/" + cs.ctm + (antialias ? "/antialias" : "");
      EXPECT_EQ(same_bits(m.model(), {n.input({2, 3, 10, 9}, 5)}, what), 2u) << what;  // the conv and the Resize
    }
  }
}

TEST_P(LayoutUNet, Float16UNetBitIdenticalWithTheEnvironmentSwitch) {
  // ISNet's pattern: conv -> relu -> maxpool -> conv -> relu -> Cast to float32 -> Resize to the
  // skip's size (sizes from Shape -> Slice -> Concat, folded at plan time) -> Cast back ->
  // Concat with the skip -> conv -> relu -> Add with the skip -> a 1-channel side conv ->
  // Sigmoid. ONNXFORGE_CHANNELS_LAST=0 and =1 must give the same bits.
  Net n(GetParam());
  GraphBuilder& m = n.m;
  const bool f16 = n.dt == DType::Float16;
  ValueId x = m.input("x", {1, 3, 16, 12});
  ValueId xin = f16 ? m.node("Cast", {x}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float16))}) : x;
  ValueId s1 = m.node("Relu", {n.conv(xin, 3, 8, 3, {}, 1, 1.f)});
  ValueId p =
      m.node("MaxPool", {s1},
             {NewAttr::Ints("kernel_shape", {2, 2}), NewAttr::Ints("strides", {2, 2}), NewAttr::Int("ceil_mode", 1)});
  ValueId d = m.node(
      "Relu", {n.conv(p, 8, 8, 3, {NewAttr::Ints("dilations", {2, 2}), NewAttr::Ints("pads", {2, 2, 2, 2})}, 1, 1.f)});
  ValueId d32 = f16 ? m.node("Cast", {d}, {NewAttr::Int("to", 1)}) : d;
  ValueId shape = m.node("Shape", {s1});
  ValueId hw = m.node("Slice", {shape, m.i64("st", {2}), m.i64("en", {4}), m.i64("ax", {0})});
  ValueId sizes = m.node("Concat", {m.i64("nc", {1, 8}), hw}, {NewAttr::Int("axis", 0)});
  ValueId up =
      m.node("Resize", {d32, ValueId{}, ValueId{}, sizes},
             {NewAttr::String("mode", "linear"), NewAttr::String("coordinate_transformation_mode", "half_pixel")});
  ValueId up16 = f16 ? m.node("Cast", {up}, {NewAttr::Int("to", static_cast<int64_t>(DType::Float16))}) : up;
  ValueId cat = m.node("Concat", {up16, s1}, {NewAttr::Int("axis", 1)});
  ValueId e = m.node("Relu", {n.conv(cat, 16, 8, 3, {}, 1, 1.f)});
  ValueId sum = m.node("Add", {e, s1});
  ValueId side = n.conv(sum, 8, 1, 3, {}, 1, 1.f);
  ValueId out = m.node("Sigmoid", {f16 ? m.node("Cast", {side}, {NewAttr::Int("to", 1)}) : side});
  m.outputs({out});
  const std::vector<rt::Tensor> in{make<float>(DType::Float, {1, 3, 16, 12}, dyadic(3 * 16 * 12, 9, 2, 1.f))};
  ASSERT_EQ(setenv("ONNXFORGE_CHANNELS_LAST", "0", 1), 0);
  rt::Session off(m.model());
  ASSERT_EQ(setenv("ONNXFORGE_CHANNELS_LAST", "1", 1), 0);
  rt::Session on(m.model());
  unsetenv("ONNXFORGE_CHANNELS_LAST");
  EXPECT_EQ(off.channels_last_count(), 0u);
  // Every conv, the pool, the Resize and the Concat; in float32 the side conv fuses the Sigmoid
  // and its output is the graph output, which it writes NCHW (in float16 the Cast and the
  // Sigmoid after it are elementwise, and the graph output is converted when returned).
  const size_t want_count = f16 ? 7u : 6u;
  EXPECT_EQ(on.channels_last_count(), want_count);
  const auto want = off.run(in);
  for (int run = 0; run < 2; ++run) {
    const auto got = on.run(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].shape, want[o].shape);
      ASSERT_EQ(got[o].bytes(), want[o].bytes());
      EXPECT_EQ(std::memcmp(got[o].data, want[o].data, want[o].bytes()), 0) << "output " << o << " run " << run;
    }
  }
  EXPECT_EQ(same_bits(m.model(), in, "unet"), want_count);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayoutUNet, ::testing::Values(DType::Float, DType::Float16), dtype_param_name);

TEST(LayoutUNetBoundaries, ConcatOnAnotherAxisKeepsItsInputsPlain) {
  for (int64_t axis : {0, 2, 3, -1}) {
    Net n(DType::Float);
    GraphBuilder& m = n.m;
    ValueId x = m.input("x", {1, 3, 8, 8});
    ValueId a = m.node("Relu", {n.conv(x, 3, 4, 3)});
    ValueId cat = m.node("Concat", {a, a}, {NewAttr::Int("axis", axis)});
    m.outputs({m.node("Relu", {n.conv(cat, 4, 4, 3)})});
    EXPECT_EQ(same_bits(m.model(), {n.input({1, 3, 8, 8}, 2)}, "axis " + std::to_string(axis)), 0u) << axis;
  }
}

TEST(LayoutUNetBoundaries, ResizeScalingChannelsRunsPlain) {
  // Constant scales that change C: the plan keeps the producer NCHW. Scales known only at run
  // time: the plan goes channels-last and the Resize converts its input when it sees them.
  for (bool constant : {true, false}) {
    Net n(DType::Float);
    GraphBuilder& m = n.m;
    ValueId x = m.input("x", {1, 3, 8, 8});
    ValueId scales = constant ? m.f32("scales", {4}, {1, 2, 2, 2}) : m.input("scales", {4});
    ValueId a = n.conv(x, 3, 4, 3);
    ValueId r = m.node("Resize", {a, ValueId{}, scales}, {NewAttr::String("mode", "nearest")});
    m.outputs({m.node("MaxPool", {r}, {NewAttr::Ints("kernel_shape", {1, 1})})});
    std::vector<rt::Tensor> in{n.input({1, 3, 8, 8}, 2)};
    if (!constant) in.push_back(make<float>(DType::Float, {4}, {1, 2, 2, 2}));
    EXPECT_EQ(same_bits(m.model(), in, constant ? "constant scales" : "input scales"), constant ? 0u : 2u);
  }
}

TEST(LayoutUNetBoundaries, GraphOutputsStayPlain) {
  // A Concat whose output is a graph output writes NCHW from its NHWC inputs; a Resize whose
  // output is one likewise; the stem before them still runs channels-last.
  auto layout_changes = [](bool stem_is_output, const char* what) {
    Net n(DType::Float16);
    GraphBuilder& m = n.m;
    ValueId x = m.input("x", {1, 3, 8, 6}, DType::Float16);
    ValueId a = m.node("Relu", {n.conv(x, 3, 4, 3)});
    ValueId cat = m.node("Concat", {a, a}, {NewAttr::Int("axis", 1)});
    ValueId up =
        m.node("Resize", {a, ValueId{}, m.f32("scales", {4}, {1, 1, 2, 2})}, {NewAttr::String("mode", "linear")});
    if (stem_is_output)
      m.outputs({cat, up, a});
    else
      m.outputs({cat, up});
    return same_bits(m.model(), {n.input({1, 3, 8, 6}, 2)}, what);
  };
  // a itself is a graph output: its conv writes NCHW, so nothing runs channels-last.
  EXPECT_EQ(layout_changes(true, "outputs"), 0u);
  EXPECT_EQ(layout_changes(false, "outputs 2"), 1u);  // the conv only
}
