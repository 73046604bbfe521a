// fuse_attention — scaled dot-product attention → Attention (opset 23).            class 1
//
//   Q ─(head split)─┐
//                   MatMul ─ [scale] ─ [mask: Add m | Where(c, ·, fill)]* ─ Softmax(last) ─ MatMul ─(head merge)─ Y
//   K ─(head split, transpose, [repeat_kv])─┘                                V ─(head split, [repeat_kv])─┘
//
// Anchored on the Softmax. The head split/merge Reshape/Transposes are followed as data
// (head_layout.h), not matched as spellings, so BERT's [B,S,H,D] split, Whisper's [B·H,S,D]
// batches and ViT's seq-first [S,B·H,D] are one case; the pass emits the 3-D form
// (B,S,H·D with q_num_heads/kv_num_heads) or the 4-D form (B,H,S,D), whichever needs fewer new
// Reshape/Transposes, and adds those it needs (ViT: one Transpose per input).
//  - scale: scalar Mul/Div on the scores, on Q alone (Whisper scales q_proj's output) or √ on
//    both Q and K; multiplied up; `scale` is omitted when it equals 1/√head_size (rel. 1e-6).
//  - grouped-query attention: Llama's repeat_kv (Unsqueeze at 2, Expand, Reshape: each kv head
//    repeated in a row, the order Attention-23 broadcasts in) is dropped; kv_num_heads = Hkv.
//  - masks: every Add/Where between the scores and the Softmax becomes one additive attn_mask,
//    built in the graph from the model's own mask values in the original order, so masked
//    positions get exactly the original values (s + (-FLT_MAX) rounds to -FLT_MAX; a fully
//    masked row stays uniform as in the original). A masked_fill value must be a constant
//    <= -1e4 (-inf allowed). `is_causal=1` replaces the mask only when the mask is one Where/Add
//    whose values are provably "key j visible iff j <= query i" with Sq == Sk (a constant table
//    such as GPT-2's `bias` buffer, sliced from row/column 0, every element checked): then top-
//    left and bottom-right alignment agree, which the ONNX Runtime CPU/CUDA disagreement
//    (onnxruntime#29020) makes a requirement. A causal mask combined with a padding mask stays
//    a combined attn_mask: splitting it is not exact when a row's visible keys are all padding.
//  - ONNX Runtime 1.30's CPU kernel does not broadcast attn_mask over query positions (a BERT
//    [B,1,1,S] mask fails: REFERENCE.md), so a mask whose query dim is not provably Sq is
//    expanded to [.., Sq, ..] with an Expand (its target from the mask's own key length when
//    Sq == Sk, so every layer computes the same nodes and duplicate elimination keeps one).
// Misses (census): "softmax not over last axis", "scale not constant", "scale after mask",
// "masked_fill value not constant", "masked_fill value not large negative", "scores used
// elsewhere", "probabilities used elsewhere", "heads not static", "head size not static",
// "heads not found", "head layout not recognised", "key/value broadcast over batch", ...
#include <cmath>
#include <cstring>
#include <limits>
#include <algorithm>
#include <set>

#include "analysis/shapes.h"
#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/graph_util.h"
#include "passes/head_layout.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "MatMul/scale/mask/Softmax/MatMul with the head split and merge → Attention-23 (3-D or 4-D, grouped-query, "
    "attn_mask or a proven is_causal)";

using heads::Layout;
using heads::Sizes;
using heads::Step;

struct Operand {
  ValueId source;
  heads::Conversion conv;
  double scale = 1;
  int64_t repeat = 1;
};

struct MaskPiece {
  enum Kind { Add, WhereKeep, WhereFill } kind;  // s + m | Where(c, s, fill) | Where(c, fill, s)
  ValueId m;                                     // additive mask or condition
  ValueId fill;                                  // Where's fill constant
};

struct QueryLength {  // how to build the Expand target of a mask lacking the query dim
  bool needed = false;
  int64_t rank = 0;
  int64_t static_len = -1;  // >= 0: constant target
  ValueId from;             // else: Shape(from)[axis]
  int64_t axis = 0;
};

struct Match {
  NodeId softmax, mm1, mm2;
  std::vector<NodeId> nodes;  // every node of the block (killed when nothing else reads it)
  std::vector<MaskPiece> mask;
  bool causal = false;
  QueryLength qlen;
  Operand q, k, v;
  ValueId out;  // the value the Attention (after out_conv) replaces
  heads::Conversion out_conv;
  int rank = 3;
  int64_t q_heads = 0, kv_heads = 0;
  std::optional<float> scale;
  DType dtype = DType::Float;
  // A decoder with past (both or neither): Concat(cache, new) on the key axis, whose output
  // `present` the op returns itself.
  struct Past {
    ValueId cache, fresh, present;
    std::vector<NodeId> shapes;  // Shape(present) readers, rewritten as Shape(cache) + Shape(fresh) on the key axis
  };
  std::optional<Past> past_k, past_v;
};

