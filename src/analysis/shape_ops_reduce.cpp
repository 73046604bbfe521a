// Reductions (axes as attribute or input, keepdims, noop_with_empty_axes), ArgMax/ArgMin, TopK,
// and the recurrent/attention/detection ops whose outputs follow from attributes.
#include <algorithm>

#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

void reduce_to(OpCtx& c, DType t) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, t);
  bool keep = c.attr_int("keepdims", 1) != 0;
  auto axes = c.ints_attr_or_input("axes", 1);
  if (!axes) {  // axes not known: rank kept with keepdims, else unknown
    if (!keep) return c.set_dtype(0, t);
    std::vector<SymDim> out;
    for (const SymDim& d : x.dims) out.push_back(d.is_constant(1) ? d : c.fresh());
    return c.set(0, t, out);
  }
  if (axes->empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return c.set(0, t, x.dims);
  std::vector<uint8_t> reduce(x.rank(), axes->empty());
  for (int64_t a : *axes) {
    auto k = c.axis(a, x.rank());
    if (!k) return;
    reduce[*k] = 1;
  }
  std::vector<SymDim> out;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (!reduce[i])
      out.push_back(x.dims[i]);
    else if (keep)
      out.push_back(SymDim::constant(1));
  }
  c.set(0, t, out);
}

void reduce(OpCtx& c) { reduce_to(c, c.in(0).dtype); }

void arg_reduce(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, DType::Int64);
  auto a = c.axis(c.attr_int("axis", 0), x.rank());
  if (!a) return;
  std::vector<SymDim> out = x.dims;
  if (c.attr_int("keepdims", 1) != 0)
    out[*a] = SymDim::constant(1);
  else
    out.erase(out.begin() + *a);
  c.set(0, DType::Int64, out);
}

void top_k(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) {
    c.set_dtype(0, x.dtype);
    return c.set_dtype(1, DType::Int64);
  }
  auto a = c.axis(c.attr_int("axis", -1), x.rank());
  if (!a) return;
  std::vector<SymDim> out = x.dims;
  if (c.has_attr("k"))
    out[*a] = SymDim::constant(c.attr_int("k", 0));
  else if (const auto* v = c.value(1); v && v->size() == 1)
    out[*a] = v->front();
  else
    out[*a] = c.fresh();
  c.set(0, x.dtype, out);
  c.set(1, DType::Int64, out);
}

