#pragma once
// Fusions into standard ONNX ops (LayerNormalization-17, Gelu-20, RMSNormalization-23,
// RotaryEmbedding-23, Attention-23, Swish-24).
//
// A fusion is a pass whose matcher, given one anchor node (the op every block of its kind
// contains once: the mean's ReduceMean of a LayerNorm, the Erf/Tanh of a GELU, the Softmax of an
// attention block), says one of three things:
//   - not a block of this kind (`return {};`): the anchor is an ordinary ReduceMean, Softmax...
//   - a block, fusable: the Match `apply` turns into one standard op;
//   - a block the fusion cannot take, with the first check that failed (Miss{"axes not trailing"}).
// `analyze` keeps the fusable blocks when the model's opset has the op. `census` counts every
// block: fusable here, fusable after `--target-opset`, or missed by reason. The audit and
// optimize's upgrade hint read the census, so the pass and the report share one matcher, and a
// silent miss after an exporter change shows as "found 12, fused 0, missed 12: scale not
// constant" instead of nothing (ONNX Runtime's attention fusion went to zero matches unnoticed
// after an exporter change: onnxruntime#23864).
//
//   struct Match { NodeId mean, ...; };
//   Found<Match> match(const Graph& g, const Uses& u, NodeId reduce, const PassOptions& o) {
//     if (!is_candidate(...)) return {};           // not a LayerNorm
//     MATCH_IF(trailing_axes(...), "axes not trailing");
//     return Match{...};
//   }
//   ONNXFORGE_FUSION(fuse_layer_norm, Match, match, apply, .op = "LayerNormalization", .min_opset = 17,
//                    .accuracy = AccuracyClass::FloatBounded, .anchors = {"ReduceMean"}, .summary = "...");
#include <map>
#include <string>
#include <vector>

#include "ir/match.h"
#include "passes/edits.h"
#include "passes/pass.h"

namespace onnxforge::passes {

// Matchers return onnxforge::Found<M> (ir/match.h): `return {};` (not a block of this kind),
// `MATCH_IF(cond, "why")` / `return Miss{"why"}` (a block, not fusable), or the Match.

// One fusion's count over one graph (and, summed, over a model or a zoo).
struct CensusRow {
  std::string fusion, op;
  int min_opset = 0;
  int64_t found = 0;                      // blocks of this kind
  int64_t fusable_here = 0;               // matched, and the model's opset has the op
  int64_t fusable_after_upgrade = 0;      // matched, but the op needs a higher opset
  std::map<std::string, int64_t> missed;  // first failed check -> blocks
  int64_t missed_total() const {
    int64_t n = 0;
    for (const auto& [_, c] : missed) n += c;
    return n;
  }
  CensusRow& operator+=(const CensusRow& o);
};

struct FusionInfo {
  std::string name;   // pass name, e.g. "fuse_layer_norm"
  std::string op;     // the standard op it emits, e.g. "LayerNormalization"
  int min_opset = 0;  // first default-domain opset that has `op`
  AccuracyClass accuracy = AccuracyClass::FloatBounded;
  std::vector<std::string> anchors;  // op types a block contains exactly once
  std::string summary;
};

// What every fusion offers besides being a Pass.
class Fusion {
 public:
  virtual ~Fusion() = default;
  virtual const FusionInfo& info() const = 0;
  virtual const Pass& as_pass() const = 0;
  // Every block of this kind in `g` (not its subgraphs), classified.
  virtual CensusRow census(const Graph& g, const Uses& uses, const PassOptions& o) const = 0;
};

// The default-domain opset the fusions see: the model's (the upgrade pass, when asked for, has
// raised it before any fusion runs).
int64_t fusion_opset(const Graph& g, const PassOptions& o);

template <class M>
class FusionOf final : public Pass, public Fusion {
 public:
  using MatchFn = Found<M> (*)(const Graph&, const Uses&, NodeId anchor, const PassOptions&);
  using ApplyFn = bool (*)(Edits&, const M&);

  FusionOf(MatchFn match, ApplyFn apply, FusionInfo info)
      : Pass(info.name, info.accuracy, info.summary, info.anchors),
        info_(std::move(info)),
        match_(match),
        apply_(apply) {}

  const FusionInfo& info() const override { return info_; }
  const Pass& as_pass() const override { return *this; }

  std::any analyze(const Graph& g, const Uses& uses, const PassOptions& o) const override {
    std::vector<M> out;
    if (fusion_opset(g, o) >= info_.min_opset)
      each_anchor(g, [&](NodeId n) {
        Found<M> f = match_(g, uses, n, o);
        if (f) out.push_back(std::move(*f));
      });
    return std::any(std::move(out));
  }
  size_t match_count(const std::any& m) const override { return std::any_cast<const std::vector<M>&>(m).size(); }
  size_t apply(Edits& e, const std::any& m) const override {
    size_t n = 0;
    for (const M& match : std::any_cast<const std::vector<M>&>(m)) n += apply_(e, match) ? 1 : 0;
    return n;
  }

  CensusRow census(const Graph& g, const Uses& uses, const PassOptions& o) const override {
    CensusRow row;
    row.fusion = info_.name;
    row.op = info_.op;
    row.min_opset = info_.min_opset;
    const bool here = fusion_opset(g, o) >= info_.min_opset;
    each_anchor(g, [&](NodeId n) {
      Found<M> f = match_(g, uses, n, o);
      if (!f && !f.missed()) return;  // not a block of this kind
      ++row.found;
      if (f.missed())
        ++row.missed[std::string(f.why())];
      else
        ++(here ? row.fusable_here : row.fusable_after_upgrade);
    });
    return row;
  }

 private:
  template <class F>
  void each_anchor(const Graph& g, F&& f) const {
    for (NodeId n : g.nodes())
      for (const std::string& a : info_.anchors)
        if (g.is_op(n, a)) {
          f(n);
          break;
        }
  }

  FusionInfo info_;
  MatchFn match_;
  ApplyFn apply_;
};

// The line that ends a fusion file: defines `const Pass& NAME_pass()` (registry.h; the pass is
// also the Fusion, all_fusions() lists it) over FusionOf<Match>(match, apply, {.name = "NAME",
// then the FusionInfo fields given: .op, .min_opset, .accuracy, .anchors, .summary}), built on first
// use. As ONNXFORGE_PASS (pass.h): grep `ONNXFORGE_FUSION(NAME` to find one.
#define ONNXFORGE_FUSION(NAME, Match, match, apply, ...)                           \
  const Pass& NAME##_pass() {                                                      \
    static const FusionOf<Match> pass{match, apply, {.name = #NAME, __VA_ARGS__}}; \
    return pass;                                                                   \
  }                                                                                \
  static_assert(true, "the definer is written as a statement: ONNXFORGE_FUSION(...);")

// Every fusion into a standard op, in pipeline order.
const std::vector<const Fusion*>& all_fusions();

// The census of every fusion over a whole model (main graph, subgraphs, and function bodies once
// per call that reaches them).
std::vector<CensusRow> fusion_census(const Model& m, const PassOptions& o);

// "25 LayerNorm, 12 GELU and 12 attention blocks can be fused with --target-opset 23", or empty
// when no upgrade would unlock anything.
std::string upgrade_hint(const std::vector<CensusRow>& census);

}  // namespace onnxforge::passes
