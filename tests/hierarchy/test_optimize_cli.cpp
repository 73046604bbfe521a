// `onnxforge optimize` keeps module tags: every surviving node tagged, no tag invented, fused
// nodes carry the union of what they replaced; --strip-hierarchy removes them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "hierarchy/hierarchy.h"
#include "io/model_io.h"
#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using namespace onnxforge::test;

namespace {

std::set<std::string> all_tags(Model& m) {
  hier::read_tags(m);
  std::set<std::string> out;
  for (NodeId n : m.main().nodes())
    for (Sym t : m.tags(m.main().scope(n))) out.insert(std::string(str(t)));
  return out;
}

int optimize(const fs::path& in, const fs::path& out, const std::string& extra = "") {
  std::string cmd = std::string(ONNXFORGE_BINARY_DIR) + "/onnxforge optimize '" + in.string() + "' -o '" +
                    out.string() + "' --verify-seeds 1 " + extra + " > /dev/null 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace

TEST(OptimizeCli, KeepsEveryTagAndInventsNone) {
  fs::path dir = temp_dir("opt_tags");
  for (const char* name : {"resnet_small_bn", "bert_small"}) {
    SCOPED_TRACE(name);
    fs::path in = zoo_model(name), out = dir / (std::string(name) + ".opt.onnx");
    ASSERT_EQ(optimize(in, out), 0);
    auto before = load_model(in);
    auto after = load_model(out);
    std::set<std::string> tags_before = all_tags(*before);
    hier::read_tags(*after);
    const Graph& g = after->main();
    ASSERT_LT(g.node_count(), before->main().node_count());
    size_t merged = 0;
    for (NodeId n : g.nodes()) {
      auto tags = after->tags(g.scope(n));
      EXPECT_FALSE(tags.empty()) << str(g.node_name(n)) << " lost its tag";
      for (Sym t : tags) EXPECT_TRUE(tags_before.count(std::string(str(t)))) << "invented tag " << str(t);
      merged += tags.size() > 1;
      // Written into the file's metadata, not re-derived from node names on reading.
      bool written = false;
      for (const MetadataEntry& e : g.metadata(n)) written |= str(e.key) == "onnxforge.hierarchy.module";
      EXPECT_TRUE(written) << str(g.node_name(n));
    }
    if (std::string(name) == "resnet_small_bn") {
      EXPECT_GT(merged, 0u) << "Conv+BN fusions should carry both modules";
    }
  }
}

TEST(OptimizeCli, StripHierarchyRemovesTheMetadata) {
  fs::path dir = temp_dir("opt_strip");
  fs::path out = dir / "out.onnx";
  ASSERT_EQ(optimize(zoo_model("resnet_small_bn"), out, "--strip-hierarchy"), 0);
  auto m = load_model(out);
  for (NodeId n : m->main().nodes())
    for (const MetadataEntry& e : m->main().metadata(n))  // other annotations (annotate_conv_activation) stay
      EXPECT_NE(str(e.key).rfind("onnxforge.hierarchy", 0), 0u) << str(m->main().node_name(n)) << " " << str(e.key);
}
