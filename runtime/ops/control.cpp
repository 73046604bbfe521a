// Control flow: If, Loop, Scan. Subgraphs run through OpContext::run_subgraph, which resolves
// their outer-scope reads in the frame running this node.
#include "io/budget.h"
#include "ir/match.h"
#include "runtime/ops/common.h"

namespace onnxforge::rt {

void copy_strided(size_t es, const Shape& shape, const std::byte* base, const std::vector<int64_t>& strides,
                  std::byte* dst);

namespace {

GraphId graph_attr(const OpContext& c, std::string_view name) {
  GraphId g = c.graph.attr_graph(c.node, name);
  if (!g.valid()) c.error("attribute '" + std::string(name) + "' (a graph) is missing");
  return g;
}

void if_op(OpContext& c) {
  if (c.input(0).numel() != 1) c.error("cond must hold one value, got " + shape_str(c.input(0).shape));
  const bool cond = c.input(0).get_f64(0) != 0;
  auto outs = c.run_subgraph(graph_attr(c, cond ? "then_branch" : "else_branch"), {});
  for (size_t i = 0; i < outs.size() && i < c.output_count(); ++i) c.set_output(i, std::move(outs[i]));
}

Tensor scalar_i64(int64_t v) {
  Tensor t = Tensor::alloc(DType::Int64, {});
  t.ptr<int64_t>()[0] = v;
  return t;
}
Tensor scalar_bool(bool v) {
  Tensor t = Tensor::alloc(DType::Bool, {});
  t.ptr<uint8_t>()[0] = v;
  return t;
}

// The element type of scan output `k` (body output `body_out`) when no iteration ran to give
// it: the body's declaration, else traced through the body (ir known_dtype) to a body input,
// whose type is that of the node input it receives (for a Loop: iteration number int64,
// condition bool, then the carried values' initial values), else the node output's declaration.
// Before, an undeclared one was float32, while the same model with inferred types (as optimize
// writes it) gave the traced type: verification failed on a mutated Range-as-Loop model.
DType empty_scan_dtype(const OpContext& c, const Graph& bg, size_t body_out, size_t k, bool loop) {
  const DType t = known_dtype(bg, bg.graph_outputs()[body_out], [&](ValueId in) {
    const auto ins = bg.graph_inputs();
    const auto i = static_cast<size_t>(std::find(ins.begin(), ins.end(), in) - ins.begin());
    if (loop && i == 0) return DType::Int64;
    if (loop && i == 1) return DType::Bool;
    const Tensor* x = c.in(i);
    return x ? x->dtype : DType::Undefined;
  });
  if (t != DType::Undefined) return t;
  const auto outs = c.graph.outputs(c.node);
  return k < outs.size() && outs[k].valid() ? c.graph.dtype(outs[k]) : DType::Undefined;
}

// Stacks equally shaped tensors along a new axis 0 (or an empty [0] tensor of `dtype`).
Tensor stack(const std::vector<Tensor>& parts, DType dtype) {
  if (parts.empty()) return Tensor::alloc(dtype == DType::Undefined ? DType::Float : dtype, {0});
  Shape s = parts[0].shape;
  s.insert(s.begin(), static_cast<int64_t>(parts.size()));
  Tensor t = Tensor::alloc(parts[0].dtype, s);
  size_t off = 0;
  for (const Tensor& p : parts) {
    if (p.bytes() != parts[0].bytes()) fail("Loop/Scan: scan outputs change shape between iterations");
    std::memcpy(t.data + off, p.data, p.bytes());
    off += p.bytes();
  }
  return t;
}

// Whether a Loop body's condition output is true on every iteration whatever the inputs: the
// condition input itself (the Loop's own condition is checked by the caller) or a constant true
// (an initializer, or a Constant node's value), through Identity nodes (torch writes cond_out =
// Identity(cond_in)).
bool body_condition_always_true(const Model& model, const Graph& bg) {
  if (bg.graph_outputs().empty() || bg.graph_inputs().size() < 2) return false;
  ValueId out = bg.graph_outputs()[0];
  for (int hops = 0; hops < 8 && bg.producer(out).valid() && bg.is_op(bg.producer(out), "Identity"); ++hops)
    out = bg.inputs(bg.producer(out))[0];
  if (out == bg.graph_inputs()[1]) return true;
  TensorId t = bg.initializer(out);
  if (!t.valid() && bg.producer(out).valid() && bg.is_op(bg.producer(out), "Constant"))
    t = bg.attr_tensor(bg.producer(out), "value");
  if (!t.valid() || model.tensors.dtype(t) != DType::Bool) return false;
  const std::span<const std::byte> b = model.tensors.bytes(t);
  return b.size() == 1 && b[0] != std::byte{0};
}

// What Loops and Scans may cost (--max-loop-iterations), counted in node steps: an iteration
// counts the nodes of its body and of the subgraphs those hold (an If's branches, both: an
// upper bound; a nested Loop or Scan counts its own iterations), plus 2 for the iteration itself.
// A step costs about the same whatever the body (0.37 us per one-element Add, measured) and an
// iteration's own overhead about two steps, so a limit in steps bounds the time of a Loop whose
// compute is trivial, whatever its body: the default 2^23 at about 3 s, where a limit on
// iterations alone let a 1000-node body run for hours.
uint64_t steps_per_iteration(const Model& model, const Graph& g) {
  uint64_t n = 2;
  for (NodeId id : g.nodes()) {
    ++n;
    if (g.is_op(id, "Loop") || g.is_op(id, "Scan")) continue;
    for (GraphId sub : g.subgraphs(id)) n += steps_per_iteration(model, model.graph(sub)) - 2;
  }
  return n;
}

// The steps taken by the Loop or Scan running on this thread and by those nested in it: an
// inner Loop spends from the budget of the outermost one, so nesting cannot multiply it.
// (A body runs on the thread of the kernel that runs it: Frame::run_subgraph.)
struct LoopSteps {
  uint64_t used = 0;
  int depth = 0;
};
thread_local LoopSteps t_steps;
struct StepScope {
  StepScope() {
    if (t_steps.depth++ == 0) t_steps.used = 0;
  }
  ~StepScope() { --t_steps.depth; }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
};

[[noreturn]] void over_step_limit(const OpContext& c, const std::string& how) {
  c.error(how + ": over the limit of " + std::to_string(loop_iteration_limit()) +
          " node steps per Loop (iterations x the body's nodes + 2; raise it with --max-loop-iterations N)");
}

void loop(OpContext& c) {
  const GraphId body = graph_attr(c, "body");
  const Graph& bg = c.graph.model().graph(body);
  const Tensor* m = c.in(0);
  const Tensor* cond_in = c.in(1);
  // M is int64 (a float's conversion past int64 would be undefined).
  if (m && m->numel() && m->dtype != DType::Int64)
    c.error("trip count M must be int64, got " + std::string(dtype_name(m->dtype)));
  const int64_t max_trip = m && m->numel() ? m->get_i64(0) : std::numeric_limits<int64_t>::max();
  if (max_trip < 0) c.error("trip count M = " + std::to_string(max_trip) + " is negative");
  bool cond = cond_in && cond_in->numel() ? cond_in->get_f64(0) != 0 : true;
  if (!m && !cond_in) c.error("Loop without a trip count or condition never ends");
  const size_t n_carried = c.input_count() >= 2 ? c.input_count() - 2 : 0;
  std::vector<Tensor> carried;
  for (size_t i = 0; i < n_carried; ++i)
    carried.push_back(c.input(i + 2).hold ? c.input(i + 2) : c.input(i + 2).clone());
  if (bg.graph_outputs().size() < 1 + n_carried || bg.graph_inputs().size() != 2 + n_carried)
    c.error("the body has " + std::to_string(bg.graph_inputs().size()) + " inputs and " +
            std::to_string(bg.graph_outputs().size()) + " outputs; with " + std::to_string(n_carried) +
            " loop-carried values it needs " + std::to_string(2 + n_carried) + " inputs and at least " +
            std::to_string(1 + n_carried) + " outputs");
  const size_t n_scan = bg.graph_outputs().size() - 1 - n_carried;
  std::vector<std::vector<Tensor>> scans(n_scan);
  // The stacked scan outputs count against the memory budget as they accumulate: iterations
  // may share one buffer (a constant scan output), so the allocator alone never saw a 2^62-trip
  // Loop grow its lists until the OOM killer ended it.
  uint64_t scan_bytes = 0;
  // When the body's condition cannot turn false (the exporters' usual spelling: the condition
  // input passed through, or a constant true), the Loop runs all M iterations; after the first
  // one its scan outputs' total is known, so a Loop that cannot fit is refused before it runs
  // the rest (a 2^62-trip Loop of 4 KB scan outputs ran 4.5 million iterations, 53 s, before
  // the running total reached the budget: a hang to anyone waiting on it).
  const bool runs_all_trips = m && m->numel() && body_condition_always_true(c.graph.model(), bg);
  // The iteration number and condition tensors are rewritten in place unless the body kept
  // them (an output that is a view of one still holds it).
  Tensor it_t = scalar_i64(0), cond_t = scalar_bool(cond);
  // A Loop that allocates nothing per iteration is not stopped by the memory budget: its node
  // steps are counted against --max-loop-iterations (above), and --max-time is checked before
  // each iteration (a body with no nodes runs no steps that would check it).
  const StepScope scope;
  const uint64_t limit = loop_iteration_limit(), steps = steps_per_iteration(c.graph.model(), bg);
  const std::string each = " at " + std::to_string(steps) + " node steps each";
  if (runs_all_trips && cond && static_cast<uint64_t>(max_trip) > (limit - std::min(limit, t_steps.used)) / steps)
    over_step_limit(c, "would run all " + std::to_string(max_trip) + " iterations of its trip count" + each +
                           " (the body's condition is always true)");
  for (int64_t it = 0; it < max_trip && cond; ++it) {
    if (time_budget_spent()) fail_time_budget(c.where() + " (iteration " + std::to_string(it) + ")");
    if (steps > limit - t_steps.used)  // used <= limit: every addition is checked first
      over_step_limit(c, "ran " + std::to_string(it) + " iterations of its trip count " +
                             (m && m->numel() ? std::to_string(max_trip) : std::string("(none)")) + each +
                             " and its condition is still true");
    t_steps.used += steps;
    if (it_t.hold.use_count() > 1)
      it_t = scalar_i64(it);
    else
      it_t.ptr<int64_t>()[0] = it;
    if (cond_t.hold.use_count() > 1)
      cond_t = scalar_bool(cond);
    else
      cond_t.ptr<uint8_t>()[0] = cond;
    std::vector<Tensor> ins;
    ins.reserve(2 + carried.size());
    ins.push_back(it_t);
    ins.push_back(cond_t);
    for (auto& t : carried) ins.push_back(t);
    auto outs = c.run_subgraph(body, std::move(ins));
    if (outs.size() < 1 + n_carried + n_scan) c.error("the body returned fewer outputs than it declares");
    if (outs[0].numel() != 1)
      c.error("the body's condition output must hold one value, got " + shape_str(outs[0].shape));
    cond = outs[0].get_f64(0) != 0;
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t i = 0; i < n_scan; ++i) {
      scan_bytes += checked_bytes(outs[1 + n_carried + i].dtype, outs[1 + n_carried + i].shape) + sizeof(Tensor);
      scans[i].push_back(std::move(outs[1 + n_carried + i]));
    }
    if (n_scan && it == 0 && runs_all_trips && cond) {
      uint64_t total = 0;
      if (__builtin_mul_overflow(scan_bytes, static_cast<uint64_t>(max_trip), &total)) total = UINT64_MAX;
      check_memory(total, "the scan outputs of all " + std::to_string(max_trip) + " iterations (" +
                              std::to_string(scan_bytes) + " bytes each; the body's condition is always true)");
    }
    if (n_scan)
      check_memory(scan_bytes, "the scan outputs after " + std::to_string(it + 1) + " of " + std::to_string(max_trip) +
                                   " iterations");
  }
  for (size_t i = 0; i < n_carried && i < c.output_count(); ++i) c.set_output(i, std::move(carried[i]));
  for (size_t i = 0; i < n_scan && n_carried + i < c.output_count(); ++i)
    c.set_output(n_carried + i,
                 stack(scans[i], scans[i].empty() ? empty_scan_dtype(c, bg, 1 + n_carried + i, n_carried + i, true)
                                                  : DType::Undefined));
}

void scan(OpContext& c) {
  if (c.opset < 9) c.error("Scan-8 (with sequence_lens) is not supported");
  const GraphId body = graph_attr(c, "body");
  const Graph& bg = c.graph.model().graph(body);
  const int64_t n_in_attr = c.attr_i("num_scan_inputs", 0);
  if (n_in_attr < 1 || static_cast<uint64_t>(n_in_attr) > c.input_count())
    c.error("num_scan_inputs " + std::to_string(n_in_attr) + " does not fit its " + std::to_string(c.input_count()) +
            " inputs");
  const size_t n_in = static_cast<size_t>(n_in_attr);
  const size_t n_state = c.input_count() - n_in;
  if (bg.graph_outputs().size() < n_state || bg.graph_inputs().size() != n_state + n_in)
    c.error("the body's inputs and outputs do not match the node's state and scan inputs");
  const size_t n_scan_out = bg.graph_outputs().size() - n_state;
  auto in_axes = c.attr_ints("scan_input_axes"), in_dirs = c.attr_ints("scan_input_directions");
  auto out_axes = c.attr_ints("scan_output_axes"), out_dirs = c.attr_ints("scan_output_directions");
  if ((!in_axes.empty() && in_axes.size() != n_in) || (!in_dirs.empty() && in_dirs.size() != n_in) ||
      (!out_axes.empty() && out_axes.size() != n_scan_out) || (!out_dirs.empty() && out_dirs.size() != n_scan_out))
    c.error("scan_input_*/scan_output_* attributes do not match the number of scan inputs and outputs");
  std::vector<Tensor> state;
  for (size_t i = 0; i < n_state; ++i) state.push_back(c.input(i).clone());
  int64_t T = -1;
  std::vector<int64_t> axis(n_in);
  for (size_t j = 0; j < n_in; ++j) {
    const Tensor& x = c.input(n_state + j);
    axis[j] = norm_axis(c, in_axes.empty() ? 0 : in_axes[j], x.rank());
    const int64_t len = x.shape[static_cast<size_t>(axis[j])];
    if (j > 0 && len != T) c.error("scan inputs have different lengths along their scan axes");
    T = len;
  }
  // A Scan's iterations are its inputs' length, but its body is as free as a Loop's.
  const StepScope scope;
  const uint64_t steps = steps_per_iteration(c.graph.model(), bg), limit = loop_iteration_limit();
  if (T > 0 && static_cast<uint64_t>(T) > (limit - std::min(limit, t_steps.used)) / steps)
    over_step_limit(c, "would run " + std::to_string(T) + " iterations (its scan inputs' length) at " +
                           std::to_string(steps) + " node steps each");
  t_steps.used += static_cast<uint64_t>(std::max<int64_t>(T, 0)) * steps;
  std::vector<std::vector<Tensor>> outs(n_scan_out);
  for (int64_t t = 0; t < T; ++t) {
    if (time_budget_spent()) fail_time_budget(c.where() + " (iteration " + std::to_string(t) + ")");
    std::vector<Tensor> ins = state;
    for (size_t j = 0; j < n_in; ++j) {
      const Tensor& x = c.input(n_state + j);
      const int64_t idx = (!in_dirs.empty() && in_dirs[j]) ? T - 1 - t : t;
      Shape s = x.shape;
      s.erase(s.begin() + axis[j]);
      auto st = contiguous_strides(x.shape);
      std::vector<int64_t> strides = st;
      strides.erase(strides.begin() + axis[j]);
      Tensor slice = Tensor::alloc(x.dtype, s);
      const size_t es = dtype_size(x.dtype);
      copy_strided(es, s, x.data + static_cast<size_t>(idx * st[static_cast<size_t>(axis[j])]) * es, strides,
                   slice.data);
      ins.push_back(std::move(slice));
    }
    auto res = c.run_subgraph(body, std::move(ins));
    for (size_t i = 0; i < n_state; ++i) state[i] = std::move(res[i]);
    for (size_t i = 0; i < n_scan_out; ++i) outs[i].push_back(std::move(res[n_state + i]));
  }
  for (size_t i = 0; i < n_state; ++i) c.set_output(i, std::move(state[i]));
  for (size_t i = 0; i < n_scan_out; ++i) {
    if (!out_dirs.empty() && out_dirs[i]) std::reverse(outs[i].begin(), outs[i].end());
    Tensor st =
        stack(outs[i], outs[i].empty() ? empty_scan_dtype(c, bg, n_state + i, n_state + i, false) : DType::Undefined);
    const int64_t ax = out_axes.empty() ? 0 : norm_axis(c, out_axes[i], st.rank());
    if (ax != 0) {
      std::vector<int64_t> perm;
      for (int64_t d = 1; d <= ax; ++d) perm.push_back(d);
      perm.insert(perm.begin() + ax, 0);
      for (int64_t d = ax + 1; d < st.rank(); ++d) perm.push_back(d);
      Shape ys;
      std::vector<int64_t> strides;
      auto cs = contiguous_strides(st.shape);
      for (auto p : perm) {
        ys.push_back(st.shape[static_cast<size_t>(p)]);
        strides.push_back(cs[static_cast<size_t>(p)]);
      }
      Tensor y = Tensor::alloc(st.dtype, ys);
      copy_strided(dtype_size(st.dtype), ys, st.data, strides, y.data);
      st = std::move(y);
    }
    c.set_output(n_state + i, std::move(st));
  }
}

}  // namespace

void register_control(Registry& r) {
  r.add("", "If", {.run = if_op, .float_compute = false});
  r.add("", "Loop", {.run = loop, .float_compute = false});
  r.add("", "Scan", {.run = scan, .float_compute = false});
}

}  // namespace onnxforge::rt
