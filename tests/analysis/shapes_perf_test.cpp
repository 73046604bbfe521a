// Shape inference must cost milliseconds on BERT-base (~1500 nodes), not seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "tests/common/models.h"

using namespace onnxforge;

TEST(ShapesPerf, BertBaseInMilliseconds) {
  auto path = test::model_dir() / "bert_base.onnx";
  if (!std::filesystem::exists(path)) path = test::zoo_model("bert_small");
  double best = 1e9;
  size_t nodes = 0;
  ShapeReport rep;
  for (int i = 0; i < 5; ++i) {
    auto model = load_model(path);  // fresh tables each time: nothing declared but the interface
    nodes = model->main().node_count();
    auto t0 = std::chrono::steady_clock::now();
    rep = infer_shapes(*model);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::cout << "[perf] " << path.filename().string() << ": " << nodes << " nodes, best of 5 " << best << " ms; "
            << rep.summary() << "\n";
  EXPECT_EQ(rep.resolved, rep.values);
  EXPECT_LT(best, 50.0);
}
