#pragma once
// Internal: the execution plan of one graph and the frame that runs it.
//   plan.cpp      Plan::Plan: order, kernels, folding, preparation, fusions, liveness
//   fusions.cpp   the plan's fusions (a table of matchers, fusions.h)
//   layout.cpp    channels-last planning (plan_layouts) and arena placement (record, arenas)
//   frame.cpp     Frame (one execution) and OpContext
//   session.cpp   Session; evaluate.cpp: evaluate_node, has_kernel, supported_ops
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/runtime.h"

namespace onnxforge::rt {

// "" for the default domain ("ai.onnx" included), else the domain.
std::string_view norm_domain(Sym d);
// "node 'name' (Op)" (or "(domain::Op)") for messages.
std::string node_desc(const Graph& g, NodeId n);
// The node's name, or "Op#index" when it has none: what errors carry as their node (`--json`)
// and profiles as a path element.
std::string node_ref(const Graph& g, NodeId n);

struct Step {
  NodeId node;
  const KernelDef* kernel = nullptr;
  int64_t opset = 0;
  std::vector<ValueId> inputs;   // invalid id = absent optional input
  std::vector<ValueId> outputs;  // after fusion: the fused activation's outputs
  simd::Unary act{};
  std::shared_ptr<const void> state;  // KernelDef::prepare's result
  std::vector<ValueId> release;       // values whose last reader is this step
  std::vector<ValueId> drop_pages;    // mapped embedding tables read last here (Plan::drop_pages)
  std::vector<Tensor> drop_views;     // weights read in place (KernelDef::in_place_b), dropped likewise
  bool prefer_nhwc = false;           // every reader of output 0 takes channels-last input
  bool round_half = false;            // output 0 becomes float(half(y)) after the kernel (fusions.cpp: half_round_trip)
};

class Frame;

// Arena placement for one set of input shapes (see Plan::layout()).
struct Layout {
  static constexpr uint64_t kNone = ~uint64_t{0};
  std::vector<uint64_t> offset;  // per value; kNone = not in the arena
  std::vector<uint64_t> size;
  std::vector<uint32_t> root;  // values sharing one buffer have one root
  uint64_t arena_bytes = 0;
};

// Drops the resident pages of a file-mapped weight (weights.cpp); no-op for memory the plan owns.
void release_pages(const Model& m, const Tensor& t);

class Plan {
 public:
  // `parent`: the plan of the graph enclosing `g` (a subgraph's), whose constants the
  // subgraph's captures of them become (plan-time folding in bodies reads outer weights).
  Plan(const Graph& g, const SessionOptions& options, const Plan* parent = nullptr);

  const Graph& graph;
  SessionOptions options;
  std::vector<Step> steps;
  std::vector<Tensor> constants;      // per value: a view of its initializer (dtype Undefined if none)
  std::vector<uint8_t> graph_output;  // per value
  std::vector<ValueId> inputs;        // caller-provided graph inputs
  std::vector<ValueId> run_captures;  // captures read from the enclosing frame at run time
  size_t fused = 0;
  size_t folded = 0;              // nodes evaluated once at plan time
  size_t channels_last = 0;       // steps with prefer_nhwc
  size_t in_place = 0;            // steps with weights read in place (KernelDef::in_place_b)
  std::vector<uint8_t> is_const;  // per value: known before any run
  // Per-step wall time in ns, accumulated over runs when options.profile is set.
  mutable std::vector<std::atomic<uint64_t>> step_ns;

  Plan* subplan(GraphId g) const;
  const std::map<GraphId, std::unique_ptr<Plan>>& subplans() const { return subplans_; }

  // Layout for these input shapes, or nullptr until a run has recorded the sizes.
  std::shared_ptr<const Layout> layout(const std::vector<Shape>& shapes) const;
  // Records sizes from a heap run (value -> bytes, value -> value whose memory it shares).
  void record(const std::vector<Shape>& shapes, const std::vector<uint64_t>& bytes,
              const std::vector<ValueId>& alias_of) const;

  // Arenas are kept between runs (a fresh multi-MB allocation is page-faulted in on every run):
  // a run takes one of at least `bytes` and gives it back when done.
  std::shared_ptr<std::byte> take_arena(uint64_t bytes) const;
  void give_arena(std::shared_ptr<std::byte> arena, uint64_t bytes) const;

  // Idle top-level frames (with their child frames) kept between runs, like the arenas.
  std::unique_ptr<Frame> take_frame() const;
  void give_frame(std::unique_ptr<Frame> f) const;

  // Subgraph frames and layouts made so far (tests: bodies are planned and set up once per
  // shape, not per call).
  size_t frames_made() const { return frames_made_.load(); }
  size_t layouts_recorded() const;

