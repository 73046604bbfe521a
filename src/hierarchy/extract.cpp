#include "hierarchy/extract.h"

#include <algorithm>
#include <set>

#include "analysis/shapes.h"
#include "hierarchy/hierarchy.h"
#include "hierarchy/model_copy.h"
#include "ir/error.h"
#include "ir/topo.h"
#include "ir/uses.h"

namespace onnxforge::hier {
namespace {

bool tag_matches(Sym tag, std::string_view spec) {
  if (spec.starts_with('/')) {
    std::string_view c = tag_class_path(tag);
    return c == spec || (c.size() > spec.size() && c.starts_with(spec) && c[spec.size()] == '/');
  }
  return is_within(tag_module(tag), spec);
}

[[noreturn]] void no_match(const Model& m, std::string_view spec) {
  std::set<std::string> names;
  for (uint32_t s = 1; s < m.tag_set_count(); ++s)
    for (Sym t : m.tags(s)) names.insert(std::string(spec.starts_with('/') ? tag_class_path(t) : tag_module(t)));
  std::string close;
  size_t shown = 0;
  std::string_view stem = spec.substr(0, spec.rfind(spec.starts_with('/') ? '/' : '.') + 1);
  for (const std::string& n : names)
    if (n.starts_with(stem) && shown < 8) {
      close += "\n  " + (n.empty() ? std::string("\"\" (root)") : n);
      ++shown;
    }
  fail("no node is tagged with module '", spec, "'",
       close.empty() ? std::string(": `onnxforge hierarchy MODEL --tree` lists the modules")
                     : "; modules nearby:" + close);
}

// `<source graph name>_<module>` (or just the module), in characters any tool accepts.
std::string extracted_graph_name(const Graph& source, std::string_view spec) {
  std::string module;
  for (char c : spec) {
    bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (plain || !module.empty()) module += plain ? c : '_';
  }
  if (module.empty()) module = "root";
  std::string_view from = str(source.name());
  return from.empty() ? module : std::string(from) + "_" + module;
}

}  // namespace

Extraction extract_module(Model& source, std::string_view spec) {
  Graph& g = source.main();
  const std::vector<NodeId> all = g.nodes();
  if (!all.empty() && std::none_of(all.begin(), all.end(), [&](NodeId n) { return g.scope(n) != 0; }))
    read_tags(source);
  std::vector<uint8_t> selected(g.node_capacity(), 0);
  size_t count = 0;
  for (NodeId n : g.nodes())
    for (Sym t : source.tags(g.scope(n)))
      if (tag_matches(t, spec)) {
        selected[n.index()] = 1;
        ++count;
        break;
      }
  if (count == 0) no_match(source, spec);
  // Constant nodes feeding the selection come along (they are not inputs a caller could feed).
  for (NodeId n : g.nodes())
    if (selected[n.index()]) {
      auto take_constant = [&](ValueId v) {
        if (v.valid() && g.producer(v).valid() && g.is_op(g.producer(v), "Constant"))
          selected[g.producer(v).index()] = 1;
      };
      for (ValueId v : g.inputs(n)) take_constant(v);
      for (ValueId v : g.implicit_inputs(n)) take_constant(v);  // read by an If/Loop/Scan body
    }

  // Types and shapes of the cut values (torch writes no value_info for intermediates).
  bool need_shapes = false;
  for (NodeId n : g.nodes())
    if (selected[n.index()])
      for (ValueId v : g.inputs(n))
        if (v.valid() && !g.has_type(v)) need_shapes = true;
  if (need_shapes) infer_shapes(source);

  Extraction out;
  out.model = std::make_unique<Model>();
  ModelCopier copy(source, *out.model);
  copy.copy_header();
  Graph& sub = out.model->main();
  sub.set_name(intern(extracted_graph_name(g, spec)));
  Uses uses(g);
  std::vector<ValueId> inputs, outputs;
  std::set<uint32_t> seen_inputs;
  auto take_input = [&](ValueId v) {
    if (!v.valid() || (g.producer(v).valid() && selected[g.producer(v).index()])) return;
    if (g.is_constant(v)) {
      copy.initializer(g, v, sub);
      ++out.initializers;
      return;
    }
    if (!seen_inputs.insert(v.index()).second) return;
    if (!g.has_type(v))
      fail("cannot type the cut value '", str(g.value_name(v)), "' (shape inference found no element type)");
    inputs.push_back(copy.value(g, v, sub));
    out.inputs.emplace_back(str(g.value_name(v)));
  };
  for (NodeId n : topological_order(g)) {
    if (!selected[n.index()]) continue;
    for (ValueId v : g.inputs(n)) take_input(v);
    for (ValueId v : g.implicit_inputs(n)) take_input(v);
    copy.node(g, n, sub);
    ++out.nodes;
  }
  for (NodeId n : topological_order(g)) {
    // A Constant read elsewhere too is copied, not exported (torch pools constants across modules).
    if (!selected[n.index()] || g.is_op(n, "Constant")) continue;
    for (ValueId v : g.outputs(n)) {
      if (!v.valid()) continue;
      bool read_outside = uses.is_graph_output(v);
      for (const Use& u : uses.of(v)) read_outside |= !selected[u.node.index()];
      if (!read_outside) continue;
      if (!g.has_type(v)) infer_shapes(source);
      outputs.push_back(copy.value(g, v, sub));
      out.outputs.emplace_back(str(g.value_name(v)));
    }
  }
  if (outputs.empty()) fail("module '", spec, "' computes nothing used outside it: no outputs to extract");
  // Graph inputs keep the source's order (original model inputs first), then the cut values.
  std::vector<ValueId> ordered;
  std::vector<std::string> ordered_names;
  for (ValueId v : g.graph_inputs())
    if (seen_inputs.contains(v.index())) {
      auto it = std::find(out.inputs.begin(), out.inputs.end(), str(g.value_name(v)));
      ordered.push_back(inputs[static_cast<size_t>(it - out.inputs.begin())]);
      ordered_names.push_back(*it);
    }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (std::find(ordered_names.begin(), ordered_names.end(), out.inputs[i]) == ordered_names.end()) {
      ordered.push_back(inputs[i]);
      ordered_names.push_back(out.inputs[i]);
    }
  out.inputs = std::move(ordered_names);
  sub.set_graph_inputs(std::move(ordered));
  sub.set_graph_outputs(std::move(outputs));
  out.initializer_bytes = copy.shared_bytes();
  return out;
}

std::unique_ptr<Model> clone_model(const Model& source) {
  auto m = std::make_unique<Model>();
  ModelCopier copy(source, *m);
  copy.copy_header();
  const Graph& g = source.main();
  Graph& to = m->main();
  to.set_name(g.name().empty() ? intern("main_graph") : g.name());
  std::vector<ValueId> ins, outs;
  for (ValueId v : g.graph_inputs()) ins.push_back(copy.value(g, v, to));
  for (ValueId v : g.initializers()) copy.initializer(g, v, to);
  for (NodeId n : topological_order(g)) copy.node(g, n, to);
  for (ValueId v : g.graph_outputs()) outs.push_back(copy.value(g, v, to));
  to.set_graph_inputs(std::move(ins));
  to.set_graph_outputs(std::move(outs));
  return m;
}

std::unique_ptr<Model> with_cuts_exposed(const Model& source, const Extraction& cut) {
  auto m = clone_model(source);
  Graph& g = m->main();
  std::vector<ValueId> outs = g.graph_outputs();
  auto expose = [&](const std::string& name) {
    auto v = g.find_value(name);
    if (!v || g.is_graph_input(*v) || g.is_initializer(*v)) return;
    if (std::find(outs.begin(), outs.end(), *v) == outs.end()) outs.push_back(*v);
  };
  for (const std::string& n : cut.inputs) expose(n);
  for (const std::string& n : cut.outputs) expose(n);
  g.set_graph_outputs(std::move(outs));
  return m;
}

}  // namespace onnxforge::hier
