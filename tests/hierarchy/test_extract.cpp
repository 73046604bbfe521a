// extract: every transformer layer of the zoo models cuts out as a runnable model whose outputs
// equal the original's intermediate tensors bit for bit (reference runtime).
#include <gtest/gtest.h>

#include "hierarchy/extract.h"
#include "api/extract_verify.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

void expect_exact(Model& source, const std::string& module, const std::filesystem::path& out) {
  Extraction cut = extract_module(source, module);
  EXPECT_GT(cut.nodes, 0u);
  EXPECT_FALSE(cut.outputs.empty());
  save_model(*cut.model, out);
  // the saved file is a model of its own: reload it and check again
  auto reloaded = load_model(out);
  Extraction again{std::move(reloaded), cut.inputs, cut.outputs};
  for (const OutputCheck& c : verify_extraction(source, again, 2)) {
    EXPECT_EQ(c.max_diff, 0.0) << module << " output " << c.name;
    EXPECT_TRUE(c.bit_exact) << module << " output " << c.name;
  }
}

TEST(Extract, EveryBertLayerRunsWithMaxDiffZero) {
  auto model = load_model(test::zoo_model("bert_small"));
  read_tags(*model);
  auto dir = test::temp_dir("extract_bert");
  for (int layer = 0; layer < 2; ++layer)
    expect_exact(*model, "encoder.layer." + std::to_string(layer), dir / ("layer" + std::to_string(layer) + ".onnx"));
  expect_exact(*model, "embeddings", dir / "embeddings.onnx");
  expect_exact(*model, "encoder.layer.0.attention.self", dir / "self.onnx");
}

TEST(Extract, ByClassPathOnTheHierarchyExport) {
  auto path = test::htp_export("bert_small");
  ASSERT_FALSE(path.empty());
  auto model = load_model(path);
  read_tags(*model);
  auto dir = test::temp_dir("extract_htp");
  expect_exact(*model, "/BertModel/BertEncoder/BertLayer.1", dir / "layer1.onnx");
  Extraction by_class = extract_module(*model, "/BertModel/BertEncoder/BertLayer.0");
  Extraction by_module = extract_module(*model, "encoder.layer.0");
  EXPECT_EQ(by_class.nodes, by_module.nodes);
  EXPECT_EQ(by_class.inputs, by_module.inputs);
  EXPECT_EQ(by_class.outputs, by_module.outputs);
}

TEST(Extract, OtherFamilies) {
  auto dir = test::temp_dir("extract_zoo");
  struct Case {
    const char* model;
    const char* module;
  };
  for (Case c : {Case{"llama_small", "model.layers.1"}, Case{"gpt2_small_cfg", "h.0"},
                 Case{"whisper_small_enc", "layers.1"}, Case{"resnet_small", "layer2.0"},
                 Case{"mobilenet_v3_small", "features.4"}, Case{"vit_small", "encoder.layers.encoder_layer_0"}}) {
    auto model = load_model(test::zoo_model(c.model));
    read_tags(*model);
    expect_exact(*model, c.module, dir / (std::string(c.model) + ".onnx"));
  }
}

TEST(Extract, SharesWeightsInsteadOfCopying) {
  auto model = load_model(test::zoo_model("resnet_small"));
  read_tags(*model);
  Extraction cut = extract_module(*model, "layer4");
  ASSERT_GT(cut.initializers, 0u);
  const Graph& g = cut.model->main();
  for (ValueId v : g.initializers()) {
    auto name = str(g.value_name(v));
    auto src = model->main().find_value(name);
    ASSERT_TRUE(src);
    EXPECT_EQ(cut.model->tensors.bytes(g.initializer(v)).data(),
              model->tensors.bytes(model->main().initializer(*src)).data())
        << name << " was copied";
  }
}

TEST(Extract, UnknownModuleSaysWhatExists) {
  auto model = load_model(test::zoo_model("bert_small"));
  read_tags(*model);
  try {
    extract_module(*model, "encoder.layer.7");
    FAIL() << "no error";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("encoder.layer.0"), std::string::npos) << e.what(); }
}

}  // namespace
}  // namespace onnxforge::hier
