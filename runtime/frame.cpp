// One execution of a plan (Frame) and the kernel's view of it (OpContext): inputs looked up,
// float16/bfloat16 converted, channels-last inputs viewed or converted, outputs placed in the
// arena or on the heap, values freed after their last reader.
#include <chrono>
#include <new>
#include <stdexcept>

#include "io/budget.h"
#include "ir/error.h"
#include "runtime/plan.h"
#include "simd/resample.h"

namespace onnxforge::rt {

namespace {

// Routes a kernel's outputs into the frame (or into temporaries when the step converts
// float16/bfloat16 inputs, see Frame::run_step). Plain calls into the frame: a sink is made
// per step, and four std::function members allocated four times per step (a Loop of 1000
// small bodies: a tenth of its time in operator new).
class StepSink final : public OutputSink {
 public:
  StepSink(Frame& f, const Step& s, std::span<const Tensor* const> ins, std::vector<Tensor>* temps)
      : f_(f), s_(s), ins_(ins), temps_(temps) {}
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (temps_) {
      // float32 results are rounded into the real output and dropped: a reused buffer.
      if (dtype == DType::Float) return (*temps_)[i] = f_.conversion_buffer(true, i, std::move(shape));
      return (*temps_)[i] = Tensor::alloc(dtype, std::move(shape));
    }
    return f_.alloc(s_, i, dtype, std::move(shape));
  }
  void alias(size_t i, size_t input, Shape shape) override {
    if (temps_) {
      Tensor t = ins_[input]->hold ? *ins_[input] : ins_[input]->clone();
      t.shape = std::move(shape);
      (*temps_)[i] = std::move(t);
      return;
    }
    f_.alias(s_, ins_, i, input, std::move(shape));
  }
  void set(size_t i, Tensor t) override {
    if (temps_)
      (*temps_)[i] = std::move(t);
    else
      f_.set(s_, i, std::move(t));
  }
  std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs) override {
    return f_.run_subgraph(g, std::move(inputs));
  }

 private:
  Frame& f_;
  const Step& s_;
  std::span<const Tensor* const> ins_;
  std::vector<Tensor>* temps_;
};

}  // namespace

Frame::Frame(const Plan& plan, Frame* parent) : plan_(plan), parent_(parent) {
  vals_.resize(plan.graph.value_count());
  if (parent) ++plan.frames_made_;
}

std::vector<Tensor> Frame::run_subgraph(GraphId sub, std::vector<Tensor> inputs) {
  const Plan& sp = *plan_.subplan(sub);
  Frame* child = nullptr;
  for (auto& [p, f] : children_)
    if (p == &sp) child = f.get();
  if (!child) {
    children_.emplace_back(&sp, std::make_unique<Frame>(sp, this));
    child = children_.back().second.get();
  }
  if (child->busy_) {  // a kernel running the same body re-entrantly: a frame of its own
    Frame fresh(sp, this);
    return fresh.run(std::move(inputs));
  }
  return child->run(std::move(inputs));
}

