#pragma once
// Sizes for a model's symbolic input dims that the model can actually run with.
//
// Defaults chosen dim by dim (batch 1, sequence-like 128) need not fit together: a
// decoder-with-past export — attention_mask [batch, total_sequence] beside
// past_key_values [batch, heads, past_sequence, head_dim] and input_ids [batch, sequence] —
// cannot run unless total_sequence = past_sequence + sequence. Shape inference records the
// equalities the ops need (dim_relations() below); this solver keeps the defaults that satisfy
// them and re-derives a dim where a relation fails — the dim that is the sum of the others
// (total_sequence), so the parts keep their defaults.
// A relation whose dims are all fixed by the user and disagree is an error naming both sides.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/symbolic.h"
#include "ir/graph.h"

namespace onnxforge {

// Two dims an op requires to be equal (or, for a broadcast, one of them 1) that inference could
// not prove equal: `total_sequence` against `past_sequence+sequence` where a decoder's mask meets
// its scores; a MatMul's contraction; Concat's other axes.
struct DimRelation {
  SymDim a, b;
  GraphId graph;
  NodeId node;
  bool broadcast = true;  // a broadcast also holds when either side is 1
};

// Every relation of `m`'s graphs, from a read-only run of shape inference (analysis/shapes.h).
std::vector<DimRelation> dim_relations(const Model& m);

struct DimSolution {
  std::map<std::string, int64_t> values;  // every dim of `start`, some re-derived
  std::vector<std::string>
      notes;  // one per re-derived dim: "dim 'total_sequence' = 256 (= past_sequence+sequence at node 'X')"
};

// `start`: a size for every symbolic input dim (the defaults and the user's); `fixed`: the names
// the user gave (never changed); `where` describes a relation's node for messages. Symbols that
// are no input dim (fresh unk__N of the inference) are derived from the relations when they can
// be, and otherwise ignored. Throws onnxforge::Error (usage) when a relation between fixed dims
// fails or no choice satisfies one.
DimSolution solve_dims(const std::vector<DimRelation>& relations, const std::map<std::string, int64_t>& start,
                       const std::set<std::string>& fixed,
                       const std::function<std::string(const DimRelation&)>& where = {});

}  // namespace onnxforge
