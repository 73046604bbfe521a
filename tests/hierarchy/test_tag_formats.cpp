// Reading tags from each source format, on hand-written metadata and names.
#include <gtest/gtest.h>

#include "hierarchy/hierarchy.h"
#include "hierarchy/python_repr.h"
#include "hierarchy/tag_sources.h"
#include "hierarchy/torchscript_names.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

using test::GraphBuilderHelper;

TEST(PythonRepr, ParsesBothQuoteStylesAndEscapes) {
  auto l = parse_python_str_list(R"(['', 'encoder', "it's", 'a\'b', "q\"x", 'back\\slash', 'caf\xe9'])");
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 7u);
  EXPECT_EQ((*l)[0], "");
  EXPECT_EQ((*l)[1], "encoder");
  EXPECT_EQ((*l)[2], "it's");
  EXPECT_EQ((*l)[3], "a'b");
  EXPECT_EQ((*l)[4], "q\"x");
  EXPECT_EQ((*l)[5], "back\\slash");
  EXPECT_EQ((*l)[6], "caf\xc3\xa9");
  EXPECT_EQ(parse_python_str_list("[]")->size(), 0u);
  EXPECT_EQ(parse_python_str_list("  ['a', 'b',]  ")->size(), 2u);
  EXPECT_EQ(parse_python_str_list("('a', None)")->at(1), "");
}

TEST(PythonRepr, RejectsWhatIsNotAListOfStrings) {
  EXPECT_FALSE(parse_python_str_list(""));
  EXPECT_FALSE(parse_python_str_list("['a'"));
  EXPECT_FALSE(parse_python_str_list("['a' 'b']"));
  EXPECT_FALSE(parse_python_str_list("[1, 2]"));
  EXPECT_FALSE(parse_python_str_list("['unterminated]"));
  EXPECT_FALSE(parse_python_str_list("['a'] trailing"));
}

TEST(Tag, EncodesModuleAndClassPath) {
  Sym t = make_tag("encoder.layer.0", "/BertModel/BertEncoder/BertLayer.0");
  EXPECT_EQ(tag_module(t), "encoder.layer.0");
  EXPECT_EQ(tag_class_path(t), "/BertModel/BertEncoder/BertLayer.0");
  EXPECT_FALSE(make_tag("").empty());
  EXPECT_EQ(tag_module(make_tag("")), "");
  EXPECT_EQ(common_ancestor("encoder.layer.0.x", "encoder.layer.1"), "encoder.layer");
  EXPECT_EQ(common_ancestor("enc", "encoder"), "");
  EXPECT_EQ(common_ancestor("encoder", "encoder.layer"), "encoder");
  EXPECT_TRUE(is_within("encoder.layer.10", "encoder.layer.10"));
  EXPECT_FALSE(is_within("encoder.layer.10", "encoder.layer.1"));
  EXPECT_EQ(last_class("/BertModel/BertEncoder/BertLayer.3"), "BertLayer");
}

TEST(TorchScriptNames, UndoesTheExporterQuirks) {
  EXPECT_EQ(*module_from_node_name("/encoder/layer.0/attention/self/query/MatMul"),
            "encoder.layer.0.attention.self.query");
  EXPECT_EQ(*module_from_node_name("/layer1/layer1.0/conv2/Conv"), "layer1.0.conv2");
  EXPECT_EQ(*module_from_node_name("/layer1/layer1.0/relu_2/Relu"), "layer1.0.relu");
  EXPECT_EQ(*module_from_node_name("/features/features.0/features.0.0/Conv"), "features.0.0");
  EXPECT_EQ(*module_from_node_name("/features/features.1/block/block.1/fc1/Conv"), "features.1.block.1.fc1");
  EXPECT_EQ(*module_from_node_name("/encoder/layer.0/attention/self/MatMul_1"), "encoder.layer.0.attention.self");
  EXPECT_EQ(*module_from_node_name("/Cast"), "");
  EXPECT_EQ(*module_from_node_name("/model/layers.1/self_attn/q_proj/MatMul"), "model.layers.1.self_attn.q_proj");
  EXPECT_FALSE(module_from_node_name("Constant_85"));
  EXPECT_FALSE(module_from_node_name(""));
}

TEST(TorchScriptNames, KnownModulesSettleAmbiguities) {
  // A module really called `conv_1` keeps its name when the initializers say it exists.
  ModuleSet known = {"block", "block.conv_1"};
  EXPECT_EQ(*module_from_node_name("/block/conv_1/Conv", known), "block.conv_1");
  EXPECT_EQ(*module_from_node_name("/block/conv_1/Conv"), "block.conv");
  // A ModuleList named like its parent (`layer.layer.0`) is not an invoked Sequential.
  ModuleSet nested = {"layer", "layer.layer", "layer.layer.0"};
  EXPECT_EQ(*module_from_node_name("/layer/layer.0/Add", nested), "layer.layer.0");
  EXPECT_EQ(*module_from_node_name("/layer/layer.0/Add"), "layer.0");
}