std::vector<Tensor> Frame::run(std::vector<Tensor> inputs) {
  const Graph& g = plan_.graph;
  const uint32_t nv = g.value_count();
  if (inputs.size() != plan_.inputs.size())
    fail("the graph takes ", plan_.inputs.size(), " inputs but ", inputs.size(), " were given");
  busy_ = true;
  struct Done {  // leaves the frame reusable, whatever happens: no value survives the run
    Frame& f;
    ~Done() {
      for (Tensor& t : f.vals_)
        if (t.dtype != DType::Undefined) t = Tensor{};
      f.scratch_.clear();
      // The float16 conversion buffers stay, like the arena: freed, they came back as fresh pages
      // every run (ISNet fp16: ~150k page faults per run, half of them in these buffers' first writes).
      // The layout and its arena stay with the frame for the next run with these shapes (a
      // Loop's next iteration): no map lookup, no arena taken and given back per iteration.
      f.recording_ = false;
      f.busy_ = false;
    }
  } done{*this};
  // The arena layout is keyed by the shapes of everything the graph reads at run time: its
  // inputs and, for a body, the outer values it captures (an If branch has no inputs).
  bool same = shapes_.size() == inputs.size() + plan_.run_captures.size();
  shapes_.resize(inputs.size() + plan_.run_captures.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (shapes_[i] != inputs[i].shape) shapes_[i] = inputs[i].shape, same = false;
    vals_[plan_.inputs[i].index()] = std::move(inputs[i]);
  }
  for (size_t k = 0; k < plan_.run_captures.size(); ++k) {
    const ValueId c = plan_.run_captures[k];
    const ValueId o = g.outer(c);
    if (!parent_ || !o.valid()) continue;
    const Tensor& t = parent_->lookup(o);
    vals_[c.index()] = t;
    if (shapes_[inputs.size() + k] != t.shape) shapes_[inputs.size() + k] = t.shape, same = false;
  }
  if (plan_.options.arena && !(same && layout_)) {
    if (arena_) plan_.give_arena(std::move(arena_), layout_->arena_bytes);
    layout_ = plan_.layout(shapes_);
    if (layout_)
      arena_ = plan_.take_arena(layout_->arena_bytes);
    else {
      recording_ = true;
      sizes_.assign(nv, 0);
      alias_of_.assign(nv, ValueId{});
    }
  }
  if (plan_.options.profile) {
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      if (time_budget_spent()) fail_time_budget(node_desc(g, plan_.steps[i].node));
      auto t0 = std::chrono::steady_clock::now();
      run_step(plan_.steps[i], i);
      plan_.step_ns[i] += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  } else {
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      if (time_budget_spent()) fail_time_budget(node_desc(g, plan_.steps[i].node));
      run_step(plan_.steps[i], i);
    }
  }
  if (recording_) plan_.record(shapes_, sizes_, alias_of_);
  std::vector<Tensor> outs;
  outs.reserve(g.graph_outputs().size());
  for (ValueId v : g.graph_outputs()) {
    const Tensor& t = lookup(v);
    if (t.dtype == DType::Undefined) fail("graph output '", str(g.value_name(v)), "' was not computed");
    outs.push_back(t.nhwc ? to_nchw(t) : t.hold ? t : t.clone());
  }
  return outs;
}

// Converting float16 operands into fresh float32 tensors would cost a page-faulted allocation per
// operand per step (ISNet fp16 at 1024x1024: its convs read up to 128 MiB of float32 each), so the
// buffers live as long as the run (ISNet fp16 then runs at 1.03x its fp32 twin's speed;
// docs/history/benchmarks-log.md, "Runtime on real models").
Tensor Frame::conversion_buffer(bool output, size_t k, Shape shape) {
  std::vector<Tensor>& pool = output ? convert_out_ : convert_in_;
  if (pool.size() <= k) pool.resize(k + 1);
  const int64_t n = numel(shape);
  if (pool[k].data == nullptr || pool[k].numel() < n) pool[k] = Tensor::alloc(DType::Float, {std::max<int64_t>(n, 1)});
  return Tensor::view(DType::Float, std::move(shape), pool[k].data);
}

Tensor& Frame::alloc(const Step& s, size_t i, DType dtype, Shape shape) {
  ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
  if (!v.valid()) {
    scratch_.push_back(Tensor::alloc(dtype, std::move(shape)));
    return scratch_.back();
  }
  Tensor& t = vals_[v.index()];
  uint64_t bytes = checked_bytes(dtype, shape);  // an overflowing shape must not match a slot's size
  if (layout_ && layout_->offset[v.index()] != Layout::kNone && layout_->size[v.index()] == bytes) {
    t = Tensor::view(dtype, std::move(shape), arena_.get() + layout_->offset[v.index()]);
  } else {
    t = Tensor::alloc(dtype, std::move(shape));
    if (recording_) sizes_[v.index()] = bytes;
  }
  return t;
}

