#pragma once
// What a hierarchy tag Sym holds.
//
// A node's tag set (Graph::scope, Model::tag_set) holds Syms of the form
//
//     <module path>@<class path>
//
//   module path  dotted PyTorch module path down to the leaf module, "" = root
//                (`encoder.layer.0.attention.self.query`)
//   class path   instance-specific class path when known (`/BertModel/BertEncoder/BertLayer.0/
//                BertAttention/BertSelfAttention/Linear.0`), else empty
//
// so a Sym is never empty (the untagged root is "@") and two tags are equal exactly when both
// parts are. Module paths never contain '@', so the first '@' splits the two parts. The module
// path is the identity used everywhere (extract, coverage, trees); the class path is carried
// along so that write-back (sync_tags_to_metadata) needs no side table.
#include <string>
#include <string_view>
#include <vector>

#include "ir/types.h"

namespace onnxforge::hier {

struct ModuleTag {
  std::string module;      // dotted, "" = root
  std::string class_path;  // "/A/B.0/C", "" = unknown
  bool operator==(const ModuleTag&) const = default;
};

Sym make_tag(std::string_view module, std::string_view class_path = {});
ModuleTag parse_tag(Sym tag);
std::string_view tag_module(Sym tag);      // no allocation
std::string_view tag_class_path(Sym tag);  // no allocation

// Dotted-path helpers.
bool is_within(std::string_view module, std::string_view ancestor);  // ancestor "" contains all
std::string common_ancestor(std::string_view a, std::string_view b);
std::string parent_module(std::string_view module);  // "" for top-level modules and the root
std::vector<std::string_view> split(std::string_view s, char sep);

// Class name of the last class-path segment without its instance index ("BertLayer").
std::string_view last_class(std::string_view class_path);

}  // namespace onnxforge::hier
