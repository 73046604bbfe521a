#include "passes/decompose.h"

#include "ir/error.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"

namespace onnxforge::passes::decompose {

std::vector<int64_t> trailing_axes_of(const Graph& g, ValueId x, int64_t axis) {
  std::vector<int64_t> axes;
  if (axis < 0) {
    for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    return axes;
  }
  const int64_t r = rank_of(g, x);
  for (int64_t a = axis; a < r; ++a) axes.push_back(a);
  return axes;
}

int64_t static_dim(const Graph& g, ValueId v, int64_t i) {
  if (!g.has_shape(v)) return -1;
  const auto s = g.shape(v);
  if (i < 0) i += static_cast<int64_t>(s.size());
  if (i < 0 || i >= static_cast<int64_t>(s.size())) return -1;
  return s[static_cast<size_t>(i)].known() ? s[static_cast<size_t>(i)].value : -1;
}

bool output_read(const Graph& g, const Uses& u, NodeId n, size_t i) {
  if (i >= g.outputs(n).size()) return false;
  const ValueId v = g.output(n, i);
  return v.valid() && (u.used(v) || u.is_graph_output(v));
}

bool is_half_type(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

}  // namespace onnxforge::passes::decompose
