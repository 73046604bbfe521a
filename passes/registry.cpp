#include "passes/registry.h"

namespace onnxforge::passes {

const std::vector<const Pass*>& all_passes() {
  static const std::vector<const Pass*> list = {
      &fold_constants_pass(),
      &simplify_shape_chains_pass(),
      &eliminate_identity_ops_pass(),
      &eliminate_redundant_transposes_pass(),
      &sink_transposes_pass(),
      &unflatten_gemm_pass(),
      &fuse_consecutive_reshapes_pass(),
      &fuse_layer_norm_pass(),
      &fuse_rms_norm_pass(),
      &fuse_gelu_pass(),
      &fuse_swish_pass(),
      &fuse_pad_into_conv_pass(),
      &fuse_conv_batchnorm_pass(),
      &annotate_conv_activation_pass(),
      &fuse_rotary_embedding_pass(),  // attention fusions: rotary first (attention reads its 3-D output)
      &fuse_attention_pass(),
      &fuse_qkv_projections_pass(),
      &fuse_matmul_add_pass(),
      &eliminate_duplicate_constants_pass(),
      &eliminate_dead_nodes_pass(),
      &eliminate_unused_initializers_pass(),
  };
  return list;
}

const std::vector<const Pass*>& pre_passes() {
  static const std::vector<const Pass*> list = {&upgrade_opset_pass()};
  return list;
}

const std::vector<const Pass*>& decomposition_passes() {
  static const std::vector<const Pass*> list = {
      &decompose_layer_norm_pass(), &decompose_rms_norm_pass(),         &decompose_gelu_pass(),
      &decompose_swish_pass(),      &decompose_rotary_embedding_pass(), &decompose_attention_pass()};
  return list;
}

const Pass* find_pass(std::string_view name) {
  for (const auto* list : {&pre_passes(), &all_passes(), &decomposition_passes()})
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
