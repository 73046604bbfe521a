// upgrade_opset — the default-domain opset of the whole model raised to a target, one version
// step at a time; at step k every node whose op changed signature or meaning at k is rewritten
// into the form valid at k (helper nodes are written in that form too, so later steps adapt them
// like the model's own). After each step the model's opset says k and shapes are re-inferred,
// so the next step's adapters read the ranks and element types of the new graph.     class 0
//
// The adapters (version: ops):
//   2  Pad (paddings -> pads), Split (split input -> attribute), LpPool/GlobalLpPool (p int)
//   4  Concat (axis became required; it defaulted to 1)
//   5  Reshape (shape attribute -> input)
//   6  every op: consumed_inputs dropped; Cast (`to` name -> type number); Tile-1 refused
//   7  Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less: legacy broadcast/axis -> numpy
//      broadcasting (Unsqueeze B when it was aligned at `axis` instead of at the end);
//      BatchNormalization/Dropout is_test dropped; Gemm broadcast dropped; PRelu's per-channel
//      [C] slope -> [C, 1, ...]; experimental Upsample refused
//   9  BatchNormalization spatial dropped (spatial=0 refused); Upsample scales -> input; Scan-8 refused
//   10 Slice starts/ends/axes -> inputs; TopK k -> input; Upsample -> Resize-10; Dropout's mask
//      became bool (a Cast back to T when it is read)
//   11 Clip min/max -> inputs; Pad pads/value -> inputs; Resize-10 -> 11 (roi input, asymmetric
//      coordinates, floor rounding); Scatter -> ScatterElements; OneHot negative indices (all
//      off before 11, counted from the back after)
//   12 Dropout ratio -> input
//   13 Softmax/LogSoftmax/Hardmax: the <= 12 form flattens to 2-D at `axis` (default 1):
//      Flatten + Softmax(-1) + Reshape back to Shape(x), unless the axis is the last one (or
//      every dim after it is a known 1); Squeeze/Unsqueeze/ReduceSum axes -> input; Split split
//      -> input; Resize tf_half_pixel_for_nn (removed) -> half_pixel with the nearest_mode that
//      picks the same pixels (floor -> round_prefer_ceil, round_prefer_floor -> ceil; the other
//      two refused)
//   14 BatchNormalization: training (more than one output) -> training_mode=1, saved_mean/var
//      dropped (refused when read)
//   16 RoiAlign: coordinate_transformation_mode became half_pixel by default: output_half_pixel
//      kept explicitly
//   18 ReduceL1/L2/LogSum/LogSumExp/Max/Mean/Min/Prod/SumSquare axes -> input; Split without a
//      split input gets num_outputs
//   20 GridSample modes bilinear/bicubic -> linear/cubic; DFT axis -> input
//   21 GroupNormalization: per-group scale/bias -> per-channel (constants expanded, otherwise
//      Shape/Div/Concat/Expand/Reshape)
// Every other version bump between 7 and 24 only widens types or adds attributes whose defaults
// keep the old meaning (Reshape-14 allowzero, Shape-15 start/end, Pad-18 axes, Resize-18/19,
// Cast-19 saturate (float8 only), ...): nothing to do. ONNX's own version converter
// (onnx/version_converter/convert.h) lists the same changes.
#include "passes/upgrade_opset.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "analysis/shapes.h"
#include "ir/error.h"
#include "ir/float16.h"
#include "ir/inline_functions.h"
#include "ir/uses.h"
#include "passes/builder.h"
#include "passes/edits.h"
#include "passes/graph_util.h"

namespace onnxforge::passes {

int64_t min_ir_version(int64_t opset) {
  // onnx/helper.py VERSION_TABLE: the first release shipping each opset and its IR version.
  if (opset <= 8) return 3;
  if (opset == 9) return 4;
  if (opset == 10) return 5;
  if (opset == 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset == 23) return 11;
  if (opset == 24) return 12;
  return 13;
}

namespace {

// ------------------------------------------------------------------ opset imports
// FunctionProto.opset_import (field 9) is kept verbatim (Function::fields): read and written by
// the core (ir/inline_functions.h: function_imports, set_function_import).

// The default-domain import among a function's verbatim fields: index and version.
std::optional<std::pair<size_t, int64_t>> function_opset(const Function& f) {
  for (const FunctionImport& imp : function_imports(f))
    if (imp.domain.empty()) return std::pair{imp.field, imp.version};
  return std::nullopt;
}

void set_model_opset(Model& m, int64_t version) {
  for (OpsetImport& o : m.opsets)
    if (o.domain.empty() || str(o.domain) == "ai.onnx") {
      o.version = version;
      return;
    }
  m.opsets.push_back({Sym{}, version, true});
}

// ------------------------------------------------------------------ adapting one node

// The node an adapter looks at (step `step` of one graph) and the Builder it writes with: helper
// nodes carry the node's tags and values its name; replace() rebuilds it in place.
struct Adapting {
  Graph& g;
  Edits& edits;
  UpgradeReport& rep;
  int64_t step = 0;
  NodeId cur{};
  NodeId replaced{};  // what replace() made of `cur` (the next adapter of the step continues on it)
  std::optional<Builder> b = {};