TEST(ReadTags, DynamoMetadataBothKeysAndNamespace) {
  Model m;
  GraphBuilderHelper b(m);
  b.g.set_graph_inputs({b.v("x")});
  NodeId a =
      b.node("MatMul", {"x", "x"}, {"y"}, "node_linear",
             {{"pkg.torch.onnx.name_scopes", "['', 'encoder', 'encoder.layer.0', 'encoder.layer.0.query', 'linear']"},
              {"pkg.torch.onnx.class_hierarchy",
               "[\"transformers.BertModel\", 'transformers.BertEncoder', 'transformers.BertLayer', "
               "'torch.nn.modules.linear.Linear', 'aten.linear.default']"}});
  NodeId c = b.node("Relu", {"y"}, {"z"}, "node_relu",
                    {{"namespace", ": a.Net/act: torch.nn.modules.activation.ReLU/relu: aten.relu.default"}});
  NodeId r = b.node("Add", {"z", "x"}, {"w"}, "node_add", {{"pkg.torch.onnx.name_scopes", "['', 'add']"}});
  b.g.set_graph_outputs({b.v("w")});
  TagReport rep = read_tags(m);
  ASSERT_EQ(m.tags(b.g.scope(a)).size(), 1u);
  Sym ta = m.tags(b.g.scope(a))[0];
  EXPECT_EQ(tag_module(ta), "encoder.layer.0.query");
  EXPECT_EQ(tag_class_path(ta), "/BertModel/BertEncoder/BertLayer.0/Linear");
  EXPECT_EQ(tag_module(m.tags(b.g.scope(c))[0]), "act");
  EXPECT_EQ(tag_class_path(m.tags(b.g.scope(c))[0]), "/Net/ReLU");
  EXPECT_EQ(tag_module(m.tags(b.g.scope(r))[0]), "");
  EXPECT_EQ(rep.at(b.g.id(), a), TagSource::Dynamo);
  EXPECT_EQ(rep.at(b.g.id(), c), TagSource::Dynamo);
}

TEST(ReadTags, RulesTagConstantsAndHelpers) {
  Model m;
  GraphBuilderHelper b(m);
  b.g.set_graph_inputs({b.v("x")});
  NodeId k = b.node("Constant", {}, {"k"}, "Constant_1");  // consumers: one module
  b.node("Mul", {"x", "k"}, {"y"}, "/enc/layer.0/Mul");
  NodeId k2 = b.node("Constant", {}, {"k2"}, "Constant_2");  // consumers: two modules
  b.node("Add", {"y", "k2"}, {"z"}, "/enc/layer.0/Add");
  b.node("Add", {"y", "k2"}, {"z2"}, "/enc/layer.1/Add");
  NodeId tail = b.node("Sub", {"z", "z2"}, {"w"}, "Sub_9");  // producers in two modules: their common ancestor
  b.g.set_graph_outputs({b.v("w")});
  TagReport rep = read_tags(m);
  EXPECT_EQ(tag_module(m.tags(b.g.scope(k))[0]), "enc.layer.0");
  EXPECT_EQ(rep.at(b.g.id(), k), TagSource::Consumers);
  EXPECT_EQ(tag_module(m.tags(b.g.scope(k2))[0]), "enc.layer");
  EXPECT_EQ(rep.at(b.g.id(), k2), TagSource::CommonAncestor);
  EXPECT_EQ(tag_module(m.tags(b.g.scope(tail))[0]), "enc.layer");
  EXPECT_EQ(rep.reason[0][tail.index()], NoTagReason::NameWithoutScope);
}

TEST(WriteTags, MultiTagRoundTripAndStrip) {
  Model m;
  GraphBuilderHelper b(m);
  b.g.set_graph_inputs({b.v("x")});
  NodeId n = b.node("Gemm", {"x", "x"}, {"y"}, "fused", {{"other", "keep"}});
  b.g.set_graph_outputs({b.v("y")});
  b.g.set_scope(n,
                m.tag_set({make_tag("enc.layer.0.query", "/M/E/L.0/Linear.0"), make_tag("enc.layer.0", "/M/E/L.0")}));
  m.metadata_props.push_back({"onnxforge.hierarchy.strategy", "htp"});
  sync_tags_to_metadata(m);
  EXPECT_EQ(b.g.metadata_value(n, kModuleKey), "enc.layer.0;enc.layer.0.query");
  EXPECT_EQ(b.g.metadata_value(n, kTagKey), "/M/E/L.0;/M/E/L.0/Linear.0");
  EXPECT_EQ(b.g.metadata_value(n, kDepthKey), "3;4");
  EXPECT_EQ(b.g.metadata_value(n, kSourceKey), "merged");
  EXPECT_EQ(b.g.metadata_value(n, kCountKey), "2");
  EXPECT_EQ(b.g.metadata_value(n, "other"), "keep");
  uint32_t before = b.g.scope(n);
  ReadOptions no_names;
  no_names.use_names = false;
  read_tags(m, no_names);
  EXPECT_EQ(b.g.scope(n), before);
  strip_hierarchy(m);
  EXPECT_EQ(b.g.scope(n), 0u);
  EXPECT_EQ(b.g.metadata_value(n, kModuleKey), "");
  EXPECT_EQ(b.g.metadata_value(n, "other"), "keep");
  EXPECT_TRUE(m.metadata_props.empty());
}

}  // namespace
}  // namespace onnxforge::hier
