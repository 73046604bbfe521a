// fuse_rotary_embedding — x·cos + rotate(x)·sin → RotaryEmbedding (opset 23).      class 1
//
//   rotate_half (GPT-NeoX/Llama):  Concat(Neg(x[..., h:]), x[..., :h])          interleaved=0
//   rotate_every_two (GPT-J):      Reshape(Concat(Unsqueeze(Neg(x[..., 1::2])),
//                                                 Unsqueeze(x[..., ::2])))       interleaved=1
//   partial: Concat(rope(x[..., :R]), x[..., R:])                              rotary_embedding_dim=R
// Anchored on the Neg (one per rotation). The op's caches are half-width, so the full-width
// cos/sin must be provably two equal halves (interleaved: equal pairs) before halving:
//  - a constant table, gathered by position ids (older HF Llama, GPT-NeoX) or already the
//    positions 0..S-1 (a static-shape export folded it): every element compared bitwise; the
//    half table becomes a 2-D cache (positions, R/2) + position_ids;
//  - computed in the graph as Cos/Sin(Concat(f, f)) from inv_freq and the positions (HF Llama
//    >= 4.38): the halves are the same values by construction; the op gets Cos(f), Sin(f) as
//    3-D caches (B, S, R/2) without position ids — no constant table, so no maximum position to
//    guess, and the values are the model's own.
// A cache from anything else (a graph input, a table with unequal halves) is a Miss.
// Types: the op takes caches of x's type. A table of that type is halved as stored; a table of
// another float type reaching the Mul through one Cast (an fp32 table in a float16 model, as
// mixed-precision converters keep it, or an fp16 Constant in an fp32 graph) is halved and
// converted once, round to nearest even as the runtime's Cast: Gather/Slice/Unsqueeze only move
// elements, so converting the selected elements equals casting the gathered ones, bit for bit.
// Cos/Sin computed in float32 and Cast to the input's type keep that Cast after the op's Cos/Sin.
// Two Casts on one path (fp32 -> fp16 -> fp32 rounds) are a Miss.
// ONNX Runtime 1.30 wants position_ids as [B, S] and 3-D caches as [B, S, R/2] exactly (no
// broadcast over batch; measured), and so does our kernel: a batch-1 shape gets an Expand to the
// batch of a [B, S] graph input (input_ids), so every layer computes the same nodes.
// The head split before x is followed as data (head_layout.h): when x is Transpose(Reshape(y))
// of a [B, S, H·D] y, the op takes y in its 3-D form (num_heads) and the split is re-created
// after it, where fuse_attention absorbs it.
#include <algorithm>
#include <cstring>

#include "ir/float16.h"
#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/fusion.h"
#include "passes/fusion_patterns.h"
#include "passes/graph_util.h"
#include "passes/head_layout.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

// What --list-passes says of this pass.
constexpr const char* kSummary =
    "x*cos + rotate_half(x)*sin (also interleaved, partial) → RotaryEmbedding-23 with half-width caches proven from "
    "the full-width ones";

using heads::Layout;
using heads::Sizes;
using heads::Step;

enum class Cache { InGraph, Table };

struct BatchSeq {  // how to get [B, S] (int64) for expanding position ids / caches
  bool needed = false;
  std::vector<int64_t> constant;  // non-empty: static
  ValueId input;                  // else a [B, S] graph input: Shape(input)
  bool from_x = false;            // else Shape of the op's own input
};

struct Match {
  NodeId neg;
  std::vector<NodeId> nodes;
  ValueId out;  // the value the op replaces
  ValueId source;
  heads::Conversion in_conv, out_conv;
  int rank = 4;
  int64_t heads = 1, half = 0, rot_dim = 0;
  bool interleaved = false;
  Cache cache = Cache::Table;
  ValueId freqs;                  // InGraph: f, [.., S, R/2]
  bool freqs_cast = false;        // InGraph: Cos/Sin(f) are Cast to `dtype` (f of another type)
  TensorId cos_table, sin_table;  // Table: full-width [P, R]
  int64_t rows = 0, width = 0;    // table dims
  ValueId position_ids;           // Table: ids (invalid: 0..S-1, built as a constant)
  int64_t seq_static = -1;        // Table without ids: S
  bool ids_rank1 = false, ids_cast = false;
  BatchSeq bs;
  int64_t bs_rank4_axis = 2;  // from_x with a 4-D input: the seq axis
  DType dtype = DType::Float;
};

