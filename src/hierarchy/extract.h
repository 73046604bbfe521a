#pragma once
// Cut one module out of a model as a model of its own.
//
// Selection: main-graph nodes with a tag inside the module — a dotted module path
// (`encoder.layer.0`: that module and its descendants) or a class path starting with '/'
// (`/BertModel/BertEncoder/BertLayer.0`: that tag and tags below it). A fused node with several
// tags is selected when any tag matches. Constant nodes feeding the selection (also through an
// If/Loop/Scan body) come along. Subgraphs of selected nodes are copied whole; the outer-scope
// values they read count as inputs of their owner node, and in the copy they stay captures
// (Graph::add_capture) of the copied outer values, so the in-memory sub-model is complete.
//
// Names: the sub-model's graph is `<source graph name>_<module>` (module with characters other
// than [A-Za-z0-9._-] as '_', leading ones dropped, `root` if nothing is left; just the module
// when the source graph has no name); copied subgraphs keep their names, an unnamed one becomes
// `<owner node name or op>_<attribute>` (ONNX Runtime rejects unnamed subgraphs, onnx.checker
// any unnamed graph).
//
// The sub-model: values read by the selection but produced outside become graph inputs (types
// and shapes from shape inference), constant initializers are shared with the source model
// (zero-copy: same mappings, written verbatim or as external data by save_model), and values
// produced inside but read outside (or graph outputs) become graph outputs. Node names, tags
// and metadata are kept.
//
// `with_cuts_exposed` returns a copy of the source whose graph outputs also list the sub-model's
// inputs and outputs, so a runtime can verify the extraction: feed the sub-model the values the
// original computed and compare its outputs with the original's (max_diff must be exactly 0).
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::hier {

struct Extraction {
  std::unique_ptr<Model> model;
  std::vector<std::string> inputs, outputs;  // value names (shared with the source model)
  size_t nodes = 0;                          // main-graph nodes copied
  size_t initializers = 0;
  uint64_t initializer_bytes = 0;  // bytes shared with the source, not copied
};

// Throws onnxforge::Error (listing close module names) when nothing matches.
Extraction extract_module(Model& source, std::string_view module);

// Source model with extra graph outputs (the cut values). Shares the source's tensors.
std::unique_ptr<Model> with_cuts_exposed(const Model& source, const Extraction& cut);

// Deep copy of `source` sharing its tensor bytes (used by with_cuts_exposed; handy for tests).
std::unique_ptr<Model> clone_model(const Model& source);

}  // namespace onnxforge::hier
