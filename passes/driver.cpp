#include "passes/driver.h"

#include <tbb/flow_graph.h>

#include <any>
#include <chrono>

#include "analysis/shapes.h"
#include "ir/uses.h"

namespace onnxforge::passes {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

bool optimizable(const Graph& g) { return !g.detached() && !g.is_function_body(); }

// One round in one graph. Returns whether anything changed.
ShapeOptions shape_options(const RunOptions& o) {
  ShapeOptions so;
  for (auto& [k, v] : o.pass.dims) so.dims[k] = v;
  return so;
}

bool run_round(Graph& g, std::span<const Pass* const> passes, const RunOptions& o, std::vector<PassStats>& stats) {
  // Shapes first (it writes the value tables, so never concurrently with the analyses).
  if (o.infer_shapes) infer_shapes(g.model(), shape_options(o));
  Uses uses(g);
  std::vector<std::any> matches(passes.size());
  std::vector<double> analyze_time(passes.size(), 0);
  auto analyze_one = [&](size_t i) {
    auto t = Clock::now();
    matches[i] = passes[i]->analyze(g, uses, o.pass);
    analyze_time[i] = since(t);
  };
  if (o.parallel && passes.size() > 1) {
    tbb::flow::graph fg;
    tbb::flow::broadcast_node<tbb::flow::continue_msg> start(fg);
    std::vector<std::unique_ptr<tbb::flow::continue_node<tbb::flow::continue_msg>>> nodes;
    for (size_t i = 0; i < passes.size(); ++i) {
      nodes.push_back(std::make_unique<tbb::flow::continue_node<tbb::flow::continue_msg>>(
          fg, [&, i](const tbb::flow::continue_msg&) { analyze_one(i); }));
      tbb::flow::make_edge(start, *nodes.back());
    }
    start.try_put(tbb::flow::continue_msg());
    fg.wait_for_all();
  } else {
    for (size_t i = 0; i < passes.size(); ++i) analyze_one(i);
  }

  Edits edits(g, uses, o.pass);
  std::vector<Delta> deltas(passes.size());
  std::vector<size_t> applied(passes.size(), 0);
  for (size_t i = 0; i < passes.size(); ++i) {
    stats[i].analyze_seconds += analyze_time[i];
    if (passes[i]->match_count(matches[i]) == 0) continue;
    auto t = Clock::now();
    edits.charge_to(&deltas[i]);
    applied[i] = passes[i]->apply(edits, matches[i]);
    stats[i].apply_seconds += since(t);
  }
  edits.charge_to(nullptr);
  if (edits.empty()) return false;
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
      while (rounds < o.max_rounds) {
        if (o.progress)
          o.progress("graph " + std::to_string(gi) + " round " + std::to_string(rounds + 1) + ": " +
                     std::to_string(g.node_count()) + " nodes");
        if (!run_round(g, passes, o, r.passes)) break;
        ++rounds;
        any = true;
      }
      r.rounds = std::max(r.rounds, rounds);
    }
    if (!any || m.graph_count() == 1) break;
  }
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