// Slice(x, start, end) along the last axis with step `step`: returns x, start, end.
struct LastSlice {
  ValueId x;
  int64_t start = 0, end = 0;
};
std::optional<LastSlice> last_axis_slice(const Graph& g, NodeId s, int64_t step) {
  auto sp = is(g, s, "Slice") ? slice_params(g, s) : std::nullopt;
  const int64_t rank = sp ? known_rank(g, g.input(s, 0)) : -1;
  if (rank < 1 || !sp->ends || sp->starts.size() != 1 || sp->steps[0] != step) return std::nullopt;
  if ((sp->axes[0] < 0 ? sp->axes[0] + rank : sp->axes[0]) != rank - 1) return std::nullopt;
  return LastSlice{g.input(s, 0), sp->starts[0], (*sp->ends)[0]};
}

bool last_axis_concat(const Graph& g, NodeId c) {
  if (!is(g, c, "Concat") || g.inputs(c).size() != 2) return false;
  const int64_t rank = known_rank(g, g.output(c, 0));
  const int64_t axis = g.attr_int(c, "axis", 0);
  return rank > 0 && (axis == -1 || axis == rank - 1);
}

// The float types a cache is converted between (convert_element).
bool float_type(DType t) { return is_float(t) && t != DType::Double; }

// A Cast between float types (its input's type known).
bool float_cast(const Graph& g, NodeId c) {
  return is(g, c, "Cast") && float_type(dtype_of(g, g.input(c, 0))) &&
         float_type(static_cast<DType>(g.attr_int(c, "to", 0)));
}

// cos/sin with their head-broadcast Unsqueezes (and same-data Reshapes) removed, and float Casts
// (counted in `casts`: they commute with moving elements).
ValueId strip_broadcast(const Graph& g, ValueId v, int& casts) {
  for (NodeId p = g.producer(v); is(g, p, "Unsqueeze") || is(g, p, "Squeeze") || float_cast(g, p); p = g.producer(v)) {
    casts += is(g, p, "Cast") ? 1 : 0;
    v = g.input(p, 0);
  }
  return v;
}

