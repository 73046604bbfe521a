#include "hierarchy/tag_sources.h"

#include <nlohmann/json.hpp>

#include "hierarchy/python_repr.h"
#include "io/safe_file.h"
#include "ir/error.h"

namespace onnxforge::hier {

std::optional<DirectTags> read_exporter_metadata(const Graph& g, NodeId n) {
  std::optional<std::string_view> module, tag, source;
  for (const MetadataEntry& e : g.metadata(n)) {
    std::string_view k = str(e.key);
    if (k == kModuleKey)
      module = str(e.value);
    else if (k == kTagKey)
      tag = str(e.value);
    else if (k == kSourceKey)
      source = str(e.value);
  }
  if (!module && !tag) return std::nullopt;
  std::vector<std::string_view> modules = module ? split(*module, ';') : std::vector<std::string_view>{};
  std::vector<std::string_view> classes = tag ? split(*tag, ';') : std::vector<std::string_view>{};
  DirectTags out;
  size_t k = std::max(modules.size(), classes.size());
  for (size_t i = 0; i < k; ++i) {
    std::string_view m = i < modules.size() ? modules[i] : std::string_view{};
    std::string_view c = i < classes.size() ? classes[i] : std::string_view{};
    out.tags.push_back(make_tag(m, c));
  }
  bool by_rule = source && (*source == "parameter" || *source == "consumers");
  bool defaulted = source && *source == "none";
  out.source = defaulted ? TagSource::ExporterDefault : by_rule ? TagSource::ExporterRule : TagSource::Exporter;
  return out;
}

std::string short_class_name(std::string_view q) {
  if (q.starts_with("<class '") && q.ends_with("'>")) q = q.substr(8, q.size() - 10);
  size_t dot = q.rfind('.');
  return std::string(dot == std::string_view::npos ? q : q.substr(dot + 1));
}

std::string class_path_from(const std::vector<std::string>& modules, const std::vector<std::string>& classes) {
  std::string path;
  for (size_t i = 0; i < classes.size(); ++i) {
    path += '/';
    path += short_class_name(classes[i]);
    if (i > 0 && i < modules.size()) {
      std::string_view m = modules[i];
      size_t dot = m.rfind('.');
      std::string_view last = dot == std::string_view::npos ? m : m.substr(dot + 1);
      if (!last.empty() && std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        path += '.';
        path += last;
      }
    }
  }
  return path;
}

namespace {

// Cumulative module paths; tolerates relative entries by joining them to the previous one.
std::vector<std::string> cumulative(std::vector<std::string> scopes) {
  for (size_t i = 1; i < scopes.size(); ++i)
    if (!scopes[i - 1].empty() && !is_within(scopes[i], scopes[i - 1])) scopes[i] = scopes[i - 1] + "." + scopes[i];
  return scopes;
}

DirectTags dynamo_tags(std::vector<std::string> scopes, std::vector<std::string> classes) {
  // the last entry is the FX node, not a module
  if (scopes.size() > 1) scopes.pop_back();
  if (classes.size() > scopes.size()) classes.resize(scopes.size());
  scopes = cumulative(std::move(scopes));
  std::string module = scopes.empty() ? std::string() : scopes.back();
  std::string class_path = classes.size() == scopes.size() ? class_path_from(scopes, classes) : std::string();
  return {{make_tag(module, class_path)}, TagSource::Dynamo};
}

}  // namespace

std::optional<DirectTags> read_dynamo_metadata(const Graph& g, NodeId n) {
  std::string_view scopes_text = g.metadata_value(n, "pkg.torch.onnx.name_scopes");
  if (!scopes_text.empty()) {
    auto scopes = parse_python_str_list(scopes_text);
    if (scopes && !scopes->empty()) {
      std::vector<std::string> classes;
      if (auto c = parse_python_str_list(g.metadata_value(n, "pkg.torch.onnx.class_hierarchy")))
        classes = std::move(*c);
      return dynamo_tags(std::move(*scopes), std::move(classes));
    }
  }
  // namespace = "<module>: <Class>/<module>: <Class>/.../<fx node>: <target>"
  std::string_view ns = g.metadata_value(n, "namespace");
  if (ns.empty()) return std::nullopt;
  std::vector<std::string> scopes, classes;
  for (std::string_view seg : split(ns, '/')) {
    size_t colon = seg.find(": ");
    if (colon == std::string_view::npos) return std::nullopt;
    scopes.emplace_back(seg.substr(0, colon));
    classes.emplace_back(seg.substr(colon + 2));
  }
  return dynamo_tags(std::move(scopes), std::move(classes));
}

Sidecar::Sidecar(const std::filesystem::path& file) {
  // A side file: a FIFO, a device or a directory is an error, not a hang (io/safe_file.h).
  const std::string text = read_side_file(file, "hierarchy sidecar (--hierarchy)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) { fail("hierarchy sidecar ", file, " is not valid JSON: ", e.what()); }
  if (!j.is_object()) fail("hierarchy sidecar ", file, " is not a JSON object (expected the tools/export format)");
  const auto modules = j.value("node_modules", nlohmann::json::object());
  const auto tags = j.value("node_tags", nlohmann::json::object());
  if (!modules.is_object() || !tags.is_object())
    fail("hierarchy sidecar ", file, ": node_modules and node_tags must be JSON objects (the tools/export format)");
  if (modules.empty() && tags.empty())
    fail("hierarchy sidecar ", file, " has no node_modules/node_tags maps (expected the tools/export format)");
  for (auto it = modules.begin(); it != modules.end(); ++it) {
    std::string cls = tags.contains(it.key()) && tags[it.key()].is_string() ? tags[it.key()].get<std::string>() : "";
    if (it->is_string()) by_name_[it.key()] = make_tag(it->get<std::string>(), cls);
  }
}

std::optional<Sym> Sidecar::find(std::string_view node_name) const {
  auto it = by_name_.find(std::string(node_name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace onnxforge::hier
