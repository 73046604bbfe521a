// fuse_matmul_add — MatMul(A[M,K], B[K,N]) + bias → Gemm(A, B, bias), rank 2 only, when the
// bias broadcasts to [M,N] without growing it ([N], [1,N], [M,N], [1] or a scalar) and the
// MatMul's result is read only by the Add.                                              class 1
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId matmul, add;
  ValueId bias;
};

bool gemm_type(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 || t == DType::BFloat16;
}

std::vector<int64_t> dims_or_unknown(const Graph& g, ValueId v) {
  std::vector<int64_t> out;
  if (TensorId t = constant_tensor(g, v); t.valid()) {
    auto d = g.model().tensors.dims(t);
    return {d.begin(), d.end()};
  }
  for (const Dim& d : g.shape(v)) out.push_back(d.known() ? d.value : -1);
  return out;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  for (NodeId mm : g.nodes()) {
    if (!is(g, mm, "MatMul")) continue;
    ValueId a = g.input(mm, 0), b = g.input(mm, 1), y = g.output(mm, 0);
    if (known_rank(g, a) != 2 || known_rank(g, b) != 2) continue;
    NodeId add = single_consumer(g, uses, y);
    if (!is(g, add, "Add")) continue;
    ValueId bias = other_input(g, add, y);
    if (!bias.valid() || bias == y) continue;
    DType t = dtype_of(g, b);
    if (!gemm_type(t)) continue;
    auto ad = dims_or_unknown(g, a), bd = dims_or_unknown(g, b);
    int64_t rb = known_rank(g, bias);
    if (rb < 0 || rb > 2) continue;
    auto cd = dims_or_unknown(g, bias);
    if (static_cast<int64_t>(cd.size()) != rb) continue;
    int64_t M = ad[0], N = bd[1];
    bool ok = false;
    if (rb == 0)
      ok = true;
    else if (rb == 1)
      ok = cd[0] == 1 || (N >= 0 && cd[0] == N);
    else
      ok = (cd[0] == 1 || (M >= 0 && cd[0] == M)) && (cd[1] == 1 || (N >= 0 && cd[1] == N));
    if (!ok) continue;
    out.push_back({mm, add, bias});
  }
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  return e.replace_with({m.matmul, m.add}, "Gemm", {g.input(m.matmul, 0), g.input(m.matmul, 1), m.bias}).valid();
}

}  // namespace

ONNXFORGE_PASS(fuse_matmul_add, Match, AccuracyClass::FloatBounded, analyze, apply, {"MatMul", "Add", "Gemm"},
               "rank-2 MatMul + Add(bias) becomes Gemm (bias shape checked)");

}  // namespace onnxforge::passes
