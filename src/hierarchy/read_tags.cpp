// read_tags: direct sources per node, then the rules (tag_rules.cpp).
#include "hierarchy/hierarchy.h"
#include "hierarchy/tag_rules.h"
#include "hierarchy/tag_sources.h"
#include "hierarchy/torchscript_names.h"

namespace onnxforge::hier {

std::string_view source_name(TagSource s) {
  switch (s) {
    case TagSource::None: return "none";
    case TagSource::Exporter: return "exporter";
    case TagSource::ExporterRule: return "exporter-rule";
    case TagSource::ExporterDefault: return "exporter-default";
    case TagSource::Dynamo: return "dynamo";
    case TagSource::Sidecar: return "sidecar";
    case TagSource::NodeName: return "node-name";
    case TagSource::Consumers: return "rule-consumers";
    case TagSource::Producers: return "rule-producers";
    case TagSource::CommonAncestor: return "rule-common-ancestor";
    case TagSource::Parent: return "rule-parent-node";
    case TagSource::kCount: break;
  }
  return "?";
}

bool is_direct(TagSource s) {
  return s == TagSource::Exporter || s == TagSource::ExporterRule || s == TagSource::ExporterDefault ||
         s == TagSource::Dynamo || s == TagSource::Sidecar || s == TagSource::NodeName;
}

std::string_view reason_name(NoTagReason r) {
  switch (r) {
    case NoTagReason::Tagged: return "tagged";
    case NoTagReason::NameWithoutScope: return "name without scope (created by the exporter outside any module)";
    case NoTagReason::Unnamed: return "unnamed node";
    case NoTagReason::NoInformation: return "no metadata, sidecar entry or scope name";
    case NoTagReason::kCount: break;
  }
  return "?";
}

std::vector<std::string> modules_of(const Model& model, uint32_t tag_set) {
  std::vector<std::string> out;
  for (Sym t : model.tags(tag_set)) out.emplace_back(tag_module(t));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TagReport read_tags(Model& model, const ReadOptions& options) {
  TagReport report;
  report.source.resize(model.graph_count());
  report.reason.resize(model.graph_count());
  std::optional<Sidecar> sidecar;
  if (!options.sidecar.empty()) sidecar.emplace(options.sidecar);
  ModuleSet known;
  if (options.use_names) known = modules_from_initializers(model);

  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    auto& source = report.source[gi];
    auto& reason = report.reason[gi];
    source.assign(g.node_capacity(), TagSource::None);
    reason.assign(g.node_capacity(), NoTagReason::Tagged);
    for (NodeId n : g.nodes()) {
      std::optional<DirectTags> direct;
      if (options.use_metadata) direct = read_exporter_metadata(g, n);
      if (!direct && options.use_metadata) direct = read_dynamo_metadata(g, n);
      std::string_view name = str(g.node_name(n));
      if (!direct && sidecar && !name.empty())
        if (auto t = sidecar->find(name)) direct = DirectTags{{*t}, TagSource::Sidecar};
      if (!direct && options.use_names)
        if (auto m = module_from_node_name(name, known)) direct = DirectTags{{make_tag(*m)}, TagSource::NodeName};
      if (direct) {
        g.set_scope(n, model.tag_set(std::move(direct->tags)));
        source[n.index()] = direct->source;
      } else {
        g.set_scope(n, 0);
        reason[n.index()] = name.empty()                            ? NoTagReason::Unnamed
                            : (options.use_names && name[0] != '/') ? NoTagReason::NameWithoutScope
                                                                    : NoTagReason::NoInformation;
      }
    }
  }
  if (options.apply_rules) apply_tag_rules(model, report);
  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    const Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes()) ++report.by_source[static_cast<size_t>(report.source[gi][n.index()])];
  }
  return report;
}

}  // namespace onnxforge::hier
