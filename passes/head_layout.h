#pragma once
// Where the heads of an attention block live in a tensor, for fuse_attention and
// fuse_rotary_embedding: the exporters split heads with every combination of Reshape and
// Transpose (BERT: [B,S,768] → [B,S,12,64] → [B,12,S,64]; Whisper: → [B·H,S,64]; ViT's
// seq-first nn.MultiheadAttention: [S,B,E] → [S,B·H,64] → [B·H,S,64]), so the passes do not
// match spellings: they follow the data.
//
// A tensor of a block is a row-major arrangement of named *factors*, grouped into axes:
//   b batch, h query heads, g key/value heads, s query positions, t key positions,
//   d query/key head dim, e value head dim, x merged batch·heads (split into b,h when a shape
//   on the way shows the boundary).
// "BERT's [B,S,768]" is the layout {"b","s","hd"}; "[B,12,S,64]" is {"b","h","s","d"}. Factors of
// static size 1 are left out (an axis of size 1 is ""), because they do not move data.
// Reshape/Squeeze/Unsqueeze/Flatten regroup the factors (checked against the inferred shapes),
// Transpose permutes the axes; walking back from a MatMul operand through them finds every
// earlier value holding the same data, and `plan_conversion` says how many nodes it takes to
// get the layout the standard op wants from any of them (the pass picks the cheapest).
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/symbolic.h"
#include "ir/graph.h"
#include "ir/uses.h"

namespace onnxforge::passes {
class Builder;
class Edits;
}  // namespace onnxforge::passes

namespace onnxforge::passes::heads {

using Layout = std::vector<std::string>;  // axes, outermost first; each axis = its factors

// Sizes of the factors (shared by the walks of one block; 'g' can shrink along a key/value walk
// through a grouped-query repeat, so each Step keeps its own kv-head count).
struct Sizes {
  std::map<char, SymDim> of;
  bool has(char f) const { return of.count(f) != 0; }
  SymDim size(char f) const;
  SymDim axis(const std::string& a) const;
};

std::string flat(const Layout& l);
std::string to_string(const Layout& l);  // "[b][s][hd]"
// Drops the factors of constant size 1 (see above).
Layout squeeze_ones(const Layout& l, const Sizes& s);
// The value's shape as SymDims (rank and every dim known), from the graph table.
std::optional<std::vector<SymDim>> dims_of(const Graph& g, ValueId v);

// `from`'s factors regrouped into axes of `dims` (a Reshape-like op's other side), or nullopt
// when `dims` is not a regrouping. Splits 'x' into b·h the first time a dim needs it (recorded
// in `sizes`; callers rename 'x' in layouts they hold with `split_x`).
std::optional<Layout> regroup(const Layout& from, std::span<const SymDim> dims, Sizes& sizes);
// Replaces 'x' by its split ("bh", or "b"/"h" when one of them has size 1). No-op before a split.
Layout split_x(const Layout& l, const Sizes& sizes);

struct Step {
  ValueId value;
  Layout layout;
  double scale = 1;           // product of the scalar Mul/Div passed between `value` and the start
  int64_t repeat = 1;         // grouped-query repeat passed (key/value heads × repeat = start's heads)
  std::vector<NodeId> nodes;  // walked through from the previous step to reach `value`
};

struct WalkOptions {
  bool scale = false;      // pass Mul/Div by a scalar constant (query and key chains)
  bool kv_repeat = false;  // pass Llama's repeat_kv: Reshape(Expand(Unsqueeze(x, 2))) (key/value chains)
};

// From `v` (layout `start`) back through layout ops; steps[0] is `v` itself. Stops at graph
// inputs, constants, other ops, or values whose shape is unknown. `*unresolved` (optional) is set
// when it stopped at a layout op whose shapes are not known yet (an unknown or fresh `unk__` dim:
// the shape chains of the raw export, which simplify_shape_chains resolves in a later round; a
// fusion then waits instead of keeping the head merge it could not see through).
std::vector<Step> walk_back(const Graph& g, ValueId v, const Layout& start, Sizes& sizes, WalkOptions o,
                            bool* unresolved = nullptr);
// From `v` forward through layout ops while each value has exactly one reader (and is no graph
// output); steps[0] is `v`.
std::vector<Step> walk_forward(const Graph& g, const Uses& uses, ValueId v, const Layout& start, Sizes& sizes,
                               bool* unresolved = nullptr);
// Every dim known and none a fresh symbol of the shape inference (unk__N).
bool resolved(const std::optional<std::vector<SymDim>>& dims);

// Reshape → Transpose → Reshape, each only when needed, turning layout `src` into `dst` (the
// same factors). Reshape targets are constants: a symbolic dim must be the input's dim at the
// same position (written 0) or the only other unknown (written -1); otherwise impossible.
struct Conversion {
  std::optional<std::vector<int64_t>> reshape1;
  std::vector<int64_t> perm;  // empty: no Transpose
  std::optional<std::vector<int64_t>> reshape2;
  int cost() const { return (reshape1 ? 1 : 0) + (perm.empty() ? 0 : 1) + (reshape2 ? 1 : 0); }
};
using SizeOf = std::function<SymDim(char)>;
std::optional<Conversion> plan_conversion(const Layout& src, const Layout& dst, const SizeOf& size);
// Emits the conversion's nodes after `v` (with the block's Builder: its tags); returns the
// converted value (v when cost 0).
ValueId emit(Builder& b, ValueId v, const Conversion& c);

// Kills the nodes of `block` that nothing outside the block reads (`replaced`'s readers were
// redirected already). A member still read elsewhere (a head split shared with another reader)
// stays for it.
void kill_unused(Edits& e, std::span<const NodeId> block, std::span<const ValueId> replaced);

// How a head-layout fusion (attention, rotary) ends: `op`(inputs, attrs) with one new output
// named `hint`, converted back to the block's layout by `out_conv`; the readers of `replaced`
// read the result, and the block's nodes nothing else reads go (kill_unused). `b` writes with
// the block's tags.
bool replace_block(Builder& b, std::span<const NodeId> block, ValueId replaced, std::string_view op,
                   std::vector<ValueId> inputs, std::vector<NewAttr> attrs, const Conversion& out_conv,
                   std::string_view hint);

}  // namespace onnxforge::passes::heads
