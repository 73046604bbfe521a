// fuse_qkv_projections — three projections of one input → one MatMul + Split.      class 1
//
//   q = x·Wq (+ bq), k = x·Wk (+ bk), v = x·Wv (+ bv)   →   Split(x·[Wq|Wk|Wv] (+ [bq|bk|bv]))
//
// Exactly three MatMuls read the same x with constant 2-D weights of the same K and of x's float
// type (the attention projections; Llama's GQA gives unequal widths). Biases are constant [N] Adds
// of that type read only after their MatMul; a projection without one (Whisper's k_proj) gets
// zeros. Each output element is the same dot product over K as before, so the result is
// bit-identical when the GEMM's accumulation order over K does not depend on the column (checked:
// max_diff 0 on the zoo in our runtime, float32 and float16); the concatenated weight is a deferred
// tensor (written straight from the three). Concatenating stored elements is exact in any type, so
// float16/bfloat16 models (tools/models/to_fp16.py: float16 initializers) fuse the same way.
// Anchored on the MatMul of the three that comes first in the graph (one block, one anchor).
// In the default pipeline (registry.cpp); passes/README.md (Experiment 14) has what it measured.
#include <algorithm>
#include <cstring>

#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "three MatMuls of one input with constant weights (+ bias Adds) → one MatMul on the concatenated weights (+ one "
    "Add) + Split";

struct Match {
  ValueId x;
  NodeId mm[3], add[3];  // add invalid: no bias
  TensorId w[3], b[3];   // b invalid: zeros
  int64_t k = 0, n[3] = {0, 0, 0};
  DType dtype = DType::Float;
  std::vector<NodeId> nodes;
};

// A constant float weight [K, N] read as MatMul input 1.
std::optional<std::pair<TensorId, std::pair<int64_t, int64_t>>> weight(const Graph& g, NodeId mm) {
  TensorId t = constant_tensor(g, g.input(mm, 1));
  if (!t.valid() || !is_float(g.model().tensors.dtype(t))) return std::nullopt;
  auto d = g.model().tensors.dims(t);
  if (d.size() != 2) return std::nullopt;
  return std::make_pair(t, std::make_pair(d[0], d[1]));
}

Found<Match> match(const Graph& g, const Uses& uses, NodeId anchor, const PassOptions&) {
  if (!is(g, anchor, "MatMul") || !weight(g, anchor)) return {};
  const ValueId x = g.input(anchor, 0);
  std::vector<NodeId> mms;
  for (const Use& u : uses.of(x))
    if (u.slot == 0 && is(g, u.node, "MatMul") && weight(g, u.node) &&
        weight(g, u.node)->second.first == weight(g, anchor)->second.first &&
        std::find(mms.begin(), mms.end(), u.node) == mms.end())
      mms.push_back(u.node);
  if (mms.size() != 3) return {};
  std::sort(mms.begin(), mms.end());
  if (mms[0] != anchor) return {};  // the block is counted at its first MatMul
  Match m;
  m.x = x;
  const int64_t xr = known_rank(g, x);
  MATCH_IF(xr >= 2, "input rank unknown");
  m.dtype = g.model().tensors.dtype(weight(g, anchor)->first);
  MATCH_IF(dtype_of(g, x) == m.dtype, "input type differs from the weights'");
  for (int i = 0; i < 3; ++i) {
    auto w = weight(g, mms[static_cast<size_t>(i)]);
    MATCH_IF(g.model().tensors.dtype(w->first) == m.dtype, "weight types differ");
    m.mm[i] = mms[static_cast<size_t>(i)];
    m.w[i] = w->first;
    m.k = w->second.first;
    m.n[i] = w->second.second;
    MATCH_IF(uses.count(g.input(m.mm[i], 1)) == 1, "weights shared");
    m.nodes.push_back(m.mm[i]);
    const ValueId y = g.output(m.mm[i], 0);
    NodeId add = single_consumer(g, uses, y);
    if (is(g, add, "Add")) {
      TensorId b = constant_tensor(g, other_input(g, add, y));
      auto bd = b.valid() ? g.model().tensors.dims(b) : std::span<const int64_t>();
      if (b.valid() && g.model().tensors.dtype(b) == m.dtype && bd.size() == 1 && bd[0] == m.n[i]) {
        m.add[i] = add;
        m.b[i] = b;
        m.nodes.push_back(add);
      }
    }
    const ValueId out = m.add[i].valid() ? g.output(m.add[i], 0) : y;
    MATCH_IF(!g.outer(out).valid(), "projection read by a subgraph");
  }
  return m;
}

bool apply(Edits& e, const Match& m) {
  if (e.any_touched(std::span<const NodeId>(m.nodes))) return false;
  Graph& g = e.g;
  const int64_t n = m.n[0] + m.n[1] + m.n[2], k = m.k;
  const int64_t wd[2] = {k, n};
  const int64_t es = dtype_bits(m.dtype) / 8;  // bytes per element
  TensorRecipe cat;
  cat.key = "ConcatColumns " + std::to_string(m.n[0]) + "," + std::to_string(m.n[1]) + "," + std::to_string(m.n[2]);
  cat.sources = {m.w[0], m.w[1], m.w[2]};
  const int64_t widths[3] = {m.n[0], m.n[1], m.n[2]};
  cat.compute = [k, n, widths, es](std::span<const std::span<const std::byte>> src, std::span<std::byte> out) {
    for (int64_t r = 0; r < k; ++r) {
      int64_t col = 0;
      for (int i = 0; i < 3; ++i) {
        std::memcpy(out.data() + (r * n + col) * es, src[static_cast<size_t>(i)].data() + r * widths[i] * es,
                    static_cast<size_t>(widths[i] * es));
        col += widths[i];
      }
    }
  };
  ValueId w = e.new_deferred_constant("qkv_weight", m.dtype, wd, static_cast<uint64_t>(k * n * es), std::move(cat));
  Builder b(e, m.nodes);
  ValueId y = b.named("qkv", "MatMul", {m.x, w});
  const bool bias = m.add[0].valid() || m.add[1].valid() || m.add[2].valid();
  if (bias) {
    std::vector<std::byte> bytes(static_cast<size_t>(n * es), std::byte{0});  // +0.0 in every float type
    int64_t col = 0;
    for (int i = 0; i < 3; ++i) {
      if (m.b[i].valid())
        std::memcpy(bytes.data() + col * es, g.model().tensors.bytes(m.b[i]).data(), static_cast<size_t>(m.n[i] * es));
      col += m.n[i];
    }
    const int64_t bd[1] = {n};
    y = b.named("qkv_biased", "Add", {y, b.bytes("qkv_bias", m.dtype, bd, bytes)});
  }
  const ValueId split = b.ints("qkv_split", {m.n[0], m.n[1], m.n[2]});
  std::vector<ValueId> outs{b.value("q"), b.value("k"), b.value("v")};
  b.add("Split", {y, split}, outs, {NewAttr::Int("axis", -1)});
  for (int i = 0; i < 3; ++i) {
    NodeId last = m.add[i].valid() ? m.add[i] : m.mm[i];
    e.replace_uses(g.output(last, 0), outs[static_cast<size_t>(i)]);
    if (m.add[i].valid()) e.kill(m.add[i]);
    e.kill(m.mm[i]);
  }
  return true;
}

}  // namespace

ONNXFORGE_FUSION(fuse_qkv_projections, Match, match, apply, .op = "MatMul", .min_opset = 13,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"MatMul"}, .summary = kSummary);

}  // namespace onnxforge::passes