// The key (value) walk of a decoder with past ends at Concat(past, new) on the key axis, in the
// [b, g, t, d] layout Attention-23's past_key/present_key have, read only by the walk and the
// graph output `present`. The op takes the cache and returns the present itself, so the walk goes
// on from the new keys, whose positions are the query's ('s'). The Concat and the nodes walked to
// it become steps[0]'s nodes of the returned walk.
struct PastWalk {
  Match::Past past;
  std::vector<Step> steps;
};
std::optional<PastWalk> through_past(const Graph& g, const Uses& uses, const std::vector<Step>& steps,
                                     NodeId first_reader, char last, Sizes& sizes, heads::WalkOptions o,
                                     bool* unresolved) {
  const Step& end = steps.back();
  const NodeId c = g.producer(end.value);
  if (!is(g, c, "Concat") || g.inputs(c).size() != 2) return std::nullopt;
  const Layout& l = end.layout;
  // Heads 'g', or "" for one key/value head (Gemma's multi-query attention).
  if (l.size() != 4 || !(l[0] == "b" || l[0].empty()) || !(l[1] == "g" || l[1].empty()) || l[2] != "t" ||
      l[3] != std::string(1, last))
    return std::nullopt;
  if (int64_t axis = g.attr_int(c, "axis", 0); axis != 2 && axis != -2) return std::nullopt;
  const NodeId reader = steps.size() > 1 ? end.nodes.back() : first_reader;
  std::vector<NodeId> shapes;  // Shape readers of the present (GPT-2 sizes its causal mask by it)
  for (const Use& u : uses.of(end.value)) {
    if (u.node == reader) continue;
    if (!is(g, u.node, "Shape") || u.slot != 0) return std::nullopt;
    shapes.push_back(u.node);
  }
  const ValueId cache = g.input(c, 0), fresh = g.input(c, 1);
  auto cd = heads::dims_of(g, cache), fd = heads::dims_of(g, fresh), ed = heads::dims_of(g, end.value);
  if (!cd || !fd || !ed || cd->size() != 4 || fd->size() != 4) return std::nullopt;
  if (!((*cd)[1] == (*ed)[1]) || !((*cd)[3] == (*ed)[3]) || !((*fd)[1] == (*ed)[1]) || !((*fd)[3] == (*ed)[3]) ||
      !((*cd)[0] == (*ed)[0]) || !((*fd)[2] == sizes.size('s')))
    return std::nullopt;
  Layout from = l;
  from[2] = "s";
  PastWalk w{{cache, fresh, end.value, std::move(shapes)}, heads::walk_back(g, fresh, from, sizes, o, unresolved)};
  for (Step& st : w.steps) {
    st.repeat *= end.repeat;
    st.scale *= end.scale;
  }
  for (size_t i = 1; i < steps.size(); ++i)
    for (NodeId n : steps[i].nodes) w.steps[0].nodes.push_back(n);
  w.steps[0].nodes.push_back(c);
  return w;
}

bool elementwise_link(const Graph& g, NodeId n) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Where", "Cast", "Tanh", "Slice", "Clip", "Neg"})
    if (is(g, n, op)) return true;
  return false;
}

// Whether `v` is computed from a MatMul through elementwise links only (a few steps): decides
// which input of an Add/Where carries the scores, and whether a Softmax is an attention at all.
bool from_matmul(const Graph& g, ValueId v, int depth = 8) {
  NodeId p = g.producer(v);
  if (!p.valid() || depth == 0) return false;
  if (is(g, p, "MatMul")) return true;
  if (!elementwise_link(g, p)) return false;
  for (ValueId in : g.inputs(p))
    if (in.valid() && from_matmul(g, in, depth - 1)) return true;
  return false;
}

// ---- causal proofs -------------------------------------------------------------------------

// A constant table, possibly sliced: c = T[..., r0:, c0:]. Leading dims of the result must be 1.
struct Table {
  TensorId t;
  std::vector<int64_t> dims;
  int64_t r0 = 0, c0 = 0;
};
std::optional<Table> sliced_table(const Graph& g, ValueId v) {
  int64_t r0 = 0, c0 = 0;
  for (int guard = 0; guard < 8; ++guard) {
    if (TensorId t = constant_tensor(g, v); t.valid()) {
      auto d = g.model().tensors.dims(t);
      if (d.size() < 2) return std::nullopt;
      return Table{t, std::vector<int64_t>(d.begin(), d.end()), r0, c0};
    }
    NodeId s = g.producer(v);
    auto sp = is(g, s, "Slice") ? slice_params(g, s) : std::nullopt;
    const int64_t rank = sp ? known_rank(g, g.input(s, 0)) : -1;
    if (rank < 2) return std::nullopt;
    for (size_t i = 0; i < sp->axes.size(); ++i) {
      const int64_t a = sp->axes[i] < 0 ? sp->axes[i] + rank : sp->axes[i];
      const int64_t st = sp->starts[i];
      if (st < 0 || sp->steps[i] != 1) return std::nullopt;
      if (a == rank - 2)
        r0 += st;
      else if (a == rank - 1)
        c0 += st;
      else if (st != 0)
        return std::nullopt;
    }
    v = g.input(s, 0);
  }
  return std::nullopt;
}

