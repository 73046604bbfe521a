// Control flow: If (branch shapes merged), Loop (carried shapes generalised to a fixed point,
// scan outputs stacked on a new leading dim), Scan. Bodies are inferred with their formal
// inputs bound to the node's operands; captures read the enclosing graph's state.
#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

// The least specific state covering both: equal dims kept, differing dims fresh.
VState merge(OpCtx& c, const VState& a, const VState& b) {
  VState m;
  m.dtype = a.dtype != DType::Undefined ? a.dtype : b.dtype;
  if (!a.ranked || !b.ranked || a.rank() != b.rank()) return m;
  m.ranked = true;
  for (size_t i = 0; i < a.rank(); ++i) m.dims.push_back(a.dims[i] == b.dims[i] ? a.dims[i] : c.fresh());
  if (a.val && b.val && *a.val == *b.val) m.val = a.val;
  return m;
}

bool same_shape(const VState& a, const VState& b) {
  return a.ranked == b.ranked && a.dims == b.dims && a.dtype == b.dtype;
}

Graph* body(OpCtx& c, std::string_view attr) {
  GraphId id = c.g.attr_graph(c.n, attr);
  return id.valid() ? &c.eng.model().graph(id) : nullptr;
}

void if_(OpCtx& c) {
  Graph *then_g = body(c, "then_branch"), *else_g = body(c, "else_branch");
  if (!then_g || !else_g) return;
  std::vector<VState> t = c.eng.run_subgraph(*then_g, {});
  std::vector<VState> e = c.eng.run_subgraph(*else_g, {});
  auto cond = c.const_ints(0);
  for (size_t i = 0; i < c.num_outputs() && i < t.size() && i < e.size(); ++i) {
    if (cond && cond->size() == 1)
      c.out(i) = (*cond)[0] ? t[i] : e[i];
    else
      c.out(i) = merge(c, t[i], e[i]);
  }
}

VState scalar(DType t) {
  VState s;
  s.dtype = t;
  s.ranked = true;
  return s;
}

void loop(OpCtx& c) {
  Graph* g = body(c, "body");
  if (!g) return;
  size_t n_carried = c.num_inputs() >= 2 ? c.num_inputs() - 2 : 0;
  std::vector<VState> bound{scalar(DType::Int64), scalar(DType::Bool)};
  for (size_t i = 0; i < n_carried; ++i) {
    bound.push_back(c.in(2 + i));
    bound.back().val.reset();  // a carried value changes from one iteration to the next
  }
  std::vector<VState> outs = c.eng.run_subgraph(*g, bound);
  // Carried values whose shape changes across iterations: generalise and infer again.
  bool changed = false;
  for (size_t i = 0; i < n_carried && 1 + i < outs.size(); ++i) {
    if (same_shape(bound[2 + i], outs[1 + i])) continue;
    bound[2 + i] = merge(c, bound[2 + i], outs[1 + i]);
    bound[2 + i].val.reset();
    changed = true;
  }
  if (changed) outs = c.eng.run_subgraph(*g, bound);
  for (size_t i = 0; i < n_carried && 1 + i < outs.size(); ++i) {
    VState s = same_shape(bound[2 + i], outs[1 + i]) ? outs[1 + i] : merge(c, bound[2 + i], outs[1 + i]);
    s.val.reset();
    c.out(i) = s;
  }
  // Scan outputs: the trip count is M when the loop cannot stop early.
  SymDim trips = c.fresh();
  const auto* m = c.value(0);
  auto cond = c.const_ints(1);
  if (m && m->size() == 1 && (!c.has_input(1) || (cond && cond->size() == 1 && (*cond)[0]))) trips = m->front();
  bool early_exit_possible = c.has_input(1) && !(cond && (*cond)[0]);
  if (early_exit_possible) trips = c.fresh();
  for (size_t k = 0; n_carried + k < c.num_outputs() && 1 + n_carried + k < outs.size(); ++k) {
    const VState& s = outs[1 + n_carried + k];
    if (!s.ranked) {
      c.set_dtype(n_carried + k, s.dtype);
      continue;
    }
    std::vector<SymDim> dims{trips};
    dims.insert(dims.end(), s.dims.begin(), s.dims.end());
    c.set(n_carried + k, s.dtype, dims);
  }
}

// Scan (opset 9+): N state variables, then M scan inputs sliced along their scan axes.
void scan(OpCtx& c) {
  Graph* g = body(c, "body");
  if (!g) return;
  size_t m = static_cast<size_t>(c.attr_int("num_scan_inputs", 0));
  if (m > c.num_inputs()) return;
  size_t n = c.num_inputs() - m;
  auto in_axes = c.attr_ints("scan_input_axes");
  auto out_axes = c.attr_ints("scan_output_axes");
  std::vector<VState> bound;
  for (size_t i = 0; i < n; ++i) {
    bound.push_back(c.in(i));
    bound.back().val.reset();
  }
  std::optional<SymDim> len;
  for (size_t j = 0; j < m; ++j) {
    VState s = c.in(n + j);
    s.val.reset();
    if (s.ranked) {
      auto a = c.axis(in_axes.size() == m ? in_axes[j] : 0, s.rank());
      if (!a) return;
      if (!len) len = s.dims[*a];
      s.dims.erase(s.dims.begin() + *a);
    }
    bound.push_back(s);
  }
  std::vector<VState> outs = c.eng.run_subgraph(*g, bound);
  for (size_t i = 0; i < n && i < outs.size(); ++i) c.out(i) = merge(c, bound[i], outs[i]);
  for (size_t k = 0; n + k < c.num_outputs() && n + k < outs.size(); ++k) {
    const VState& s = outs[n + k];
    if (!s.ranked) {
      c.set_dtype(n + k, s.dtype);
      continue;
    }
    std::vector<SymDim> dims = s.dims;
    int64_t a = out_axes.size() > k ? out_axes[k] : 0;
    if (a < 0) a += static_cast<int64_t>(dims.size()) + 1;
    if (a < 0 || a > static_cast<int64_t>(dims.size())) return c.conflict("scan output axis out of range");
    dims.insert(dims.begin() + a, len ? *len : c.fresh());
    c.set(n + k, s.dtype, dims);
  }
}

}  // namespace

void register_control(const Registrar& reg) {
  reg("If", if_);
  reg("Loop", loop);
  reg("Scan", scan);
}

}  // namespace onnxforge::shape
