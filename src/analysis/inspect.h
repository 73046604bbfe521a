#pragma once
// A summary of a model for `onnxforge inspect`: counts, bytes, op inventory and which passes
// have work to do. Reads only the tables: weight pages are never touched.
#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace onnxforge {

struct OpCount {
  std::string op;  // "domain::Op" outside the default domain
  uint64_t count = 0;
};

// A graph input (initializers excluded) or output with its declared type and shape.
struct PortSummary {
  std::string name, dtype;         // dtype "?" when undeclared, "(non-tensor type)" for sequences/maps
  std::vector<std::string> shape;  // "128", "batch", "?"
  bool known_rank = false;         // false: no shape declared (shape is empty)
};

struct ModelSummary {
  int64_t ir_version = 0;
  std::vector<std::pair<std::string, int64_t>> opsets;
  std::string producer, producer_version;
  uint64_t file_bytes = 0;
  uint64_t nodes = 0;         // main graph
  uint64_t nodes_total = 0;   // including subgraphs and function bodies
  uint64_t initializers = 0;  // main graph
  uint64_t initializers_total = 0;
  uint64_t sparse_initializers = 0;
  uint64_t initializer_bytes = 0;
  uint64_t inputs = 0, outputs = 0, value_infos = 0;
  uint64_t subgraphs = 0, functions = 0;
  std::vector<std::pair<std::string, uint64_t>> external_files;  // file -> bytes referenced
  std::vector<OpCount> ops;                                      // descending count
  std::vector<std::pair<std::string, std::string>> relevance;    // pass family -> finding
  std::vector<PortSummary> graph_inputs, graph_outputs;          // main graph
  bool topologically_sorted = true;  // the file's node order (ONNX requires it; `optimize` sorts)
  // Declared graph outputs that contradict what the ops compute (add_declaration_warnings).
  std::vector<std::string> warnings;
  nlohmann::json to_json() const;
};

ModelSummary summarize(const Model& model);
// Runs shape inference on `model` (which it may annotate) and adds a warning to `s` for every
// graph output whose declared element type or shape contradicts what its producer computes (an
// output declared int32 [9,9] that computes float [4]).
void add_declaration_warnings(Model& model, ModelSummary& s);
std::string format_summary(const ModelSummary& s, bool color);

}  // namespace onnxforge
