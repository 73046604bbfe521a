// Tags survive optimization: after the whole pass pipeline every surviving node is tagged, no
// tag is invented (each output tag existed in the input), and the tags make it through the file
// (sync_tags_to_metadata -> save -> load -> read_tags).
#include <gtest/gtest.h>

#include <set>

#include "hierarchy/diff.h"
#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "passes/driver.h"
#include "passes/pipeline.h"
#include "tests/hierarchy/hierarchy_test_util.h"

namespace onnxforge::hier {
namespace {

std::set<Sym> all_tags(const Model& m) {
  std::set<Sym> out;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes())
      for (Sym t : m.tags(g.scope(n))) out.insert(t);
  }
  return out;
}

void check_optimized(const std::filesystem::path& path, const std::string& label) {
  auto model = load_model(path);
  read_tags(*model);
  std::set<Sym> before = all_tags(*model);
  auto passes = passes::select_passes({}, {});
  passes::RunOptions ro;
  ro.parallel = false;
  passes::RunResult r = passes::run_passes(*model, passes, ro);
  sync_tags_to_metadata(*model);
  auto out = test::temp_dir("opt_tags") / "optimized.onnx";
  save_model(*model, out);

  auto reread = load_model(out);
  ReadOptions metadata_only;
  metadata_only.use_names = false;
  metadata_only.apply_rules = false;
  TagReport rep = read_tags(*reread, metadata_only);
  uint64_t nodes = 0, untagged = 0, invented = 0, merged = 0;
  for (size_t gi = 0; gi < reread->graph_count(); ++gi) {
    const Graph& g = reread->graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes()) {
      ++nodes;
      auto tags = reread->tags(g.scope(n));
      if (tags.empty()) {
        ++untagged;
        ADD_FAILURE() << label << ": untagged after optimize: " << str(g.node_name(n)) << " (" << str(g.op_type(n))
                      << ")";
      }
      merged += tags.size() > 1;
      for (Sym t : tags)
        if (!before.contains(t)) {
          ++invented;
          ADD_FAILURE() << label << ": invented tag " << str(t);
        }
    }
  }
  std::cout << "[ opt ] " << label << ": " << r.before.nodes << " -> " << r.after.nodes << " nodes, " << untagged
            << " untagged, " << invented << " invented, " << merged << " with merged tags\n";
  EXPECT_EQ(nodes, static_cast<uint64_t>(r.after.nodes));
}

TEST(OptimizeTags, HierarchyExportKeepsEveryTag) {
  for (std::string zoo : {"bert_small", "llama_small"}) {
    auto path = test::htp_export(zoo);
    ASSERT_FALSE(path.empty());
    check_optimized(path, zoo + " (htp)");
  }
}

TEST(OptimizeTags, NameDerivedTagsToo) {
  for (std::string zoo : {"resnet_small_bn", "mobilenet_v3_small", "whisper_small_enc", "mobilevit_mini_bn",
                          "yolov8n_mini_bn", "wav2vec2_mini", "roberta_mini_op17"})
    check_optimized(test::zoo_model(zoo), zoo);
}

}  // namespace
}  // namespace onnxforge::hier
