// fuse_pad_into_conv — Pad(x) → Conv becomes Conv(x) with the Pad's spatial pads added to its
// own (tf2onnx writes every TF "SAME" stride-2 conv and MobileNet's explicit ZeroPadding2D this
// way); also into ConvInteger, QLinearConv and AveragePool.                               class 1
//
// Only a constant-mode Pad whose pads are constants, non-negative and zero on the batch and
// channel axes, whose fill value is what the reader pads with itself (0, or the input zero
// point of ConvInteger/QLinearConv), read by nothing else (no other reader, not a graph output,
// not read by a subgraph) as the reader's data input. The reader must use explicit pads
// (auto_pad NOTSET). AveragePool only with count_include_pad=1 and ceil_mode=0: with
// count_include_pad=0 the Pad's zeros are counted and the pool's own pads are not, and with
// ceil_mode=1 a last window starting in the Pad's end padding is kept (it is input) where the
// pool drops one starting in its own padding. The same rules in ONNX Runtime's PadFusion and
// onnxoptimizer's pass are missing some of these: the former fused into MaxPool (which pads
// with -inf) and any AveragePool, the latter ignores auto_pad and the opset-18 axes input.
// The fold is exact arithmetic, but a conv kernel is chosen by its padding (the direct 3x3 pad-1
// kernels, the GEMM path), so the float sums may run in another order: class 1, not 0 (the
// BlazeFace-style zoo model: max_diff 9.5e-7 through onnxforge's runtime).
#include <cmath>

#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"