  // Moves to node `n` (invalid: done), counting the helper nodes written for the previous one.
  void at(NodeId n) {
    if (b) rep.added += b->added();
    b.reset();
    cur = n;
    replaced = NodeId{};
    if (n.valid()) b.emplace(edits, n);
  }
  Model& model() const { return g.model(); }
  std::string where() const {
    return "node '" + std::string(str(g.node_name(cur))) + "' (" + std::string(str(g.op_type(cur))) + ")";
  }
  [[noreturn]] void refuse(const std::string& why) const {
    fail("cannot upgrade ", where(), " to opset ", step, ": ", why);
  }

  std::vector<ValueId> inputs() const { return {g.inputs(cur).begin(), g.inputs(cur).end()}; }
  std::vector<ValueId> outputs() const { return {g.outputs(cur).begin(), g.outputs(cur).end()}; }
  bool has(std::string_view attr) const { return g.attr(cur, attr) != nullptr; }
  // The node's attributes minus `drop`, as NewAttrs.
  std::vector<NewAttr> attrs_except(std::initializer_list<std::string_view> drop) const {
    auto all = copy_attrs(g, cur);
    if (!all) refuse("it has attributes onnxforge cannot re-create (function attribute references or sparse values)");
    std::vector<NewAttr> out;
    for (NewAttr& a : *all)
      if (std::find(drop.begin(), drop.end(), a.name) == drop.end()) out.push_back(std::move(a));
    return out;
  }
  static void set_attr(std::vector<NewAttr>& attrs, NewAttr a) {
    for (NewAttr& x : attrs)
      if (x.name == a.name) {
        x = std::move(a);
        return;
      }
    attrs.push_back(std::move(a));
  }
  // A rank-0 constant of element type `t` (refused, naming the node, for types with no scalar).
  ValueId scalar(std::string_view hint, DType t, double x) {
    if (!Edits::scalar_type(t)) refuse("cannot make a constant of element type " + std::string(dtype_name(t)));
    return b->scalar(hint, t, x);
  }
  ValueId floats(std::string_view hint, const std::vector<float>& v, bool rank0 = false) {
    return b->tensor(hint, DType::Float,
                     rank0 ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())},
                     std::vector<double>(v.begin(), v.end()));
  }
  DType dtype_of(ValueId v, std::string_view what) const {
    DType t = v.valid() && g.has_type(v) ? g.dtype(v) : DType::Undefined;
    if (t == DType::Undefined)
      refuse("the element type of " + std::string(what) + " is unknown (shape inference found none)");
    return t;
  }

  // Replaces the current node by `op` with these inputs/attributes (outputs kept unless given);
  // the name, tags and metadata carry over.
  NodeId replace(std::string_view op, std::vector<ValueId> ins, std::vector<NewAttr> attrs,
                 std::optional<std::vector<ValueId>> outs = std::nullopt) {
    ++rep.adapted;
    ++rep.by_adapter[std::string(str(g.op_type(cur))) + "-" + std::to_string(step)];
    replaced = b->rebuild(op, std::move(ins), std::move(attrs), std::move(outs));
    return replaced;
  }
  // Same op, attribute `attr` (ints) moved to input `index` (absent attribute: no change).
  void ints_attr_to_input(std::string_view attr, size_t index, bool keep_absent = true) {
    if (!has(attr)) {
      if (!keep_absent) refuse(std::string("attribute ") + std::string(attr) + " is missing");
      return;
    }
    auto a = g.attr_ints(cur, attr);
    std::vector<ValueId> ins = inputs();
    if (ins.size() > index && ins[index].valid()) refuse(std::string(attr) + " is given both as attribute and input");
    ins.resize(std::max(ins.size(), index + 1));
    ins[index] = b->ints(attr, {a.begin(), a.end()});
    replace(str(g.op_type(cur)), ins, attrs_except({attr}));
  }
};

using Adapter = void (*)(Adapting&);

// ------------------------------------------------------------------ the adapters

