// fuse_layer_norm, fuse_rms_norm, fuse_gelu, fuse_swish on hand-built graphs: every spelling the
// passes claim (must change, checked numerically through the runtime against the unfused graph),
// the near misses they must leave alone with the census's reason, and opset gating.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "analysis/shapes.h"
#include "ir/uses.h"
#include "numeric.h"
#include "tests/common/random.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"

namespace onnxforge::test {
namespace {

// A one-element float constant of rank 0.
ValueId f32s(GraphBuilder& b, const std::string& name, float v) { return b.f32(name, {}, {v}); }

uint16_t to_half(float f) {  // test data only: values exactly representable or rounded by truncation
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, man = x & 0x7fffffu;
  if (e == 0) return static_cast<uint16_t>(sign);
  int he = static_cast<int>(e) - 127 + 15;
  if (he <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (he << 10) | (man >> 13));
}
ValueId f16(GraphBuilder& b, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
  std::vector<uint16_t> h;
  for (float x : v) h.push_back(to_half(x));
  return b.init(name, std::move(dims), h, DType::Float16);
}

// ReduceMean over `axes` in the form of the model's opset.
ValueId reduce_mean(GraphBuilder& b, ValueId x, std::vector<int64_t> axes, int64_t keepdims = 1) {
  static int k = 0;
  std::vector<NewAttr> attrs;
  if (keepdims != 1) attrs.push_back(NewAttr::Int("keepdims", keepdims));
  if (b.m->opset("") >= 18) return b.node("ReduceMean", {x, b.i64("axes" + std::to_string(k++), axes)}, attrs);
  attrs.push_back(NewAttr::Ints("axes", axes));
  return b.node("ReduceMean", {x}, attrs);
}

// How a LayerNorm / RMSNorm is written out.
struct Spelling {
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  int inv = 0;              // 0: Div(d, s)  1: Mul(d, Reciprocal(s))  2: Mul(Div(1, s), d)
  bool swap = false;        // the other operand order of every commutative node
  bool scale = true, bias = true;
  std::vector<int64_t> axes = {-1};
  float eps = 1e-5f;
  DType type = DType::Float;  // of the chain's constants (Float or Float16)
};

ValueId scalar_of(GraphBuilder& b, const std::string& name, float v, DType t) {
  return t == DType::Float16 ? f16(b, name, {}, {v}) : f32s(b, name, v);
}

ValueId commute(GraphBuilder& b, const std::string& op, ValueId a, ValueId c, bool swap) {
  return swap ? b.node(op, {c, a}) : b.node(op, {a, c});
}

// d / sqrt(v + eps) in the spelling's form.
ValueId inv_rms(GraphBuilder& b, ValueId d, ValueId v, const Spelling& s, const std::string& p) {
  ValueId sd = b.node("Sqrt", {commute(b, "Add", v, scalar_of(b, p + "eps", s.eps, s.type), s.swap)});
  if (s.inv == 0) return b.node("Div", {d, sd});
  ValueId r = s.inv == 1 ? b.node("Reciprocal", {sd}) : b.node("Div", {scalar_of(b, p + "one", 1.f, s.type), sd});
  return commute(b, "Mul", d, r, s.inv == 2 ? !s.swap : s.swap);
}

ValueId square(GraphBuilder& b, ValueId d, const Spelling& s, const std::string& p) {
  return s.mul_square ? b.node("Mul", {d, d}) : b.node("Pow", {d, scalar_of(b, p + "two", 2.f, s.type)});
}

ValueId layer_norm(GraphBuilder& b, ValueId x, const std::vector<int64_t>& norm_dims, const Spelling& s,
                   const std::string& p = "ln") {
  ValueId m = reduce_mean(b, x, s.axes);
  ValueId d = b.node("Sub", {x, m});
  ValueId v = reduce_mean(b, square(b, d, s, p), s.axes);
  ValueId y = inv_rms(b, d, v, s, p);
  if (s.scale) y = commute(b, "Mul", y, b.f32(p + "gamma", norm_dims, noise(numel(norm_dims), 11, 0.5f, 1.5f)), s.swap);
  if (s.bias) y = commute(b, "Add", y, b.f32(p + "beta", norm_dims, noise(numel(norm_dims), 12)), s.swap);
  return y;
}

ValueId rms_norm(GraphBuilder& b, ValueId x, const std::vector<int64_t>& norm_dims, const Spelling& s,
                 const std::string& p = "rms") {
  ValueId v = reduce_mean(b, square(b, x, s, p), s.axes);
  ValueId y = inv_rms(b, x, v, s, p);
  if (s.scale) y = commute(b, "Mul", y, b.f32(p + "w", norm_dims, noise(numel(norm_dims), 13, 0.5f, 1.5f)), s.swap);
  return y;
}

// The census as the pipeline sees it: after shape inference.
passes::CensusRow census(Model& m, std::string_view fusion) {
  infer_shapes(m);
  for (const passes::CensusRow& r : passes::fusion_census(m, {}))
    if (r.fusion == fusion) return r;
  ADD_FAILURE() << "no fusion " << fusion;
  return {};
}

std::string missed(const passes::CensusRow& r) {
  std::string s;
  for (const auto& [why, n] : r.missed) s += why + "=" + std::to_string(n) + " ";
  return s;
}

NodeId only(const Graph& g, std::string_view op) {
  for (NodeId n : g.nodes())
    if (g.is_op(n, op)) return n;
  return {};
}

std::vector<double> values(const Graph& g, ValueId v) {
  auto x = constant_values(g, v);
  return x ? *x : std::vector<double>{};
}

// ------------------------------------------------------------------------------ LayerNorm

TEST(FuseLayerNorm, EverySpellingBecomesOneOp) {
  int case_no = 0;
  for (int64_t opset : {17, 18})
    for (bool mul_square : {false, true})
      for (int inv : {0, 1, 2})
        for (bool swap : {false, true})
          for (int affine : {0, 1, 2, 3}) {
            Spelling s{.mul_square = mul_square,
                       .inv = inv,
                       .swap = swap,
                       .scale = (affine & 1) != 0,
                       .bias = (affine & 2) != 0};
            if (++case_no % 3 == 0) s.axes = {2};  // positive axis, same as -1 here
            SCOPED_TRACE("opset " + std::to_string(opset) + " square " + std::to_string(mul_square) + " inv " +
                         std::to_string(inv) + " swap " + std::to_string(swap) + " affine " + std::to_string(affine));
            auto make = [&] {
              GraphBuilder b(opset);
              ValueId x = b.input("x", {-1, 5, 16}, DType::Float, {"batch"});
              b.output(layer_norm(b, x, {16}, s));
              return std::move(b.m);
            };
            auto before = make();
            EXPECT_EQ(census(*before, "fuse_layer_norm").fusable_here, 1);
            auto m =
                optimize_and_check(make, {"fuse_layer_norm", "eliminate_dead_nodes", "eliminate_unused_initializers"});
            const Graph& g = m->main();
            ASSERT_EQ(g.node_count(), 1u);
            NodeId ln = only(g, "LayerNormalization");
            ASSERT_TRUE(ln.valid());
            EXPECT_EQ(g.attr_int(ln, "axis", 0), -1);
            EXPECT_FLOAT_EQ(g.attr_float(ln, "epsilon", 0), 1e-5f);
            EXPECT_EQ(g.inputs(ln).size(), s.bias ? 3u : 2u);
            if (!s.scale) { EXPECT_EQ(values(g, g.input(ln, 1)), std::vector<double>(16, 1.0)); }
          }
}

// Normalizing over the two last dims (a [.., H, W] map): axis -2, scale of shape [H, W].
TEST(FuseLayerNorm, SeveralTrailingAxesAndBroadcastScale) {
  auto make = [] {
    GraphBuilder b(17);
    ValueId x = b.input("x", {2, 3, 4, 6});
    ValueId m = reduce_mean(b, x, {-2, -1});
    ValueId d = b.node("Sub", {x, m});
    ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", 2)}), {-1, -2});
    ValueId n = b.node("Div", {d, b.node("Sqrt", {b.node("Add", {v, f32s(b, "eps", 1e-6f)})})});
    // scale varies along W only ([1, 6]), bias is a scalar: both broadcast over normalized dims.
    ValueId y = b.node("Mul", {n, b.f32("gamma", {1, 6}, noise(6, 3))});
    b.output(b.node("Add", {y, b.f32("beta", {1}, {0.25f})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_layer_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  ASSERT_EQ(g.node_count(), 1u);
  NodeId ln = only(g, "LayerNormalization");
  EXPECT_EQ(g.attr_int(ln, "axis", 0), -2);
  auto scale = static_shape(g, g.input(ln, 1));
  ASSERT_TRUE(scale);
  EXPECT_EQ(*scale, (std::vector<int64_t>{4, 6}));  // expanded to the normalized shape
  EXPECT_EQ(values(g, g.input(ln, 2)), std::vector<double>(24, 0.25));
}

// ConvNeXt's LayerNorm: Permute to NHWC, LayerNorm over C (the last axis), Permute back.
TEST(FuseLayerNorm, ConvNeXtBetweenPermutesFuses) {
  auto make = [] {
    GraphBuilder b(17);
    ValueId x = b.input("x", {1, 8, 5, 5});
    ValueId t = b.node("Transpose", {x}, {NewAttr::Ints("perm", {0, 2, 3, 1})});
    ValueId y = layer_norm(b, t, {8}, Spelling{.eps = 1e-6f});
    b.output(b.node("Transpose", {y}, {NewAttr::Ints("perm", {0, 3, 1, 2})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_layer_norm", "eliminate_dead_nodes"});
  EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 1u);
  EXPECT_EQ(count_op(m->main(), "Transpose"), 2u);
  EXPECT_EQ(m->main().node_count(), 3u);
}

// The channels-first LayerNorm of ConvNeXt's reference code: mean over axis 1 of NCHW, scale
// [C, 1, 1]. Not a LayerNormalization (which normalizes axis..r-1): the census says why.
TEST(FuseLayerNorm, NormOverChannelsOfNchwIsAMiss) {
  auto make = [] {
    GraphBuilder b(17);
    ValueId x = b.input("x", {1, 8, 5, 5});
    Spelling s{.axes = {1}};
    ValueId m = reduce_mean(b, x, s.axes);
    ValueId d = b.node("Sub", {x, m});
    ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", 2)}), s.axes);
    ValueId n = inv_rms(b, d, v, s, "ln");
    b.output(
        b.node("Add", {b.node("Mul", {n, b.f32("g", {8, 1, 1}, noise(8, 1))}), b.f32("b", {8, 1, 1}, noise(8, 2))}));
    return std::move(b.m);
  };
  auto before = make();
  auto row = census(*before, "fuse_layer_norm");
  EXPECT_EQ(row.found, 1);
  EXPECT_EQ(row.missed["axes not trailing"], 1) << missed(row);
  auto m = optimize_and_check(make, {"fuse_layer_norm"});
  EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 0u);
  EXPECT_EQ(m->main().node_count(), before->main().node_count());
}

// Each near miss is found (so the census shows it) and left alone, with the first failed check.
TEST(FuseLayerNorm, NearMissesStayWithTheirReason) {
  struct Case {
    const char* reason;
    std::function<void(GraphBuilder&, ValueId)> build;
  };
  auto chain = [](GraphBuilder& b, ValueId x, ValueId mean, float two, ValueId eps) {
    ValueId d = b.node("Sub", {x, mean});
    ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", two)}), {-1});
    return b.node("Div", {d, b.node("Sqrt", {b.node("Add", {v, eps})})});
  };
  std::vector<Case> cases = {
      {"axes differ",
       [](GraphBuilder& b, ValueId x) {
         ValueId m = reduce_mean(b, x, {-1});
         ValueId d = b.node("Sub", {x, m});
         ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", 2)}), {-2, -1});
         b.output(b.node("Div", {d, b.node("Sqrt", {b.node("Add", {v, f32s(b, "eps", 1e-5f)})})}));
       }},
      {"keepdims=0",
       [](GraphBuilder& b, ValueId x) {
         ValueId m = reduce_mean(b, x, {-1}, 0);
         ValueId d = b.node("Sub", {x, m});
         ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", 2)}), {-1}, 0);
         b.output(b.node("Div", {d, b.node("Sqrt", {b.node("Add", {v, f32s(b, "eps", 1e-5f)})})}));
       }},
      {"epsilon not constant",
       [&](GraphBuilder& b, ValueId x) { b.output(chain(b, x, reduce_mean(b, x, {-1}), 2, b.input("eps", {1}))); }},
      {"constants differ",
       [&](GraphBuilder& b, ValueId x) { b.output(chain(b, x, reduce_mean(b, x, {-1}), 3, f32s(b, "eps", 1e-5f))); }},
      {"intermediate is a graph output",
       [&](GraphBuilder& b, ValueId x) {
         ValueId m = reduce_mean(b, x, {-1});
         b.output(chain(b, x, m, 2, f32s(b, "eps", 1e-5f)));
         b.output(m);
       }},
      {"intermediate has other readers",
       [&](GraphBuilder& b, ValueId x) {
         ValueId m = reduce_mean(b, x, {-1});
         b.output(chain(b, x, m, 2, f32s(b, "eps", 1e-5f)));
         b.output(b.node("Neg", {m}));
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    auto make = [&] {
      GraphBuilder b(17);
      c.build(b, b.input("x", {4, 4, 4}));  // keepdims=0 still broadcasts
      return std::move(b.m);
    };
    auto before = make();
    auto row = census(*before, "fuse_layer_norm");
    EXPECT_EQ(row.found, 1);
    EXPECT_EQ(row.missed[c.reason], 1) << missed(row);
    auto m = optimize_and_check(make, {"fuse_layer_norm"});
    EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 0u);
  }
}

// Things that share pieces with a LayerNorm but are none: not counted at all.
TEST(FuseLayerNorm, LookAlikesAreNotBlocks) {
  GraphBuilder b(17);
  ValueId x = b.input("x", {2, 4, 8});
  // Softmax written out over ReduceSum, and a sum-normalization over ReduceMean.
  ValueId e = b.node("Exp", {x});
  b.output(b.node("Div", {e, b.node("ReduceSum", {e, b.i64("ax", {-1})})}));
  b.output(b.node("Div", {x, reduce_mean(b, x, {-1})}));
  // Mean-centering without a variance; the mean square without a normalization.
  b.output(b.node("Sub", {x, reduce_mean(b, x, {-1})}));
  b.output(b.node("Sqrt", {reduce_mean(b, b.node("Mul", {x, x}), {-1})}));
  // (x - mean) divided by a max instead of a standard deviation.
  ValueId d = b.node("Sub", {x, reduce_mean(b, x, {-1})});
  b.output(b.node("Div", {d, b.node("ReduceMax", {d}, {NewAttr::Ints("axes", {-1})})}));
  auto row = census(*b.m, "fuse_layer_norm");
  EXPECT_EQ(row.found, 0) << missed(row);
  EXPECT_EQ(census(*b.m, "fuse_rms_norm").found, 0);
  const size_t n = b.g().node_count();
  optimize(*b.m, {"fuse_layer_norm", "fuse_rms_norm"});
  EXPECT_EQ(b.g().node_count(), n);
}

// A scale that varies along a non-normalized dim (per position) is not the op's Scale: the
// LayerNormalization ends before it and the Mul stays. Likewise a scale from a graph input.
TEST(FuseLayerNorm, ScaleOutsideTheNormalizedDimsStaysOutside) {
  auto make = [] {
    GraphBuilder b(17);
    ValueId x = b.input("x", {2, 5, 8});
    ValueId y = layer_norm(b, x, {8}, Spelling{.scale = false, .bias = false});
    ValueId z = b.node("Mul", {y, b.f32("per_position", {5, 1}, noise(5, 4))});
    b.output(b.node("Add", {b.node("Mul", {z, b.input("gate", {8})}), b.f32("beta", {8}, noise(8, 5))}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_layer_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  EXPECT_EQ(count_op(g, "LayerNormalization"), 1u);
  EXPECT_EQ(count_op(g, "Mul"), 2u);
  EXPECT_EQ(count_op(g, "Add"), 1u);
  EXPECT_EQ(values(g, g.input(only(g, "LayerNormalization"), 1)), std::vector<double>(8, 1.0));
}

// Symbolic batch and sequence are fine; a symbolic hidden size leaves the scale unprovable.
TEST(FuseLayerNorm, DynamicShapes) {
  auto make = [](int64_t hidden) {
    return [hidden] {
      GraphBuilder b(17);
      ValueId x = b.input("x", {-1, -1, hidden}, DType::Float, {"batch", "seq", "hidden"});
      b.output(layer_norm(b, x, {8}, Spelling{}));
      return std::move(b.m);
    };
  };
  auto m = optimize_and_check(make(8), {"fuse_layer_norm"});
  EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 1u);
  auto dyn = make(-1)();
  auto row = census(*dyn, "fuse_layer_norm");
  EXPECT_EQ(row.found, 1);
  EXPECT_EQ(row.missed["normalized shape unknown"], 1) << missed(row);
}

// The opset decides: below 17 the block counts as fusable after an upgrade and stays.
TEST(FuseLayerNorm, BelowOpset17OnlyTheCensusCounts) {
  GraphBuilder b(16);
  ValueId x = b.input("x", {2, 4, 8});
  b.output(layer_norm(b, x, {8}, Spelling{}));
  auto row = census(*b.m, "fuse_layer_norm");
  EXPECT_EQ(row.found, 1);
  EXPECT_EQ(row.fusable_here, 0);
  EXPECT_EQ(row.fusable_after_upgrade, 1);
  EXPECT_EQ(passes::upgrade_hint(passes::fusion_census(*b.m, {})),
            "1 LayerNormalization block can be fused with --target-opset 17");
  optimize(*b.m, {"fuse_layer_norm"});
  EXPECT_EQ(count_op(b.g(), "LayerNormalization"), 0u);
}

// Inside an If body the block is fused; an intermediate a body reads keeps the outer block.
TEST(FuseLayerNorm, SubgraphBodies) {
  auto make = [](bool capture_mean) {
    return [capture_mean] {
      GraphBuilder b(17);
      Graph& g = b.g();
      ValueId x = b.input("x", {2, 4, 8});
      ValueId cond = b.input("cond", {}, DType::Bool);
      ValueId outer_mean = reduce_mean(b, x, {-1});
      ValueId d = b.node("Sub", {x, outer_mean});
      ValueId v = reduce_mean(b, b.node("Pow", {d, f32s(b, "two", 2)}), {-1});
      b.output(b.node("Div", {d, b.node("Sqrt", {b.node("Add", {v, f32s(b, "eps", 1e-5f)})})}));
      const GraphBuilder::If branch = b.add_if(cond, "branch_out");
      const ValueId out = branch.out;
      // then: a whole LayerNorm on the captured x.
      Graph& tg = branch.then_body;
      ValueId xt = tg.add_capture(g.value_name(x), x);
      auto body_const = [&](Graph& body, const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
        ValueId c = body.add_value(intern(name));
        body.set_initializer(
            c, b.m->tensors.add_owned(
                   intern(name), DType::Float, dims,
                   std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * 4)));
        return c;
      };
      auto body_node = [&](Graph& body, const std::string& op, std::vector<ValueId> ins,
                           std::vector<NewAttr> attrs = {}) {
        static int k = 0;
        std::string name = "body_" + op + std::to_string(k++);
        ValueId o = body.add_value(intern(name));
        body.add_node(intern(op), Sym{}, intern(name + "_node"), ins, std::vector<ValueId>{o}, attrs);
        return o;
      };
      ValueId tm = body_node(tg, "ReduceMean", {xt}, {NewAttr::Ints("axes", {-1})});
      ValueId td = body_node(tg, "Sub", {xt, tm});
      ValueId tv = body_node(tg, "ReduceMean", {body_node(tg, "Mul", {td, td})}, {NewAttr::Ints("axes", {-1})});
      ValueId tn = body_node(
          tg, "Div", {td, body_node(tg, "Sqrt", {body_node(tg, "Add", {tv, body_const(tg, "teps", {}, {1e-5f})})})});
      tg.set_graph_outputs({body_node(tg, "Add",
                                      {body_node(tg, "Mul", {tn, body_const(tg, "tg", {8}, noise(8, 7))}),
                                       body_const(tg, "tb", {8}, noise(8, 8))})});
      tg.set_dtype(tg.graph_outputs()[0], DType::Float);
      // else: reads the outer mean (or just negates x).
      Graph& eg = branch.else_body;
      ValueId xe =
          eg.add_capture(capture_mean ? g.value_name(outer_mean) : g.value_name(x), capture_mean ? outer_mean : x);
      eg.set_graph_outputs({body_node(eg, "Neg", {xe})});
      eg.set_dtype(eg.graph_outputs()[0], DType::Float);
      b.output(out);
      return std::move(b.m);
    };
  };
  auto body = make(false)();
  EXPECT_EQ(census(*body, "fuse_layer_norm").fusable_here, 2) << missed(census(*body, "fuse_layer_norm"));
  auto m = optimize_and_check(make(false), {"fuse_layer_norm", "eliminate_dead_nodes"});
  EXPECT_EQ(count_op(m->main(), "LayerNormalization"), 1u);
  EXPECT_EQ(count_op(m->graph(GraphId(1)), "LayerNormalization"), 1u);
  EXPECT_EQ(m->graph(GraphId(1)).node_count(), 1u);
  auto captured = make(true)();
  auto row = census(*captured, "fuse_layer_norm");
  EXPECT_EQ(row.found, 2);
  EXPECT_EQ(row.missed["intermediate read by a subgraph"], 1) << missed(row);
  auto m2 = optimize_and_check(make(true), {"fuse_layer_norm"});
  EXPECT_EQ(count_op(m2->main(), "LayerNormalization"), 0u);
  EXPECT_EQ(count_op(m2->graph(GraphId(1)), "LayerNormalization"), 1u);
}

// float16 model, statistics in float (torch ≥ 2 exports LayerNorm of a half tensor this way):
// X16 → Cast(float) → chain → Cast(float16) → Mul(γ16) [→ Add(β16)] is LayerNormalization-17 with
// stash_type=1 on X16, γ and β taken over (the op rounds once where the chain rounds x̂, x̂·γ and
// the sum: an ulp of x̂·γ where β cancels it, an ulp of the output's scale, which is how
// verification judges a float16 model). A chain in float16 itself is the same op. Scale and bias applied in float
// before the Cast back: a float LayerNormalization between the kept Casts.
TEST(FuseLayerNorm, Float16WithCastsBecomesStashType1) {
  enum Form { kCastBackThenAffine, kCastBackThenScale, kNoCast, kAffineInFloat };
  auto make = [](Form form) {
    return [form] {
      GraphBuilder b(17);
      ValueId x16 = b.input("x", {2, 4, 16}, DType::Float16);
      ValueId x = form == kNoCast ? x16 : b.node("Cast", {x16}, {NewAttr::Int("to", 1)});
      ValueId n = layer_norm(
          b, x, {16}, Spelling{.scale = false, .bias = false, .type = form == kNoCast ? DType::Float16 : DType::Float});
      if (form == kAffineInFloat) {
        ValueId y = b.node(
            "Add", {b.node("Mul", {n, b.f32("g", {16}, noise(16, 21, 0.5f, 1.5f))}), b.f32("b", {16}, noise(16, 22))});
        b.output(b.node("Cast", {y}, {NewAttr::Int("to", 10)}), DType::Float16);
        return std::move(b.m);
      }
      ValueId n16 = form == kNoCast ? n : b.node("Cast", {n}, {NewAttr::Int("to", 10)});
      ValueId y = b.node("Mul", {n16, f16(b, "g16", {16}, noise(16, 21, 0.5f, 1.5f))});
      if (form != kCastBackThenScale) y = b.node("Add", {y, f16(b, "b16", {16}, noise(16, 22))});
      b.output(y, DType::Float16);
      return std::move(b.m);
    };
  };
  auto stash_op = [](const Graph& g) {
    NodeId ln = only(g, "LayerNormalization");
    EXPECT_TRUE(ln.valid());
    if (!ln.valid()) return;
    EXPECT_EQ(g.attr_int(ln, "stash_type", 0), 1);
    EXPECT_EQ(g.dtype(g.input(ln, 0)), DType::Float16);
    EXPECT_EQ(dtype_of(g, g.input(ln, 1)), DType::Float16);
  };
  {
    auto m = optimize_and_check(make(kCastBackThenScale), {"fuse_layer_norm", "eliminate_dead_nodes"});
    EXPECT_EQ(m->main().node_count(), 1u);
    stash_op(m->main());
  }
  {
    auto m = optimize_and_check(make(kCastBackThenAffine), {"fuse_layer_norm", "eliminate_dead_nodes"});
    EXPECT_EQ(m->main().node_count(), 1u);
    EXPECT_EQ(count_op(m->main(), "Cast"), 0u);
    stash_op(m->main());
  }
  {
    auto pure = make(kNoCast)();
    auto row = census(*pure, "fuse_layer_norm");
    EXPECT_EQ(row.fusable_here, 1) << missed(row);
    auto m = optimize_and_check(make(kNoCast), {"fuse_layer_norm", "eliminate_dead_nodes"});
    EXPECT_EQ(m->main().node_count(), 1u);
    stash_op(m->main());
  }
  {
    auto m = optimize_and_check(make(kAffineInFloat), {"fuse_layer_norm", "eliminate_dead_nodes"});
    const Graph& g = m->main();
    EXPECT_EQ(count_op(g, "LayerNormalization"), 1u);
    EXPECT_EQ(count_op(g, "Cast"), 2u);
    EXPECT_EQ(g.node_count(), 3u);
  }
}

// ------------------------------------------------------------------------------ RMSNorm

// HF Llama's LlamaRMSNorm as torch.onnx writes it (float32 model: both Casts to float32).
ValueId llama_rms(GraphBuilder& b, ValueId x, int64_t hidden, DType model_type, const std::string& p) {
  const int64_t to = static_cast<int64_t>(model_type);
  ValueId xf = b.node("Cast", {x}, {NewAttr::Int("to", 1)});
  ValueId v = reduce_mean(b, b.node("Pow", {xf, f32s(b, p + "two", 2)}), {-1});
  ValueId r = b.node("Div", {f32s(b, p + "one", 1), b.node("Sqrt", {b.node("Add", {v, f32s(b, p + "eps", 1e-6f)})})});
  ValueId n = b.node("Cast", {b.node("Mul", {xf, r})}, {NewAttr::Int("to", to)});
  ValueId w = model_type == DType::Float16 ? f16(b, p + "w", {hidden}, noise(hidden, 31, 0.5f, 1.5f))
                                           : b.f32(p + "w", {hidden}, noise(hidden, 31, 0.5f, 1.5f));
  return b.node("Mul", {w, n});
}

TEST(FuseRmsNorm, LlamaSpellingBecomesOneOp) {
  auto make = [] {
    GraphBuilder b(23);
    ValueId x = b.input("x", {-1, -1, 32}, DType::Float, {"batch", "seq"});
    b.output(llama_rms(b, x, 32, DType::Float, "l"));
    return std::move(b.m);
  };
  auto before = make();
  EXPECT_EQ(census(*before, "fuse_rms_norm").fusable_here, 1) << missed(census(*before, "fuse_rms_norm"));
  EXPECT_EQ(census(*before, "fuse_layer_norm").found, 0);
  auto m = optimize_and_check(make, {"fuse_rms_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  ASSERT_EQ(g.node_count(), 1u);
  NodeId n = only(g, "RMSNormalization");
  ASSERT_TRUE(n.valid());
  EXPECT_EQ(g.input(n, 0), g.graph_inputs()[0]);
  EXPECT_FLOAT_EQ(g.attr_float(n, "epsilon", 0), 1e-6f);
  EXPECT_EQ(g.attr_int(n, "axis", 0), -1);
}

// An RMSNorm computed in float16 itself (a float16 export without the Casts) is
// RMSNormalization with stash_type=1 on X16, γ taken over; verified in float16 ulps.
TEST(FuseRmsNorm, Float16ChainIsStashType1) {
  auto make = [] {
    GraphBuilder b(23);
    ValueId x = b.input("x", {2, 4, 16}, DType::Float16);
    ValueId y = rms_norm(b, x, {16}, Spelling{.scale = false, .bias = false, .type = DType::Float16});
    b.output(b.node("Mul", {y, f16(b, "w16", {16}, noise(16, 31, 0.5f, 1.5f))}), DType::Float16);
    return std::move(b.m);
  };
  auto before = make();
  EXPECT_EQ(census(*before, "fuse_rms_norm").fusable_here, 1) << missed(census(*before, "fuse_rms_norm"));
  auto m = optimize_and_check(make, {"fuse_rms_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  ASSERT_EQ(g.node_count(), 1u);
  NodeId n = only(g, "RMSNormalization");
  ASSERT_TRUE(n.valid());
  EXPECT_EQ(g.attr_int(n, "stash_type", 0), 1);
  EXPECT_EQ(g.input(n, 0), g.graph_inputs()[0]);
  EXPECT_EQ(dtype_of(g, g.input(n, 1)), DType::Float16);
}

TEST(FuseRmsNorm, EverySpelling) {
  for (int64_t opset : {23, 24})
    for (bool mul_square : {false, true})
      for (int inv : {0, 1, 2})
        for (bool swap : {false, true})
          for (bool scale : {false, true}) {
            SCOPED_TRACE(std::to_string(opset) + " " + std::to_string(mul_square) + " " + std::to_string(inv) + " " +
                         std::to_string(swap) + " " + std::to_string(scale));
            Spelling s{.mul_square = mul_square, .inv = inv, .swap = swap, .scale = scale, .bias = false};
            auto make = [&] {
              GraphBuilder b(opset);
              ValueId x = b.input("x", {2, 3, 16});
              b.output(rms_norm(b, x, {16}, s));
              return std::move(b.m);
            };
            auto m =
                optimize_and_check(make, {"fuse_rms_norm", "eliminate_dead_nodes", "eliminate_unused_initializers"});
            EXPECT_EQ(m->main().node_count(), 1u);
            EXPECT_EQ(count_op(m->main(), "RMSNormalization"), 1u);
          }
}

// Gemma: x̂ · (1 + w) with both constants: the op's scale is 1 + w.
TEST(FuseRmsNorm, GemmaOnePlusWeightFoldsIntoTheScale) {
  const std::vector<float> w = noise(16, 41, -0.5f, 0.5f);
  auto make = [&] {
    GraphBuilder b(23);
    ValueId x = b.input("x", {2, 3, 16});
    ValueId n = rms_norm(b, x, {16}, Spelling{.inv = 2, .scale = false, .bias = false, .eps = 1e-6f});
    b.output(b.node("Mul", {n, b.node("Add", {f32s(b, "one_", 1.f), b.f32("gemma_w", {16}, w)})}));
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_rms_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  ASSERT_EQ(g.node_count(), 1u);
  auto scale = values(g, g.input(only(g, "RMSNormalization"), 1));
  ASSERT_EQ(scale.size(), 16u);
  for (size_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(static_cast<float>(scale[i]), 1.f + w[i]);
}

// float16 Llama: X16 → Cast(float) → chain → Cast(float16) → Mul(w16): stash_type=1 on X16.
TEST(FuseRmsNorm, Float16LlamaBecomesStashType1) {
  auto make = [] {
    GraphBuilder b(23);
    ValueId x = b.input("x", {2, 3, 32}, DType::Float16);
    b.output(llama_rms(b, x, 32, DType::Float16, "h"), DType::Float16);
    return std::move(b.m);
  };
  auto m = optimize_and_check(make, {"fuse_rms_norm", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  ASSERT_EQ(g.node_count(), 1u);
  NodeId n = only(g, "RMSNormalization");
  EXPECT_EQ(g.attr_int(n, "stash_type", 0), 1);
  EXPECT_EQ(g.dtype(g.input(n, 0)), DType::Float16);
}

TEST(FuseRmsNorm, NearMissesAndOpsetGate) {
  {  // mean square over axis 1 of NCHW
    GraphBuilder b(23);
    ValueId x = b.input("x", {1, 8, 4, 4});
    b.output(rms_norm(b, x, {8, 1, 1}, Spelling{.scale = false, .bias = false, .axes = {1}}));
    auto row = census(*b.m, "fuse_rms_norm");
    EXPECT_EQ(row.missed["axes not trailing"], 1) << missed(row);
  }
  {  // the normalized value is also returned
    GraphBuilder b(23);
    ValueId x = b.input("x", {2, 8});
    ValueId v = reduce_mean(b, b.node("Mul", {x, x}), {-1});
    ValueId s = b.node("Sqrt", {b.node("Add", {v, f32s(b, "eps", 1e-6f)})});
    b.output(b.node("Div", {x, s}));
    b.output(s);
    auto row = census(*b.m, "fuse_rms_norm");
    EXPECT_EQ(row.missed["intermediate is a graph output"], 1) << missed(row);
    optimize(*b.m, {"fuse_rms_norm"});
    EXPECT_EQ(count_op(b.g(), "RMSNormalization"), 0u);
  }
  {  // L2 normalization (ReduceSum, no mean) and a LayerNorm's variance are not RMSNorms
    GraphBuilder b(23);
    ValueId x = b.input("x", {2, 8});
    ValueId ss = b.node("ReduceSum", {b.node("Mul", {x, x}), b.i64("ax", {-1})});
    b.output(b.node("Div", {x, b.node("Sqrt", {b.node("Add", {ss, f32s(b, "eps", 1e-6f)})})}));
    b.output(layer_norm(b, b.input("y", {2, 8}), {8}, Spelling{}));
    EXPECT_EQ(census(*b.m, "fuse_rms_norm").found, 0);
    EXPECT_EQ(census(*b.m, "fuse_layer_norm").fusable_here, 1);
  }
  {  // opset 22: counted for an upgrade, untouched
    GraphBuilder b(22);
    ValueId x = b.input("x", {2, 8});
    b.output(rms_norm(b, x, {8}, Spelling{}));
    auto row = census(*b.m, "fuse_rms_norm");
    EXPECT_EQ(row.fusable_after_upgrade, 1);
    optimize(*b.m, {"fuse_rms_norm"});
    EXPECT_EQ(count_op(b.g(), "RMSNormalization"), 0u);
  }
}

// ------------------------------------------------------------------------------ GELU

// One GELU written out: `form` picks the association and the constants' spelling.
ValueId gelu_erf(GraphBuilder& b, ValueId x, int form, const std::string& p, float sqrt2 = 1.4142135f) {
  ValueId z =
      form % 2 == 0 ? b.node("Div", {x, f32s(b, p + "s2", sqrt2)}) : b.node("Mul", {f32s(b, p + "is2", 1 / sqrt2), x});
  ValueId a = form % 3 == 0 ? b.node("Add", {b.node("Erf", {z}), f32s(b, p + "one", 1)})
                            : b.node("Add", {f32s(b, p + "one", 1), b.node("Erf", {z})});
  switch (form % 4) {
    case 0: return b.node("Mul", {b.node("Mul", {x, a}), f32s(b, p + "half", 0.5f)});  // torch F.gelu
    case 1: return b.node("Mul", {b.node("Mul", {x, f32s(b, p + "half", 0.5f)}), a});  // HF x * 0.5 * (1 + erf)
    case 2: return b.node("Mul", {x, b.node("Mul", {f32s(b, p + "half", 0.5f), a})});  // x * (0.5 * (1 + erf))
    default: return b.node("Div", {b.node("Mul", {a, x}), f32s(b, p + "two", 2)});     // x * (1 + erf) / 2
  }
}

ValueId gelu_tanh(GraphBuilder& b, ValueId x, bool gpt2, const std::string& p, float kappa = 0.044715f) {
  ValueId cube = gpt2 ? b.node("Pow", {x, f32s(b, p + "three", 3)}) : b.node("Mul", {x, b.node("Mul", {x, x})});
  ValueId inner = b.node("Add", {x, b.node("Mul", {cube, f32s(b, p + "kappa", kappa)})});
  ValueId t = b.node("Tanh", {b.node("Mul", {inner, f32s(b, p + "beta", 0.7978845608f)})});
  ValueId a = b.node("Add", {t, f32s(b, p + "one", 1)});
  if (gpt2) return b.node("Mul", {b.node("Mul", {f32s(b, p + "half", 0.5f), x}), a});
  return b.node("Mul", {f32s(b, p + "half", 0.5f), b.node("Mul", {x, a})});
}

TEST(FuseGelu, EveryErfSpellingAndBothTanhSpellings) {
  auto make = [] {
    GraphBuilder b(20);
    ValueId x = b.input("x", {-1, 6, 16}, DType::Float, {"batch"});
    for (int form = 0; form < 12; ++form) b.output(gelu_erf(b, x, form, "e" + std::to_string(form)));
    b.output(gelu_tanh(b, x, true, "gpt2"));
    b.output(gelu_tanh(b, x, false, "torch"));
    return std::move(b.m);
  };
  auto before = make();
  auto row = census(*before, "fuse_gelu");
  EXPECT_EQ(row.found, 14);
  EXPECT_EQ(row.fusable_here, 14) << missed(row);
  auto m = optimize_and_check(make, {"fuse_gelu", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  EXPECT_EQ(g.node_count(), 14u);
  EXPECT_EQ(count_op(g, "Gelu"), 14u);
  size_t tanh = 0;
  for (NodeId n : g.nodes()) tanh += g.attr_string(n, "approximate") == "tanh";
  EXPECT_EQ(tanh, 2u);
}

// Constants stored as float64 or float16 (rounded) are the same GELU; a wrong one is a Miss.
TEST(FuseGelu, ConstantsByValueWithinTheirTypesRounding) {
  GraphBuilder h(20);
  ValueId xh = h.input("x", {4, 8}, DType::Float16);
  ValueId zh = h.node("Div", {xh, f16(h, "s2", {}, {1.4142135f})});
  ValueId ah = h.node("Add", {h.node("Erf", {zh}), f16(h, "one", {}, {1})});
  h.output(h.node("Mul", {h.node("Mul", {xh, ah}), f16(h, "half", {}, {0.5f})}), DType::Float16);
  // The float16 constants pass.
  auto half_row = census(*h.m, "fuse_gelu");
  EXPECT_EQ(half_row.fusable_here, 1) << missed(half_row);

  GraphBuilder w(20);
  ValueId xw = w.input("x", {4, 8});
  w.output(gelu_erf(w, xw, 0, "a", 1.5f));           // x / 1.5
  w.output(gelu_tanh(w, xw, true, "b", 0.044716f));  // κ off by 2e-5 relative
  ValueId a = w.node("Add", {w.node("Erf", {w.node("Div", {xw, f32s(w, "s2", 1.4142135f)})}), f32s(w, "two", 2)});
  w.output(w.node("Mul", {w.node("Mul", {xw, a}), f32s(w, "half", 0.5f)}));  // 2 + erf
  auto row = census(*w.m, "fuse_gelu");
  EXPECT_EQ(row.found, 3);
  EXPECT_EQ(row.missed["constants differ"], 3) << missed(row);
  optimize(*w.m, {"fuse_gelu"});
  EXPECT_EQ(count_op(w.g(), "Gelu"), 0u);
}

// A GELU computed in float16 rounds every step: 1 + erf(x/√2) loses most of its digits where
// erf is near −1, so the fused op (computing in float, rounding once) differs from the chain by
// 0.00195 on 64×64 seeded inputs, erf and tanh forms: more than float32's class-1 bound at those
// small elements, a few float16 ulps of the output's scale, which is how verification judges a
// float16 model (docs/accuracy.md). Both forms fuse, as SiLU does.
TEST(FuseGelu, Float16ChainsFuse) {
  auto make = [](int k) {
    return [k] {
      GraphBuilder b(24);
      ValueId x = b.input("x", {64, 64}, DType::Float16);
      if (k == 0) {
        ValueId a = b.node(
            "Add", {b.node("Erf", {b.node("Div", {x, f16(b, "s2", {}, {1.4142135f})})}), f16(b, "one", {}, {1})});
        b.output(b.node("Mul", {b.node("Mul", {x, a}), f16(b, "half", {}, {0.5f})}), DType::Float16);
      } else if (k == 1) {
        ValueId inner = b.node(
            "Add",
            {x, b.node("Mul", {b.node("Pow", {x, f16(b, "three", {}, {3})}), f16(b, "kappa", {}, {0.044715f})})});
        ValueId a = b.node("Add", {b.node("Tanh", {b.node("Mul", {inner, f16(b, "beta", {}, {0.7978845608f})})}),
                                   f16(b, "one", {}, {1})});
        b.output(b.node("Mul", {b.node("Mul", {f16(b, "half", {}, {0.5f}), x}), a}), DType::Float16);
      } else {
        b.output(b.node("Mul", {x, b.node("Sigmoid", {x})}), DType::Float16);
      }
      return std::move(b.m);
    };
  };
  for (int k : {0, 1}) {
    auto m = optimize_and_check(make(k), {"fuse_gelu"});
    EXPECT_EQ(count_op(m->main(), "Gelu"), 1u);
    EXPECT_EQ(m->main().node_count(), 1u);
  }
  auto m = optimize_and_check(make(2), {"fuse_swish"});
  EXPECT_EQ(count_op(m->main(), "Swish"), 1u);
}

TEST(FuseGelu, NearMissesAndOpsetGate) {
  {  // BERT's pooler Tanh and a plain Erf are not GELUs
    GraphBuilder b(20);
    ValueId x = b.input("x", {4, 8});
    b.output(b.node("Tanh", {b.node("MatMul", {x, b.f32("w", {8, 8}, noise(64, 1))})}));
    b.output(b.node("Erf", {x}));
    EXPECT_EQ(census(*b.m, "fuse_gelu").found, 0);
  }
  {  // the Erf's output is read twice
    GraphBuilder b(20);
    ValueId x = b.input("x", {4, 8});
    ValueId e = b.node("Erf", {b.node("Div", {x, f32s(b, "s2", 1.4142135f)})});
    ValueId a = b.node("Add", {e, f32s(b, "one", 1)});
    b.output(b.node("Mul", {b.node("Mul", {x, a}), f32s(b, "half", 0.5f)}));
    b.output(b.node("Neg", {e}));
    auto row = census(*b.m, "fuse_gelu");
    EXPECT_EQ(row.missed["intermediate has other readers"], 1) << missed(row);
  }
  {  // x under the erf and x in the product differ
    GraphBuilder b(20);
    ValueId x = b.input("x", {4, 8}), y = b.input("y", {4, 8});
    ValueId a = b.node("Add", {b.node("Erf", {b.node("Div", {x, f32s(b, "s2", 1.4142135f)})}), f32s(b, "one", 1)});
    b.output(b.node("Mul", {b.node("Mul", {y, a}), f32s(b, "half", 0.5f)}));
    EXPECT_EQ(census(*b.m, "fuse_gelu").found, 0);
  }
  {  // x²·y is not x³: a link reads the chain's value (this fused, and failed verification, before)
    GraphBuilder b(20);
    ValueId x = b.input("x", {4, 8}), y = b.input("y", {4, 8});
    ValueId cube = b.node("Mul", {b.node("Mul", {x, x}), y});
    ValueId inner = b.node("Add", {x, b.node("Mul", {cube, f32s(b, "kappa", 0.044715f)})});
    ValueId t = b.node("Tanh", {b.node("Mul", {inner, f32s(b, "beta", 0.7978845608f)})});
    ValueId a = b.node("Add", {t, f32s(b, "one", 1)});
    b.output(b.node("Mul", {b.node("Mul", {f32s(b, "half", 0.5f), x}), a}));
    EXPECT_EQ(census(*b.m, "fuse_gelu").found, 0);
    optimize(*b.m, {"fuse_gelu"});
    EXPECT_EQ(count_op(b.g(), "Gelu"), 0u);
  }
  {  // opset 19: after an upgrade only
    GraphBuilder b(19);
    b.output(gelu_erf(b, b.input("x", {4, 8}), 0, "g"));
    EXPECT_EQ(census(*b.m, "fuse_gelu").fusable_after_upgrade, 1);
    optimize(*b.m, {"fuse_gelu"});
    EXPECT_EQ(count_op(b.g(), "Gelu"), 0u);
  }
}

// ------------------------------------------------------------------------------ Swish

TEST(FuseSwish, SiluAndScaledSigmoid) {
  auto make = [] {
    GraphBuilder b(24);
    ValueId x = b.input("x", {2, 16});
    b.output(b.node("Mul", {x, b.node("Sigmoid", {x})}));
    b.output(b.node("Mul", {b.node("Sigmoid", {x}), x}));
    b.output(b.node("Mul", {b.node("Sigmoid", {b.node("Mul", {f32s(b, "alpha", 1.702f), x})}), x}));
    return std::move(b.m);
  };
  auto before = make();
  EXPECT_EQ(census(*before, "fuse_swish").fusable_here, 3);
  auto m = optimize_and_check(make, {"fuse_swish", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  EXPECT_EQ(g.node_count(), 3u);
  EXPECT_EQ(count_op(g, "Swish"), 3u);
  size_t scaled = 0;
  for (NodeId n : g.nodes()) scaled += g.attr_float(n, "alpha", 1.f) == 1.702f;
  EXPECT_EQ(scaled, 1u);
}

TEST(FuseSwish, NearMissesAndOpsetGate) {
  GraphBuilder b(24);
  ValueId x = b.input("x", {2, 16});
  // a gate read twice, a per-channel α, and a Sigmoid of something else
  ValueId s = b.node("Sigmoid", {x});
  b.output(b.node("Mul", {x, s}));
  b.output(s);
  b.output(b.node("Mul", {b.node("Sigmoid", {b.node("Mul", {b.f32("w", {16}, noise(16, 1)), x})}), x}));
  b.output(b.node("Mul", {b.node("Sigmoid", {b.input("y", {2, 16})}), x}));
  auto row = census(*b.m, "fuse_swish");
  EXPECT_EQ(row.found, 2);
  EXPECT_EQ(row.missed["intermediate is a graph output"], 1) << missed(row);
  EXPECT_EQ(row.missed["alpha not a scalar"], 1) << missed(row);
  optimize(*b.m, {"fuse_swish"});
  EXPECT_EQ(count_op(b.g(), "Swish"), 0u);

  GraphBuilder old(23);
  ValueId xo = old.input("x", {2, 16});
  old.output(old.node("Mul", {xo, old.node("Sigmoid", {xo})}));
  EXPECT_EQ(census(*old.m, "fuse_swish").fusable_after_upgrade, 1);
  optimize(*old.m, {"fuse_swish"});
  EXPECT_EQ(count_op(old.g(), "Swish"), 0u);
}

// ------------------------------------------------------------------------------ HardSwish

// x · ReLU6(x + 3) / 6 as Keras, tf2onnx and hand-written torch spell it.
ValueId relu6_swish(GraphBuilder& b, ValueId x, int form, const std::string& k, float hi = 6) {
  ValueId c =
      b.node("Clip", {b.node("Add", {x, f32s(b, "three" + k, 3)}), f32s(b, "lo" + k, 0), f32s(b, "hi" + k, hi)});
  if (form == 0) return b.node("Div", {b.node("Mul", {x, c}), f32s(b, "six" + k, 6)});
  if (form == 1) return b.node("Mul", {f32s(b, "sixth" + k, 1.0f / 6), b.node("Mul", {c, x})});
  return b.node("Mul", {x, b.node("Div", {c, f32s(b, "six" + k, 6)})});
}

TEST(FuseHardSwish, TorchAndKerasSpellings) {
  auto make = [] {
    GraphBuilder b(14);
    ValueId x = b.input("x", {2, 16, 4, 4});
    // torch.onnx below opset 14: Mul(x, HardSigmoid(x, alpha=1/6)) in either order
    const std::vector<NewAttr> torch_alpha = {NewAttr::Float("alpha", 0.1666666716337204f)};
    b.output(b.node("Mul", {x, b.node("HardSigmoid", {x}, torch_alpha)}));
    b.output(b.node("Mul", {b.node("HardSigmoid", {x}, torch_alpha), x}));
    for (int form : {0, 1, 2}) b.output(relu6_swish(b, x, form, std::to_string(form)));
    return std::move(b.m);
  };
  auto before = make();
  EXPECT_EQ(census(*before, "fuse_hard_swish").fusable_here, 5);
  auto m = optimize_and_check(make, {"fuse_hard_swish", "eliminate_dead_nodes"});
  const Graph& g = m->main();
  EXPECT_EQ(g.node_count(), 5u);
  EXPECT_EQ(count_op(g, "HardSwish"), 5u);
  for (NodeId n : g.nodes()) EXPECT_EQ(str(g.value_name(g.input(n, 0))), "x");
}

TEST(FuseHardSwish, GatesOtherSlopesOtherBoundsAndTheOpsetAreLeft) {
  GraphBuilder b(14);
  ValueId x = b.input("x", {2, 16}), y = b.input("y", {2, 16});
  // MobileNetV3's squeeze-excitation gate x · HardSigmoid(se): not an h-swish at all
  b.output(b.node("Mul", {x, b.node("HardSigmoid", {y}, {NewAttr::Float("alpha", 1.0f / 6)})}));
  // Keras's hard_sigmoid (0.2·x + 0.5) times x, a ReLU5, and a product read twice
  b.output(b.node("Mul", {x, b.node("HardSigmoid", {x})}));
  b.output(relu6_swish(b, x, 0, "five", 5));
  ValueId c = b.node("Clip", {b.node("Add", {x, f32s(b, "three", 3)}), f32s(b, "lo", 0), f32s(b, "hi", 6)});
  ValueId prod = b.node("Mul", {x, c});
  b.output(b.node("Div", {prod, f32s(b, "six", 6)}));
  b.output(b.node("Relu", {prod}));
  auto row = census(*b.m, "fuse_hard_swish");
  EXPECT_EQ(row.found, 3) << missed(row);
  EXPECT_EQ(row.missed["HardSigmoid slope is not 1/6"], 1) << missed(row);
  EXPECT_EQ(row.missed["Clip bounds are not [0, 6]"], 1) << missed(row);
  EXPECT_EQ(row.missed["intermediate has other readers"], 1) << missed(row);
  optimize(*b.m, {"fuse_hard_swish"});
  EXPECT_EQ(count_op(b.g(), "HardSwish"), 0u);

  GraphBuilder old(13);  // torch's opset-13 export: fusable after an upgrade only
  ValueId xo = old.input("x", {2, 16});
  old.output(old.node("Mul", {xo, old.node("HardSigmoid", {xo}, {NewAttr::Float("alpha", 1.0f / 6)})}));
  EXPECT_EQ(census(*old.m, "fuse_hard_swish").fusable_after_upgrade, 1);
  optimize(*old.m, {"fuse_hard_swish"});
  EXPECT_EQ(count_op(old.g(), "HardSwish"), 0u);
}

}  // namespace
}  // namespace onnxforge::test
