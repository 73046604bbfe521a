#pragma once
// Sizes for a model's symbolic input dims, as the command line (--dim NAME=N, --input-shape
// NAME:d0,d1,...), the Python module (dims={...}) and the engine (app/api) take them. One place
// checks them against the model, so every front end reports the same errors (docs/cli.md): a dim
// no input has, an --input-shape naming no input or contradicting the declared shape, a --dim
// given twice with different sizes. These are usage errors (onnxforge::Error, Kind::Usage).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxforge {

struct DimSpec {
  std::string name;
  int64_t value = 0;
};
// NAME=N with a non-negative integer N (the last '=' separates); nullopt when malformed.
std::optional<DimSpec> parse_dim_spec(const std::string& s);

struct InputShapeSpec {
  std::string name;
  std::vector<int64_t> dims;
};
// NAME:D0,D1,... with non-negative integers (the last ':' separates: input names may contain
// ':'); "NAME:" is a scalar. nullopt when malformed.
std::optional<InputShapeSpec> parse_input_shape_spec(const std::string& s);

// NAME=N strings to a map; a malformed entry or one name with two sizes is a usage error.
std::map<std::string, int64_t> parse_dim_specs(const std::vector<std::string>& specs);

// Sizes of symbolic dims for the runtime's inputs and the passes: `dims`, plus the named dims
// the `input_shapes` give. Applies `input_shapes` to the models' graph inputs (their declared
// shapes become the given static shape) after checking each names an input of the right rank
// whose static dims agree. A dim that no input of any model has is a usage error (the same rule
// as `run`), as is an input shape that contradicts a dim.
std::map<std::string, int64_t> resolve_input_dims(const std::map<std::string, int64_t>& dims,
                                                  const std::vector<std::string>& input_shapes,
                                                  const std::vector<Model*>& models);

}  // namespace onnxforge
