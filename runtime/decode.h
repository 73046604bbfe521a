#pragma once
// Verified generation: a decoder with a KV cache (optimum's layout: input_ids [batch, sequence],
// attention_mask [batch, past + sequence], optional position_ids [batch, sequence],
// past_key_values.N.key/value -> logits, present.N.key/value) run as it is deployed — a prefill
// on an empty cache, then one token per step, each model feeding its own present.* back as its
// next past_key_values.* — on the reference and the candidate side by side. Logits are compared
// at every step and the greedy tokens must agree; both models are fed the reference's token, so
// one early disagreement does not make every later step incomparable. A pass that breaks the
// cache path (a wrong present, a mask that ignores the past) fails here even when a single run
// at any shape agrees.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace onnxforge::rt {

struct DecodeOptions {
  int steps = 8;        // decode steps after the prefill
  int64_t prompt = 16;  // prefill length
  uint64_t seed = 0;    // the prompt's tokens
  double atol = 1e-4, rtol = 1e-3;
  std::map<std::string, int64_t> dims;  // other symbolic dims (batch defaults to 1)
};

struct DecodeStep {
  int64_t past = 0, sequence = 0;                // cache length fed, tokens fed
  double max_abs = 0;                            // logits, over the whole step
  bool pass = true;                              // logits within tolerance and the same greedy tokens
  std::vector<int64_t> tokens_ref, tokens_cand;  // greedy tokens of the last position, per batch row
  std::string problem;
};

struct DecodeReport {
  bool pass = true;
  std::vector<DecodeStep> steps;             // the prefill first
  double seconds_ref = 0, seconds_cand = 0;  // summed run times
  size_t layers = 0;                         // cache pairs found
  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Throws onnxforge::Error when the models are not decoders with a cache in that layout (naming
// what is missing) or cannot run.
DecodeReport verify_decode(const Model& reference, const Model& candidate, const DecodeOptions& options);

}  // namespace onnxforge::rt