// Whether `v` (a mask piece's tensor, shape [1.., Sq, Sk]) holds "visible" exactly where key
// j <= query i, for every Sq <= the table: `visible(x)` classifies an element as visible (1),
// hidden (0) or neither (-1).
template <class F>
bool provably_causal(const Graph& g, ValueId v, F visible) {
  auto d = heads::dims_of(g, v);
  if (!d || d->size() < 2) return false;
  for (size_t i = 0; i + 2 < d->size(); ++i)
    if (!(*d)[i].is_constant(1)) return false;
  auto tab = sliced_table(g, v);
  if (!tab) return false;
  const auto& td = tab->dims;
  const size_t r = td.size();
  int64_t lead = 1;
  for (size_t i = 0; i + 2 < r; ++i) lead *= td[i];
  if (lead != 1) return false;
  const int64_t rows = td[r - 2], cols = td[r - 1];
  if (rows * cols > (int64_t{1} << 24) || tab->r0 >= rows || tab->c0 >= cols) return false;
  for (int64_t i = tab->r0; i < rows; ++i)
    for (int64_t j = tab->c0; j < cols; ++j) {
      int k = visible(element_as_double(g.model(), tab->t, static_cast<uint64_t>(i * cols + j)));
      if (k < 0 || k != ((j - tab->c0) <= (i - tab->r0) ? 1 : 0)) return false;
    }
  return true;
}

constexpr double kLargeNegative = -1e4;

// Slice(x, 0, >= dim, axes, 1) on every axis it names returns x (Llama slices its mask to the
// key length it already has, per layer).
ValueId skip_noop_slices(const Graph& g, ValueId v) {
  for (NodeId s = g.producer(v); is(g, s, "Slice"); s = g.producer(v)) {
    auto d = heads::dims_of(g, g.input(s, 0));
    auto sp = slice_params(g, s);
    if (!d || !sp || !sp->ends) break;
    const auto& [starts, ends_known, axes, steps] = *sp;
    const std::vector<int64_t>& ends = *ends_known;
    bool noop = true;
    for (size_t i = 0; i < axes.size() && noop; ++i) {
      const int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(d->size()) : axes[i];
      if (a < 0 || a >= static_cast<int64_t>(d->size())) return v;
      const SymDim& dim = (*d)[static_cast<size_t>(a)];
      noop = starts[i] == 0 && steps[i] == 1 &&
             (ends[i] >= (int64_t{1} << 62) || (dim.is_constant() && ends[i] >= dim.value()));
    }
    if (!noop) break;
    v = g.input(s, 0);
  }
  return v;
}

// ---- the matcher -----------------------------------------------------------------------------
// Six steps, each a function that returns what it found or why the block cannot fuse (the
// census counts the reasons): the scores chain from the Softmax back to the first MatMul, the
// operands' shapes, the heads followed back to their split and forward to their merge (through a
// past Concat), the cheapest layout the op takes them in, the scale, and the mask's form.

// Step 1: Softmax ← [mask pieces, scales]* ← MatMul(Q, K), read by MatMul(·, V).
struct Scores {
  NodeId softmax, mm1, mm2;
  std::vector<NodeId> chain;    // chain[i] produces values[i] and reads the scores as values[i + 1]
  std::vector<ValueId> values;  // the last one is the first MatMul's output
  double scale = 1;             // the product of the chain's constant scales
  std::vector<MaskPiece> mask;
  std::vector<NodeId> mask_side;  // Expand/Shape nodes that only size a mask piece to the scores
};

