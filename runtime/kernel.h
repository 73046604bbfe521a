#pragma once
// The kernel interface. A kernel is a plain function over an OpContext: it reads its inputs
// (already float32 when the node's float inputs are stored as float16/bfloat16 and the kernel
// asked for conversion), reads attributes from the graph, asks the context for outputs of a
// dtype and shape, and fills them. See runtime/README.md for how to add an op.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"
#include "simd/unary.h"

namespace onnxforge::rt {

// Where a kernel's outputs go (implemented by the executor and by evaluate_node).
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual Tensor& alloc(size_t i, DType dtype, Shape shape) = 0;
  virtual void alias(size_t i, size_t input, Shape shape) = 0;
  virtual void set(size_t i, Tensor t) = 0;
  virtual std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs) = 0;
};

class OpContext {
 public:
  const Graph& graph;
  NodeId node;
  int64_t opset;  // the opset of the node's domain in the model

  // Input i, or nullptr when absent (optional input left empty or past the end).
  const Tensor* in(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  const Tensor& input(size_t i) const;  // throws naming the node when absent
  size_t input_count() const { return inputs_.size(); }
  size_t output_count() const { return n_outputs_; }
  bool has_output(size_t i) const;  // an output the graph names (not "" or past the end)

  // Allocates output i (arena slot when the plan has one, else heap) and returns it.
  Tensor& output(size_t i, DType dtype, Shape shape) { return sink_->alloc(i, dtype, std::move(shape)); }
  // Output i shares input `input`'s bytes with a new shape (Reshape, Identity, Squeeze...).
  void output_alias(size_t i, size_t input, Shape shape) { sink_->alias(i, input, std::move(shape)); }
  // Sets output i to an existing tensor (e.g. one produced by a subgraph).
  void set_output(size_t i, Tensor t) { sink_->set(i, std::move(t)); }

  // Activation fused into this node by the plan (Conv/Gemm/MatMul + Relu/Clip/...).
  simd::Unary fused_act{};
  // Every reader of output 0 takes channels-last tensors (Plan): a Layout::Aware kernel may
  // then write output 0 as NHWC (Tensor::nhwc) instead of converting back.
  bool prefer_nhwc = false;
  // What KernelDef::prepare returned for this node (nullptr if nothing).
  const void* state = nullptr;
  // The run's seed for random ops (Session::run), mixed with each node's own seed.
  uint64_t random_seed = 0;

  // Attributes (shortcuts for graph.attr_*).
  int64_t attr_i(std::string_view name, int64_t fallback) const { return graph.attr_int(node, name, fallback); }
  float attr_f(std::string_view name, float fallback) const { return graph.attr_float(node, name, fallback); }
  std::string_view attr_s(std::string_view name, std::string_view fallback = {}) const {
    return graph.attr_string(node, name, fallback);
  }
  std::span<const int64_t> attr_ints(std::string_view name) const { return graph.attr_ints(node, name); }
  std::span<const float> attr_floats(std::string_view name) const { return graph.attr_floats(node, name); }
  bool has_attr(std::string_view name) const { return graph.attr(node, name) != nullptr; }

  // Runs a subgraph of this node with `inputs` bound to its graph inputs (in order); the
  // subgraph's outer-scope reads resolve through the frame that runs this node.
  std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs) {
    return sink_->run_subgraph(g, std::move(inputs));
  }

  [[noreturn]] void error(const std::string& what) const;
  std::string where() const;  // "node 'name' (Op)" for messages

  OpContext(const Graph& g, NodeId n, int64_t opset_, std::span<const Tensor* const> inputs, size_t n_outputs,
            OutputSink* sink)
      : graph(g), node(n), opset(opset_), inputs_(inputs), n_outputs_(n_outputs), sink_(sink) {}

 private:
  std::span<const Tensor* const> inputs_;
  size_t n_outputs_;
  OutputSink* sink_;
};

using KernelFn = void (*)(OpContext&);

