#pragma once
// What ONNX Runtime 1.30 (CPU) can load, op by op and opset by opset: the table in ort_ops.inc,
// made from ORT itself by tools/peers/ort_op_table.py (one-node models loaded at each opset).
// `optimize --target ort` upgrades no op past it and checks its output against it; with
// `--target generic`, an upgrade that takes an op to a version ORT lacks is said in one line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace onnxforge::passes {

// Whether ORT 1.30 has a CPU kernel for default-domain `op` in a model of default opset `opset`:
// known yes, known no, or no evidence (an op or opset the table does not cover).
enum class OrtKernel { Unknown, Implemented, Missing };
OrtKernel ort_kernel(std::string_view op, int64_t opset);

// The default-domain ops of `m` (every graph) ORT 1.30 has no kernel for when the model's
// default opset is `opset` (the model's own when 0), one line per op: "RandomNormalLike at opset
// 23 (2 nodes, first '/dp/RandomNormalLike')".
std::vector<std::string> ort_missing(const Model& m, int64_t opset = 0);

// The highest opset in [from, to] at which ort_missing(m, opset) is empty; `from` - 1 when none
// (the model cannot be loaded by ORT at any of them).
int64_t ort_highest_loadable_opset(const Model& m, int64_t from, int64_t to);

}  // namespace onnxforge::passes