void Frame::run_step(const Step& s, size_t index) {
  (void)index;
  const Graph& g = plan_.graph;
  // The frame's buffer (a frame runs one step at a time; a body runs in a child frame).
  std::vector<const Tensor*>& ins = ins_;
  ins.assign(s.inputs.size(), nullptr);
  bool convert = false;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (!s.inputs[k].valid()) continue;
    const Tensor& t = lookup(s.inputs[k]);
    if (t.dtype == DType::Undefined)
      fail(node_desc(g, s.node), ": input '", str(g.value_name(s.inputs[k])), "' has no value",
           g.outer(s.inputs[k]).valid() ? " (outer-scope value not available)" : "");
    ins[k] = &t;
    convert |= s.kernel->float_compute && is_stored_float(t.dtype);
  }
  std::vector<Tensor> layout_held;
  const bool relabel_nhwc = layout_inputs(s, ins, layout_held);
  std::vector<Tensor> converted, temps;
  DType stored = DType::Undefined;
  if (convert) {
    converted.resize(ins.size());
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k] && is_stored_float(ins[k]->dtype)) {
        if (stored == DType::Undefined) stored = ins[k]->dtype;
        if (ins[k]->data) {
          converted[k] = conversion_buffer(false, k, ins[k]->shape);
          cast_into(*ins[k], converted[k]);  // elementwise: a channels-last input stays so
          converted[k].nhwc = ins[k]->nhwc;
        } else {  // a prepared constant: only its shape is read
          converted[k] = *ins[k];
          converted[k].dtype = DType::Float;
        }
        ins[k] = &converted[k];
      }
    temps.resize(s.outputs.size());
  }
  scratch_.clear();
  StepSink sink(*this, s, ins, convert ? &temps : nullptr);
  OpContext ctx(g, s.node, s.opset, ins, s.outputs.size(), &sink);
  ctx.fused_act = s.act;
  ctx.state = s.state.get();
  ctx.prefer_nhwc = s.prefer_nhwc;
  ctx.random_seed = run_seed();
  try {
    s.kernel->run(ctx);
  } catch (const Error& e) {
    // The innermost node keeps its name as the error's node: a body's node, not its If or Loop.
    std::string what = e.what();
    if (what.find(node_desc(g, s.node)) != std::string::npos) throw e.at_node(node_ref(g, s.node));
    throw e.reworded(node_desc(g, s.node) + ": " + what).at_node(node_ref(g, s.node));  // a Memory error stays one
  } catch (const std::bad_alloc&) {
    // A buffer the budget did not see (a kernel's own table): an error naming the node, never a signal.
    throw Error(node_desc(g, s.node) + ": out of memory (lower the inputs' sizes or --max-memory)", Error::Kind::Memory,
                {}, node_ref(g, s.node));
  } catch (const std::length_error&) {
    throw Error(node_desc(g, s.node) + ": a table sized from the data is larger than memory can address",
                Error::Kind::Memory, {}, node_ref(g, s.node));
  } catch (const std::exception& e) {
    throw Error(node_desc(g, s.node) + ": " + e.what(), Error::Kind::Input, {}, node_ref(g, s.node));
  }
  if (convert) {
    for (size_t i = 0; i < temps.size(); ++i) {
      if (temps[i].dtype == DType::Undefined || !s.outputs[i].valid()) continue;
      if (temps[i].dtype == DType::Float) {
        Tensor& out = alloc(s, i, stored, temps[i].shape);
        cast_into(temps[i], out);
        out.nhwc = temps[i].nhwc;
      } else {
        vals_[s.outputs[i].index()] = std::move(temps[i]);
      }
    }
  }
  if (s.round_half) round_output_to_half(s);
  if (relabel_nhwc)
    for (ValueId v : s.outputs) {
      if (!v.valid()) continue;
      Tensor& t = vals_[v.index()];
      if (t.rank() != 4) fail(node_desc(g, s.node), ": internal: channels-last elementwise output of rank ", t.rank());
      t.shape = {t.shape[0], t.shape[3], t.shape[1], t.shape[2]};
      t.nhwc = true;
    }
  for (ValueId v : s.drop_pages) plan_.drop_pages(vals_[v.index()]);
  for (const Tensor& t : s.drop_views) plan_.drop_pages(t);
  for (ValueId v : s.release) vals_[v.index()] = Tensor{};
}

