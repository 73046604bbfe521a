// Session: a plan for the model's main graph, runs, and the per-step profile.
#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ir/inline_functions.h"
#include "runtime/plan.h"
#include "simd/parallel.h"

namespace onnxforge::rt {

namespace {
// The model the plan runs: `model`, or a copy with its function calls expanded (value ids of the
// main graph's interface are the same in both: expansion only adds values).
const Model& planned(const Model& model, std::unique_ptr<Model>& expanded) {
  if (!calls_functions(model)) return model;
  expanded = model.clone();
  try {
    inline_functions(*expanded, {.drop_functions = false});
  } catch (const Error& e) { throw e.about(model.path.string()); }
  return *expanded;
}
}  // namespace

Session::Session(const Model& model, SessionOptions options)
    : model_(&model), plan_(std::make_unique<Plan>(planned(model, expanded_).main(), options)) {}
Session::~Session() = default;

const std::vector<ValueId>& Session::input_values() const { return plan_->inputs; }
std::vector<std::string> Session::input_names() const {
  std::vector<std::string> out;
  for (ValueId v : plan_->inputs) out.emplace_back(str(model_->main().value_name(v)));
  return out;
}
std::vector<std::string> Session::output_names() const {
  std::vector<std::string> out;
  for (ValueId v : model_->main().graph_outputs()) out.emplace_back(str(model_->main().value_name(v)));
  return out;
}
size_t Session::step_count() const { return plan_->steps.size(); }
size_t Session::fused_count() const { return plan_->fused; }
size_t Session::channels_last_count() const { return plan_->channels_last; }
size_t Session::in_place_count() const { return plan_->in_place; }

namespace {
std::string step_op(const Plan& plan, const Step& s) {
  std::string op(str(plan.graph.op_type(s.node)));
  if (s.kernel == &softmax_attention_kernel()) op = "MatMul+Softmax+MatMul";
  if (s.kernel == &decomposed_layer_norm_kernel()) op = "LayerNorm(decomposed)";
  if (s.kernel == &split_attention_kernel()) op = "Split+Attention";
  if (s.kernel == &conv_integer_to_float_kernel()) op = "ConvInteger+Cast+Mul";
  if (s.act.op != simd::UnaryOp::Identity) op += "+act";
  return op;
}

// Every step of `plan` and, depth first, of the bodies of its If/Loop/Scan steps, each with its
// path ("If_0/then_branch/LSTM_3"). A control-flow step's time is its own (the frames, copies
// and stacking around its bodies, the sum of its body steps taken off): the steps of one run
// add up to the run, and the body's nodes show where its time goes.
void collect(const Plan& plan, const std::string& prefix, std::vector<StepProfile>& out) {
  const Graph& g = plan.graph;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    const std::string path = prefix + node_ref(g, s.node);
    const size_t self = out.size();
    out.push_back(
        {prefix.empty() ? node_desc(g, s.node) : "node '" + path + "' (" + std::string(str(g.op_type(s.node))) + ")",
         step_op(plan, s), static_cast<double>(plan.step_ns[i].load()) * 1e-6, path, 0});
    double body_ms = 0;
    for (const Attr& a : g.attrs(s.node)) {
      std::vector<GraphId> subs;
      if (a.type == AttrType::Graph) subs.push_back(a.graph);
      if (a.type == AttrType::Graphs)
        for (GraphId sub : g.graphs(a)) subs.push_back(sub);
      for (size_t k = 0; k < subs.size(); ++k) {
        const Plan& sp = *plan.subplan(subs[k]);
        for (const auto& ns : sp.step_ns) body_ms += static_cast<double>(ns.load()) * 1e-6;
        std::string attr(str(a.name));
        if (subs.size() > 1) attr += "[" + std::to_string(k) + "]";
        collect(sp, path + "/" + attr + "/", out);
      }
    }
    for (size_t k = self + 1; k < out.size(); ++k) out[k].depth += 1;
    out[self].ms = std::max(0.0, out[self].ms - body_ms);
  }
}
}  // namespace

std::vector<StepProfile> Session::step_profile() const {
  std::vector<StepProfile> out;
  collect(*plan_, "", out);
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

std::vector<OpProfile> Session::profile() const {
  std::vector<StepProfile> steps;
  collect(*plan_, "", steps);
  std::map<std::string, OpProfile> by;
  for (const StepProfile& s : steps) {
    OpProfile& p = by[s.op];
    p.op = s.op;
    p.ms += s.ms;
    ++p.nodes;
  }
  std::vector<OpProfile> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

namespace {
void add_counts(const Plan& p, Session::SetupCounts& c) {
  c.body_frames += p.frames_made();
  c.layouts += p.layouts_recorded();
  for (const auto& [g, sp] : p.subplans()) add_counts(*sp, c);
}
}  // namespace

Session::SetupCounts Session::setup_counts() const {
  SetupCounts c;
  add_counts(*plan_, c);
  return c;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs, uint64_t random_seed) const {
  simd::WarmWorkers warm;
  std::unique_ptr<Frame> f = plan_->take_frame();
  f->random_seed = random_seed;
  auto outs = f->run(inputs);
  plan_->give_frame(std::move(f));
  return outs;
}

}  // namespace onnxforge::rt