// Full-width table T [P, R] behind `v`: a constant, or Slice(T) starting at row 0, with leading
// 1-dims squeezed, float Casts counted in `casts`. Returns the tensor and its dims.
std::optional<std::pair<TensorId, std::vector<int64_t>>> table_behind(const Graph& g, ValueId v, int& casts) {
  for (int guard = 0; guard < 8; ++guard) {
    if (TensorId t = constant_tensor(g, v); t.valid()) {
      auto d = g.model().tensors.dims(t);
      std::vector<int64_t> dims;
      for (size_t i = 0; i < d.size(); ++i)
        if (i + 2 >= d.size() || d[i] != 1) dims.push_back(d[i]);
      if (dims.size() != 2) return std::nullopt;
      return std::make_pair(t, dims);
    }
    NodeId p = g.producer(v);
    if (is(g, p, "Squeeze") || is(g, p, "Unsqueeze") || float_cast(g, p)) {
      casts += is(g, p, "Cast") ? 1 : 0;
      v = g.input(p, 0);  // only 1-dims move
      continue;
    }
    if (is(g, p, "Slice")) {  // rows 0..n of the table: positions < n read the same rows
      auto sp = slice_params(g, p);
      if (!sp) return std::nullopt;
      for (size_t i = 0; i < sp->starts.size(); ++i)
        if (sp->starts[i] != 0 || sp->steps[i] != 1) return std::nullopt;
      v = g.input(p, 0);
      continue;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// Whether every row of float table t ([P, R]) is two equal halves (interleaved: equal pairs),
// bitwise in its stored type (equal stored elements stay equal through any Cast).
bool halves_equal(const Model& m, TensorId t, int64_t rows, int64_t width, bool interleaved) {
  if (!float_type(m.tensors.dtype(t))) return false;
  const size_t es = static_cast<size_t>(dtype_bits(m.tensors.dtype(t)) / 8);
  const auto bytes = m.tensors.bytes(t);
  if (bytes.size() < static_cast<size_t>(rows * width) * es) return false;
  const int64_t h = width / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < h; ++i) {
      const int64_t a = r * width + (interleaved ? 2 * i : i), b = r * width + (interleaved ? 2 * i + 1 : i + h);
      if (std::memcmp(bytes.data() + static_cast<size_t>(a) * es, bytes.data() + static_cast<size_t>(b) * es, es))
        return false;
    }
  return true;
}

// ---- the matcher -----------------------------------------------------------------------------
// Five steps, each returning what it found or why the block cannot fuse (the census counts the
// reasons), each adding to the Match: the rotation and its Mul/Add, x's layout, the op's input
// form, the cos/sin caches, and the [B, S] shape a cache or the position ids are expanded to.
struct Done {};

// Step 1: rotate(x)·sin + x·cos in either spelling (rotate_half or rotate_every_two), and a
// partial rotation's pass-through tail.
struct Rotation {
  ValueId x;         // the op's input: the rotated part's source, or the whole x of a partial rotation
  ValueId cos, sin;  // full-width, as the Muls read them
  int64_t R = 0;     // the rotated width
};

Found<Rotation> rotation(const Graph& g, const Uses& uses, NodeId neg, Match& m) {
  // rotate(x)
  NodeId x2s = g.producer(g.input(neg, 0));
  NodeId after = single_consumer(g, uses, g.output(neg, 0));
  NodeId cat, x1s, flat, un_neg, un_x1;
  ValueId rotated;
  if (auto s2 = last_axis_slice(g, x2s, 1); s2 && last_axis_concat(g, after) && g.input(after, 0) == g.output(neg, 0)) {
    cat = after;
    x1s = g.producer(g.input(cat, 1));
    rotated = g.output(cat, 0);
  } else if (auto s2i = last_axis_slice(g, x2s, 2); s2i && is(g, after, "Unsqueeze")) {
    m.interleaved = true;
    un_neg = after;
    cat = single_consumer(g, uses, g.output(un_neg, 0));
    if (!is(g, cat, "Concat") || g.inputs(cat).size() != 2 || g.input(cat, 0) != g.output(un_neg, 0)) return {};
    un_x1 = g.producer(g.input(cat, 1));
    if (!is(g, un_x1, "Unsqueeze")) return {};
    x1s = g.producer(g.input(un_x1, 0));
    flat = single_consumer(g, uses, g.output(cat, 0));
    if (!is(g, flat, "Reshape")) return {};
    rotated = g.output(flat, 0);
  } else {
    return {};
  }
  const bool il = m.interleaved;
  auto s1 = last_axis_slice(g, x1s, il ? 2 : 1);
  auto s2 = last_axis_slice(g, x2s, il ? 2 : 1);
  if (!s1 || !s2 || s1->x != s2->x) return {};
  const ValueId xr = s1->x;
  auto xrd = heads::dims_of(g, xr);
  if (!xrd || xrd->empty() || !xrd->back().is_constant()) return Miss{"rotary width not static"};
  const int64_t R = xrd->back().value();
  if (R % 2 || R == 0) return Miss{"rotary width odd"};
  m.half = R / 2;
  if (il) {
    if (s1->start != 0 || s2->start != 1 || s1->end < R || s2->end < R) return {};
    for (NodeId u : {un_neg, un_x1}) {
      auto a = axes_of(g, u);
      const int64_t r = static_cast<int64_t>(xrd->size()) + 1;
      if (!a || a->size() != 1 || ((*a)[0] != -1 && (*a)[0] != r - 1)) return {};
    }
    auto rd = heads::dims_of(g, rotated);
    if (!rd || *rd != *xrd) return {};
  } else {
    if (s1->start != 0 || s1->end != m.half || s2->start != m.half || s2->end < R) return {};
  }
  // · sin, + x · cos
  NodeId mul_sin = single_consumer(g, uses, rotated);
  if (!is(g, mul_sin, "Mul")) return {};
  const ValueId sin = other_input(g, mul_sin, rotated);
  NodeId add = single_consumer(g, uses, g.output(mul_sin, 0));
  if (!is(g, add, "Add")) return {};
  NodeId mul_cos = g.producer(other_input(g, add, g.output(mul_sin, 0)));
  if (!is(g, mul_cos, "Mul") || !uses.single(g.output(mul_cos, 0))) return {};
  if (g.input(mul_cos, 0) != xr && g.input(mul_cos, 1) != xr) return {};
  const ValueId cos = other_input(g, mul_cos, xr);
  m.nodes = {neg, x2s, x1s, cat, mul_sin, mul_cos, add};
  if (il) m.nodes.insert(m.nodes.end(), {un_neg, un_x1, flat});
  for (ValueId v : {g.output(x1s, 0), g.output(x2s, 0), g.output(cat, 0)})
    if (!uses.single(v)) return Miss{"rotation used elsewhere"};
  // Partial rotation: x[..., :R] rotated, x[..., R:] concatenated back.
  ValueId x = xr;
  m.out = g.output(add, 0);
  if (NodeId head = g.producer(xr); auto rs = last_axis_slice(g, head, 1)) {
    NodeId tail_cat = single_consumer(g, uses, g.output(add, 0));
    if (rs->start == 0 && rs->end == R && last_axis_concat(g, tail_cat) && g.input(tail_cat, 0) == g.output(add, 0)) {
      auto ts = last_axis_slice(g, g.producer(g.input(tail_cat, 1)), 1);
      auto xd = heads::dims_of(g, rs->x);
      if (ts && ts->x == rs->x && ts->start == R && xd && xd->back().is_constant() && ts->end >= xd->back().value()) {
        x = rs->x;
        m.rot_dim = R;
        m.out = g.output(tail_cat, 0);
        m.nodes.insert(m.nodes.end(), {head, g.producer(g.input(tail_cat, 1)), tail_cat});
      }
    }
  }
  return Rotation{x, cos, sin, R};
}

// Step 2: x's rank and type, which axis is the sequence (the one cos varies along: cos
// broadcasts over heads), and the heads.
struct XLayout {
  Sizes sizes;
  Layout xl;
};

Found<XLayout> input_layout(const Graph& g, const Rotation& rot, Match& m) {
  const ValueId x = rot.x, cos = rot.cos, sin = rot.sin;
  const int64_t R = rot.R;
  auto xd = heads::dims_of(g, x);
  if (!xd || (xd->size() != 4 && xd->size() != 3)) return Miss{"rotary input rank not 3 or 4"};
  m.dtype = dtype_of(g, x);
  // float16/bfloat16 too: the op rounds x·cos − x₂·sin once where the chain rounds each product and
  // the sum, which verification judges in ulps of that type for such a model (docs/accuracy.md).
  const bool half = m.dtype == DType::Float16 || m.dtype == DType::BFloat16;
  if (m.dtype != DType::Float && !half) return Miss{"rotary input not float32, float16 or bfloat16"};
  if (!xd->back().is_constant()) return Miss{"head size not static"};
  const size_t r = xd->size();

  // Which axis is the sequence: the one cos varies along (cos broadcasts over heads).
  auto cd = heads::dims_of(g, cos), sd = heads::dims_of(g, sin);
  if (!cd || !sd || cd->size() > r || *cd != *sd) return Miss{"cos/sin shapes differ"};
  std::vector<SymDim> c(r - cd->size(), SymDim::constant(1));
  c.insert(c.end(), cd->begin(), cd->end());
  if (!(c[r - 1] == SymDim::constant(R))) return Miss{"cos/sin width differs"};
  if (!c[0].is_constant(1) && !(c[0] == (*xd)[0])) return Miss{"cos/sin batch differs"};
  XLayout lay;
  Sizes& sizes = lay.sizes;
  sizes.of['b'] = (*xd)[0];
  sizes.of['d'] = (*xd)[r - 1];
  Layout& xl = lay.xl;
  if (r == 3) {
    if (!(c[1] == (*xd)[1])) return Miss{"cos/sin not per position"};
    sizes.of['s'] = (*xd)[1];
    sizes.of['h'] = SymDim::constant(1);
    xl = {"b", "s", "d"};
  } else if (c[1].is_constant(1) && c[2] == (*xd)[2]) {
    sizes.of['h'] = (*xd)[1];
    sizes.of['s'] = (*xd)[2];
    xl = {"b", "h", "s", "d"};
  } else if (c[2].is_constant(1) && c[1] == (*xd)[1]) {
    sizes.of['s'] = (*xd)[1];
    sizes.of['h'] = (*xd)[2];
    xl = {"b", "s", "h", "d"};
  } else {
    return Miss{"cos/sin not per position"};
  }
  if (!sizes.size('h').is_constant()) return Miss{"heads not static"};
  m.heads = sizes.size('h').value();
  xl = heads::squeeze_ones(xl, sizes);

  return lay;
}

// Step 3: the op's input — walked back to the head split, 3-D when that costs no more nodes
// than 4-D — and the nodes between it and x.
Found<Done> choose_source(const Graph& g, const Uses& uses, ValueId x, XLayout lay, Match& m) {
  Sizes& sizes = lay.sizes;
  const Layout& xl = lay.xl;
  bool unresolved = false;
  auto steps = heads::walk_back(g, x, xl, sizes, {}, &unresolved);
  if (unresolved) return Miss{"head split shapes not resolved"};
  auto size_fn = [&](char f) { return sizes.size(f); };
  // Nodes between x and each step that die with the block (each value read only by the chain;
  // a Shape reader does not count: the exporters' `x.shape[-1] // 2` chains fold away).
  std::vector<int> dying(steps.size(), 0);
  bool dies = !uses.is_graph_output(x);
  for (const Use& u : uses.of(x))
    if (std::find(m.nodes.begin(), m.nodes.end(), u.node) == m.nodes.end() && !is(g, u.node, "Shape")) dies = false;
  for (size_t i = 1; i < steps.size(); ++i) {
    dying[i] = dying[i - 1] + (dies ? static_cast<int>(steps[i].nodes.size()) : 0);
    dies = dies && uses.single(steps[i].value);
  }
  int best = 1 << 20;
  for (int rank : {4, 3}) {
    const Layout canon = heads::squeeze_ones(rank == 3 ? Layout{"b", "s", "hd"} : Layout{"b", "h", "s", "d"}, sizes);
    auto out = heads::plan_conversion(canon, xl, size_fn);
    if (!out) continue;
    for (size_t i = 0; i < steps.size(); ++i) {
      auto in = heads::plan_conversion(steps[i].layout, canon, size_fn);
      if (!in) continue;
      const int net = in->cost() + out->cost() - dying[i];
      if (net < best || (net == best && rank == 3)) {
        best = net;
        m.rank = rank;
        m.source = steps[i].value;
        m.in_conv = *in;
        m.out_conv = *out;
      }
    }
  }
  if (best >= (1 << 20)) return Miss{"head layout not recognised"};
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i - 1].value == m.source) break;
    for (NodeId n : steps[i].nodes) m.nodes.push_back(n);
  }

  return Done{};
}