void pad_2(Adapting& e) {
  if (!e.has("paddings")) return;
  auto attrs = e.attrs_except({"paddings"});
  auto p = e.g.attr_ints(e.cur, "paddings");
  attrs.push_back(NewAttr::Ints("pads", {p.begin(), p.end()}));
  e.replace("Pad", e.inputs(), attrs);
}

void split_2(Adapting& e) {
  ValueId s = e.g.input(e.cur, 1);
  if (!s.valid()) return;
  auto v = constant_ints(e.g, s);
  if (!v) e.refuse("its split input is not a constant (Split-2 takes it as an attribute)");
  auto attrs = e.attrs_except({"split"});
  attrs.push_back(NewAttr::Ints("split", *v));
  e.replace("Split", {e.g.input(e.cur, 0)}, attrs);
}

void lp_pool_2(Adapting& e) {
  const Attr* a = e.g.attr(e.cur, "p");
  if (!a || a->type != AttrType::Float) return;
  auto attrs = e.attrs_except({"p"});
  attrs.push_back(NewAttr::Int("p", static_cast<int64_t>(a->f)));
  e.replace(str(e.g.op_type(e.cur)), e.inputs(), attrs);
}

void concat_4(Adapting& e) {
  if (e.has("axis")) return;
  auto attrs = e.attrs_except({});
  attrs.push_back(NewAttr::Int("axis", 1));
  e.replace("Concat", e.inputs(), attrs);
}

void reshape_5(Adapting& e) { e.ints_attr_to_input("shape", 1); }

void consumed_inputs_6(Adapting& e) {
  if (!e.has("consumed_inputs")) return;
  e.replace(str(e.g.op_type(e.cur)), e.inputs(), e.attrs_except({"consumed_inputs"}));
}

void cast_6(Adapting& e) {
  const Attr* a = e.g.attr(e.cur, "to");
  if (!a || a->type != AttrType::String) return;
  static constexpr std::pair<std::string_view, int64_t> names[] = {
      {"FLOAT", 1},   {"UINT8", 2},   {"INT8", 3},    {"UINT16", 4},     {"INT16", 5},
      {"INT32", 6},   {"INT64", 7},   {"STRING", 8},  {"BOOL", 9},       {"FLOAT16", 10},
      {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}, {"COMPLEX64", 14}, {"COMPLEX128", 15}};
  std::string_view to = str(a->s);
  for (auto [name, num] : names)
    if (to == name) {
      auto attrs = e.attrs_except({"to"});
      attrs.push_back(NewAttr::Int("to", num));
      e.replace("Cast", e.inputs(), attrs);
      return;
    }
  e.refuse("unknown Cast target '" + std::string(to) + "'");
}

void tile_6(Adapting& e) {
  if (e.g.inputs(e.cur).size() > 2)
    e.refuse("Tile-1 (tiles and axis inputs) has no Tile-6 form without the input's rank");
}

// Add & co. before 7: `broadcast=1` aligns B at `axis` of A (default: at the end). Numpy
// broadcasting aligns at the end, so a B aligned earlier gets trailing 1-dims (Unsqueeze-1).
void legacy_broadcast_7(Adapting& e) {
  if (!e.has("broadcast") && !e.has("axis")) return;
  std::vector<ValueId> ins = e.inputs();
  if (e.g.attr_int(e.cur, "broadcast", 0) != 0 && e.has("axis") && ins.size() == 2) {
    const int64_t ra = known_rank(e.g, ins[0]), rb = known_rank(e.g, ins[1]);
    int64_t axis = e.g.attr_int(e.cur, "axis", 0);
    if (ra < 0 || rb < 0)
      e.refuse("legacy broadcasting at axis " + std::to_string(axis) + " needs both operands' ranks");
    if (axis < 0) axis += ra;
    const int64_t trailing = ra - axis - rb;
    if (trailing < 0) e.refuse("operand B does not fit at axis " + std::to_string(axis));
    if (trailing > 0) {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < trailing; ++i) axes.push_back(rb + i);
      ins[1] = e.b->node("Unsqueeze", {ins[1]}, {NewAttr::Ints("axes", axes)});
    }
  }
  e.replace(str(e.g.op_type(e.cur)), ins, e.attrs_except({"broadcast", "axis"}));
}

void is_test_7(Adapting& e) {
  if (!e.has("is_test")) return;
  e.replace(str(e.g.op_type(e.cur)), e.inputs(), e.attrs_except({"is_test"}));
}

void gemm_7(Adapting& e) {
  if (!e.has("broadcast")) return;
  e.replace("Gemm", e.inputs(), e.attrs_except({"broadcast"}));
}