Found<Scores> scores_chain(const Graph& g, const Uses& uses, NodeId softmax) {
  if (!is(g, softmax, "Softmax")) return {};
  const ValueId probs = g.output(softmax, 0);
  Scores sc;
  sc.softmax = softmax;
  for (const Use& u : uses.of(probs))
    if (u.slot == 0 && is(g, u.node, "MatMul")) sc.mm2 = u.node;
  if (!sc.mm2.valid() || !from_matmul(g, g.input(softmax, 0))) return {};  // not an attention block
  if (!uses.single(probs)) return Miss{"probabilities used elsewhere"};

  // Softmax over the last axis (opset < 13: the 2-D flattening at `axis` is the same thing only
  // when axis is the last one).
  const int64_t srank = known_rank(g, g.input(softmax, 0));
  if (srank < 0) return Miss{"shapes unknown"};
  const int64_t opset = g.model().opset("");
  int64_t axis = g.attr_int(softmax, "axis", opset >= 13 ? -1 : 1);
  if (axis < 0) axis += srank;
  if (axis != srank - 1) return Miss{"softmax not over last axis"};

  sc.values = {g.input(softmax, 0)};
  bool seen_scale = false;  // walking back: a mask after a scale means the scale scales the mask too
  for (int guard = 0;; ++guard) {
    const ValueId cur = sc.values.back();
    NodeId p = g.producer(cur);
    if (guard > 16 || !p.valid()) return Miss{"unsupported op between scores and softmax"};
    if (is(g, p, "MatMul")) {
      sc.mm1 = p;
      break;
    }
    sc.chain.push_back(p);
    ValueId next;
    if (is(g, p, "Mul") || is(g, p, "Div")) {
      ValueId a = g.input(p, 0), b = g.input(p, 1);
      const bool a_scores = from_matmul(g, a), b_scores = from_matmul(g, b);
      if (a_scores == b_scores || (is(g, p, "Div") && b_scores))
        return Miss{"unsupported op between scores and softmax"};
      ValueId c = a_scores ? b : a;
      if (!constant_tensor(g, c).valid()) return Miss{"scale not constant"};
      auto s = scalar(g, c);
      if (!s) return Miss{"scale not scalar"};
      if (*s == 0 || !std::isfinite(*s)) return Miss{"scale not finite"};
      seen_scale = true;
      sc.scale = is(g, p, "Mul") ? sc.scale * *s : sc.scale / *s;
      next = a_scores ? a : b;
    } else if (is(g, p, "Add")) {
      ValueId a = g.input(p, 0), b = g.input(p, 1);
      const bool a_scores = from_matmul(g, a), b_scores = from_matmul(g, b);
      if (a_scores == b_scores) return Miss{"unsupported op between scores and softmax"};
      if (seen_scale) return Miss{"scale after mask"};
      sc.mask.insert(sc.mask.begin(), MaskPiece{MaskPiece::Add, a_scores ? b : a, {}});
      next = a_scores ? a : b;
    } else if (is(g, p, "Where")) {
      ValueId c = g.input(p, 0), a = g.input(p, 1), b = g.input(p, 2);
      const bool a_scores = from_matmul(g, a), b_scores = from_matmul(g, b);
      if (a_scores == b_scores) return Miss{"unsupported op between scores and softmax"};
      ValueId fill = a_scores ? b : a;
      if (!constant_tensor(g, fill).valid()) return Miss{"masked_fill value not constant"};
      auto f = scalar(g, fill);
      if (!f) return Miss{"masked_fill value not scalar"};
      if (!(*f <= kLargeNegative)) return Miss{"masked_fill value not large negative"};
      if (dtype_of(g, c) != DType::Bool) return Miss{"mask condition not boolean"};
      if (seen_scale) return Miss{"scale after mask"};
      sc.mask.insert(sc.mask.begin(), MaskPiece{a_scores ? MaskPiece::WhereKeep : MaskPiece::WhereFill, c, fill});
      next = a_scores ? a : b;
    } else {
      return Miss{"unsupported op between scores and softmax"};
    }
    sc.values.push_back(next);
  }
  // Every scores value is read only by the chain, except Shape readers whose result only sizes an
  // Expand of a mask piece (DistilBERT expands its mask to the scores' shape): an Expand to the
  // scores' own shape is what the attention's broadcasting does anyway, so the piece is read
  // before it (also when duplicate elimination made a later layer's Expand read this layer's
  // Shape: any Expand whose output has the scores' dims).
  const auto scores_dims = heads::dims_of(g, g.output(sc.mm1, 0));
  auto strip_expand = [&](ValueId v) {
    v = skip_noop_slices(g, v);
    NodeId ex = g.producer(v);
    if (!is(g, ex, "Expand") || !scores_dims || heads::dims_of(g, v) != scores_dims) return v;
    sc.mask_side.push_back(ex);
    if (NodeId sh = g.producer(g.input(ex, 1)); is(g, sh, "Shape")) sc.mask_side.push_back(sh);
    return g.input(ex, 0);
  };
  for (MaskPiece& p : sc.mask) p.m = strip_expand(p.m);
  for (size_t i = 0; i < sc.values.size(); ++i) {
    const ValueId v = sc.values[i];
    const NodeId reader = i == 0 ? softmax : sc.chain[i - 1];
    if (uses.is_graph_output(v)) return Miss{"scores used elsewhere"};
    for (const Use& u : uses.of(v))
      if (u.node != reader && std::find(sc.mask_side.begin(), sc.mask_side.end(), u.node) == sc.mask_side.end())
        return Miss{"scores used elsewhere"};
  }
  return sc;
}

// Steps 2 and 3: the operands' shapes, then each operand followed as data (head_layout.h) back to
// its head split and the output forward to its head merge. Factor letters: b batch, h query
// heads, g key/value heads, s query and t key positions, d and e the head sizes of K and V, x
// batch·heads merged (rank 3).
struct Heads {
  size_t r = 0;  // the scores' rank, 3 or 4
  DType dtype = DType::Float;
  Sizes sizes;
  char G = 'g';  // the factor of the key/value heads ('h' when the rank-3 form merges them)
  std::vector<Step> qs, ks, vs, os;
  std::optional<Match::Past> past_k, past_v;
  int64_t H = 0, Gk = 0;  // query heads; key/value heads before any repeat
};