// How a kernel meets channels-last (NHWC) inputs (runtime/README.md, "Layouts").
enum class LayoutUse : uint8_t {
  Nchw,         // the frame converts NHWC inputs to the plain layout before the call
  Elementwise,  // broadcasting elementwise: the frame hands over NHWC inputs as views of their
                // physical [N, H, W, C] bytes, so the outputs come out NHWC as well
  Aware,        // the kernel reads Tensor::nhwc itself (Conv, pools)
};

// A constant op(B) ([K, N]) read in place: column blocks, left to right, each a view of stored
// bytes, [K, n] or with `trans` [n, K] (an export's MatMul(x, Transpose(W)) weight is W itself).
// Views keep plan memory alive through Tensor::hold; mapped bytes live as long as the model.
struct InPlaceB {
  struct Block {
    Tensor t;
    bool trans = false;
  };
  std::vector<Block> blocks;
  int64_t k = 0, n = 0;
};

struct KernelDef {
  KernelFn run = nullptr;
  // Inputs stored as float16/bfloat16 are converted to float32 before the call, and float32
  // outputs converted back to that type after it. False for data-movement ops and Cast.
  bool float_compute = true;
  // Input whose buffer the output may reuse when it dies here and has the output's size
  // (the kernel must support y == x). -1: never.
  int inplace_input = -1;
  int inplace_input2 = -1;
  // Activation epilogue: the plan may fuse a following Relu/Clip/... into fused_act.
  bool fuses_activation = false;
  // Plan-time preparation from the node's constant inputs (nullptr where an input is not a
  // constant), e.g. weights packed for the GEMM micro-kernel. The result reaches the kernel as
  // OpContext::state. Inputs in `prepared_inputs` (bit i = input i) are then not read by the
  // kernel beyond their shape, so the plan may drop their bytes.
  using PrepareFn = std::shared_ptr<const void> (*)(const Graph&, NodeId, std::span<const Tensor* const>);
  PrepareFn prepare = nullptr;
  uint32_t prepared_inputs = 0;
  // The same preparation when input 1 is a deferred weight transpose (fold_constants records
  // MatMul(x, Transpose(W)) weights as recipes): given W itself ([N, K], the input's transpose),
  // so the plan packs straight from W and never computes the transposed copy (verifying
  // TinyLlama: one weight-sized buffer less per weight, the largest 262 MB).
  PrepareFn prepare_transposed_b = nullptr;
  // With SessionOptions::pack_weights off: input 1 read in place on every run instead of packed,
  // given as column blocks of op(B) (one for a stored weight or a deferred transpose of one, one
  // per part of a deferred ConcatColumns weight; InPlaceB). The result is the step's state like
  // prepare's; the plan drops the blocks' mapped pages after each run of the step.
  using InPlaceFn = std::shared_ptr<const void> (*)(const Graph&, NodeId, const struct InPlaceB&);
  InPlaceFn in_place_b = nullptr;
  // Residual epilogue: the plan may fuse a following Add (Conv + Add (+ Relu) in residual
  // networks). The Add's other operand becomes input `residual_input` of the step (absent inputs
  // before it stay empty), the kernel adds it to output 0 before `fused_act`, and output 0 is
  // then the Add's output, which may broadcast to a larger shape than the kernel's own result.
  int residual_input = -1;
  LayoutUse layout = LayoutUse::Nchw;
  // Aware kernels: whether this node works on NHWC input without converting it (from its
  // attributes, at plan time). The plan prefers NHWC outputs for producers whose readers all do.
  bool (*takes_nhwc)(const Graph&, NodeId) = nullptr;
  // Aware kernels: whether the node writes NHWC from an NCHW input at no extra cost (a CNN stem
  // reading the graph input), so that it may start a channels-last chain.
  bool (*starts_nhwc)(const Graph&, NodeId) = nullptr;
  // Aware kernels: every input is a data input taken in either layout (Concat), not only input
  // 0 (and the fused residual); the output is channels-last when any of them is.
  bool nhwc_all_inputs = false;
  // Activation kernels: the function the node applies, for a producer that fuses it into its
  // epilogue (fuses_activation, as OpContext::fused_act); nullopt when it cannot be known at plan
  // time. Which activations the plan fuses is op_traits' kEpilogue; this is how.
  using EpilogueFn = std::optional<simd::Unary> (*)(const Graph&, NodeId);
  EpilogueFn epilogue = nullptr;
};

