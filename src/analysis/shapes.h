#pragma once
// Shape inference with symbolic dimensions.
//
// infer_shapes() walks every graph of a model (main graph, If/Loop/Scan bodies with their
// captures, local function bodies) in topological order and writes the element type and shape
// of every value it can infer into the graph tables (Graph::set_type). Dims are constants or
// canonical expressions of named symbols (see symbolic.h), written as dim_param text, so the
// model stays valid ONNX. A dim nothing can name gets a fresh symbol (unk__N) so equalities
// still propagate (MatMul K dims, broadcasting equal symbols, Concat of equal halves...).
//
// Small 1-D/0-D integer tensors (Shape outputs and what is computed from them) also get a
// symbolic *value*: Shape(x) = [batch, seq, 768], Gather(Shape(x), 1) = seq. Reshape, Expand,
// ConstantOfShape, Tile, Slice, Range, Pad, Resize... read their shape operands from it; passes
// (simplify_shape_chains) read it through ShapeReport::value().
//
// For passes:
//   ShapeReport rep = infer_shapes(model);                 // ~1 ms on BERT-base
//   auto x = ShapeReport::shape(g, g.input(reshape, 0));    // [batch, seq, 768] as SymDims
//   auto* t = rep.value(g.id(), g.input(reshape, 1));       // target [batch, seq, 12, 64]
//   if (t && (*t)[0] == (*x)[0]) ...                        // equal dims compare equal
// ValueIds (and so the report) are only valid until Rewrite::commit() compacts the tables;
// re-run infer_shapes after a commit (it is cheap and idempotent). infer_shapes writes the
// graph tables, so it must not run concurrently with readers of the same model; SymDim
// arithmetic itself is thread-safe.
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/symbolic.h"
#include "ir/graph.h"

namespace onnxforge {

struct ShapeOptions {
  // Specialisation (`--dim batch=1`): these named symbols become constants everywhere,
  // including the declared graph input/output shapes.
  std::unordered_map<std::string, int64_t> dims;
  // Add a value_info entry for each inferred intermediate value (graph inputs, outputs and
  // initializers never get one).
  bool add_value_info = false;
  // Throw onnxforge::Error on the first conflict instead of recording it.
  bool strict = false;
  // Track symbolic values of integer tensors up to this many elements.
  size_t max_value_elements = 64;
};

struct ShapeIssue {
  GraphId graph;
  NodeId node;    // invalid for graph-interface declarations
  ValueId value;  // invalid when the issue is about the node as a whole
  std::string message;
};

struct ShapeReport {
  // Declared shapes that contradict what the ops compute (different rank, different constant
  // dim, incompatible broadcast). The declared type is kept (it is what the file says and what
  // other tools read); the inferred one is in the message.
  std::vector<ShapeIssue> conflicts;
  // Nodes of ops this inference does not know (domain::Op -> count): their outputs keep
  // whatever type was declared, otherwise stay unknown.
  std::unordered_map<std::string, int> unknown_ops;
  // Counts over every non-initializer value of every graph, after inference.
  size_t values = 0;         // values considered
  size_t typed = 0;          // element type known
  size_t ranked = 0;         // rank known
  size_t resolved = 0;       // rank known and no fresh (unk__) symbol in any dim
  size_t static_shape = 0;   // every dim a constant
  size_t fresh_symbols = 0;  // unk__N symbols created
  // ShapeOptions::dims names that occur in no dim of the model (a typo in `--dim`?).
  std::vector<std::string> unmatched_dims;
  double millis = 0;

  // Symbolic value of a small integer tensor (elements in row-major order); nullptr when not
  // tracked. Constant initializers and Constant nodes of up to max_value_elements count too.
  const std::vector<SymDim>* value(GraphId g, ValueId v) const;
  // Shape of a value as SymDims (from the graph table); nullopt when the rank is unknown.
  static std::optional<std::vector<SymDim>> shape(const Graph& g, ValueId v);

  std::string summary() const;

  // graph index -> value index -> symbolic value
  std::vector<std::unordered_map<uint32_t, std::vector<SymDim>>> values_by_graph;
};

ShapeReport infer_shapes(Model& m, const ShapeOptions& options = {});

// Whether shape inference has a function for (domain, op_type); "" and "ai.onnx" are the same.
bool has_shape_function(std::string_view domain, std::string_view op_type);

}  // namespace onnxforge