Found<Heads> follow_heads(const Graph& g, const Uses& uses, const Scores& sc) {
  const ValueId qa = g.input(sc.mm1, 0), kb = g.input(sc.mm1, 1), vb = g.input(sc.mm2, 1), y = g.output(sc.mm2, 0);
  auto qd = heads::dims_of(g, qa), kd = heads::dims_of(g, kb), vd = heads::dims_of(g, vb), yd = heads::dims_of(g, y);
  auto sd = heads::dims_of(g, g.output(sc.mm1, 0));
  if (!qd || !kd || !vd || !yd || !sd) return Miss{"shapes unknown"};
  Heads h;
  const size_t r = h.r = qd->size();
  if (r != 3 && r != 4) return Miss{"scores rank not 3 or 4"};
  if (kd->size() != r || vd->size() != r || yd->size() != r) return Miss{"key/value broadcast over batch"};
  for (ValueId cv : sc.values) {  // a mask must not broadcast the scores to a larger shape
    auto cd = heads::dims_of(g, cv);
    if (!cd || *cd != *sd) return Miss{"mask broadcasts the scores"};
  }
  const auto& Q = *qd;
  const auto& K = *kd;
  const auto& V = *vd;
  if (!Q[r - 1].is_constant() || !V[r - 1].is_constant()) return Miss{"head size not static"};
  h.dtype = dtype_of(g, qa);
  if (h.dtype != DType::Float && h.dtype != DType::Float16 && h.dtype != DType::BFloat16)
    return Miss{"not floating point"};

  Sizes& sizes = h.sizes;
  sizes.of['s'] = Q[r - 2];
  sizes.of['d'] = Q[r - 1];
  sizes.of['t'] = K[r - 1];
  sizes.of['e'] = V[r - 1];
  Layout lq, lk, lv, lo;
  if (r == 4) {
    if (!(K[0] == Q[0]) || !(V[0] == Q[0])) return Miss{"key/value broadcast over batch"};
    if (!(V[1] == K[1]) || !(K[1] == Q[1] || K[1].is_constant(1))) return Miss{"key/value heads differ"};
    if (!Q[1].is_constant() || !K[1].is_constant()) return Miss{"heads not static"};
    sizes.of['b'] = Q[0];
    sizes.of['h'] = Q[1];
    sizes.of['g'] = K[1];
    lq = {"b", "h", "s", "d"};
    lk = {"b", "g", "d", "t"};
    lv = {"b", "g", "t", "e"};
    lo = {"b", "h", "s", "e"};
  } else {
    if (!(K[0] == Q[0]) || !(V[0] == Q[0])) return Miss{"key/value broadcast over batch"};
    sizes.of['x'] = Q[0];
    h.G = 'h';
    lq = {"x", "s", "d"};
    lk = {"x", "d", "t"};
    lv = {"x", "t", "e"};
    lo = {"x", "s", "e"};
  }
  auto sq = [&](const Layout& l) { return heads::squeeze_ones(l, sizes); };
  bool unresolved = false;
  h.qs = heads::walk_back(g, qa, sq(lq), sizes, {.scale = true, .kv_repeat = false}, &unresolved);
  h.ks = heads::walk_back(g, kb, sq(lk), sizes, {.scale = true, .kv_repeat = r == 4}, &unresolved);
  h.vs = heads::walk_back(g, vb, sq(lv), sizes, {.scale = false, .kv_repeat = r == 4}, &unresolved);
  h.os = heads::walk_forward(g, uses, y, sq(lo), sizes, &unresolved);
  if (r == 4) {
    auto pk = through_past(g, uses, h.ks, sc.mm1, 'd', sizes, {.scale = true, .kv_repeat = true}, &unresolved);
    auto pv = through_past(g, uses, h.vs, sc.mm2, 'e', sizes, {.scale = false, .kv_repeat = true}, &unresolved);
    if (pk && pv) {
      h.past_k = pk->past;
      h.past_v = pv->past;
      h.ks = std::move(pk->steps);
      h.vs = std::move(pv->steps);
    }
  }
  if (unresolved) return Miss{"head split shapes not resolved"};
  if (r == 3) {
    if (!sizes.has('b') || !sizes.has('h')) return Miss{"heads not found"};
    for (auto* steps : {&h.qs, &h.ks, &h.vs, &h.os})
      for (Step& s : *steps) s.layout = heads::split_x(s.layout, sizes);
  }
  if (!sizes.size('h').is_constant()) return Miss{"heads not static"};
  h.H = sizes.size('h').value();
  h.Gk = sizes.size(h.G).is_constant() ? sizes.size(h.G).value() : -1;
  if (h.Gk <= 0) return Miss{"heads not static"};
  return h;
}

// Step 4: where along each walk the op reads its operand, and in which of its forms (3-D or 4-D,
// which key/value repeat it undoes). Net cost of a source: the Reshape/Transposes to add minus
// the walked nodes that die (every value between the source and the MatMul read only by the
// chain); ties go to the furthest, and to rank 3.
struct Pick {
  int cost = 1 << 20;
  size_t step = 0;
  heads::Conversion conv;
};
struct Picks {
  int rank = 3;
  int64_t repeat = 1;
  Pick q, k, v, o;
};

