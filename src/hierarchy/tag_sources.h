#pragma once
// The per-node readers behind read_tags: each returns the node's tags or nothing.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hierarchy/hierarchy.h"

namespace onnxforge::hier {

struct DirectTags {
  std::vector<Sym> tags;
  TagSource source = TagSource::None;
};

// onnxforge exporter keys (single or ';'-joined multi-value form).
std::optional<DirectTags> read_exporter_metadata(const Graph& g, NodeId n);
// Dynamo keys: pkg.torch.onnx.name_scopes (+ class_hierarchy), else namespace.
std::optional<DirectTags> read_dynamo_metadata(const Graph& g, NodeId n);

// Instance-specific class path from aligned module paths and class names: a segment gets `.k`
// when its module's last component is an integer k (a container element).
std::string class_path_from(const std::vector<std::string>& modules, const std::vector<std::string>& classes);
// "<class 'a.b.C'>" / "a.b.C" -> "C".
std::string short_class_name(std::string_view qualified);

// Sidecar JSON (tools/export format): node name -> tag.
class Sidecar {
 public:
  explicit Sidecar(const std::filesystem::path& file);
  std::optional<Sym> find(std::string_view node_name) const;
  size_t size() const { return by_name_.size(); }

 private:
  std::unordered_map<std::string, Sym> by_name_;
};

}  // namespace onnxforge::hier