// Step 4: the cos/sin caches — computed in the graph from the frequencies, gathered from a
// constant table by position ids, or the table itself — proven to be two equal halves.
Found<Done> caches(const Graph& g, const Rotation& rot, const XLayout& lay, Match& m) {
  const bool il = m.interleaved;
  const int64_t R = rot.R;
  const SymDim B = lay.sizes.size('b'), S = lay.sizes.size('s');
  int cos_casts = 0, sin_casts = 0;
  ValueId c0 = strip_broadcast(g, rot.cos, cos_casts), s0 = strip_broadcast(g, rot.sin, sin_casts);
  NodeId cp = g.producer(c0), sp = g.producer(s0);
  if (is(g, cp, "Cos") && is(g, sp, "Sin") && g.input(cp, 0) == g.input(sp, 0)) {
    NodeId cc = g.producer(g.input(cp, 0));
    if (!last_axis_concat(g, cc) || g.input(cc, 0) != g.input(cc, 1))
      return Miss{il ? "interleaved rotary cache computed in graph" : "rotary cache halves not provably equal"};
    m.cache = Cache::InGraph;
    m.freqs = g.input(cc, 0);
    auto fd = heads::dims_of(g, m.freqs);
    if (!fd || fd->size() < 2 || fd->size() > 3 || !(fd->back() == SymDim::constant(m.half)) ||
        !((*fd)[fd->size() - 2] == S))
      return Miss{"rotary frequencies not [B, S, R/2]"};
    if (cos_casts != sin_casts || cos_casts > 1) return Miss{"rotary cache cast twice"};
    m.freqs_cast = cos_casts == 1 && dtype_of(g, m.freqs) != m.dtype;
    if (!m.freqs_cast && dtype_of(g, m.freqs) != m.dtype) return Miss{"rotary frequencies not of the input's type"};
    m.bs.needed = !(fd->size() == 3 && (*fd)[0] == B);
  } else if (is(g, cp, "Gather") && is(g, sp, "Gather") && g.input(cp, 1) == g.input(sp, 1)) {
    if (g.attr_int(cp, "axis", 0) != 0 || g.attr_int(sp, "axis", 0) != 0) return Miss{"rotary cache not constant"};
    auto ct = table_behind(g, g.input(cp, 0), cos_casts), st = table_behind(g, g.input(sp, 0), sin_casts);
    if (!ct || !st || ct->second != st->second || ct->second[1] != R) return Miss{"rotary cache not constant"};
    m.cos_table = ct->first;
    m.sin_table = st->first;
    m.rows = ct->second[0];
    m.width = R;
    m.position_ids = g.input(cp, 1);
    auto idd = heads::dims_of(g, m.position_ids);
    const DType it = dtype_of(g, m.position_ids);
    if (!idd || idd->empty() || idd->size() > 2 || (it != DType::Int64 && it != DType::Int32))
      return Miss{"position ids not [B, S]"};
    if (!(idd->back() == S)) return Miss{"position ids not [B, S]"};
    m.ids_rank1 = idd->size() == 1;
    m.ids_cast = it != DType::Int64;
    m.bs.needed = !(idd->size() == 2 && (*idd)[0] == B);
  } else if (constant_tensor(g, c0).valid() && constant_tensor(g, s0).valid()) {
    auto ct = table_behind(g, c0, cos_casts), st = table_behind(g, s0, sin_casts);
    if (!ct || !st || ct->second != st->second || ct->second[1] != R || !S.is_constant() || ct->second[0] != S.value())
      return Miss{"rotary cache not constant"};
    m.cos_table = ct->first;
    m.sin_table = st->first;
    m.rows = ct->second[0];
    m.width = R;
    m.seq_static = S.value();
    m.bs.needed = !B.is_constant(1);
  } else {
    return Miss{"rotary cache not constant"};
  }
  if (m.cache == Cache::Table) {
    // half_table converts each table to x's type: exact when it is stored in it, or reaches the
    // Mul through the one Cast that does the same conversion.
    if (cos_casts > 1 || sin_casts > 1) return Miss{"rotary cache cast twice"};
    for (auto [t, casts] : {std::pair{m.cos_table, cos_casts}, std::pair{m.sin_table, sin_casts}}) {
      const DType td = g.model().tensors.dtype(t);
      if (!float_type(td)) return Miss{"rotary cache not float"};
      if (casts == 0 && td != m.dtype) return Miss{"rotary cache not of the input's type"};
    }
    if (!halves_equal(g.model(), m.cos_table, m.rows, m.width, il) ||
        !halves_equal(g.model(), m.sin_table, m.rows, m.width, il))
      return Miss{"rotary cache halves not provably equal"};
  }
  return Done{};
}

