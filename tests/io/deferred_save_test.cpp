// Deferred tensors (TensorRecipe) through the writer: computed into scratch memory one ahead of
// the write, embedded and as external data, without being kept by the store.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "io/model_io.h"
#include "tests/common/models.h"
#include "tests/common/proto_builder.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;

namespace {

// "Negate" recipe over a float source: simple enough to check, big enough to be a write hole.
TensorRecipe negate(TensorId source) {
  TensorRecipe r;
  r.key = "Neg";
  r.sources = {source};
  r.compute = [](std::span<const std::span<const std::byte>> src, std::span<std::byte> out) {
    const size_t n = out.size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, src[0].data() + i * sizeof(float), sizeof v);
      v = -v;
      std::memcpy(out.data() + i * sizeof(float), &v, sizeof v);
    }
  };
  return r;
}

std::vector<float> floats_of(const TensorStore& ts, TensorId t) { return ts.values<float>(t); }

TensorId initializer_named(const Model& m, std::string_view name) {
  const Graph& g = m.main();
  for (ValueId v : g.initializers())
    if (str(g.value_name(v)) == name) return g.initializer(v);
  return TensorId{};
}

}  // namespace

TEST(DeferredSave, ComputedTensorsAreStreamedAndStayDeferred) {
  fs::path dir = temp_dir("deferred_io");
  auto proto = tiny_model();
  std::vector<float> w(100000);  // 400 KB: above the writer's hole size
  std::iota(w.begin(), w.end(), 0.5f);
  *proto.mutable_graph()->add_initializer() = float_tensor("w", {100000}, w);
  write_model(proto, dir / "in.onnx");

  for (WeightPlacement placement : {WeightPlacement::Embed, WeightPlacement::External}) {
    auto m = load_model(dir / "in.onnx");
    Graph& g = m->main();
    TensorId src = initializer_named(*m, "w");
    ASSERT_TRUE(src.valid());
    const int64_t len = 100000;
    std::vector<ValueId> outs;
    for (const char* name : {"neg_a", "neg_b", "neg_c"}) {  // several: the compute-ahead alternates buffers
      TensorId t = m->tensors.add_deferred(intern(name), DType::Float, std::span<const int64_t>(&len, 1),
                                           len * sizeof(float), negate(src));
      ValueId v = g.add_value(intern(name));
      g.set_initializer(v, t);
      EXPECT_TRUE(m->tensors.is_deferred(t));
    }
    SaveOptions o;
    o.placement = placement;
    fs::path out = dir / (placement == WeightPlacement::Embed ? "emb.onnx" : "ext.onnx");
    save_model(*m, out, o);
    for (const char* name : {"neg_a", "neg_b", "neg_c"})
      EXPECT_TRUE(m->tensors.is_deferred(initializer_named(*m, name)));

    auto back = load_model(out);
    std::vector<float> expect(w.size());
    for (size_t i = 0; i < w.size(); ++i) expect[i] = -w[i];
    for (const char* name : {"neg_a", "neg_b", "neg_c"}) {
      TensorId t = initializer_named(*back, name);
      ASSERT_TRUE(t.valid()) << name;
      EXPECT_EQ(floats_of(back->tensors, t), expect) << name;
    }
    EXPECT_EQ(floats_of(back->tensors, initializer_named(*back, "w")), w);
  }
}

TEST(DeferredSave, ReadingComputesOnceAndReplacingTheSourceKeepsTheResult) {
  fs::path dir = temp_dir("deferred_io2");
  auto proto = tiny_model();
  *proto.mutable_graph()->add_initializer() = float_tensor("w", {3}, {1, 2, 3});
  write_model(proto, dir / "in.onnx");
  auto m = load_model(dir / "in.onnx");
  TensorId src = initializer_named(*m, "w");
  const int64_t len = 3;
  TensorId t = m->tensors.add_deferred(intern("n"), DType::Float, std::span<const int64_t>(&len, 1), 12, negate(src));
  std::vector<float> zeros(3, 0.f);
  m->tensors.replace(src, std::span<const int64_t>(&len, 1), std::as_bytes(std::span(zeros)));
  EXPECT_FALSE(m->tensors.is_deferred(t));
  EXPECT_EQ(floats_of(m->tensors, t), (std::vector<float>{-1, -2, -3}));
}
