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
  std::vector<std::string> unknown_dims;  // a message per entry of `dims` no input has (also in notes)
};

// The inputs of `g` listed in `values` (e.g. Session::input_values()).
InputPlan plan_inputs(const Graph& g, const std::vector<ValueId>& values, const std::map<std::string, int64_t>& dims);

// Tensors for one seed (same seed, same plan: same bytes).
std::vector<Tensor> make_inputs(const InputPlan& plan, uint64_t seed);

}  // namespace onnxforge::rt

namespace onnxforge::rt {

// "name=N" strings (command line --dim) to a map; throws naming the bad entry.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& specs);

// The inputs of one run (command line --input NAME=FILE and --dim): generated for `seed` from the
// plan, except those given as files (.npy or TensorProto .pb). A file must hold its input's dtype
// (floats convert to floats, int32 and int64 to each other), rank and static dims; the sizes it
// gives symbolic dims size the generated inputs too. Throws onnxforge::Error naming the input
// and the file on a mismatch, on a --dim that disagrees with a file or that no input has, and on
// an unknown input.
// `plan` receives the plan used (with its notes).
std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
                                   const std::vector<std::string>& files, uint64_t seed, InputPlan& plan);

// An input handed over in memory (the Python module's NumPy arrays): `what` names it in messages.
struct GivenInput {
  std::string name, what;
  Tensor tensor;
};
// prepare_inputs with the given inputs in memory, checked like files.
std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
                                   std::vector<GivenInput> given, uint64_t seed, InputPlan& plan);

}  // namespace onnxforge::rt