// Step 5: where the [B, S] shape comes from when a cache or the ids need expanding: constants,
// a [B, S] graph input (input_ids), or the op's own input.
void batch_seq(const Graph& g, const XLayout& lay, Match& m) {
  const SymDim B = lay.sizes.size('b'), S = lay.sizes.size('s');
  if (m.bs.needed) {
    if (B.is_constant() && S.is_constant()) {
      m.bs.constant = {B.value(), S.value()};
    } else {
      for (ValueId in : g.graph_inputs()) {
        auto d = heads::dims_of(g, in);
        if (d && d->size() == 2 && (*d)[0] == B && (*d)[1] == S && !g.is_initializer(in)) {
          m.bs.input = in;
          break;
        }
      }
      m.bs.from_x = !m.bs.input.valid();
    }
  }
}

Found<Match> match(const Graph& g, const Uses& uses, NodeId neg, const PassOptions&) {
  if (!is(g, neg, "Neg")) return {};
  Match m;
  m.neg = neg;
  Found<Rotation> rot = rotation(g, uses, neg, m);
  if (!rot) return rot.failure();
  Found<XLayout> lay = input_layout(g, *rot, m);
  if (!lay) return lay.failure();
  if (Found<Done> s = choose_source(g, uses, rot->x, *lay, m); !s) return s.failure();
  if (Found<Done> c = caches(g, *rot, *lay, m); !c) return c.failure();
  batch_seq(g, *lay, m);
  return m;
}

