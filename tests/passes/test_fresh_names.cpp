// The names a rewrite invents (ir/rewrite.h: fresh_name) come from the model's own counter: one
// process optimizing the same file again, after other models, writes the same bytes (the Python
// module does many models in one process, from one thread or several); a clone goes on from its
// original's counter, so its names never collide with those the original already handed out.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "api/engine.h"
#include "io/model_io.h"
#include "ir/rewrite.h"
#include "tests/common/models.h"

namespace onnxforge::test {
namespace {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// `model` optimized (the default pipeline, optionally to `opset`, not verified) and written.
fs::path optimized(const std::string& model, std::optional<int64_t> opset, const fs::path& out) {
  api::OptimizeSettings s;
  s.verify = false;
  s.target_opset = opset;
  api::OptimizeOutcome o = api::optimize(zoo_model(model), s);
  EXPECT_TRUE(o.ok()) << model;
  api::write_optimized(o, out, false);
  return out;
}

size_t invented_names(const fs::path& p) {
  auto m = load_model(p);
  size_t n = 0;
  const Graph& g = m->main();
  for (uint32_t v = 0; v < g.value_count(); ++v)
    n += str(g.value_name(ValueId(v))).find("__") != std::string_view::npos;
  return n;
}

TEST(FreshNames, TheSameModelOptimizedAgainInOneProcessIsTheSameFile) {
  const fs::path dir = temp_dir("fresh_names");
  for (auto [model, opset] :
       {std::pair<const char*, std::optional<int64_t>>{"bert_small", std::nullopt}, {"llama_small", 23}}) {
    SCOPED_TRACE(model);
    const fs::path first = optimized(model, opset, dir / "first.onnx");
    optimized("gpt2_small_cfg", 23, dir / "between.onnx");  // other rewrites in the same process
    const fs::path again = optimized(model, opset, dir / "again.onnx");
    EXPECT_GT(invented_names(first), 0u);  // the fusions named values of their own
    EXPECT_TRUE(bytes_of(first) == bytes_of(again));
  }
}

TEST(FreshNames, PerModelCounterCarriedByClones) {
  auto m = load_model(zoo_model("bert_small"));
  Graph& g = m->main();
  const Sym a = fresh_name(g, "x");
  const Sym b = fresh_name(g, "x");
  EXPECT_EQ(str(a), "x__0");
  EXPECT_EQ(str(b), "x__1");
  auto other = load_model(zoo_model("bert_small"));
  EXPECT_EQ(str(fresh_name(other->main(), "x")), "x__0");  // another model starts at 0
  auto copy = m->clone();
  EXPECT_EQ(str(fresh_name(copy->main(), "x")), "x__2");
  EXPECT_EQ(str(fresh_name(g, "x")), "x__2");  // the clone's counter is its own
}

}  // namespace
}  // namespace onnxforge::test
