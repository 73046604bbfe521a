#include "passes/driver.h"

#include <tbb/flow_graph.h>

#include <any>
#include <chrono>
#include <unordered_set>

#include "analysis/shapes.h"
#include "io/budget.h"
#include "ir/error.h"
#include "ir/inline_functions.h"
#include "ir/rewrite.h"
#include "ir/uses.h"

namespace onnxforge::passes {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---- function bodies
// The passes work inside the body of a model-local function (and its If/Loop/Scan bodies) when
// they read it as it runs: the function imports every domain at the model's version (passes
// read g.model().opset()) and no attribute is a reference to the caller's (a pass would read
// Softmax's referenced axis as absent, -1).
bool passes_can_read(const Model& m, const Function& f) {
  for (const FunctionImport& imp : function_imports(f))
    if (const int64_t have = m.opset(imp.domain); have != imp.version && (have != 0 || imp.domain.empty()))
      return false;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached() || function_of(m, g) != &f) continue;
    for (NodeId n : g.nodes())
      for (const Attr& a : g.attrs(n))
        if (!a.ref_attr_name.empty()) return false;
  }
  return true;
}

bool optimizable(const Graph& g) {
  if (g.detached()) return false;
  const Function* f = function_of(g.model(), g);
  return !f || passes_can_read(g.model(), *f);
}

// Shape inference types a function body from its calls, the last call's types winning. When
// every call gives the same input types, they are the body's for all of them, formal inputs
// included (the engine leaves those untyped); otherwise the passes see no shapes in the body,
// so that nothing one call's shapes allow is done for another's.
bool type_function_body(Graph& g, const Function& f) {
  Model& m = g.model();
  auto calls = calls_of(m, f);
  bool same = true;
  auto same_type = [](const Graph& a, ValueId x, const Graph& b, ValueId y) {
    if (a.dtype(x) != b.dtype(y) || a.has_shape(x) != b.has_shape(y)) return false;
    auto p = a.shape(x), q = b.shape(y);
    return !a.has_shape(x) || std::equal(p.begin(), p.end(), q.begin(), q.end());
  };
  for (size_t k = 1; k < calls.size() && same; ++k) {
    const Graph &a = m.graph(calls[0].first), &b = m.graph(calls[k].first);
    const auto xs = a.inputs(calls[0].second), ys = b.inputs(calls[k].second);
    if (xs.size() != ys.size()) same = false;
    for (size_t i = 0; same && i < xs.size(); ++i) same = same_type(a, xs[i], b, ys[i]);
  }
  if (!same) {
    for (uint32_t i = 0; i < g.value_count(); ++i)
      if (!g.is_initializer(ValueId(i)) && !g.outer(ValueId(i)).valid()) g.clear_shape(ValueId(i));
    return false;
  }
  if (calls.empty() || g.id() != f.body) return true;
  const Graph& caller = m.graph(calls[0].first);
  const auto actual = caller.inputs(calls[0].second);
  const auto& formal = g.graph_inputs();
  for (size_t i = 0; i < formal.size() && i < actual.size(); ++i) {
    if (!actual[i].valid()) continue;
    if (caller.has_shape(actual[i])) {
      std::vector<Dim> dims(caller.shape(actual[i]).begin(), caller.shape(actual[i]).end());
      g.set_type(formal[i], caller.dtype(actual[i]), dims);
    } else if (caller.dtype(actual[i]) != DType::Undefined) {
      g.set_dtype(formal[i], caller.dtype(actual[i]));
    }
  }
  return true;
}

// One round in one graph. Returns whether anything changed.
ShapeOptions shape_options(const RunOptions& o) {
  ShapeOptions so;
  for (auto& [k, v] : o.pass.dims) so.dims[k] = v;
  return so;
}

// What the previous round changed, so that passes anchored on op types (pass.h) that found
// nothing sit out rounds whose changes are nowhere near their anchors.
struct RoundState {
  explicit RoundState(std::span<const Pass* const> passes) : quiet(passes.size(), 0) {
    for (const Pass* p : passes) {
      anchors.emplace_back();
      for (const std::string& op : p->anchors()) anchors.back().push_back(intern(op).v);
    }
  }
  std::vector<std::vector<uint32_t>> anchors;  // per pass, interned op types
  std::vector<uint8_t> quiet;                  // per pass: its last analysis found nothing
  std::unordered_set<uint32_t> changed_ops;    // op types of changed nodes and their neighbours
  bool full = true;                            // analyze every pass this round
  bool skipped_any = false;                    // some pass sat out the last round
};