// Element i of a float32/float16/bfloat16 buffer, stored as `to` (round to nearest even, as the
// runtime's Cast; the same type copies the bits).
void convert_element(const std::byte* src, DType from, std::byte* dst, DType to) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(dtype_bits(to) / 8));
    return;
  }
  float f = 0;
  uint16_t h = 0;
  if (from == DType::Float)
    std::memcpy(&f, src, 4);
  else {
    std::memcpy(&h, src, 2);
    f = from == DType::Float16 ? half_to_float(h) : bf16_to_float(h);
  }
  if (to == DType::Float) {
    std::memcpy(dst, &f, 4);
  } else {
    h = to == DType::Float16 ? float_to_half(f) : float_to_bf16(f);
    std::memcpy(dst, &h, 2);
  }
}

// The half-width copy of a full-width [P, R] float table, in type `to`.
ValueId half_table(Builder& b, TensorId t, int64_t rows, int64_t width, bool interleaved, DType to,
                   std::string_view hint) {
  const TensorStore& store = b.edits().g.model().tensors;
  const DType from = store.dtype(t);
  const std::byte* p = store.bytes(t).data();
  const size_t fs = static_cast<size_t>(dtype_bits(from) / 8), ts = static_cast<size_t>(dtype_bits(to) / 8);
  const int64_t h = width / 2;
  std::vector<std::byte> out(static_cast<size_t>(rows * h) * ts);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < h; ++i)
      convert_element(p + static_cast<size_t>(r * width + (interleaved ? 2 * i : i)) * fs, from,
                      out.data() + static_cast<size_t>(r * h + i) * ts, to);
  const int64_t dims[2] = {rows, h};
  return b.bytes(hint, to, dims, out);
}