// PRelu before 7 took a per-channel slope [C] for x [N, C, ...] (the runtime still reads it so);
// from 7 the slope broadcasts numpy-style, so it becomes [C, 1, ..., 1].
void prelu_7(Adapting& e) {
  ValueId x = e.g.input(e.cur, 0), s = e.g.input(e.cur, 1);
  auto xs = static_shape(e.g, x), ss = static_shape(e.g, s);
  if (!xs || !ss || ss->size() != 1 || xs->size() <= 2 || (*ss)[0] != (*xs)[1] || (*ss)[0] == xs->back()) return;
  std::vector<int64_t> axes;
  for (size_t i = 1; i + 1 < xs->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  ValueId s2 = e.b->node("Unsqueeze", {s}, {NewAttr::Ints("axes", axes)});
  e.replace("PRelu", {x, s2}, e.attrs_except({}));
}

void experimental_upsample_7(Adapting& e) { e.refuse("Upsample before opset 7 is experimental"); }

void batch_norm_9(Adapting& e) {
  if (!e.has("spatial")) return;
  if (e.g.attr_int(e.cur, "spatial", 1) == 0) e.refuse("spatial=0 (per-activation statistics) has no opset-9 form");
  e.replace("BatchNormalization", e.inputs(), e.attrs_except({"spatial"}));
}

void upsample_9(Adapting& e) {
  if (!e.has("scales")) return;
  auto s = e.g.attr_floats(e.cur, "scales");
  std::vector<ValueId> ins = {e.g.input(e.cur, 0), e.floats("scales", {s.begin(), s.end()})};
  e.replace("Upsample", ins, e.attrs_except({"scales"}));
}

void scan_9(Adapting& e) { e.refuse("Scan-8 (batched, with sequence_lens) has no automatic Scan-9 form"); }

void slice_10(Adapting& e) {
  std::vector<ValueId> ins = {e.g.input(e.cur, 0)};
  for (const char* a : {"starts", "ends", "axes"}) {
    if (!e.has(a)) {
      if (std::string_view(a) != "axes") e.refuse(std::string("attribute ") + a + " is missing");
      continue;
    }
    auto v = e.g.attr_ints(e.cur, a);
    ins.push_back(e.b->ints(a, {v.begin(), v.end()}));
  }
  e.replace("Slice", ins, e.attrs_except({"starts", "ends", "axes"}));
}

void topk_10(Adapting& e) {
  if (!e.has("k")) e.refuse("attribute k is missing");
  ValueId k = e.b->ints("k", {e.g.attr_int(e.cur, "k", 0)});
  e.replace("TopK", {e.g.input(e.cur, 0), k}, e.attrs_except({"k"}));
}

void upsample_10(Adapting& e) {
  // Resize-10 is Upsample-9 under a new name (same inputs, mode, asymmetric coordinates).
  e.replace("Resize", e.inputs(), e.attrs_except({}));
}

void dropout_10(Adapting& e) {
  ValueId mask = e.g.output(e.cur, 1);
  if (!mask.valid()) return;
  const DType t = e.dtype_of(e.g.input(e.cur, 0), "the input");
  if (t == DType::Bool) return;
  ValueId b = e.b->value("mask_bool");
  std::vector<ValueId> outs = e.outputs();
  outs[1] = b;
  std::vector<ValueId> ins = e.inputs();
  e.replace("Dropout", ins, e.attrs_except({}), outs);
  e.b->add("Cast", {b}, {mask}, {NewAttr::Int("to", static_cast<int64_t>(t))});
}

void clip_11(Adapting& e) {
  if (!e.has("min") && !e.has("max")) return;
  const DType t = e.dtype_of(e.g.input(e.cur, 0), "the input");
  std::vector<ValueId> ins = {e.g.input(e.cur, 0), ValueId{}, ValueId{}};
  if (e.has("min")) ins[1] = e.scalar("min", t, e.g.attr_float(e.cur, "min", 0));
  if (e.has("max")) ins[2] = e.scalar("max", t, e.g.attr_float(e.cur, "max", 0));
  e.replace("Clip", ins, e.attrs_except({"min", "max"}));
}

void pad_11(Adapting& e) {
  if (!e.has("pads")) return;
  auto p = e.g.attr_ints(e.cur, "pads");
  std::vector<ValueId> ins = {e.g.input(e.cur, 0), e.b->ints("pads", {p.begin(), p.end()})};
  const float value = e.g.attr_float(e.cur, "value", 0.f);
  if (value != 0.f) ins.push_back(e.scalar("value", e.dtype_of(ins[0], "the input"), value));
  e.replace("Pad", ins, e.attrs_except({"pads", "value"}));
}

void resize_11(Adapting& e) {
  // Resize-10: asymmetric coordinates, nearest rounds down (as Upsample).
  std::vector<ValueId> ins = {e.g.input(e.cur, 0), e.floats("roi", {}), e.g.input(e.cur, 1)};
  auto attrs = e.attrs_except({});
  Adapting::set_attr(attrs, NewAttr::String("coordinate_transformation_mode", "asymmetric"));
  if (e.g.attr_string(e.cur, "mode", "nearest") == "nearest")
    Adapting::set_attr(attrs, NewAttr::String("nearest_mode", "floor"));
  e.replace("Resize", ins, attrs);
}

void scatter_11(Adapting& e) { e.replace("ScatterElements", e.inputs(), e.attrs_except({})); }

// OneHot before 11: an index outside [0, depth) is all off_value; from 11 negative indices count
// from the back. Negative indices become a value past any depth.
void one_hot_11(Adapting& e) {
  ValueId ind = e.g.input(e.cur, 0);
  if (auto c = constant_values(e.g, ind); c && std::all_of(c->begin(), c->end(), [](double v) { return v >= 0; }))
    return;
  const DType t = e.dtype_of(ind, "the indices");
  double big = 0;
  switch (t) {
    case DType::Uint8:
    case DType::Uint16:
    case DType::Uint32:
    case DType::Uint64: return;  // never negative
    case DType::Int8: big = std::numeric_limits<int8_t>::max(); break;
    case DType::Int16: big = std::numeric_limits<int16_t>::max(); break;
    case DType::Int32: big = std::numeric_limits<int32_t>::max(); break;
    case DType::Int64: big = 4.0e18; break;
    case DType::Float16: big = 65504; break;
    default: big = 1e18; break;
  }
  ValueId neg = e.b->node("Less", {ind, e.scalar("zero", t, 0)});
  ValueId fixed = e.b->node("Where", {neg, e.scalar("past_depth", t, big), ind});
  std::vector<ValueId> ins = e.inputs();
  ins[0] = fixed;
  e.replace("OneHot", ins, e.attrs_except({}));
}

void dropout_12(Adapting& e) {
  if (!e.has("ratio")) return;
  std::vector<ValueId> ins = {e.g.input(e.cur, 0), e.floats("ratio", {e.g.attr_float(e.cur, "ratio", 0.5f)}, true)};
  e.replace("Dropout", ins, e.attrs_except({"ratio"}));
}

// Softmax/LogSoftmax/Hardmax <= 12: y = reshape(op(flatten(x, axis) over the 2nd dim), shape(x)).
void softmax_13(Adapting& e) {
  const std::string op(str(e.g.op_type(e.cur)));
  ValueId x = e.g.input(e.cur, 0);
  const int64_t axis = e.g.attr_int(e.cur, "axis", 1);
  const int64_t rank = known_rank(e.g, x);
  // One axis is the same computation when nothing follows it: the last axis, or trailing dims
  // all known to be 1.
  bool single = axis == -1 || (rank >= 0 && axis == rank - 1);
  if (!single && rank >= 0 && e.g.has_shape(x) && axis >= -rank && axis < rank) {
    const int64_t a = axis < 0 ? axis + rank : axis;
    auto dims = e.g.shape(x);
    single = std::all_of(dims.begin() + a + 1, dims.end(), [](const Dim& d) { return d.known() && d.value == 1; });
  }
  if (single) {
    auto attrs = e.attrs_except({"axis"});
    attrs.push_back(NewAttr::Int("axis", axis));
    e.replace(op, {x}, attrs);
    return;
  }
  ValueId flat = e.b->node("Flatten", {x}, {NewAttr::Int("axis", axis)});
  ValueId y2 = e.b->value(op);
  ValueId shape = e.b->node("Shape", {x});
  std::vector<ValueId> outs = e.outputs();
  auto attrs = e.attrs_except({"axis"});
  attrs.push_back(NewAttr::Int("axis", -1));
  e.replace(op, {flat}, attrs, std::vector<ValueId>{y2});
  e.b->add("Reshape", {y2, shape}, outs);
}

void axes_13(Adapting& e) { e.ints_attr_to_input("axes", 1); }
void split_13(Adapting& e) { e.ints_attr_to_input("split", 1); }

// tf_half_pixel_for_nn (removed in 13) maps x to t = (x + 0.5) / scale; half_pixel maps it to
// t - 0.5. Rounding t down is rounding t - 0.5 half up (round_prefer_ceil), and rounding t half
// down (round_prefer_floor, the default) is ceil(t - 0.5): those two have an exact
// half_pixel form. The other two roundings of t have none.
void resize_13(Adapting& e) {
  if (e.g.attr_string(e.cur, "coordinate_transformation_mode", "") != "tf_half_pixel_for_nn") return;
  const std::string_view nearest = e.g.attr_string(e.cur, "nearest_mode", "round_prefer_floor");
  if (e.g.attr_string(e.cur, "mode", "nearest") != "nearest" || (nearest != "floor" && nearest != "round_prefer_floor"))
    e.refuse("coordinate_transformation_mode tf_half_pixel_for_nn (removed in Resize-13) with nearest_mode " +
             std::string(nearest) + " has no half_pixel equivalent");
  auto attrs = e.attrs_except({"coordinate_transformation_mode", "nearest_mode"});
  attrs.push_back(NewAttr::String("coordinate_transformation_mode", "half_pixel"));
  attrs.push_back(NewAttr::String("nearest_mode", nearest == "floor" ? "round_prefer_ceil" : "ceil"));
  e.replace("Resize", e.inputs(), attrs);
}

// BatchNormalization before 14: extra outputs meant training mode (running mean/var, then the
// saved batch statistics); 14 says training_mode=1 and has no saved statistics.
void batch_norm_14(Adapting& e) {
  std::vector<ValueId> outs = e.outputs();
  bool training = false;
  for (size_t i = 1; i < outs.size(); ++i) training |= outs[i].valid();
  if (!training) {
    if (outs.size() > 1) e.replace("BatchNormalization", e.inputs(), e.attrs_except({}), std::vector<ValueId>{outs[0]});
    return;
  }
  for (size_t i = 3; i < outs.size(); ++i)
    if (outs[i].valid() && e.edits.uses.used(outs[i]))
      e.refuse("its saved_mean/saved_var outputs are read; BatchNormalization-14 has none");
  outs.resize(std::min<size_t>(outs.size(), 3));
  auto attrs = e.attrs_except({});
  attrs.push_back(NewAttr::Int("training_mode", 1));
  e.replace("BatchNormalization", e.inputs(), attrs, outs);
}

void roi_align_16(Adapting& e) {
  if (e.has("coordinate_transformation_mode")) return;
  auto attrs = e.attrs_except({});
  attrs.push_back(NewAttr::String("coordinate_transformation_mode", "output_half_pixel"));
  e.replace("RoiAlign", e.inputs(), attrs);
}

void split_18(Adapting& e) {
  if (e.g.input(e.cur, 1).valid() || e.has("num_outputs")) return;
  auto attrs = e.attrs_except({});
  attrs.push_back(NewAttr::Int("num_outputs", static_cast<int64_t>(e.g.outputs(e.cur).size())));
  e.replace("Split", e.inputs(), attrs);
}

void grid_sample_20(Adapting& e) {
  std::string_view mode = e.g.attr_string(e.cur, "mode", "");
  if (mode != "bilinear" && mode != "bicubic") return;
  auto attrs = e.attrs_except({"mode"});
  attrs.push_back(NewAttr::String("mode", mode == "bilinear" ? "linear" : "cubic"));
  e.replace("GridSample", e.inputs(), attrs);
}

void dft_20(Adapting& e) {
  // DFT-17's axis attribute (default 1) became input 2 (default -2): always given explicitly.
  std::vector<ValueId> ins = e.inputs();
  ins.resize(std::max<size_t>(ins.size(), 3));
  ins[2] = e.b->ints("axis", {e.g.attr_int(e.cur, "axis", 1)}, true);
  e.replace("DFT", ins, e.attrs_except({"axis"}));
}

// GroupNormalization-18's scale and bias have one value per group; 21's one per channel.
void group_norm_21(Adapting& e) {
  const int64_t G = e.g.attr_int(e.cur, "num_groups", 0);
  if (G <= 0) e.refuse("num_groups is missing");
  ValueId x = e.g.input(e.cur, 0);
  std::optional<int64_t> C;
  if (e.g.has_shape(x) && e.g.rank(x) >= 2 && e.g.shape(x)[1].known()) C = e.g.shape(x)[1].value;
  if (C && *C == G) return;  // one channel per group: the same numbers
  if (C && *C % G) e.refuse(std::to_string(*C) + " channels do not split into " + std::to_string(G) + " groups");
  std::vector<ValueId> ins = e.inputs();
  ValueId group_shape{};  // [G, C/G], built once when needed
  for (size_t k = 1; k <= 2 && k < ins.size(); ++k) {
    const ValueId p = ins[k];
    const TensorId t = constant_tensor(e.g, p);
    if (t.valid() && e.model().tensors.element_count(t) != static_cast<uint64_t>(G)) continue;  // per channel already
    if (t.valid() && C) {
      // Constant: each group's value repeated for its C/G channels.
      const auto bytes = e.model().tensors.bytes(t);
      const size_t es = bytes.size() / static_cast<size_t>(G);
      std::vector<std::byte> out(static_cast<size_t>(*C) * es);
      for (int64_t ch = 0; ch < *C; ++ch)
        std::memcpy(out.data() + static_cast<size_t>(ch) * es, bytes.data() + static_cast<size_t>(ch / (*C / G)) * es,
                    es);
      const int64_t dims[1] = {*C};
      ins[k] = e.b->bytes(k == 1 ? "scale" : "bias", e.model().tensors.dtype(t), dims, out);
      continue;
    }
    // Otherwise: Reshape to [G, 1], Expand to [G, C/G] (C read from Shape(x)), Reshape to [C].
    if (!group_shape.valid()) {
      ValueId c = e.b->node("Shape", {x}, {NewAttr::Int("start", 1), NewAttr::Int("end", 2)});
      ValueId per = e.b->node("Div", {c, e.b->ints("groups", {G})});
      group_shape = e.b->node("Concat", {e.b->ints("groups", {G}), per}, {NewAttr::Int("axis", 0)});
    }
    ValueId col = e.b->node("Reshape", {p, e.b->ints("column", {G, 1})});
    ValueId wide = e.b->node("Expand", {col, group_shape});
    ins[k] = e.b->node("Reshape", {wide, e.b->ints("flat", {-1})});
  }
  e.replace("GroupNormalization", ins, e.attrs_except({}));
}

struct AdapterRow {
  int64_t version;
  std::string_view op;  // "*": every op
  Adapter fn;
};

const std::vector<AdapterRow>& adapters() {
  static const std::vector<AdapterRow> rows = [] {
    std::vector<AdapterRow> r = {
        {2, "Pad", pad_2},
        {2, "Split", split_2},
        {2, "LpPool", lp_pool_2},
        {2, "GlobalLpPool", lp_pool_2},
        {4, "Concat", concat_4},
        {5, "Reshape", reshape_5},
        {6, "*", consumed_inputs_6},
        {6, "Cast", cast_6},
        {6, "Tile", tile_6},
        {7, "BatchNormalization", is_test_7},
        {7, "Dropout", is_test_7},
        {7, "Gemm", gemm_7},
        {7, "PRelu", prelu_7},
        {7, "Upsample", experimental_upsample_7},
        {9, "BatchNormalization", batch_norm_9},
        {9, "Upsample", upsample_9},
        {9, "Scan", scan_9},
        {10, "Slice", slice_10},
        {10, "TopK", topk_10},
        {10, "Upsample", upsample_10},
        {10, "Dropout", dropout_10},
        {11, "Clip", clip_11},
        {11, "Pad", pad_11},
        {11, "Resize", resize_11},
        {11, "Scatter", scatter_11},
        {11, "OneHot", one_hot_11},
        {12, "Dropout", dropout_12},
        {13, "Softmax", softmax_13},
        {13, "LogSoftmax", softmax_13},
        {13, "Hardmax", softmax_13},
        {13, "Squeeze", axes_13},
        {13, "Unsqueeze", axes_13},
        {13, "ReduceSum", axes_13},
        {13, "Split", split_13},
        {13, "Resize", resize_13},
        {14, "BatchNormalization", batch_norm_14},
        {16, "RoiAlign", roi_align_16},
        {18, "Split", split_18},
        {20, "GridSample", grid_sample_20},
        {20, "DFT", dft_20},
        {21, "GroupNormalization", group_norm_21},
    };
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})
      r.push_back({7, op, legacy_broadcast_7});
    for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                           "ReduceMin", "ReduceProd", "ReduceSumSquare"})
      r.push_back({18, op, axes_13});
    return r;
  }();
  return rows;
}