// The kernel table, keyed by (domain, op type). Kernels check the node's opset themselves where
// an op's semantics changed between versions.
class Registry {
 public:
  static Registry& get();  // every built-in kernel registered
  void add(std::string_view domain, std::string_view op, KernelDef def);
  // Default-domain ops of one kind: each op's kernel is `def` with the op's own run function.
  void add_each(KernelDef def, std::span<const std::pair<const char*, KernelFn>> ops);
  const KernelDef* find(std::string_view domain, std::string_view op) const;
  std::vector<std::string> ops() const;  // "domain::Op" (default domain: "Op")

 private:
  std::vector<std::pair<std::string, KernelDef>> table_;
};

// Register functions, one per ops/ file, all declared here (called once by Registry::get() in
// registry.cpp). A kernel is built with designated initializers naming the fields it sets:
//   r.add("", "MatMul", {.run = matmul, .fuses_activation = true, .residual_input = 2});
void register_elementwise(Registry&);
void register_binary(Registry&);
void register_matmul(Registry&);
void register_conv(Registry&);
void register_pool(Registry&);
void register_norm(Registry&);
void register_shape_ops(Registry&);
void register_movement(Registry&);
void register_gather(Registry&);
void register_reduce(Registry&);
void register_resize(Registry&);
void register_cast(Registry&);
void register_quant(Registry&);
void register_qlinear(Registry&);
// Per tensor, 8-bit (uint8/int8) q: x / scale rounded half to even + zp, saturated; and
// (x - zp) * scale in float32 (ops/quant.cpp, QuantizeLinear's and DequantizeLinear's steps).
void quantize_floats(const float* x, DType q, void* y, size_t n, float scale, int32_t zp);
void dequantize_8bit(DType q, const void* x, float* y, size_t n, float scale, int32_t zp);
void register_control(Registry&);
void register_attention(Registry&);
void register_loss(Registry&);
void register_misc(Registry&);
void register_rnn(Registry&);
void register_transformer(Registry&);  // ops/transformer.cpp: Attention, Swish
void register_random(Registry&);  // ops/random.cpp: RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial

// Not registered for any op: the plan runs MatMul -> Softmax(last axis) -> MatMul as one step
// with this kernel (inputs: the first MatMul's two operands, then the second one's B).
const KernelDef& softmax_attention_kernel();
// Split (last axis, three parts: a fused QKV projection's) -> 3-D Attention reading them as its
// Q, K, V, as one step (ops/transformer.cpp): Q, K and V are read in place as column ranges of
// the Split's input. Inputs: the Split's input, two empty slots, the Attention's inputs 3..6,
// then the Split's sizes (kSplitInput); OpContext::state is a SplitAttentionState.
struct SplitAttentionState {
  static constexpr size_t kSplitInput = 7;
  NodeId attention;  // attributes and messages come from this node
};
const KernelDef& split_attention_kernel();
// Likewise for a LayerNormalization over the last axis written out in nine nodes (inputs x,
// scale, bias; OpContext::state points to epsilon as a float).
const KernelDef& decomposed_layer_norm_kernel();
// ConvInteger -> Cast(float) -> Mul(Mul(s0, s1)) as one step (inputs: ConvInteger's four, then
// s0 and s1, each one element or one per output channel): the dequantize runs in the conv's
// epilogue (runtime/ops/quant.cpp).
const KernelDef& conv_integer_to_float_kernel();
// DynamicQuantizeLinear fused into its readers (dynamic_quantize_in_packing, fusions.cpp): the
// op's step computes only its scale and zero point (outputs 1, 2), and each reader, a ConvInteger,
// MatMulInteger or one of the two kernels above, runs on quantizing_variant(its kernel) (nullptr:
// none) with the op's float input as input 0 and its scale as input quantizing_scale_input();
// the reader quantizes while packing, bit for bit the op's bytes (runtime/ops/quant.cpp).
const KernelDef& dynamic_quantize_params_kernel();
const KernelDef* quantizing_variant(const KernelDef& k);
size_t quantizing_scale_input();

}  // namespace onnxforge::rt
