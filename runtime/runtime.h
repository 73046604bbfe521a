#pragma once
// onnxforge's reference runtime: public entry points.
//
//   Session s(model);                          // plan: order, kernels, fusions, liveness
//   auto outs = s.run(inputs);                 // inputs in s.input_names() order
//
// The first run with a given set of input shapes records every intermediate's size; later runs
// with the same shapes place all intermediates in one arena by liveness (in place where a
// kernel allows). Weights are read straight from the model's mapping. run() may be called from
// several threads at once (each call has its own arena); the Model must outlive the Session.
//
//   evaluate_node(graph, node, inputs)         // constant folding: one node, no plan
//
// Evaluates node `node` of `graph` on `inputs` (in the node's input order; a TensorView with
// dtype Undefined stands for an absent optional input) and returns its outputs in order (an
// output the node does not name comes back empty). Uses the same kernels as Session. Throws
// onnxforge::Error for an unsupported op (naming op, domain, version and node) or bad inputs.
// If/Loop nodes work when their subgraphs read no outer-scope values.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace onnxforge::rt {

class Plan;

struct SessionOptions {
  bool fuse_activations = true;  // Conv/Gemm/MatMul + Relu/Clip/... as one kernel
  bool arena = true;             // place intermediates in one arena after the first run
  bool profile = false;          // time every kernel (Session::profile)
  bool fold_constants = true;    // evaluate nodes with only constant inputs once, at plan time
  // Keep activations between 2-D convs, pools and elementwise ops channels-last (NHWC);
  // ONNXFORGE_CHANNELS_LAST=0 in the environment turns it off too.
  bool channels_last = true;
  // Pack constant MatMul weights at plan time (a packed copy per weight, reused by every run).
  // Off: each run reads them in place from the model (mapped file) and drops their pages after
  // the step, so a session holds no copy of the weights: for runs that are few and a model whose
  // packed weights would be its own size again (verification of TinyLlama-1.1B: 3 runs per
  // model, 3.9 GiB of packed weights).
  bool pack_weights = true;
};

// Options for runs whose outputs are compared bit for bit against another model's: choices the
// plan makes from the graph's structure that change float rounding are off. Channels-last chains
// depend on every reader of a value (a Reshape reading a conv's output ends the chain) and NHWC
// convs sum in another order than NCHW ones, so removing a dead reader would otherwise change the
// last bits and fail a provably lossless pass.
inline SessionOptions comparison_options() {
  SessionOptions o;
  o.channels_last = false;
  return o;
}

// Profiles cover the steps of If/Loop/Scan bodies too (nested to any depth); a control-flow
// step counts only its own time (body frames, copies, stacking), its bodies' steps theirs.
struct OpProfile {
  std::string op;
  double ms = 0;  // total over all runs so far
  size_t nodes = 0;
};

struct StepProfile {
  std::string node;  // the step's first node ("node 'name' (Conv)", in a body "node 'If_0/then_branch/name' (Conv)");
                     // fused nodes are included in its time
  std::string op;    // as in OpProfile
  double ms = 0;     // total over all runs so far
  std::string path;  // node names from the main graph down: "If_0/then_branch/LSTM_3"
  int depth = 0;     // 0 for the main graph's steps, 1 inside a body, ...
};

class Session {
 public:
  // A model calling local functions (FunctionProto) is planned on a copy with every call
  // expanded (ir/inline_functions.h); `model` itself is not changed and must outlive the session.
  explicit Session(const Model& model, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Graph inputs the caller provides (inputs that are not initializers), and outputs.
  const std::vector<ValueId>& input_values() const;
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  const Model& model() const { return *model_; }

  // `random_seed` seeds the random ops (RandomNormal...) of this run, with each node's own seed:
  // the same seed draws the same numbers in a model and in its optimized copy.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, uint64_t random_seed = 0) const;

  size_t step_count() const;           // kernels per run (after fusion)
  size_t fused_count() const;          // activations fused into their producer
  size_t channels_last_count() const;  // steps planned to write channels-last outputs
  size_t in_place_count() const;       // steps reading their weights in place (SessionOptions::pack_weights off)
  // What the runs so far have set up, over the main graph and every If/Loop/Scan body: frames
  // for bodies (one per body, reused by later calls and iterations) and arena layouts (one per
  // graph and set of input and captured shapes). A steady state adds to neither.
  struct SetupCounts {
    size_t body_frames = 0;
    size_t layouts = 0;
  };
  SetupCounts setup_counts() const;
  std::vector<OpProfile> profile() const;         // per op type, slowest first (needs options.profile)
  std::vector<StepProfile> step_profile() const;  // per kernel step, slowest first (needs options.profile)

 private:
  const Model* model_;
  std::unique_ptr<Model> expanded_;  // the model with its local functions expanded, when it calls any
  std::unique_ptr<Plan> plan_;
};

std::vector<OwnedTensor> evaluate_node(const Graph& graph, NodeId node, std::span<const TensorView> inputs);

// Whether the runtime has a kernel for (domain, op_type); "" and "ai.onnx" are the default domain.
bool has_kernel(std::string_view domain, std::string_view op_type);
// Every supported op ("Op" for the default domain, "domain::Op" otherwise), sorted.
std::vector<std::string> supported_ops();

}  // namespace onnxforge::rt
