#pragma once
// Deterministic model inputs: for a seed, each input gets values from its dtype, shape, name and
// how the graph uses it.
//   - integer inputs read by a Gather/embedding: token ids in [0, rows of the table)
//   - integer inputs compared with constants (Equal/Less/Greater..., also inside If bodies: a
//     sample-rate switch `sr == 16000`): seed s takes the s-th compared value, cycling
//   - integer lengths and counts (a Range limit, an Expand/Tile/ConstantOfShape/Reshape shape
//     operand, compared with a computed tensor as in a sequence mask, or named len/count/num_):
//     values in [1, L], L the longest input dim past axis 0; the full L on seed 0
//   - names with "mask": ones; "position": p..p+n-1 along the last axis, p the tokens before them
//     (a decoder with past: the attention mask's length minus the positions', else the past
//     input's sequence axis; 0 without either); "token_type"/"segment": 0
//   - bool: true; floats: normal(0, 1), except names with "scale": uniform [0.5, 1.5)
// Symbolic dims come from `dims` (by dim name, or by "input:axis"), else default_dim(). Every
// defaulted dim is listed in InputSpec::notes so the user can be told.
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
  enum class Kind { Normal, TokenIds, Ones, Zeros, Positions, True, Length, Choice, Scale } kind = Kind::Normal;
  int64_t id_range = 0;         // TokenIds: values in [0, id_range); Length: in [1, id_range]
  int64_t first = 0;            // Positions: the first position (the past's length)
  std::vector<double> choices;  // Choice: seed s takes choices[s % size]
};

struct InputPlan {
  std::vector<InputSpec> inputs;          // in `values` order
  std::vector<std::string> notes;         // "dim 'sequence' = 128 (default; --dim sequence=N)"
  std::vector<std::string> unknown_dims;  // a message per entry of `dims` no input has (also in notes)
};

// The documented default sequence length (`run --help`): what a symbolic dim gets by default.
inline constexpr int64_t kDefaultSequence = 128;
// The size of a symbolic dim the user did not give: `key` is its name (or "input:axis" when
// unnamed), `axis` its position. Batch-like dims get 1, sequence-like ones (seq, len, token,
// position, time, frame) `sequence`, the others 1 on axis 0 and kDefaultSequence elsewhere.
int64_t default_dim(const std::string& key, size_t axis, int64_t sequence = kDefaultSequence);

// The default sequence length verification runs a model at, from its weight bytes: each token
// costs ~2 FLOPs per weight, so kDefaultSequence up to 1 GiB of weights, then fewer tokens as the
// weights grow (a power of two, at least 16). Phi-1.5 (5.3 GiB) at 128 tokens spent 38 s of a
// 66 s optimize in 6 runs of 360 GFLOP; the sizes still cover every op and the attention's
// masks, and --verify-dim / --dim set any other.
int64_t verification_sequence(uint64_t weight_bytes);

// The inputs of `g` listed in `values` (e.g. Session::input_values()); `sequence` is the default
// of sequence-like dims.
InputPlan plan_inputs(const Graph& g, const std::vector<ValueId>& values, const std::map<std::string, int64_t>& dims,
                      int64_t sequence = kDefaultSequence);

// Tensors for one seed (same seed, same plan: same bytes).
std::vector<Tensor> make_inputs(const InputPlan& plan, uint64_t seed);

}  // namespace onnxforge::rt

namespace onnxforge::rt {

// "name=N" strings (command line --dim) to a map; throws naming the bad entry.
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& specs);

// An input handed over in memory (the Python module's NumPy arrays): `what` names it in messages.
struct GivenInput {
  std::string name, what;
  Tensor tensor;
};

// What the user gives for a model's inputs (command line --inputs / --input-value, the Python
// module's `inputs`, `input_values` and arrays). docs/cli.md "Inputs" describes the forms:
//   NAME=FILE  .npy or TensorProto .pb for input NAME. Given once, it feeds every seed; given k
//              times, the i-th file of each such name goes to input set i.
//   FILE.npz   one input set: the archive's arrays by input name (arr_K: the K-th input).
//   DIR        a backend test-data folder: input_K.pb files are one set (each named by its
//              TensorProto name, else the K-th input), and test_data_set_N folders one set each.
//   values     NAME=V: input NAME filled with V (a number) on every seed.
// Input sets are the first seeds of a run; seeds past them are generated, with the inputs given
// for every seed kept.
struct UserInputs {
  std::vector<std::string> specs;   // NAME=FILE, FILE.npz or DIR
  std::vector<std::string> values;  // NAME=V
  std::vector<GivenInput> arrays;   // in memory, on every seed
  bool empty() const { return specs.empty() && values.empty() && arrays.empty(); }
};

// The inputs of a run's seeds for one model (loaded and checked once): files hold their input's
// dtype (floats convert to floats, int32 and int64 to each other), rank and static dims; sizes
// they give symbolic dims size the generated inputs of their set. Throws onnxforge::Error naming
// the input and the file on a mismatch, on a --dim that disagrees with a file or that no input
// has, on an unknown input and on a malformed file.
class SeedInputs {
 public:
  SeedInputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
             const UserInputs& user, int64_t sequence = kDefaultSequence);
  size_t sets() const { return sets_.size(); }
  // Run `index` (0-based within the run) with generation seed `seed`: input set `index` when
  // there is one, else generated inputs; the inputs given for every seed in both cases.
  std::vector<Tensor> make(size_t index, uint64_t seed) const;
  // The plan of run `index` (the generated seeds' beyond the sets), with its notes.
  const InputPlan& plan(size_t index = SIZE_MAX) const;
  // Notes for the user: defaulted dims and generated kinds (of the inputs no file gives), and
  // how many input sets there are.
  std::vector<std::string> notes() const;

 private:
  struct Set {
    std::map<size_t, Tensor> tensors;
    InputPlan plan;
  };
  std::vector<Set> sets_;
  std::map<size_t, Tensor> fixed_;        // every seed
  std::map<size_t, std::string> values_;  // every seed: NAME=V, filled to the plan's shape
  InputPlan plan_;                        // generated seeds
};

// The inputs of one run (command line --input NAME=FILE and --dim): SeedInputs(...).make(0, seed).
// `plan` receives the plan used (with its notes).
std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values,
                                   std::map<std::string, int64_t> dims, const std::vector<std::string>& files,
                                   uint64_t seed, InputPlan& plan);
// prepare_inputs with the given inputs in memory, checked like files.
std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values,
                                   std::map<std::string, int64_t> dims, std::vector<GivenInput> given, uint64_t seed,
                                   InputPlan& plan);

}  // namespace onnxforge::rt
