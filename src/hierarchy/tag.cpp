#include "hierarchy/tag.h"

namespace onnxforge::hier {

Sym make_tag(std::string_view module, std::string_view class_path) {
  std::string s;
  s.reserve(module.size() + class_path.size() + 1);
  s.append(module).push_back('@');
  s.append(class_path);
  return intern(s);
}

std::string_view tag_module(Sym tag) {
  std::string_view s = str(tag);
  size_t at = s.find('@');
  return at == std::string_view::npos ? s : s.substr(0, at);
}

std::string_view tag_class_path(Sym tag) {
  std::string_view s = str(tag);
  size_t at = s.find('@');
  return at == std::string_view::npos ? std::string_view{} : s.substr(at + 1);
}

ModuleTag parse_tag(Sym tag) { return {std::string(tag_module(tag)), std::string(tag_class_path(tag))}; }

bool is_within(std::string_view module, std::string_view ancestor) {
  if (ancestor.empty()) return true;
  if (module.size() < ancestor.size() || module.substr(0, ancestor.size()) != ancestor) return false;
  return module.size() == ancestor.size() || module[ancestor.size()] == '.';
}

std::string common_ancestor(std::string_view a, std::string_view b) {
  size_t last_dot_end = 0, i = 0;
  for (; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
    if (a[i] == '.') last_dot_end = i;
  bool a_end = i == a.size() || a[i] == '.', b_end = i == b.size() || b[i] == '.';
  if (a_end && b_end) return std::string(a.substr(0, i));
  return std::string(a.substr(0, last_dot_end));
}

std::string parent_module(std::string_view module) {
  size_t dot = module.rfind('.');
  return dot == std::string_view::npos ? std::string() : std::string(module.substr(0, dot));
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

std::string_view last_class(std::string_view class_path) {
  size_t slash = class_path.rfind('/');
  std::string_view seg = slash == std::string_view::npos ? class_path : class_path.substr(slash + 1);
  size_t dot = seg.find('.');
  return dot == std::string_view::npos ? seg : seg.substr(0, dot);
}

}  // namespace onnxforge::hier
