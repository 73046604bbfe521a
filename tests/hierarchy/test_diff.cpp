// diff: name-independent comparison.
#include <gtest/gtest.h>

#include "hierarchy/diff.h"
#include "hierarchy/extract.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "ir/rewrite.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

TEST(Diff, HierarchyExportIsTheSameGraphAsThePlainExport) {
  for (std::string zoo : {"bert_small", "resnet_small", "llama_small"}) {
    auto htp = test::htp_export(zoo);
    ASSERT_FALSE(htp.empty());
    auto a = load_model(htp);
    auto b = load_model(test::zoo_model(zoo));
    read_tags(*a);
    read_tags(*b);
    ModelDiff d = diff_models(*a, *b);
    EXPECT_TRUE(d.same_structure) << zoo << "\n" << d.to_text(false);
    // the CNN zoo calibrates BatchNorm statistics the exporter's model build does not repeat,
    // so folded Conv weights differ; the transformers are bit-identical
    if (zoo != "resnet_small") { EXPECT_TRUE(d.identical) << zoo << "\n" << d.to_text(false); }
  }
}

TEST(Diff, IgnoresNamesButSeesChanges) {
  auto a = load_model(test::zoo_model("bert_small"));
  read_tags(*a);
  auto b = clone_model(*a);
  // rename every value and node: still identical
  Graph& g = b->main();
  for (NodeId n : g.nodes())
    for (ValueId v : g.outputs(n))
      if (v.valid() && !g.is_graph_output(v)) g.set_value_name(v, intern("renamed_" + std::to_string(v.index())));
  ModelDiff same = diff_models(*a, *b);
  EXPECT_TRUE(same.identical) << same.to_text(false);

  // change one Add into a Sub inside encoder.layer.1.output: the diff names that module
  for (NodeId n : g.nodes())
    if (str(g.node_name(n)) == "/encoder/layer.1/output/Add") {
      Rewrite rw(g);
      ValueId out = rw.new_value("sub_out");
      NodeId tags_from[] = {n};
      rw.add_node("Sub", {g.input(n, 0), g.input(n, 1)}, {out}, {}, tags_from);
      rw.replace_uses(g.output(n, 0), out);
      rw.kill(n);
      rw.commit();
      break;
    }
  ModelDiff changed = diff_models(*a, *b);
  EXPECT_FALSE(changed.identical);
  bool layer0_same = false, layer1_changed = false;
  for (const ModuleDiff& m : changed.modules) {
    if (m.module == "encoder.layer.0") layer0_same = m.counts.cone == m.counts.nodes_a;
    if (m.module == "encoder.layer.1.output") {
      auto ops = m.counts.ops;
      layer1_changed = ops["Add"].a == ops["Add"].b + 1 && ops["Sub"].b == ops["Sub"].a + 1;
    }
  }
  EXPECT_TRUE(layer0_same);
  EXPECT_TRUE(layer1_changed) << changed.to_text(true);
}

TEST(Diff, WeightsCountByContent) {
  auto a = load_model(test::zoo_model("resnet_small"));
  auto b = load_model(test::zoo_model("resnet_small_bn"));
  read_tags(*a);
  read_tags(*b);
  ModelDiff d = diff_models(*a, *b);
  EXPECT_FALSE(d.identical);
  EXPECT_FALSE(d.same_structure);  // BatchNormalization kept vs folded
}

}  // namespace
}  // namespace onnxforge::hier