// [B, S] of the rotated input (constant when the match proved it).
ValueId batch_seq(Builder& b, const Match& m, ValueId x) {
  if (!m.bs.constant.empty()) return b.ints("rope_batch_seq", m.bs.constant);
  if (m.bs.input.valid()) return b.named("rope_batch_seq", "Shape", {m.bs.input});
  if (m.rank == 3) return b.named("rope_batch_seq", "Shape", {x}, {NewAttr::Int("start", 0), NewAttr::Int("end", 2)});
  const ValueId batch = b.named("rope_batch", "Shape", {x}, {NewAttr::Int("start", 0), NewAttr::Int("end", 1)});
  const ValueId seq = b.named("rope_seq", "Shape", {x}, {NewAttr::Int("start", 2), NewAttr::Int("end", 3)});
  return b.named("rope_batch_seq", "Concat", {batch, seq}, {NewAttr::Int("axis", 0)});
}

// The cos and sin caches computed in the graph from the frequencies it had (Cos/Sin of them).
void in_graph_caches(Builder& b, const Match& m, ValueId x, std::vector<ValueId>& inputs) {
  ValueId f = m.freqs;
  if (m.bs.needed) {
    const ValueId target = b.named("rope_cache_shape", "Concat", {batch_seq(b, m, x), b.ints("rope_half", {m.half})},
                                   {NewAttr::Int("axis", 0)});
    f = b.named("rope_freqs", "Expand", {f, target});
  }
  ValueId c = b.named("rope_cos", "Cos", {f}), s = b.named("rope_sin", "Sin", {f});
  if (m.freqs_cast)
    for (ValueId* v : {&c, &s})
      *v = b.named("rope_cache", "Cast", {*v}, {NewAttr::Int("to", static_cast<int64_t>(m.dtype))});
  inputs.push_back(c);
  inputs.push_back(s);
}

