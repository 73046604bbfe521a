#pragma once
// `onnxforge audit` as a library call (the CLI, `zoo` and the Python module share it): the M11
// forensics and the fingerprint of the model as exported, and the fusion census of the model as
// `optimize` would see it just before the fusions run.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "analysis/forensics.h"
#include "passes/fusion.h"

namespace onnxforge::passes {

struct AuditResult {
  std::string path;
  int64_t opset = 0, nodes = 0, nodes_simplified = 0;
  Forensics forensics;
  Fingerprint fingerprint;
  std::vector<CensusRow> census;
  double seconds = 0;
  nlohmann::json to_json() const;
};

// Loads `path` (weights memory-mapped), runs the lossless clean-ups that expose fusion patterns
// and folding restricted to small constants (no weight page is read: nodes with a constant input
// above 64 KiB are not folded, weight transposes stay deferred recipes), then counts.
AuditResult audit_model(const std::string& path);

}  // namespace onnxforge::passes
