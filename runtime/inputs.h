#pragma once
// Deterministic model inputs: for a seed, each input gets values from its dtype, shape and name.
//   - integer inputs read by a Gather/embedding: token ids in [0, rows of the table)
//   - names with "mask": ones; "position": 0..n-1 along the last axis; "token_type"/"segment": 0
//   - bool: true; floats: normal(0, 1)
// Symbolic dims come from `dims` (by dim name, or by "input:axis"), else defaults: names with
// "batch" -> 1, names with seq/len/token/position/time/frame -> 128, other unnamed -> 1 on
// axis 0 and 128 elsewhere. Every defaulted dim is listed in InputSpec::notes so the user
// can be told.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace onnxforge::rt {

struct InputSpec {
  std::string name;
  ValueId value;
  DType dtype = DType::Float;
  Shape shape;
  enum class Kind { Normal, TokenIds, Ones, Zeros, Positions, True } kind = Kind::Normal;
  int64_t id_range = 0;  // TokenIds: values in [0, id_range)
};

struct InputPlan {
  std::vector<InputSpec> inputs;     // in `values` order
  std::vector<std::string> notes;    // "dim 'sequence' = 128 (default; --dim sequence=N)"
};

// The inputs of `g` listed in `values` (e.g. Session::input_values()).
InputPlan plan_inputs(const Graph& g, const std::vector<ValueId>& values, const std::map<std::string, int64_t>& dims);

// Tensors for one seed (same seed, same plan: same bytes).
std::vector<Tensor> make_inputs(const InputPlan& plan, uint64_t seed);

}  // namespace onnxforge::rt

namespace onnxforge::rt {

// "name=N" strings (command line --dim) to a map; throws naming the bad entry.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& specs);

// Replaces generated inputs with tensors from files ("name=FILE", .npy or TensorProto .pb);
// checks dtype and that the name exists.
void override_inputs(const InputPlan& plan, std::vector<Tensor>& inputs, const std::vector<std::string>& specs);

}  // namespace onnxforge::rt
