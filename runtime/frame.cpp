// One execution of a plan (Frame) and the kernel's view of it (OpContext): inputs looked up,
// float16/bfloat16 converted, channels-last inputs viewed or converted, outputs placed in the
// arena or on the heap, values freed after their last reader.
#include <chrono>

#include "ir/error.h"
#include "runtime/plan.h"

namespace onnxforge::rt {

namespace {

// Routes a kernel's outputs into the frame (or into temporaries when the step converts
// float16/bfloat16 inputs, see Frame::run_step).
class StepSink final : public OutputSink {
 public:
  StepSink(Frame& f, const Step& s, std::span<const Tensor* const> ins, std::vector<Tensor>* temps,
           std::function<Tensor&(size_t, DType, Shape)> alloc, std::function<void(size_t, size_t, Shape)> alias,
           std::function<void(size_t, Tensor)> set, std::function<std::vector<Tensor>(GraphId, std::vector<Tensor>)> sub)
      : f_(f), s_(s), ins_(ins), temps_(temps), alloc_(std::move(alloc)), alias_(std::move(alias)),
        set_(std::move(set)), sub_(std::move(sub)) {}
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (temps_) {
      // float32 results are rounded into the real output and dropped: a reused buffer.
      if (dtype == DType::Float) return (*temps_)[i] = f_.conversion_buffer(true, i, std::move(shape));
      return (*temps_)[i] = Tensor::alloc(dtype, std::move(shape));
    }
    return alloc_(i, dtype, std::move(shape));
  }
  void alias(size_t i, size_t input, Shape shape) override {
    if (temps_) {
      Tensor t = ins_[input]->hold ? *ins_[input] : ins_[input]->clone();
      t.shape = std::move(shape);
      (*temps_)[i] = std::move(t);
      return;
    }
    alias_(i, input, std::move(shape));
  }
  void set(size_t i, Tensor t) override {
    if (temps_) (*temps_)[i] = std::move(t);
    else set_(i, std::move(t));
  }
  std::vector<Tensor> run_subgraph(GraphId g, std::vector<Tensor> inputs) override { return sub_(g, std::move(inputs)); }

 private:
  [[maybe_unused]] Frame& f_;
  [[maybe_unused]] const Step& s_;
  std::span<const Tensor* const> ins_;
  std::vector<Tensor>* temps_;
  std::function<Tensor&(size_t, DType, Shape)> alloc_;
  std::function<void(size_t, size_t, Shape)> alias_;
  std::function<void(size_t, Tensor)> set_;
  std::function<std::vector<Tensor>(GraphId, std::vector<Tensor>)> sub_;
};

}  // namespace

Frame::Frame(const Plan& plan, Frame* parent) : plan_(plan), parent_(parent) {}

const Tensor& Frame::lookup(ValueId v) const { return vals_[v.index()]; }

std::vector<Tensor> Frame::run(std::vector<Tensor> inputs) {
  const Graph& g = plan_.graph;
  const uint32_t nv = g.value_count();
  vals_ = plan_.constants;
  for (ValueId c : g.captures()) {
    ValueId o = g.outer(c);
    if (parent_ && o.valid()) vals_[c.index()] = parent_->lookup(o);
  }
  if (inputs.size() != plan_.inputs.size())
    fail("the graph takes ", plan_.inputs.size(), " inputs but ", inputs.size(), " were given");
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    shapes.push_back(inputs[i].shape);
    vals_[plan_.inputs[i].index()] = std::move(inputs[i]);
  }
  if (!parent_ && plan_.options.arena) {
    layout_ = plan_.layout(shapes);
    if (layout_) arena_ = plan_.take_arena(layout_->arena_bytes);
    else {
      recording_ = true;
      sizes_.assign(nv, 0);
      alias_of_.assign(nv, ValueId{});
    }
  }
  if (plan_.options.profile) {
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run_step(plan_.steps[i], i);
      plan_.step_ns[i] += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
  } else {
    for (size_t i = 0; i < plan_.steps.size(); ++i) run_step(plan_.steps[i], i);
  }
  if (recording_) plan_.record(shapes, sizes_, alias_of_);
  std::vector<Tensor> outs;
  for (ValueId v : g.graph_outputs()) {
    Tensor& t = vals_[v.index()];
    if (t.dtype == DType::Undefined) fail("graph output '", str(g.value_name(v)), "' was not computed");
    outs.push_back(t.nhwc ? to_nchw(t) : t.hold ? t : t.clone());
  }
  if (arena_) {
    vals_.clear();  // views into the arena
    plan_.give_arena(std::move(arena_), layout_->arena_bytes);
  }
  return outs;
}