bool needs_analysis(const RoundState& st, size_t i) {
  if (st.full || !st.quiet[i] || st.anchors[i].empty()) return true;
  for (uint32_t op : st.anchors[i])
    if (st.changed_ops.count(op)) return true;
  return false;
}

// Op types of the nodes this round touched (killed, rewired, added) and of their producers and
// consumers: a new match of an anchored pass contains one of them.
void collect_changed_ops(const Graph& g, const Uses& uses, const Edits& e, std::unordered_set<uint32_t>& ops) {
  ops.clear();
  for (NodeId n : g.nodes()) {
    if (!e.touched(n)) continue;
    ops.insert(g.op_type(n).v);
    for (ValueId v : g.inputs(n))
      if (v.valid() && g.producer(v).valid()) ops.insert(g.op_type(g.producer(v)).v);
    for (ValueId v : g.outputs(n))
      if (v.valid() && v.index() < uses.value_capacity())
        for (const Use& u : uses.of(v)) ops.insert(g.op_type(u.node).v);
  }
}

bool run_round(Graph& g, std::span<const Pass* const> passes, const RunOptions& o, std::vector<PassStats>& stats,
               RoundState& st) {
  // Shapes first (it writes the value tables, so never concurrently with the analyses); the
  // report (symbolic values of shape tensors) goes to the passes with the options.
  ShapeReport shapes;
  if (o.infer_shapes) shapes = infer_shapes(g.model(), shape_options(o));
  PassOptions po = o.pass;
  po.shapes = o.infer_shapes ? &shapes : nullptr;
  if (const Function* f = function_of(g.model(), g); f && !type_function_body(g, *f)) po.shapes = nullptr;
  Uses uses(g);
  std::vector<std::any> matches(passes.size());
  std::vector<uint8_t> ran(passes.size(), 0);
  std::vector<double> analyze_time(passes.size(), 0);
  std::vector<size_t> to_run;
  for (size_t i = 0; i < passes.size(); ++i)
    if (!o.skip_quiet || needs_analysis(st, i))
      to_run.push_back(i);
    else
      ++stats[i].skipped;
  st.skipped_any = to_run.size() < passes.size();
  auto analyze_one = [&](size_t i) {
    auto t = Clock::now();
    matches[i] = passes[i]->analyze(g, uses, po);
    analyze_time[i] = since(t);
    ran[i] = 1;
  };
  if (o.parallel && to_run.size() > 1) {
    tbb::flow::graph fg;
    tbb::flow::broadcast_node<tbb::flow::continue_msg> start(fg);
    std::vector<std::unique_ptr<tbb::flow::continue_node<tbb::flow::continue_msg>>> nodes;
    for (size_t i : to_run) {
      nodes.push_back(std::make_unique<tbb::flow::continue_node<tbb::flow::continue_msg>>(
          fg, [&, i](const tbb::flow::continue_msg&) { analyze_one(i); }));
      tbb::flow::make_edge(start, *nodes.back());
    }
    start.try_put(tbb::flow::continue_msg());
    fg.wait_for_all();
  } else {
    for (size_t i : to_run) analyze_one(i);
  }

  Edits edits(g, uses, po);
  std::vector<Delta> deltas(passes.size());
  std::vector<size_t> applied(passes.size(), 0);
  for (size_t i = 0; i < passes.size(); ++i) {
    if (!ran[i]) continue;
    ++stats[i].analyzed;
    stats[i].analyze_seconds += analyze_time[i];
    st.quiet[i] = passes[i]->match_count(matches[i]) == 0;
    if (st.quiet[i]) continue;
    auto t = Clock::now();
    edits.charge_to(&deltas[i]);
    applied[i] = passes[i]->apply(edits, matches[i]);
    stats[i].apply_seconds += since(t);
  }
  edits.charge_to(nullptr);
  if (edits.empty()) return false;
  collect_changed_ops(g, uses, edits, st.changed_ops);
  st.full = false;
  auto t = Clock::now();
  edits.commit();
  double commit_time = since(t);
  size_t changed = 0;
  for (size_t i = 0; i < passes.size(); ++i)
    if (applied[i]) ++changed;
  for (size_t i = 0; i < passes.size(); ++i) {
    if (!applied[i]) continue;
    stats[i].removed.nodes += deltas[i].nodes;
    stats[i].removed.initializers += deltas[i].initializers;
    stats[i].removed.bytes += deltas[i].bytes;
    stats[i].applied += applied[i];
    stats[i].rounds += 1;
    stats[i].apply_seconds += commit_time / static_cast<double>(changed);
  }
  return true;
}

}  // namespace