// Step k in one graph; returns whether it changed anything.
bool step_graph(Graph& g, int64_t k, UpgradeReport& rep) {
  std::vector<const AdapterRow*> rows;
  for (const AdapterRow& r : adapters())
    if (r.version == k) rows.push_back(&r);
  if (rows.empty()) return false;
  const Uses uses(g);
  const PassOptions options;
  Edits edits(g, uses, options);
  Adapting e{g, edits, rep, k};
  for (NodeId n : g.nodes()) {
    if (!(g.domain(n).empty() || str(g.domain(n)) == "ai.onnx")) continue;
    for (const AdapterRow* r : rows) {
      if (r->op != "*" && r->op != str(g.op_type(n))) continue;
      e.at(n);
      r->fn(e);
      if (e.replaced.valid()) n = e.replaced;  // later adapters of this step see the new node
    }
  }
  e.at(NodeId{});  // counts the last node's helpers
  if (edits.empty()) return false;
  edits.commit();
  return true;
}

// The default-domain opset a graph starts from: its function's own import, else the model's.
int64_t graph_opset(const Model& m, const Graph& g, int64_t model_from) {
  if (!g.is_function_body()) return model_from;
  for (const Function& f : m.functions)
    if (f.body == g.id()) {
      auto v = function_opset(f);
      return v ? v->second : model_from;
    }
  return model_from;
}

}  // namespace

