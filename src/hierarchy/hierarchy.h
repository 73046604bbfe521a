#pragma once
// Module hierarchy: which PyTorch module every node came from.
//
// Tags live in the graph tables (Graph::scope, a tag-set id; see tag.h for what a tag Sym holds)
// so every pass carries them: Rewrite::add_node(..., tags_from) gives a new node the union of the
// tag sets of the nodes it replaces, and an Identity inserted to keep an output name takes its
// producer's tags. ONNX files carry tags in node metadata_props; these three calls move them
// between the file and the tables:
//
//   auto model = load_model(in);
//   hier::read_tags(*model);                 // metadata / names / sidecar -> Graph::scope
//   ... passes ...
//   if (strip) hier::strip_hierarchy(*model);  // `--strip-hierarchy`: no tags in the output
//   else hier::sync_tags_to_metadata(*model);  // Graph::scope -> metadata_props
//   save_model(*model, out);
//
// Reading (first match wins per node):
//   1. onnxforge exporter metadata (`onnxforge.hierarchy.module` + `.tag`, tools/export/README.md),
//      including the multi-value form written by sync_tags_to_metadata;
//   2. dynamo exporter metadata: `pkg.torch.onnx.name_scopes` (+ `pkg.torch.onnx.class_hierarchy`),
//      else `namespace`;
//   3. a sidecar JSON given in ReadOptions::sidecar (`node_modules`/`node_tags` by node name; it
//      ranks above names because it is exact and knows class paths);
//   4. TorchScript-exporter node names (torchscript_names.h).
// Then untagged nodes get a tag by rule, repeated to a fixed point: all consumers in one module
// -> that module; else all producers in one module -> that module; else the lowest common
// ancestor of the tagged neighbours. Subgraph nodes still untagged take their owner node's tags.
//
// Write-back (sync_tags_to_metadata): every node gets the four exporter keys. A node with one
// tag is written exactly as the exporter writes it. A node with k > 1 tags (a fused node) gets
//   onnxforge.hierarchy.tag     the k class paths joined with ';'   (sorted by module path)
//   onnxforge.hierarchy.module  the k module paths joined with ';'  (aligned with .tag)
//   onnxforge.hierarchy.depth   the k depths joined with ';'
//   onnxforge.hierarchy.source  "merged"
// plus onnxforge.hierarchy.count = k. read_tags reads this form back into the same set. A node
// whose source key is missing (created by a pass) gets source "pass". Untagged nodes get no keys.
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hierarchy/tag.h"
#include "ir/graph.h"

namespace onnxforge::hier {

inline constexpr std::string_view kTagKey = "onnxforge.hierarchy.tag";
inline constexpr std::string_view kModuleKey = "onnxforge.hierarchy.module";
inline constexpr std::string_view kDepthKey = "onnxforge.hierarchy.depth";
inline constexpr std::string_view kSourceKey = "onnxforge.hierarchy.source";
inline constexpr std::string_view kCountKey = "onnxforge.hierarchy.count";

enum class TagSource : uint8_t {
  None,             // still untagged
  Exporter,         // onnxforge exporter, exact (source scope/fx) or written back by sync
  ExporterRule,     // onnxforge exporter, by its rules (parameter/consumers)
  ExporterDefault,  // onnxforge exporter found nothing (source none): root
  Dynamo,           // pkg.torch.onnx.* metadata
  Sidecar,          // --hierarchy FILE
  NodeName,         // TorchScript scope name
  Consumers,        // rule: all consumers in one module
  Producers,        // rule: all producers in one module
  CommonAncestor,   // rule: lowest common ancestor of tagged neighbours
  Parent,           // rule: subgraph node takes its owner node's tags
  kCount
};
std::string_view source_name(TagSource s);
bool is_direct(TagSource s);  // read from the model, not inferred by a rule

// Why a node had no direct tag (kept for nodes a rule tagged too).
enum class NoTagReason : uint8_t {
  Tagged,            // had a direct tag
  NameWithoutScope,  // name like `Constant_85`: the exporter created it outside any module
  Unnamed,           // empty node name
  NoInformation,     // nothing in metadata, sidecar or name
  kCount
};
std::string_view reason_name(NoTagReason r);

struct ReadOptions {
  std::filesystem::path sidecar = {};  // --hierarchy FILE
  bool use_metadata = true;            // read exporter / dynamo metadata
  bool use_names = true;               // read TorchScript scope names
  bool apply_rules = true;             // tag the rest by rule
};

// Per node of every graph, indexed [graph][node], valid until the next Rewrite::commit.
struct TagReport {
  std::vector<std::vector<TagSource>> source;
  std::vector<std::vector<NoTagReason>> reason;
  std::array<uint64_t, static_cast<size_t>(TagSource::kCount)> by_source{};
  TagSource at(GraphId g, NodeId n) const { return source[g.index()][n.index()]; }
};

// Sets Graph::scope of every alive node of every graph (overwriting what was there).
TagReport read_tags(Model& model, const ReadOptions& options = {});

// Graph::scope -> node metadata_props (format above). Keeps all other metadata entries.
void sync_tags_to_metadata(Model& model);
// Removes the onnxforge.hierarchy.* keys from every node and the model, and clears all scopes.
void strip_hierarchy(Model& model);

// Modules of a node's tag set (module paths, sorted, unique).
std::vector<std::string> modules_of(const Model& model, uint32_t tag_set);

}  // namespace onnxforge::hier