ModelSize measure(const Model& m) {
  ModelSize s;
  for (size_t i = 0; i < m.graph_count(); ++i) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(i)));
    if (g.detached()) continue;
    s.nodes += g.node_count();
    s.initializers += static_cast<int64_t>(g.initializers().size());
    for (ValueId v : g.initializers()) s.bytes += static_cast<int64_t>(m.tensors.byte_size(g.initializer(v)));
    for (NodeId n : g.nodes())
      if (const Attr* a = g.is_op(n, "Constant") ? g.attr(n, "value") : nullptr; a && a->type == AttrType::Tensor)
        s.constant_bytes += static_cast<int64_t>(m.tensors.byte_size(a->tensor));
  }
  return s;
}

RunResult run_passes(Model& m, std::span<const Pass* const> passes, const RunOptions& o) {
  auto t0 = Clock::now();
  RunResult r;
  r.before = measure(m);
  r.passes.resize(passes.size());
  for (size_t i = 0; i < passes.size(); ++i) {
    r.passes[i].name = passes[i]->name();
    r.passes[i].accuracy = passes[i]->accuracy();
  }
  // Graphs in id order: the main graph first, then bodies (whose parents come before them).
  // A body change can free values in its parent (fewer captures), so sweep until quiet.
  for (int sweep = 0; sweep < 4; ++sweep) {
    bool any = false;
    for (size_t gi = 0; gi < m.graph_count(); ++gi) {
      Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
      if (!optimizable(g)) continue;
      int rounds = 0;
      RoundState st(passes);
      while (rounds < o.max_rounds) {
        // Python's Ctrl-C (io/budget.h): a round is the unit of work between checks.
        if (cancel_requested()) fail("optimize: interrupted at graph ", gi, " round ", rounds + 1);
        if (o.progress)
          o.progress("graph " + std::to_string(gi) + " round " + std::to_string(rounds + 1) + ": " +
                     std::to_string(g.node_count()) + " nodes");
        if (!run_round(g, passes, o, r.passes, st)) {
          if (!st.skipped_any) break;  // every pass looked and found nothing: the fixed point
          st.full = true;              // some sat out: confirm with all of them
          continue;
        }
        ++rounds;
        any = true;
      }
      r.rounds = std::max(r.rounds, rounds);
    }
    if (!any || m.graph_count() == 1) break;
  }
  for (size_t gi = 0; gi < m.graph_count(); ++gi)
    if (Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi))); g.is_function_body() && !g.detached())
      constants_as_nodes(g);
  for (const PassStats& s : r.passes)
    if (s.applied && static_cast<int>(s.accuracy) > static_cast<int>(r.worst)) r.worst = s.accuracy;
  r.after = measure(m);
  r.seconds = since(t0);
  return r;
}

void specialise_dims(Model& m, const std::map<std::string, int64_t>& dims) {
  if (dims.empty()) return;
  ShapeOptions so;
  for (auto& [k, v] : dims) so.dims[k] = v;
  infer_shapes(m, so);
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    for (uint32_t i = 0; i < g.value_count(); ++i) {
      ValueId v(i);
      if (!g.has_shape(v) || g.outer(v).valid()) continue;
      std::vector<Dim> shape(g.shape(v).begin(), g.shape(v).end());
      bool changed = false;
      for (Dim& d : shape) {
        if (d.known() || d.param.empty()) continue;
        auto it = dims.find(std::string(str(d.param)));
        if (it == dims.end()) continue;
        d = Dim::of(it->second);
        changed = true;
      }
      if (changed) g.set_type(v, g.dtype(v), shape);
    }
  }
}

}  // namespace onnxforge::passes
