#pragma once
// The pass driver: rounds of (analyses of every pass in parallel on one snapshot, in a TBB flow
// graph) → (matches applied serially in pipeline order, stale ones dropped) → one commit, until
// no pass changes anything. Runs in the main graph, in every If/Loop/Scan body and in the body of
// every model-local function the passes can read (driver.cpp: passes_can_read).
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/edits.h"
#include "passes/pass.h"

namespace onnxforge::passes {

struct PassStats {
  std::string name;
  AccuracyClass accuracy = AccuracyClass::Lossless;
  Delta removed;  // nodes, initializers, bytes removed (negative: added)
  double analyze_seconds = 0, apply_seconds = 0;
  int rounds = 0;                 // rounds in which the pass changed something
  int analyzed = 0, skipped = 0;  // rounds in which its analysis ran / was skipped (nothing near its anchors changed)
  uint64_t applied = 0;           // matches applied
  double seconds() const { return analyze_seconds + apply_seconds; }
};

struct RunOptions {
  PassOptions pass;
  int max_rounds = 20;
  bool parallel = true;      // analyses in a flow graph; false runs them one after another
  bool infer_shapes = true;  // refresh inferred shapes (src/analysis/shapes.h) before each round
  bool skip_quiet = true;    // anchored passes that found nothing sit out rounds that changed nothing near them
  std::function<void(const std::string&)> progress;  // called with a short status line
};

struct ModelSize {
  int64_t nodes = 0, initializers = 0, bytes = 0;  // all live graphs
  int64_t constant_bytes = 0;                      // tensors held by Constant nodes (exporters store buffers there)
  int64_t stored_bytes() const { return bytes + constant_bytes; }
};
ModelSize measure(const Model& m);

struct RunResult {
  std::vector<PassStats> passes;  // in the order given
  int rounds = 0;                 // largest number of rounds in one graph
  double seconds = 0;
  ModelSize before, after;
  AccuracyClass worst = AccuracyClass::Lossless;  // worst class among passes that changed something
};

RunResult run_passes(Model& m, std::span<const Pass* const> passes, const RunOptions& options);

// --dim name=N: fixes symbolic dims of the main graph's inputs (and declared values) to N.
void specialise_dims(Model& m, const std::map<std::string, int64_t>& dims);

}  // namespace onnxforge::passes