// Half-width copies of the constant tables and the position ids that index them.
void table_caches(Builder& b, const Match& m, ValueId x, std::vector<ValueId>& inputs) {
  inputs.push_back(half_table(b, m.cos_table, m.rows, m.width, m.interleaved, m.dtype, "rope_cos_cache"));
  inputs.push_back(half_table(b, m.sin_table, m.rows, m.width, m.interleaved, m.dtype, "rope_sin_cache"));
  ValueId ids;
  if (m.position_ids.valid()) {
    ids = m.position_ids;
    if (m.ids_cast)
      ids = b.named("rope_position_ids", "Cast", {ids}, {NewAttr::Int("to", static_cast<int64_t>(DType::Int64))});
    if (m.ids_rank1) ids = b.named("rope_position_ids", "Unsqueeze", {ids, b.ints("rope_axis", {0})});
  } else {
    std::vector<int64_t> pos(static_cast<size_t>(m.seq_static));
    for (int64_t i = 0; i < m.seq_static; ++i) pos[static_cast<size_t>(i)] = i;
    const int64_t dims[2] = {1, m.seq_static};
    ids = b.bytes("rope_position_ids", DType::Int64, dims, to_bytes(pos));
  }
  if (m.bs.needed) ids = b.named("rope_position_ids", "Expand", {ids, batch_seq(b, m, x)});
  inputs.push_back(ids);
}

bool apply(Edits& e, const Match& m) {
  if (e.any_touched(std::span<const NodeId>(m.nodes))) return false;
  Builder b(e, m.nodes);
  const ValueId x = heads::emit(b, m.source, m.in_conv);
  std::vector<ValueId> inputs{x};
  if (m.cache == Cache::InGraph)
    in_graph_caches(b, m, x, inputs);
  else
    table_caches(b, m, x, inputs);
  std::vector<NewAttr> attrs;
  if (m.interleaved) attrs.push_back(NewAttr::Int("interleaved", 1));
  if (m.rot_dim) attrs.push_back(NewAttr::Int("rotary_embedding_dim", m.rot_dim));
  if (m.rank == 3) attrs.push_back(NewAttr::Int("num_heads", m.heads));
  return heads::replace_block(b, m.nodes, m.out, "RotaryEmbedding", std::move(inputs), std::move(attrs), m.out_conv,
                              "rotary");
}

}  // namespace

ONNXFORGE_FUSION(fuse_rotary_embedding, Match, match, apply, .op = "RotaryEmbedding", .min_opset = 23,
                 .accuracy = AccuracyClass::FloatBounded, .anchors = {"Neg"}, .summary = kSummary);

}  // namespace onnxforge::passes
