// sync_tags_to_metadata and strip_hierarchy (format documented in hierarchy.h).
#include <algorithm>

#include "hierarchy/hierarchy.h"

namespace onnxforge::hier {
namespace {

bool is_hierarchy_key(std::string_view k) { return k.starts_with("onnxforge.hierarchy."); }

size_t depth_of(Sym tag) {
  std::string_view c = tag_class_path(tag);
  if (!c.empty()) return static_cast<size_t>(std::count(c.begin(), c.end(), '/'));
  std::string_view m = tag_module(tag);
  return m.empty() ? 1 : 2 + static_cast<size_t>(std::count(m.begin(), m.end(), '.'));
}

template <class F>
void for_each_graph(Model& model, F&& f) {
  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    if (!g.detached()) f(g);
  }
}

std::vector<MetadataEntry> other_entries(const Graph& g, NodeId n) {
  std::vector<MetadataEntry> out;
  for (const MetadataEntry& e : g.metadata(n))
    if (!is_hierarchy_key(str(e.key))) out.push_back(e);
  return out;
}

}  // namespace

void sync_tags_to_metadata(Model& model) {
  const Sym tag_key = intern(kTagKey), module_key = intern(kModuleKey), depth_key = intern(kDepthKey),
            source_key = intern(kSourceKey), count_key = intern(kCountKey);
  for_each_graph(model, [&](Graph& g) {
    for (NodeId n : g.nodes()) {
      std::vector<MetadataEntry> entries = other_entries(g, n);
      std::span<const Sym> tags = model.tags(g.scope(n));
      if (!tags.empty()) {
        std::vector<Sym> sorted(tags.begin(), tags.end());
        std::sort(sorted.begin(), sorted.end(), [](Sym a, Sym b) {
          return std::pair(tag_module(a), tag_class_path(a)) < std::pair(tag_module(b), tag_class_path(b));
        });
        std::string modules, classes, depths;
        for (size_t i = 0; i < sorted.size(); ++i) {
          if (i) {
            modules += ';';
            classes += ';';
            depths += ';';
          }
          modules += tag_module(sorted[i]);
          classes += tag_class_path(sorted[i]);
          depths += std::to_string(depth_of(sorted[i]));
        }
        std::string source;
        if (sorted.size() > 1) {
          source = "merged";
        } else {
          std::string_view old_source = g.metadata_value(n, kSourceKey);
          bool unchanged = !old_source.empty() && g.metadata_value(n, kModuleKey) == modules &&
                           g.metadata_value(n, kTagKey) == classes;
          source = unchanged ? std::string(old_source) : "derived";
        }
        entries.push_back({tag_key, intern(classes)});
        entries.push_back({module_key, intern(modules)});
        entries.push_back({depth_key, intern(depths)});
        entries.push_back({source_key, intern(source)});
        if (sorted.size() > 1) entries.push_back({count_key, intern(std::to_string(sorted.size()))});
      }
      g.set_metadata(n, entries);
    }
  });
}

void strip_hierarchy(Model& model) {
  for_each_graph(model, [&](Graph& g) {
    for (NodeId n : g.nodes()) {
      g.set_scope(n, 0);
      bool has = std::any_of(g.metadata(n).begin(), g.metadata(n).end(),
                             [](const MetadataEntry& e) { return is_hierarchy_key(str(e.key)); });
      if (has) g.set_metadata(n, other_entries(g, n));
    }
  });
  std::erase_if(model.metadata_props, [](const auto& kv) { return is_hierarchy_key(kv.first); });
}

}  // namespace onnxforge::hier