Found<Picks> choose_layouts(const Graph& g, const Uses& uses, const Scores& sc, const Heads& h) {
  const Sizes& sizes = h.sizes;
  const char G = h.G;
  // Canonical layouts of the op's inputs/outputs, per rank; 'g' shrinks with a kv repeat.
  auto size_fn = [&](int64_t repeat) {
    return [&sizes, G, repeat](char c) -> SymDim {
      if (c == G && G == 'g') return SymDim::constant(sizes.size('g').value() / repeat);
      return sizes.size(c);
    };
  };
  auto canon = [&](char role, int rank, int64_t repeat) {
    Layout l;
    const std::string g1(1, G);
    if (role == 'q') l = rank == 3 ? Layout{"b", "s", "hd"} : Layout{"b", "h", "s", "d"};
    const std::string t = h.past_k ? "s" : "t";  // with a past, K and V hold the new positions only
    if (role == 'k') l = rank == 3 ? Layout{"b", t, g1 + "d"} : Layout{"b", g1, t, "d"};
    if (role == 'v') l = rank == 3 ? Layout{"b", t, g1 + "e"} : Layout{"b", g1, t, "e"};
    if (role == 'o') l = rank == 3 ? Layout{"b", "s", "he"} : Layout{"b", "h", "s", "e"};
    Sizes s2 = sizes;
    if (G == 'g') s2.of['g'] = SymDim::constant(sizes.size('g').value() / repeat);
    return heads::squeeze_ones(l, s2);
  };
  auto dying = [&](const std::vector<Step>& steps, NodeId reader) {
    std::vector<int> d(steps.size(), 0);
    bool dies = !uses.is_graph_output(steps[0].value);
    for (const Use& u : uses.of(steps[0].value))
      if (u.node != reader) dies = false;
    for (size_t i = 1; i < steps.size(); ++i) {
      d[i] = d[i - 1] + (dies ? static_cast<int>(steps[i].nodes.size()) : 0);
      dies = dies && uses.single(steps[i].value);
    }
    return d;
  };
  auto concat_of = [&](const std::optional<Match::Past>& p, NodeId otherwise) {
    return p ? g.producer(p->present) : otherwise;
  };
  const auto dq = dying(h.qs, sc.mm1), dk = dying(h.ks, concat_of(h.past_k, sc.mm1)),
             dv = dying(h.vs, concat_of(h.past_v, sc.mm2));
  auto best_in = [&](const std::vector<Step>& steps, const std::vector<int>& die, char role, int rank, int64_t repeat) {
    Pick p;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].repeat != repeat) continue;
      auto c = heads::plan_conversion(steps[i].layout, canon(role, rank, repeat), size_fn(repeat));
      if (c && c->cost() - die[i] <= p.cost) p = {c->cost() - die[i], i, *c};
    }
    return p;
  };
  auto best_out = [&](int rank) {
    Pick p;
    for (size_t i = 0; i < h.os.size(); ++i) {
      auto c = heads::plan_conversion(canon('o', rank, 1), h.os[i].layout, size_fn(1));
      const int net = c ? c->cost() - static_cast<int>(i) : 0;
      if (c && net <= p.cost) p = {net, i, *c};
    }
    return p;
  };
  std::set<int64_t> repeats;
  for (const Step& s : h.ks) repeats.insert(s.repeat);
  int best_total = 1 << 20;
  Picks best;
  for (int rank : {4, 3}) {  // 3 last: it wins ties
    Pick pq = best_in(h.qs, dq, 'q', rank, 1), po = best_out(rank);
    for (int64_t rep : repeats) {
      if (h.Gk % rep) continue;
      Pick pk = best_in(h.ks, dk, 'k', rank, rep), pv = best_in(h.vs, dv, 'v', rank, rep);
      const int total = pq.cost + pk.cost + pv.cost + po.cost;
      if (total >= (1 << 19)) continue;
      if (total < best_total || (total == best_total && (rank == 3 || rep > best.repeat))) {
        best_total = total;
        best = {rank, rep, pq, pk, pv, po};
      }
    }
  }
  if (best_total >= (1 << 19)) return Miss{"head layout not recognised"};
  return best;
}

// Step 5: the softmax scale, from the chain's constants and the scales walked through on Q and
// K; unset when it is the op's default 1/√d.
Found<std::optional<float>> attention_scale(const Scores& sc, const Heads& h, const Operand& q, const Operand& k) {
  const double total = q.scale * k.scale * sc.scale;
  const double dflt = 1.0 / std::sqrt(static_cast<double>(h.sizes.size('d').value()));
  if (!std::isfinite(total) || total <= 0) return Miss{"scale not positive"};
  if (std::abs(total - dflt) > 1e-6 * dflt) return std::optional<float>(static_cast<float>(total));
  return std::optional<float>();
}

// Step 6: the mask — a proven causal one becomes is_causal, any other attn_mask must broadcast
// to the 4-D scores, and ONNX Runtime needs its query dim (QueryLength says how to build it).
struct MaskForm {
  bool causal = false;
  QueryLength qlen;
};

Found<MaskForm> mask_form(const Graph& g, const Scores& sc, const Heads& h, const Step& q_source) {
  MaskForm f;
  const SymDim Sq = h.sizes.size('s'), Sk = h.sizes.size('t');
  if (sc.mask.size() == 1 && Sq == Sk) {
    const MaskPiece& p = sc.mask[0];
    if (p.kind == MaskPiece::WhereKeep && dtype_of(g, p.m) == DType::Bool)
      f.causal = provably_causal(g, p.m, [](double x) { return x != 0 ? 1 : 0; });
    else if (p.kind == MaskPiece::WhereFill && dtype_of(g, p.m) == DType::Bool)
      f.causal = provably_causal(g, p.m, [](double x) { return x != 0 ? 0 : 1; });
    else if (p.kind == MaskPiece::Add)
      f.causal = provably_causal(g, p.m, [](double x) { return x == 0 ? 1 : (x <= kLargeNegative ? 0 : -1); });
  }
  if (sc.mask.empty() || f.causal) return f;
  // Broadcast shape of the pieces; a rank-3 mask of merged batch·heads scores cannot be given
  // to the 4-D broadcasting attn_mask.
  ValueId with_sq, with_sk;
  size_t mrank = 0;
  for (const MaskPiece& p : sc.mask) {
    auto d = heads::dims_of(g, p.m);
    if (!d) return Miss{"mask shape unknown"};
    mrank = std::max(mrank, d->size());
    for (size_t k = 0; k < d->size(); ++k) {
      const SymDim& x = (*d)[d->size() - 1 - k];
      if (k == 1 && x == Sq && !x.is_constant(1)) with_sq = p.m;
      if (k == 0 && x == Sk) with_sk = p.m;
    }
    if (h.r == 3 && d->size() == 3 && !(*d)[0].is_constant(1)) return Miss{"mask on merged batch and heads"};
    if (d->size() > 4) return Miss{"mask rank above 4"};
  }
  if (with_sq.valid() || Sq.is_constant(1)) return f;
  f.qlen.needed = true;
  f.qlen.rank = static_cast<int64_t>(std::max<size_t>(mrank, 2));
  if (Sq.is_constant()) {
    f.qlen.static_len = Sq.value();
  } else if (Sq == Sk && with_sk.valid()) {
    f.qlen.from = with_sk;
    f.qlen.axis = -1;
  } else {
    // The query's own sequence axis.
    int64_t ax = -1;
    for (size_t i = 0; i < q_source.layout.size(); ++i)
      if (q_source.layout[i] == "s") ax = static_cast<int64_t>(i);
    if (ax < 0) return Miss{"query length not found"};
    f.qlen.from = q_source.value;
    f.qlen.axis = ax;
  }
  return f;
}