namespace onnxforge::passes {
namespace {

struct Match {
  NodeId pad, reader;
  std::vector<int64_t> pads;  // the reader's new pads attribute
};

// The Pad's pads over every axis of its input (begin..., end...), when they are constants. The
// runtime's pad_into_conv (runtime/ops/conv.cpp, zero_spatial_pads) reads the same parameters with
// its own code on purpose: verification runs the original through that fusion, so one shared
// reader's mistake would fold the Pad wrongly here and hide from the check.
std::optional<std::vector<int64_t>> pad_amounts(const Graph& g, NodeId pad, int64_t opset) {
  if (opset < 11) {
    auto a = g.attr(pad, "pads") || opset >= 2 ? g.attr_ints(pad, "pads") : g.attr_ints(pad, "paddings");
    return std::vector<int64_t>(a.begin(), a.end());
  }
  auto pads = constant_ints(g, g.input(pad, 1));
  if (!pads) return std::nullopt;
  const ValueId axes_v = g.inputs(pad).size() > 3 ? g.input(pad, 3) : ValueId{};
  if (!axes_v.valid()) return pads;
  auto axes = constant_ints(g, axes_v);
  const int64_t r = known_rank(g, g.input(pad, 0));
  if (!axes || r < 0 || pads->size() != 2 * axes->size()) return std::nullopt;
  std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
  std::vector<uint8_t> seen(static_cast<size_t>(r), 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t a = (*axes)[i];
    if (a < -r || a >= r) return std::nullopt;
    if (a < 0) a += r;
    if (seen[static_cast<size_t>(a)]++) return std::nullopt;
    full[static_cast<size_t>(a)] = (*pads)[i];
    full[static_cast<size_t>(a + r)] = (*pads)[i + axes->size()];
  }
  return full;
}

// The Pad's fill value, when it is a constant: the `value` attribute (< 11) or input 2 (absent: 0).
std::optional<double> pad_value(const Graph& g, NodeId pad, int64_t opset) {
  if (opset < 11) return g.attr_float(pad, "value", 0.f);
  const ValueId v = g.inputs(pad).size() > 2 ? g.input(pad, 2) : ValueId{};
  if (!v.valid()) return 0.0;
  return scalar(g, v);
}

// What the reader pads with: +0, or its input zero point (input 2; absent: 0).
std::optional<double> reader_fill(const Graph& g, NodeId reader) {
  if (!is_one_of(g, reader, {"ConvInteger", "QLinearConv"})) return 0.0;
  const ValueId zp = g.inputs(reader).size() > 2 ? g.input(reader, 2) : ValueId{};
  if (!zp.valid()) return is(g, reader, "ConvInteger") ? std::optional<double>(0.0) : std::nullopt;
  return scalar(g, zp);
}

std::optional<Match> match(const Graph& g, const Uses& uses, NodeId pad, int64_t opset) {
  if (!is(g, pad, "Pad") || g.outputs(pad).size() != 1) return std::nullopt;
  const Use use = single_use(uses, g.output(pad, 0));
  const NodeId reader = use.node;
  if (!is_one_of(g, reader, {"Conv", "ConvInteger", "QLinearConv", "AveragePool"}) || use.slot != 0)
    return std::nullopt;
  if (g.attr_string(pad, "mode", "constant") != "constant") return std::nullopt;
  if (g.attr_string(reader, "auto_pad", "NOTSET") != "NOTSET") return std::nullopt;
  if (is(g, reader, "AveragePool") &&
      (g.attr_int(reader, "count_include_pad", 0) != 1 || g.attr_int(reader, "ceil_mode", 0) != 0))
    return std::nullopt;
  auto value = pad_value(g, pad, opset);
  auto fill = reader_fill(g, reader);
  // A -0 fill would be the one float the reader's own +0 padding does not reproduce.
  if (!value || !fill || *value != *fill || std::signbit(*value)) return std::nullopt;
  auto pads = pad_amounts(g, pad, opset);
  if (!pads || pads->size() % 2 != 0 || pads->size() < 6) return std::nullopt;
  const size_t r = pads->size() / 2, spatial = r - 2;
  if (const int64_t xr = known_rank(g, g.input(pad, 0)); xr >= 0 && static_cast<size_t>(xr) != r) return std::nullopt;
  if ((*pads)[0] != 0 || (*pads)[1] != 0 || (*pads)[r] != 0 || (*pads)[r + 1] != 0) return std::nullopt;
  for (int64_t p : *pads)
    if (p < 0) return std::nullopt;  // a crop is no padding
  auto own = g.attr_ints(reader, "pads");
  if (!own.empty() && own.size() != 2 * spatial) return std::nullopt;
  Match m{pad, reader, std::vector<int64_t>(2 * spatial, 0)};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t b = own.empty() ? 0 : own[i], e = own.empty() ? 0 : own[spatial + i];
    if (__builtin_add_overflow(b, (*pads)[2 + i], &m.pads[i]) ||
        __builtin_add_overflow(e, (*pads)[r + 2 + i], &m.pads[spatial + i]))
      return std::nullopt;
  }
  return m;
}

std::vector<Match> analyze(const Graph& g, const Uses& uses, const PassOptions&) {
  std::vector<Match> out;
  const int64_t opset = g.model().opset("");
  for (NodeId n : g.nodes())
    if (auto m = match(g, uses, n, opset)) out.push_back(std::move(*m));
  return out;
}

bool apply(Edits& e, const Match& m) {
  const Graph& g = e.g;
  if (e.any_touched(m.pad, m.reader)) return false;
  auto attrs = copy_attrs(g, m.reader);
  if (!attrs) return false;
  std::erase_if(*attrs, [](const NewAttr& a) { return a.name == "pads"; });
  attrs->push_back(NewAttr::Ints("pads", m.pads));
  std::vector<ValueId> inputs(g.inputs(m.reader).begin(), g.inputs(m.reader).end());
  inputs[0] = g.input(m.pad, 0);
  return e.replace_with({m.pad, m.reader}, str(g.op_type(m.reader)), std::move(inputs), std::move(*attrs)).valid();
}

}  // namespace

ONNXFORGE_PASS(
    fuse_pad_into_conv, Match, AccuracyClass::FloatBounded, analyze, apply,
    {"Pad", "Conv", "ConvInteger", "QLinearConv", "AveragePool"},
    "a zero Pad of the spatial axes becomes the pads of the Conv/ConvInteger/QLinearConv/AveragePool reading it");

}  // namespace onnxforge::passes
