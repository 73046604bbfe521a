#pragma once
// Pattern pieces the norm and activation fusions share (fuse_layer_norm, fuse_rms_norm, fuse_gelu,
// fuse_swish): walking from a value to the reader of a given op, constants matched by value within
// the rounding of their type, ReduceMean axes in either opset form, the inverse-RMS tail both norms
// end in, and the scale/bias a norm can absorb. All read-only; matchers never look at names.
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/match.h"
#include "ir/uses.h"
#include "passes/graph_util.h"

namespace onnxforge::passes {
class Edits;
}

namespace onnxforge::passes::pattern {

// Nodes of a matched block: every value they produce except `out` must be read only by block
// nodes and must not be a graph output. Returns the first violation as a Miss reason, or nullptr.
const char* private_values(const Graph& g, const Uses& u, std::span<const NodeId> block, ValueId out);

// `v` is read only by `nodes` (explicitly) and is not a graph output.
bool read_only_by(const Graph& g, const Uses& u, ValueId v, std::span<const NodeId> nodes);

// Orders a matched block for Edits::replace_with: the producer of the result `out` goes last.
void result_last(const Graph& g, std::vector<NodeId>& block, ValueId out);

// ReduceMean's axes in either form (attribute before opset 18, input from 18).
struct ReduceAxes {
  bool known = false;  // constant (or absent: all axes)
  bool all = false;    // no axes given: every axis
  bool noop = false;   // opset 18 noop_with_empty_axes with no axes: the op reduces nothing
  std::vector<int64_t> axes;
  bool keepdims = true;
};
ReduceAxes reduce_axes(const Graph& g, NodeId reduce);
// Normalizes `a` against rank `r` (r < 0: unknown, only negative axes allowed) into sorted negative
// axes; nullopt when the rank is needed but unknown or an axis is out of range.
std::optional<std::vector<int64_t>> negative_axes(const ReduceAxes& a, int64_t r);
// Sorted negative axes are the trailing run -k..-1: returns k, or 0.
int64_t trailing_count(const std::vector<int64_t>& neg);

// The tail both norms end in: v → Add(eps) → Sqrt → Div(num, ·) | Mul(num, Reciprocal(·)) |
// Mul(num, Div(1, ·)). Operands of Add and Mul in either order.
struct InvRms {
  NodeId add{}, sqrt{}, recip{},
      scale{};           // recip: Reciprocal or Div(1, ·) (invalid for Div(num, s)); scale: Div or Mul
  ValueId eps{}, one{};  // the epsilon operand; the 1 of Div(1, ·) when present
  ValueId normalized{};  // the output of `scale`
};
std::optional<InvRms> match_inv_rms(const Graph& g, const Uses& u, ValueId v, ValueId num);

// The scale (and bias) after a normalized value that a LayerNormalization / RMSNormalization can
// take over: a Mul by a constant (or by Add(constant, constant), Gemma's `1 + w`) and an Add of a
// constant, each broadcasting only over the normalized (trailing `norm_dims.size()`) dims of a
// rank-`rank` value of type `t`. Stops at the first reader it cannot take (that one stays).
struct Affine {
  NodeId mul, add;      // absorbed nodes (invalid when absent)
  ValueId scale, bias;  // the constant operands (scale may be the output of `scale_sum`)
  ValueId scale_base;   // Gemma: the tensor w of scale = w + offset
  double scale_offset = 0;
  ValueId out;  // the block's last value
};
Affine absorb_affine(const Graph& g, const Uses& u, ValueId normalized, DType t, int64_t rank,
                     std::span<const int64_t> norm_dims, bool with_bias);

// What a LayerNorm and an RMSNorm match hold: the op they become, the nodes replaced (result
// last), the op's input, its scale (and bias) as taken over, the normalized dims, epsilon, and the
// stash form.
struct NormMatch {      // every member initialized: a matcher starts from {.op = "..."}
  const char* op = "";  // LayerNormalization / RMSNormalization
  std::vector<NodeId> nodes{};
  ValueId x{}, out{};
  Affine affine{};
  std::vector<int64_t> norm_dims{};
  DType type = DType::Undefined;
  float eps = 0;
  bool stash = false;  // float16/bfloat16 X, statistics in float: stash_type=1
};
// The constants of square (squared()) → ReduceMean → InvRms: exponent 2 (Pow), the 1 of Div(1, ·), and a
// one-element constant epsilon that does not broadcast `x`. Epsilon, or the Miss.
Found<float> inv_rms_constants(const Graph& g, const Hop& square, const InvRms& tail, ValueId x);
// The ReduceMeans of a norm reduce the same constant axes, keepdims, and those are the trailing
// ones of `x`: how many (k), or the Miss.
Found<int64_t> trailing_axes(const Graph& g, std::span<const NodeId> reduces, ValueId x);
// The checks both norm matchers make once their chain is found, each failure a Miss: the constants
// (inv_rms_constants), the reduced axes (trailing_axes), no intermediate read outside the block.
// Adds the tail's nodes to `r` and sets its epsilon, X = x and X's type; returns k (the trailing
// axes of x that are normalized).
Found<int64_t> norm_checks(const Graph& g, const Uses& u, NormMatch& r, const Hop& square, const InvRms& tail,
                           std::span<const NodeId> reduces, ValueId x);
// float16/bfloat16 X cast up to float for the statistics (the Cast read only by `readers`) and the
// normalized value `n` cast back to X's type: the op takes X with stash_type=1 and both Casts.
// Returns the block's value after the Cast back, or `n` when the Casts are not such a pair.
ValueId stash_casts(const Graph& g, const Uses& u, NormMatch& r, ValueId n, std::span<const NodeId> readers);
// How a LayerNorm and an RMSNorm matcher end, once the statistics and the stash Casts are taken:
// the type checks (Miss when the op cannot take it), the normalized dims (the trailing `k` of the
// block's input `x`), the scale (and, `with_bias`, the bias) absorbed after the normalized value
// `n`, the result last.
Found<NormMatch> finish_norm(const Graph& g, const Uses& u, NormMatch r, ValueId x, int64_t k, ValueId n,
                             bool with_bias);
// Both norm fusions' apply: `m.op` replacing `m.nodes`, one replace_with.
bool apply_norm(Edits& e, const NormMatch& m);

// What a GELU and a Swish match hold: the nodes replaced (result last), the op's input and the
// attributes the op takes (approximate=tanh, alpha).
struct ActivationMatch {  // every member initialized: a matcher starts from {.op = "..."}
  const char* op = "";    // Gelu / Swish
  std::vector<NodeId> nodes{};
  ValueId x{}, out{};
  std::vector<NewAttr> attrs{};
};
// How both matchers end once the block is found: its values read only inside it, x of a float
// type (float16/bfloat16 too), the result last.
Found<ActivationMatch> finish_activation(const Graph& g, const Uses& u, ActivationMatch r);
// Both activation fusions' apply: `m.op` replacing `m.nodes`, one replace_with.
bool apply_activation(Edits& e, const ActivationMatch& m);

// A constant of type `t` and shape `dims`: `src` (a constant broadcasting to `dims` right-aligned,
// leading 1s beyond `dims` allowed) plus `offset`, or `fill` everywhere when `src` is invalid.
// Reuses `src` itself when nothing changes.
ValueId norm_parameter(Edits& e, std::string_view hint, ValueId src, double offset, double fill, DType t,
                       std::span<const int64_t> dims);

}  // namespace onnxforge::passes::pattern