// Every node the Attention replaces (each killed when nothing outside reads it): the chain, the
// walked steps up to the chosen sources, the past Concats.
std::vector<NodeId> block_nodes(const Scores& sc, const Heads& h, const Picks& p) {
  std::vector<NodeId> nodes;
  auto add_walked = [&](const std::vector<Step>& steps, size_t upto) {
    for (size_t i = 1; i <= upto; ++i)
      for (NodeId n : steps[i].nodes) nodes.push_back(n);
  };
  nodes.push_back(sc.mm1);
  for (NodeId n : sc.chain) nodes.push_back(n);
  for (NodeId n : sc.mask_side) nodes.push_back(n);
  nodes.push_back(sc.softmax);
  nodes.push_back(sc.mm2);
  add_walked(h.qs, p.q.step);
  add_walked(h.ks, p.k.step);
  add_walked(h.vs, p.v.step);
  if (h.past_k) {  // the past Concats and the nodes walked to them
    for (NodeId n : h.ks[0].nodes) nodes.push_back(n);
    for (NodeId n : h.vs[0].nodes) nodes.push_back(n);
  }
  add_walked(h.os, p.o.step);
  return nodes;
}

Found<Match> match(const Graph& g, const Uses& uses, NodeId softmax, const PassOptions&) {
  Found<Scores> sc = scores_chain(g, uses, softmax);
  if (!sc) return sc.failure();
  Found<Heads> h = follow_heads(g, uses, *sc);
  if (!h) return h.failure();
  Found<Picks> p = choose_layouts(g, uses, *sc, *h);
  if (!p) return p.failure();

  Match m;
  m.softmax = softmax;
  m.mm1 = sc->mm1;
  m.mm2 = sc->mm2;
  m.mask = sc->mask;
  m.dtype = h->dtype;
  m.past_k = h->past_k;
  m.past_v = h->past_v;
  m.rank = p->rank;
  m.q_heads = h->H;
  m.kv_heads = h->G == 'g' ? h->Gk / p->repeat : h->H;
  if (m.kv_heads <= 0 || h->H % m.kv_heads) return Miss{"query heads not a multiple of key/value heads"};
  m.q = {h->qs[p->q.step].value, p->q.conv, h->qs[p->q.step].scale, 1};
  m.k = {h->ks[p->k.step].value, p->k.conv, h->ks[p->k.step].scale, p->repeat};
  m.v = {h->vs[p->v.step].value, p->v.conv, 1, p->repeat};
  m.out = h->os[p->o.step].value;
  m.out_conv = p->o.conv;

  Found<std::optional<float>> scale = attention_scale(*sc, *h, m.q, m.k);
  if (!scale) return scale.failure();
  m.scale = *scale;
  Found<MaskForm> mask = mask_form(g, *sc, *h, h->qs[p->q.step]);
  if (!mask) return mask.failure();
  m.causal = mask->causal;
  m.qlen = mask->qlen;
  m.nodes = block_nodes(*sc, *h, *p);
  return m;
}

// ---- apply -----------------------------------------------------------------------------------

// Shape(Concat(cache, fresh) on axis 2) without the Concat: Shape(cache) + S * e2 with the
// reader's own start/end, S the query length read from the op's Q input (`q`, its axis `s_axis`),
// so a mask sized by the present (GPT-2's key_length) does not make the Attention that produces
// the present read its own output.
void reshape_shape_reader(Builder& b, NodeId shape, const Match::Past& p, ValueId q, int64_t s_axis) {
  Edits& e = b.edits();
  const Graph& g = e.g;
  int64_t start = g.attr_int(shape, "start", 0), end = g.attr_int(shape, "end", 4);
  if (start < 0) start += 4;
  if (end < 0) end += 4;
  start = std::clamp<int64_t>(start, 0, 4);
  end = std::clamp<int64_t>(end, start, 4);
  std::vector<int64_t> axis2;
  for (int64_t i = start; i < end; ++i) axis2.push_back(i == 2 ? 1 : 0);
  std::vector<NewAttr> at;
  if (g.attr(shape, "start")) at.push_back(NewAttr::Int("start", g.attr_int(shape, "start", 0)));
  if (g.attr(shape, "end")) at.push_back(NewAttr::Int("end", g.attr_int(shape, "end", 0)));
  const ValueId past = b.named("past_shape", "Shape", {p.cache}, at);
  const ValueId fresh =
      b.named("fresh_shape", "Shape", {q}, {NewAttr::Int("start", s_axis), NewAttr::Int("end", s_axis + 1)});
  const ValueId part = b.named("fresh_len", "Mul", {fresh, b.ints("key_axis", axis2)});
  e.replace_uses(g.output(shape, 0), b.named("present_shape", "Add", {past, part}));
  e.kill(shape);
}

