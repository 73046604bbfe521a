#include <algorithm>

#include "ir/error.h"
#include "runtime/kernel.h"

namespace onnxforge::rt {

Registry& Registry::get() {
  static Registry* r = [] {
    auto* reg = new Registry;
    register_elementwise(*reg);
    register_binary(*reg);
    register_matmul(*reg);
    register_conv(*reg);
    register_pool(*reg);
    register_norm(*reg);
    register_shape_ops(*reg);
    register_movement(*reg);
    register_gather(*reg);
    register_reduce(*reg);
    register_resize(*reg);
    register_cast(*reg);
    register_quant(*reg);
    register_qlinear(*reg);
    register_control(*reg);
    register_attention(*reg);
    register_loss(*reg);
    register_misc(*reg);
    register_rnn(*reg);
    register_transformer(*reg);
    register_random(*reg);
    std::sort(reg->table_.begin(), reg->table_.end(), [](auto& a, auto& b) { return a.first < b.first; });
    return reg;
  }();
  return *r;
}

static std::string key(std::string_view domain, std::string_view op) {
  std::string k(domain == "ai.onnx" ? std::string_view{} : domain);
  k += '\0';
  k += op;
  return k;
}

void Registry::add(std::string_view domain, std::string_view op, KernelDef def) {
  if (find(domain, op)) fail("internal: kernel ", op, " registered twice");
  table_.emplace_back(key(domain, op), def);
  std::sort(table_.begin(), table_.end(), [](auto& a, auto& b) { return a.first < b.first; });
}

void Registry::add_each(KernelDef def, std::span<const std::pair<const char*, KernelFn>> ops) {
  for (auto [op, run] : ops) {
    def.run = run;
    add("", op, def);
  }
}

const KernelDef* Registry::find(std::string_view domain, std::string_view op) const {
  std::string k = key(domain, op);
  auto it =
      std::lower_bound(table_.begin(), table_.end(), k, [](auto& e, const std::string& x) { return e.first < x; });
  return it != table_.end() && it->first == k ? &it->second : nullptr;
}

std::vector<std::string> Registry::ops() const {
  std::vector<std::string> out;
  for (auto& [k, d] : table_) {
    size_t z = k.find('\0');
    out.push_back(z == 0 ? k.substr(1) : k.substr(0, z) + "::" + k.substr(z + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace onnxforge::rt
