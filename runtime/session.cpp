// Session: a plan for the model's main graph, runs, and the per-step profile.
#include <algorithm>
#include <map>

#include "runtime/plan.h"
#include "simd/parallel.h"

namespace onnxforge::rt {

Session::Session(const Model& model, SessionOptions options)
    : model_(&model), plan_(std::make_unique<Plan>(model.main(), options)) {}
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

namespace {
std::string step_op(const Plan& plan, const Step& s) {
  std::string op(str(plan.graph.op_type(s.node)));
  if (s.kernel == &softmax_attention_kernel()) op = "MatMul+Softmax+MatMul";
  if (s.kernel == &decomposed_layer_norm_kernel()) op = "LayerNorm(decomposed)";
  if (s.act.op != simd::UnaryOp::Identity) op += "+act";
  return op;
}
}  // namespace

std::vector<StepProfile> Session::step_profile() const {
  std::vector<StepProfile> out;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const Step& s = plan_->steps[i];
    out.push_back({node_desc(plan_->graph, s.node), step_op(*plan_, s), static_cast<double>(plan_->step_ns[i].load()) * 1e-6});
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

std::vector<OpProfile> Session::profile() const {
  std::map<std::string, OpProfile> by;
  for (size_t i = 0; i < plan_->steps.size(); ++i) {
    const Step& s = plan_->steps[i];
    const std::string op = step_op(*plan_, s);
    OpProfile& p = by[op];
    p.op = op;
    p.ms += static_cast<double>(plan_->step_ns[i].load()) * 1e-6;
    ++p.nodes;
  }
  std::vector<OpProfile> out;
  for (auto& [k, v] : by) out.push_back(v);
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ms > b.ms; });
  return out;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) const {
  simd::WarmWorkers warm;
  Frame f(*plan_, nullptr);
  return f.run(inputs);
}

}  // namespace onnxforge::rt