// The attn_mask input: the mask pieces (added biases, Where fills) in one float bias, expanded
// to the query length when the match needs it (m.qlen).
ValueId mask_input(Builder& b, const Match& m) {
  ValueId bias;
  for (const MaskPiece& p : m.mask) {
    if (p.kind == MaskPiece::Add) {
      bias = bias.valid() ? b.named("attn_mask", "Add", {bias, p.m}) : p.m;
      continue;
    }
    const ValueId keep = bias.valid() ? bias : b.scalar("attn_zero", m.dtype, 0);
    bias = p.kind == MaskPiece::WhereKeep ? b.named("attn_mask", "Where", {p.m, keep, p.fill})
                                          : b.named("attn_mask", "Where", {p.m, p.fill, keep});
  }
  if (!m.qlen.needed) return bias;
  ValueId target;
  const std::vector<int64_t> ones_before(static_cast<size_t>(m.qlen.rank - 2), 1);
  if (m.qlen.static_len >= 0) {
    std::vector<int64_t> t = ones_before;
    t.push_back(m.qlen.static_len);
    t.push_back(1);
    target = b.ints("attn_shape", t);
  } else {
    std::vector<NewAttr> at{NewAttr::Int("start", m.qlen.axis)};
    if (m.qlen.axis != -1) at.push_back(NewAttr::Int("end", m.qlen.axis + 1));
    const ValueId len = b.named("attn_query_len", "Shape", {m.qlen.from}, at);
    std::vector<ValueId> parts;
    if (!ones_before.empty()) parts.push_back(b.ints("attn_shape", ones_before));
    parts.push_back(len);
    parts.push_back(b.ints("attn_shape", {1}));
    target = b.named("attn_mask_shape", "Concat", parts, {NewAttr::Int("axis", 0)});
  }
  return b.named("attn_mask_expanded", "Expand", {bias, target});
}

bool apply(Edits& e, const Match& m) {
  if (e.any_touched(std::span<const NodeId>(m.nodes))) return false;
  for (const auto* p : {&m.past_k, &m.past_v})
    if (*p && e.any_touched(std::span<const NodeId>((*p)->shapes))) return false;
  const std::span<const NodeId> tags(m.nodes);
  Builder b(e, tags);
  ValueId q = heads::emit(b, m.q.source, m.q.conv);
  ValueId k = heads::emit(b, m.k.source, m.k.conv);
  ValueId v = heads::emit(b, m.v.source, m.v.conv);
  std::vector<ValueId> inputs{q, k, v};
  if (!m.mask.empty() && !m.causal) inputs.push_back(mask_input(b, m));
  if (m.past_k) {
    if (inputs.size() == 3) inputs.push_back(ValueId{});  // no attn_mask
    inputs.push_back(m.past_k->cache);
    inputs.push_back(m.past_v->cache);
  }
  std::vector<NewAttr> attrs;
  if (m.rank == 3) {
    attrs.push_back(NewAttr::Int("q_num_heads", m.q_heads));
    attrs.push_back(NewAttr::Int("kv_num_heads", m.kv_heads));
  }
  if (m.scale) attrs.push_back(NewAttr::Float("scale", *m.scale));
  if (m.causal) attrs.push_back(NewAttr::Int("is_causal", 1));
  if (!m.past_k)
    return heads::replace_block(b, m.nodes, m.out, "Attention", std::move(inputs), std::move(attrs), m.out_conv,
                                "attention");
  // present_key/present_value take over the Concats' outputs (the graph outputs keep their names).
  const ValueId y = b.value("attention"), pk = b.value("present_key"), pv = b.value("present_value");
  // The presents keep the declared type of the values they replace (graph outputs: [.., total_sequence, ..]).
  for (auto [to, from] : {std::pair{pk, m.past_k->present}, std::pair{pv, m.past_v->present}})
    if (e.g.has_shape(from)) {
      const std::vector<Dim> dims(e.g.shape(from).begin(), e.g.shape(from).end());
      e.g.set_type(to, e.g.dtype(from), dims);
    }
  b.add("Attention", std::move(inputs), {y, pk, pv}, std::move(attrs));
  e.replace_uses(m.out, heads::emit(b, y, m.out_conv));
  for (const auto* p : {&m.past_k, &m.past_v})
    for (NodeId sh : (*p)->shapes) reshape_shape_reader(b, sh, **p, q, m.rank == 3 ? 1 : 2);
  e.replace_uses(m.past_k->present, pk);
  e.replace_uses(m.past_v->present, pv);
  const ValueId replaced[] = {m.out, m.past_k->present, m.past_v->present};
  heads::kill_unused(e, tags, replaced);
  for (const auto* p : {&m.past_k, &m.past_v})  // every reader moved: the present's or the shape's
    if (NodeId c = e.g.producer((*p)->present); !e.killed(c)) e.kill(c);
  return true;
}

}  // namespace

ONNXFORGE_FUSION(fuse_attention, Match, match, apply, .op = "Attention", .min_opset = 23,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Softmax"}, .summary = kSummary);

}  // namespace onnxforge::passes