// An absorbed Cast(to=FLOAT16) -> Cast(to=FLOAT) after the step (fusions.cpp: half_round_trip):
// output 0 becomes float(half(y)) in place, the two Casts' bits without their float16 tensor.
// The plan proved output 0 float32 where it could; any other type is converted as the Casts
// would.
void Frame::round_output_to_half(const Step& s) {
  Tensor& t = vals_[s.outputs[0].index()];
  if (t.dtype == DType::Float) {
    simd::round_to_half(t.ptr<float>(), t.ptr<float>(), static_cast<size_t>(t.numel()));
    return;
  }
  const Tensor half = cast(t, DType::Float16);
  const bool nhwc = t.nhwc;
  Tensor& out = alloc(s, 0, DType::Float, half.shape);
  cast_into(half, out);
  out.nhwc = nhwc;
}

// Output i shares input `input`'s bytes (Reshape & co.): a view unless the input lives in an
// arena slot the output does not share, or the output is a graph output (those outlive the run).
void Frame::alias(const Step& s, std::span<const Tensor* const> ins, size_t i, size_t input, Shape sh) {
  ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
  if (!v.valid()) return;
  const Tensor& src = *ins[input];
  ValueId u = s.inputs[input];
  bool view_ok =
      src.hold || (!plan_.graph_output[v.index()] && (!layout_ || layout_->offset[u.index()] == Layout::kNone ||
                                                      layout_->root[v.index()] == layout_->root[u.index()]));
  Tensor t = view_ok ? src : src.clone();
  t.shape = std::move(sh);
  if (t.bytes() != src.bytes()) fail(node_desc(plan_.graph, s.node), ": internal: alias with a different size");
  if (recording_) alias_of_[v.index()] = u;
  vals_[v.index()] = std::move(t);
}

void Frame::set(const Step& s, size_t i, Tensor t) {
  ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
  if (v.valid()) vals_[v.index()] = t.hold ? std::move(t) : t.clone();
}

// Channels-last inputs for this step's kernel (see LayoutUse): views of their physical bytes
// for an elementwise kernel when every other operand is laid out the same way in both layouts
// (rank <= 4, not both channels > 1 and pixels > 1: a [N, C, 1, 1] scale, a scalar), else
// plain copies. Returns whether the outputs are then channels-last.
bool Frame::layout_inputs(const Step& s, std::vector<const Tensor*>& ins, std::vector<Tensor>& held) const {
  bool any = false;
  for (const Tensor* t : ins) any = any || (t != nullptr && t->nhwc);
  if (!any || s.kernel->layout == LayoutUse::Aware) return false;
  held.resize(ins.size());
  bool views = s.kernel->layout == LayoutUse::Elementwise;
  for (const Tensor* t : ins) {
    if (!views || t == nullptr || t->nhwc) continue;
    if (t->rank() > 4) {
      views = false;
      continue;
    }
    const Shape e = nhwc_physical_shape(t->shape);  // [n, h, w, c]
    views = !(e[3] > 1 && e[1] * e[2] > 1);
  }
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] == nullptr || (!views && !ins[k]->nhwc)) continue;
    if (views) {
      held[k] = *ins[k];
      held[k].shape = nhwc_physical_shape(ins[k]->shape);
      held[k].nhwc = false;
    } else {
      held[k] = to_nchw(*ins[k]);
    }
    ins[k] = &held[k];
  }
  return views;
}

// ---------------------------------------------------------------------------- OpContext

const Tensor& OpContext::input(size_t i) const {
  const Tensor* t = in(i);
  if (!t) error("input " + std::to_string(i) + " is required");
  return *t;
}

bool OpContext::has_output(size_t i) const { return graph.output(node, i).valid(); }

void OpContext::error(const std::string& what) const { fail(where(), ": ", what); }

std::string OpContext::where() const { return node_desc(graph, node); }

}  // namespace onnxforge::rt