  // Unmaps a file-backed weight's pages from the process after a run's last reader (the page
  // cache keeps them; the next run maps back what it reads). For embedding tables: a Gather reads
  // a few rows, but the page cache maps whole folios (up to 2 MB) around each, so 128 token ids
  // kept 100-250 MiB of TinyLlama's 250 MiB table resident for the rest of every run.
  void drop_pages(const Tensor& t) const;

 private:
  bool fold(NodeId n);
  void plan_layouts();
  void consumed(ValueId v, bool shape_still_read = false);
  void resolve_deferred(ValueId v);
  void pack_weights(std::vector<size_t> to_prepare);  // weights.cpp
  void drop_unread_constants();
  std::shared_ptr<const void> prepare_from_transpose(const Step& s, const KernelDef* k);
  std::optional<InPlaceB> in_place_b(ValueId b);
  std::shared_ptr<const void> prepare_in_place(Step& s, const KernelDef* k);
  std::vector<uint8_t> folded_;
  std::vector<TensorId> deferred_;   // per value: a deferred initializer not computed yet
  std::vector<uint8_t> shape_kept_;  // per value: a packing reader still reads its shape
  std::vector<NodeId> lazy_fold_;    // per value: the weight Transpose that folds when needed
  bool weight_transpose(NodeId n) const;
  std::vector<uint32_t> remaining_;  // plan-time readers left per value
  std::map<GraphId, std::unique_ptr<Plan>> subplans_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<Shape>, std::shared_ptr<const Layout>> layouts_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<std::byte>>> arenas_;  // idle, with their sizes
  mutable std::vector<std::unique_ptr<Frame>> frames_;                           // idle top-level frames
  mutable std::atomic<size_t> frames_made_{0};
  friend class Frame;
};

// One execution of a plan: the values, the arena, the enclosing frame for outer-scope reads.
// A frame is reused: run() may be called again once it returned (Plan::take_frame keeps idle
// top-level frames, and a frame keeps one child frame per subgraph it ran), so If/Loop/Scan
// bodies run on frames, value tables and arenas made once, not per call or iteration.
class Frame {
 public:
  Frame(const Plan& plan, Frame* parent);
  // Inputs in plan.inputs order (subgraphs: the body's graph inputs in order).
  std::vector<Tensor> run(std::vector<Tensor> inputs);
  // The run's seed for random ops (ops/random.cpp); bodies read their top-level frame's.
  uint64_t random_seed = 0;
  uint64_t run_seed() const { return parent_ ? parent_->run_seed() : random_seed; }
  // A value of this frame's graph (captures: parent's); constants come from the plan.
  const Tensor& lookup(ValueId v) const {
    const Tensor& t = vals_[v.index()];
    return t.dtype != DType::Undefined ? t : plan_.constants[v.index()];
  }
  const Plan& plan() const { return plan_; }
  // A float32 view of `shape` on the run's reusable buffer `k` for converted float16/bfloat16
  // operands (outputs: the kernel's float32 results before rounding back), grown as needed.
  Tensor conversion_buffer(bool output, size_t k, Shape shape);

  // The step's output sink (StepSink in frame.cpp) calls these.
  Tensor& alloc(const Step& s, size_t out, DType dtype, Shape shape);
  void alias(const Step& s, std::span<const Tensor* const> ins, size_t out, size_t input, Shape shape);
  void set(const Step& s, size_t out, Tensor t);
  std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs);

 private:
  void run_step(const Step& s, size_t index);
  void round_output_to_half(const Step& s);
  bool layout_inputs(const Step& s, std::vector<const Tensor*>& ins, std::vector<Tensor>& held) const;
  const Plan& plan_;
  Frame* parent_;
  std::vector<Tensor> vals_;  // values computed or bound in this run (Undefined: see plan_.constants)
  std::shared_ptr<const Layout> layout_;
  std::shared_ptr<std::byte> arena_;
  bool recording_ = false;
  bool busy_ = false;  // inside run(): a nested use of this frame gets a fresh one
  std::vector<uint64_t> sizes_;
  std::vector<ValueId> alias_of_;
  std::deque<Tensor> scratch_;
  std::vector<Tensor> convert_in_, convert_out_;  // conversion_buffer()
  std::vector<Shape> shapes_;                     // this run's input (and run-time capture) shapes
  std::vector<const Tensor*> ins_;                // the running step's inputs
  std::vector<std::pair<const Plan*, std::unique_ptr<Frame>>> children_;
  friend class OpContext;
};

}  // namespace onnxforge::rt
