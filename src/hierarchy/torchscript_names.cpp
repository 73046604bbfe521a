#include "hierarchy/torchscript_names.h"

#include <cctype>

#include "hierarchy/tag.h"

namespace onnxforge::hier {
namespace {

bool is_identifier_path(std::string_view s) {
  if (s.empty()) return false;
  bool start = true;
  for (char c : s) {
    if (c == '.') {
      if (start) return false;
      start = true;
      continue;
    }
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    start = false;
  }
  return !start;
}

std::string join(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  std::string s(parent);
  s.push_back('.');
  s.append(child);
  return s;
}

// "relu_2" -> "relu"; nullopt without an `_N` suffix.
std::optional<std::string_view> strip_call_suffix(std::string_view c) {
  size_t us = c.rfind('_');
  if (us == std::string_view::npos || us == 0 || us + 1 == c.size()) return std::nullopt;
  for (size_t i = us + 1; i < c.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(c[i]))) return std::nullopt;
  return c.substr(0, us);
}

bool known_or_unknowable(const ModuleSet& known, const std::string& path) {
  return known.empty() || known.contains(path);
}

}  // namespace

ModuleSet modules_from_initializers(const Model& model) {
  ModuleSet out;
  for (size_t gi = 0; gi < model.graph_count(); ++gi) {
    const Graph& g = model.graph(GraphId(static_cast<uint32_t>(gi)));
    for (ValueId v : g.initializers()) {
      std::string_view name = str(g.value_name(v));
      if (!is_identifier_path(name)) continue;
      for (size_t i = 0; i < name.size(); ++i)
        if (name[i] == '.') out.emplace(name.substr(0, i));
    }
  }
  return out;
}

std::optional<std::string> module_from_node_name(std::string_view name, const ModuleSet& known) {
  if (name.size() < 2 || name[0] != '/') return std::nullopt;
  std::vector<std::string_view> parts = split(name.substr(1), '/');
  if (parts.empty() || parts.back().empty()) return std::nullopt;
  parts.pop_back();  // op type
  std::string path;
  std::string_view last_component;
  for (std::string_view c : parts) {
    if (c.empty()) return std::nullopt;
    // `_N`: the N-th extra call of a module, unless a module really has that name.
    std::string_view base = c;
    if (auto stripped = strip_call_suffix(c)) {
      bool literal_known = !known.empty() && (known.contains(join(path, c)));
      if (!literal_known) base = *stripped;
    }
    std::string plain = join(path, base);
    std::string next = plain;
    // Invoked nn.Sequential: the child's component repeats the parent's component.
    if (!last_component.empty() && base.size() > last_component.size() + 1 &&
        base.substr(0, last_component.size()) == last_component && base[last_component.size()] == '.' &&
        std::isdigit(static_cast<unsigned char>(base[last_component.size() + 1]))) {
      std::string repeated = join(path, base.substr(last_component.size() + 1));
      if (known_or_unknowable(known, repeated) || !known.contains(plain)) next = repeated;
    }
    path = std::move(next);
    last_component = base;
  }
  return path;
}

}  // namespace onnxforge::hier