// RNN, GRU, LSTM: Y [seq, dirs, batch, hidden] (layout 0) or [batch, seq, dirs, hidden].
void recurrent(OpCtx& c) {
  const VState& x = c.in(0);
  DType t = x.dtype;
  if (!x.ranked || x.rank() != 3) {
    for (size_t i = 0; i < c.num_outputs(); ++i) c.set_dtype(i, t);
    return;
  }
  bool batch_first = c.attr_int("layout", 0) != 0;
  SymDim seq = x.dims[batch_first ? 1 : 0], batch = x.dims[batch_first ? 0 : 1];
  SymDim dirs = SymDim::constant(c.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
  SymDim hidden = SymDim::constant(c.attr_int("hidden_size", 0));
  if (!c.has_attr("hidden_size")) hidden = c.fresh();
  if (batch_first)
    c.set(0, t, {batch, seq, dirs, hidden});
  else
    c.set(0, t, {seq, dirs, batch, hidden});
  for (size_t i = 1; i < c.num_outputs(); ++i) {
    if (batch_first)
      c.set(i, t, {batch, dirs, hidden});
    else
      c.set(i, t, {dirs, batch, hidden});
  }
}

void non_max_suppression(OpCtx& c) { c.set(0, DType::Int64, {c.fresh(), SymDim::constant(3)}); }

// com.microsoft::Attention: input [B, S, hidden], weights [hidden, q+k+v] -> [B, S, v].
void ms_attention(OpCtx& c) {
  const VState &x = c.in(0), &w = c.in(1);
  DType t = x.dtype;
  if (!x.ranked || x.rank() != 3 || !w.ranked || w.rank() != 2) return c.set_dtype(0, t);
  auto sizes = c.attr_ints("qkv_hidden_sizes");
  std::optional<SymDim> v;
  if (sizes.size() == 3)
    v = SymDim::constant(sizes[2]);
  else
    v = exact_div(w.dims[1], SymDim::constant(3));
  c.set(0, t, {x.dims[0], x.dims[1], v ? *v : c.fresh()});
}

// com.microsoft::EmbedLayerNormalization: ids [B, S], word embedding [V, H] -> [B, S, H], mask [B].
void ms_embed_layer_norm(OpCtx& c) {
  const VState &ids = c.in(0), &emb = c.in(2);
  DType t = emb.dtype;
  if (!ids.ranked || ids.rank() != 2 || !emb.ranked || emb.rank() != 2) return c.set_dtype(0, t);
  c.set(0, t, {ids.dims[0], ids.dims[1], emb.dims[1]});
  c.set(1, DType::Int32, {ids.dims[0]});
  if (c.has_output(2)) c.set(2, t, {ids.dims[0], ids.dims[1], emb.dims[1]});
}

// Unique: data-dependent count; with an axis only that dim is unknown.
void unique(OpCtx& c) {
  const VState& x = c.in(0);
  SymDim count = c.fresh();
  SymDim inverse = x.ranked ? product(x.dims) : c.fresh();  // one entry per input element (or slice)
  if (c.has_attr("axis") && x.ranked) {
    auto a = c.axis(c.attr_int("axis", 0), x.rank());
    if (!a) return;
    std::vector<SymDim> dims = x.dims;
    inverse = dims[*a];
    dims[*a] = count;
    c.set(0, x.dtype, dims);
  } else {
    c.set(0, x.dtype, {count});
  }
  c.set(1, DType::Int64, {count});
  c.set(2, DType::Int64, {inverse});
  c.set(3, DType::Int64, {count});
}

// GridSample: [N, C, H_out, W_out] from the grid [N, H_out, W_out, 2].
void grid_sample(OpCtx& c) {
  const VState &x = c.in(0), &grid = c.in(1);
  if (!x.ranked || !grid.ranked || grid.rank() != x.rank() || x.rank() < 3) return c.set_dtype(0, x.dtype);
  std::vector<SymDim> dims{x.dims[0], x.dims[1]};
  dims.insert(dims.end(), grid.dims.begin() + 1, grid.dims.end() - 1);
  c.set(0, x.dtype, dims);
}

// RoiAlign: [num_rois, C, output_height, output_width].
void roi_align(OpCtx& c) {
  const VState &x = c.in(0), &rois = c.in(1);
  SymDim n = rois.ranked && rois.rank() == 2 ? rois.dims[0] : c.fresh();
  SymDim ch = x.ranked && x.rank() == 4 ? x.dims[1] : c.fresh();
  c.set(0, x.dtype,
        {n, ch, SymDim::constant(c.attr_int("output_height", 1)), SymDim::constant(c.attr_int("output_width", 1))});
}

// Det: the batch dims of [..., M, M].
void det(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked || x.rank() < 2) return c.set_dtype(0, x.dtype);
  c.set(0, x.dtype, std::vector<SymDim>(x.dims.begin(), x.dims.end() - 2));
}

// BlackmanWindow / HammingWindow / HannWindow(size): `size` elements of output_datatype
// (float by default).
void window(OpCtx& c) {
  DType t = dtype_of(c.attr_int("output_datatype", 1));
  const auto* v = c.value(0);
  c.set(0, t, {v && v->size() == 1 ? v->front() : c.fresh()});
}

// NegativeLogLikelihoodLoss(input [N, C, d...], target [N, d...]) and
// SoftmaxCrossEntropyLoss(scores, labels): a scalar loss, or the target's shape with reduction
// "none"; SoftmaxCrossEntropyLoss's optional log_prob has the scores' shape.
void loss(OpCtx& c) {
  DType t = c.in(0).dtype;
  const VState& target = c.in(1);
  if (c.attr_string("reduction", "mean") != "none")
    c.set(0, t, {});
  else if (target.ranked)
    c.set(0, t, target.dims);
  else
    c.set_dtype(0, t);
  if (c.has_output(1)) same_as(c, 0, 1);
}

}  // namespace

void register_reduce(const Registrar& reg) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    reg(op, reduce);
  reg("ArgMax", arg_reduce);
  reg("ArgMin", arg_reduce);
  reg("TopK", top_k);
}

void register_misc(const Registrar& reg) {
  for (const char* op : {"BlackmanWindow", "HammingWindow", "HannWindow"}) reg(op, window);
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) reg(op, loss);
  for (const char* op : {"RNN", "GRU", "LSTM"}) reg(op, recurrent);
  reg("NonMaxSuppression", non_max_suppression);
  reg("Unique", unique);
  reg("GridSample", grid_sample);
  reg("RoiAlign", roi_align);
  reg("Det", det);
  reg("com.microsoft::Attention", ms_attention);
  reg("com.microsoft::EmbedLayerNormalization", ms_embed_layer_norm);
}

}  // namespace onnxforge::shape