void check_target_opset(const Model& m, int64_t target) {
  const int64_t from = m.opset("");
  if (target < kMinTargetOpset || target > kMaxRuntimeOpset)  // a bad option, as docs/cli.md says: kind usage
    fail_usage("--target-opset ", target, " is outside what onnxforge can emit and verify: opsets ", kMinTargetOpset,
               " to ", kMaxRuntimeOpset, " (the runtime implements every default-domain op up to opset ",
               kMaxRuntimeOpset, ")");
  if (target < from)
    fail("the model is at opset ", from, "; --target-opset ", target,
         " would downgrade it, which onnxforge never does (use a target of at least ", from, ")");
}

UpgradeReport upgrade_opset(Model& m, int64_t target) {
  check_target_opset(m, target);
  UpgradeReport rep;
  rep.from = m.opset("");
  rep.to = target;
  rep.ir_from = rep.ir_to = m.ir_version;
  std::vector<int64_t> start(m.graph_count());
  for (size_t i = 0; i < m.graph_count(); ++i)
    start[i] = graph_opset(m, m.graph(GraphId(static_cast<uint32_t>(i))), rep.from);
  int64_t lowest = rep.from;
  for (int64_t s : start) lowest = std::min(lowest, s);
  if (lowest < target) {
    infer_shapes(m);
    for (int64_t k = lowest + 1; k <= target; ++k) {
      bool changed = false;
      for (size_t i = 0; i < m.graph_count(); ++i) {
        Graph& g = m.graph(GraphId(static_cast<uint32_t>(i)));
        if (g.detached() || start[i] >= k) continue;
        changed |= step_graph(g, k, rep);
      }
      // The nodes are now in step k's form: say so before inferring shapes for the next step.
      if (k > rep.from) set_model_opset(m, k);
      if (changed) infer_shapes(m);
    }
  }
  set_model_opset(m, target);
  for (size_t i = 0; i < m.graph_count(); ++i)  // the adapters' constants, in bodies that hold no initializers
    if (Graph& g = m.graph(GraphId(static_cast<uint32_t>(i))); g.is_function_body() && !g.detached())
      rep.added += constants_as_nodes(g);
  for (Function& f : m.functions)
    if (auto v = function_opset(f); v && v->second < target) set_function_import(f, "", target);
  rep.ir_to = std::max(m.ir_version, min_ir_version(target));
  m.ir_version = rep.ir_to;
  return rep;
}

