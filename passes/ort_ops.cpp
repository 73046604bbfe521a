#include "passes/ort_ops.h"

#include <algorithm>
#include <map>

namespace onnxforge::passes {
namespace {

struct Row {
  std::string_view op;
  uint64_t implemented, missing;  // bit N: opset N
};
constexpr Row kRows[] = {
#include "passes/ort_ops.inc"
};

// Default-domain op types of every graph of `m` (main, bodies, functions): count and first node.
std::map<std::string, std::pair<size_t, std::string>> default_domain_ops(const Model& m) {
  std::map<std::string, std::pair<size_t, std::string>> ops;
  for (uint32_t i = 0; i < m.graph_count(); ++i) {
    const Graph& g = m.graph(GraphId(i));
    if (g.detached()) continue;
    for (NodeId n : g.nodes()) {
      const std::string_view d = str(g.domain(n));
      if (!d.empty() && d != "ai.onnx") continue;
      auto& [count, first] = ops[std::string(str(g.op_type(n)))];
      if (count++ == 0) first = std::string(str(g.node_name(n)));
    }
  }
  return ops;
}

}  // namespace

OrtKernel ort_kernel(std::string_view op, int64_t opset) {
  if (opset < 0 || opset > 63) return OrtKernel::Unknown;
  auto it = std::lower_bound(std::begin(kRows), std::end(kRows), op,
                             [](const Row& r, std::string_view o) { return r.op < o; });
  if (it == std::end(kRows) || it->op != op) return OrtKernel::Unknown;
  const uint64_t bit = uint64_t{1} << opset;
  if (it->implemented & bit) return OrtKernel::Implemented;
  if (it->missing & bit) return OrtKernel::Missing;
  return OrtKernel::Unknown;
}

std::vector<std::string> ort_missing(const Model& m, int64_t opset) {
  if (opset == 0) opset = m.opset("");
  std::vector<std::string> out;
  for (const auto& [op, seen] : default_domain_ops(m))
    if (ort_kernel(op, opset) == OrtKernel::Missing)
      out.push_back(op + " at opset " + std::to_string(opset) + " (" + std::to_string(seen.first) + " node" +
                    (seen.first == 1 ? "" : "s") + ", first '" + seen.second + "')");
  return out;
}

int64_t ort_highest_loadable_opset(const Model& m, int64_t from, int64_t to) {
  const auto ops = default_domain_ops(m);
  for (int64_t v = to; v >= from; --v)
    if (std::none_of(ops.begin(), ops.end(),
                     [&](const auto& kv) { return ort_kernel(kv.first, v) == OrtKernel::Missing; }))
      return v;
  return from - 1;
}

}  // namespace onnxforge::passes
