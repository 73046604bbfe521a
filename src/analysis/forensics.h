#pragma once
// Forensics and the architecture fingerprint for `onnxforge audit` (seeds Exp 11 and Exp 22).
//
// Forensics count, over every graph of a model, the ten structures the M11 plan names as the
// places where exported transformers waste nodes or time: shape chains, consecutive
// Reshape/Transpose/Cast pairs, no-op Transpose/Reshape/Expand, 3-D MatMul + bias Add,
// attention blocks (with how Q, K and V are projected and where the scale is applied),
// unfolded constant subgraphs, Cast chains, decomposed LayerNorms, Expand feeding a
// broadcasting op. The fingerprint turns the op histogram and a few structural features into
// one of six families. Both read only the graph tables and declared/inferred shapes: no weight
// page is touched, so they are instant on a multi-gigabyte LLM.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

struct Forensics {
  int64_t shape_chains = 0;                    // Shape nodes whose value feeds a shape operand (Reshape/Expand/...)
  int64_t consecutive_reshapes = 0;            // Reshape -> Reshape (first one read only by the second)
  int64_t consecutive_transposes = 0;          // Transpose -> Transpose
  int64_t cast_chains = 0;                     // Cast -> Cast
  int64_t noop_transposes = 0;                 // identity perm
  int64_t noop_reshapes = 0;                   // static shape in == static shape out
  int64_t noop_expands = 0;                    // static shape in == static shape out
  int64_t matmul3d_add = 0;                    // MatMul with a rank >= 3 operand whose only reader adds a constant bias
  int64_t attention_blocks = 0;                // MatMul -> [scale/mask] -> Softmax -> MatMul
  std::map<std::string, int64_t> qkv_pattern;  // "separate" | "fused-split" | "other" -> blocks
  std::map<std::string, int64_t> attention_scale;  // "scores-div" | "scores-mul" | "q-only" | "q-and-k" | "none"
  int64_t constant_subgraph_nodes = 0;             // non-Constant nodes whose inputs are all constants
  int64_t layer_norm_decomposed = 0;               // ReduceMean -> Sub(x, mean) -> ... chains
  int64_t layer_norm_ops = 0;                      // LayerNormalization nodes already present
  int64_t expand_into_broadcast = 0;               // Expand whose only reader is a broadcasting elementwise op
  nlohmann::json to_json() const;
};

// Vision CNN, vision transformer, encoder transformer (BERT-like), decoder LLM, hybrid
// (convolutions and attention both substantial), speech (audio-shaped input), or unknown.
enum class Family { Unknown, VisionCnn, VisionTransformer, EncoderTransformer, DecoderLlm, Hybrid, Speech };
const char* family_name(Family f);

struct Fingerprint {
  // Features (fractions are over compute nodes: everything but Constant/Shape/Gather-of-shape
  // bookkeeping, so exporters' shape arithmetic does not dilute them).
  int64_t compute_nodes = 0;
  double conv_fraction = 0, matmul_fraction = 0, norm_fraction = 0;
  int64_t convs = 0, conv1d = 0, matmuls = 0, softmaxes = 0, attention_like = 0;
  bool token_input = false;  // an integer input of rank 2 (token ids)
  bool image_input = false;  // a float input of rank 4
  bool audio_input = false;  // a float input of rank 2 or 3 read by a 1-D Conv, or recurrent ops
  bool causal_mask = false;  // Trilu / a triangular mask construction (also from Range comparisons)
  bool rotary = false;       // Sin and Cos (rotary tables), or rotate_half (Concat(-x2, x1) of slices)
  bool kv_cache = false;     // a graph input concatenated into attention keys/values, or fused past/present
  bool silu = false;         // x * Sigmoid(x)
  bool recurrent = false;    // LSTM / GRU / RNN
  bool has_layer_norm = false, has_rms_norm = false, has_gelu = false;
  Family family = Family::Unknown;
  std::string reason;  // one line: which features decided the family
  nlohmann::json to_json() const;
};

// Both read declared and inferred types: run infer_shapes(model) first (tables only, cheap).
Forensics forensics(const Model& m);
Fingerprint fingerprint(const Model& m);

}  // namespace onnxforge