std::optional<UpgradeReport> upgrade_step(Model& m, std::optional<int64_t> target, const OpsetCap& cap) {
  if (!target) return std::nullopt;
  check_target_opset(m, *target);
  const int64_t to = std::max(std::min(*target, cap.opset), m.opset(""));
  UpgradeReport r = upgrade_opset(m, to);
  r.requested = *target;
  if (to < *target) r.refused = cap.why;
  return r;
}

nlohmann::json upgrade_json(const UpgradeReport& r) {
  nlohmann::json by = nlohmann::json::object();
  for (auto& [k, n] : r.by_adapter) by[k] = n;
  nlohmann::json j = {{"opset_from", r.from},     {"opset_to", r.to},           {"ir_from", r.ir_from},
                      {"ir_to", r.ir_to},         {"nodes_adapted", r.adapted}, {"nodes_added", r.added},
                      {"adapters", std::move(by)}};
  if (!r.refused.empty()) {
    j["opset_requested"] = r.requested;
    j["refused"] = r.refused;
  }
  return j;
}

std::string upgrade_text(const UpgradeReport& r) {
  return "opset " + std::to_string(r.from) + " -> " + std::to_string(r.to) + ", IR " + std::to_string(r.ir_from) +
         " -> " + std::to_string(r.ir_to) + " (" + std::to_string(r.adapted) + " nodes adapted, " +
         std::to_string(r.added) + " added)";
}

}  // namespace onnxforge::passes
