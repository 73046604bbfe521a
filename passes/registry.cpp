#include "passes/registry.h"

#include "ir/error.h"
#include "passes/fusion.h"

namespace onnxforge::passes {

namespace {
struct Row {
  const Pass& (*pass)();
  const Pass& (*inverse)() = nullptr;
};
// The pipeline. A new pass is its file plus one row here (plus its test); a fusion's row names
// its decomposition.
const Row kRows[] = {
    {fold_constants_pass},
    {simplify_shape_chains_pass},
    {eliminate_identity_ops_pass},
    {eliminate_redundant_transposes_pass},
    {sink_transposes_pass},
    {unflatten_gemm_pass},
    {fuse_consecutive_reshapes_pass},
    {fuse_layer_norm_pass, decompose_layer_norm_pass},
    {fuse_rms_norm_pass, decompose_rms_norm_pass},
    {fuse_gelu_pass, decompose_gelu_pass},
    {fuse_swish_pass, decompose_swish_pass},
    {fuse_hard_swish_pass},
    {fuse_pad_into_conv_pass},
    {fuse_conv_batchnorm_pass},
    {annotate_conv_activation_pass},
    {fuse_rotary_embedding_pass, decompose_rotary_embedding_pass},  // before attention, which reads its 3-D output
    {fuse_attention_pass, decompose_attention_pass},
    {fuse_qkv_projections_pass},
    {fuse_matmul_add_pass},
    {eliminate_duplicate_constants_pass},
    {eliminate_dead_nodes_pass},
    {eliminate_unused_initializers_pass},
};
}  // namespace

const std::vector<Rule>& rules() {
  static const std::vector<Rule> list = [] {
    std::vector<Rule> out;
    for (const Row& r : kRows) {
      Rule& rule = out.emplace_back();
      rule.pass = &r.pass();
      rule.fusion = dynamic_cast<const Fusion*>(rule.pass);
      rule.inverse = r.inverse ? &r.inverse() : nullptr;
      if (rule.inverse && !rule.fusion)
        fail("internal: pass '", rule.pass->name(), "' has an inverse but emits no standard op (registry.cpp)");
    }
    return out;
  }();
  return list;
}

const Pass* inverse_of(std::string_view op) {
  for (const Rule& r : rules())
    if (r.fusion && r.inverse && r.fusion->info().op == op) return r.inverse;
  return nullptr;
}

namespace {

// The rows' `field` where set, in pipeline order.
template <class T>
std::vector<const T*> from_rows(const T* Rule::*field) {
  std::vector<const T*> out;
  for (const Rule& r : rules())
    if (r.*field) out.push_back(r.*field);
  return out;
}

}  // namespace

const std::vector<const Pass*>& all_passes() {
  static const std::vector<const Pass*> list = from_rows(&Rule::pass);
  return list;
}

const std::vector<const Pass*>& decomposition_passes() {
  static const std::vector<const Pass*> list = from_rows(&Rule::inverse);
  return list;
}

const std::vector<const Fusion*>& all_fusions() {
  static const std::vector<const Fusion*> list = from_rows(&Rule::fusion);
  return list;
}

const Pass* find_pass(std::string_view name) {
  for (const auto* list : {&all_passes(), &decomposition_passes()})
    for (const Pass* p : *list)
      if (p->name() == name) return p;
  return nullptr;
}

const char* accuracy_name(AccuracyClass c) {
  switch (c) {
    case AccuracyClass::Lossless: return "lossless";
    case AccuracyClass::FloatBounded: return "float-bounded";
    case AccuracyClass::EmpiricallySafe: return "empirical";
  }
  return "?";
}

Tolerance tolerance_of(AccuracyClass c) {
  switch (c) {
    case AccuracyClass::Lossless: return {0, 0};
    case AccuracyClass::FloatBounded: return {1e-4, 1e-3, 1.0 / 16};
    case AccuracyClass::EmpiricallySafe: return {1e-3, 1e-2, 1.0 / 16};
  }
  return {};
}

}  // namespace onnxforge::passes