// Converting float16 operands into fresh float32 tensors cost a page-faulted allocation per
// operand per step (ISNet fp16 at 1024x1024: its convs read up to 128 MiB of float32 each); the
// buffers now live as long as the run. ISNet fp16 vs the same network in fp32, same run: see
// git log.
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
  std::vector<const Tensor*> ins(s.inputs.size(), nullptr);
  bool convert = false;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    if (!s.inputs[k].valid()) continue;
    const Tensor& t = vals_[s.inputs[k].index()];
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
          cast_into(*ins[k], converted[k]);
        } else {  // a prepared constant: only its shape is read
          converted[k] = *ins[k];
          converted[k].dtype = DType::Float;
        }
        ins[k] = &converted[k];
      }
    temps.resize(s.outputs.size());
  }
  scratch_.clear();
  StepSink sink(
      *this, s, ins, convert ? &temps : nullptr,
      [&](size_t i, DType d, Shape sh) -> Tensor& { return alloc(s, i, d, std::move(sh)); },
      [&](size_t i, size_t input, Shape sh) {
        ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
        if (!v.valid()) return;
        const Tensor& src = *ins.at(input);
        Tensor t;
        ValueId u = s.inputs[input];
        bool view_ok = src.hold || (!plan_.graph_output[v.index()] &&
                                    (!layout_ || layout_->offset[u.index()] == Layout::kNone ||
                                     layout_->root[v.index()] == layout_->root[u.index()]));
        t = view_ok ? src : src.clone();
        t.shape = std::move(sh);
        if (t.bytes() != src.bytes()) fail(node_desc(g, s.node), ": internal: alias with a different size");
        if (recording_) alias_of_[v.index()] = u;
        vals_[v.index()] = std::move(t);
      },
      [&](size_t i, Tensor t) {
        ValueId v = i < s.outputs.size() ? s.outputs[i] : ValueId{};
        if (v.valid()) vals_[v.index()] = t.hold ? std::move(t) : t.clone();
      },
      [&](GraphId sub, std::vector<Tensor> inputs) {
        Frame child(*plan_.subplan(sub), this);
        return child.run(std::move(inputs));
      });
  OpContext ctx(g, s.node, s.opset, ins, s.outputs.size(), &sink);
  ctx.fused_act = s.act;
  ctx.state = s.state.get();
  ctx.prefer_nhwc = s.prefer_nhwc && !convert;
  try {
    s.kernel->run(ctx);
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.find(node_desc(g, s.node)) != std::string::npos) throw;
    fail(node_desc(g, s.node), ": ", what);
  } catch (const std::exception& e) {
    fail(node_desc(g, s.node), ": ", e.what());
  }
  if (convert) {
    for (size_t i = 0; i < temps.size(); ++i) {
      if (temps[i].dtype == DType::Undefined || !s.outputs[i].valid()) continue;
      if (temps[i].dtype == DType::Float) {
        Tensor& out = alloc(s, i, stored, temps[i].shape);
        cast_into(temps[i], out);
      } else {
        vals_[s.outputs[i].index()] = std::move(temps[i]);
      }
    }
  }
  if (relabel_nhwc)
    for (ValueId v : s.outputs) {
      if (!v.valid()) continue;
      Tensor& t = vals_[v.index()];
      if (t.rank() != 4) fail(node_desc(g, s.node), ": internal: channels-last elementwise output of rank ", t.rank());
      t.shape = {t.shape[0], t.shape[3], t.shape[1], t.shape[2]};
      t.nhwc = true;
    }
  for (ValueId v : s.drop_pages) plan_.drop_pages(vals_[v.index()]);
  for (ValueId v : s.release) vals_[v.index()] = Tensor{};
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
