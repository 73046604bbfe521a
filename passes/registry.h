#pragma once
// The passes. registry.cpp declares each in ONE row, {pass, inverse}: the row's position is its
// place in the pipeline, and a fusion's inverse is the decomposition a target lacking the fused op
// runs first. The rest of what a rule is — the op it emits, that op's first opset, its accuracy
// class, its anchors — the pass says about itself (Pass::accuracy(), Fusion::info()), so the
// pipeline, all_fusions(), the targets' inverses and --list-passes are all derived from the rows.
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace onnxforge::passes {

class Fusion;

struct Rule {
  const Pass* pass = nullptr;
  const Fusion* fusion = nullptr;  // the pass as a fusion into a standard op (fusion.h), else null
  const Pass* inverse = nullptr;   // its decompose_* pass, else null
};
// Every rule of the default pipeline, in pipeline order.
const std::vector<Rule>& rules();
// The decomposition of a standard op that a fusion emits ("Attention" → decompose_attention), or null.
const Pass* inverse_of(std::string_view op);

// Every pass, in pipeline order (the order `optimize` runs them by default).
const std::vector<const Pass*>& all_passes();
// The inverse of each fusion (decompose_*): not in the default pipeline; a --target that lacks
// an op puts its decomposition in front (passes/targets.h), --passes can name one.
const std::vector<const Pass*>& decomposition_passes();
const Pass* find_pass(std::string_view name);  // nullptr when unknown (searches both lists)

// One accessor per pass file.
const Pass& fold_constants_pass();
const Pass& simplify_shape_chains_pass();
const Pass& eliminate_identity_ops_pass();
const Pass& eliminate_redundant_transposes_pass();
const Pass& sink_transposes_pass();
const Pass& unflatten_gemm_pass();
const Pass& fuse_consecutive_reshapes_pass();
const Pass& fuse_layer_norm_pass();
const Pass& fuse_rms_norm_pass();
const Pass& fuse_gelu_pass();
const Pass& fuse_swish_pass();
const Pass& fuse_hard_swish_pass();
// Fusions into standard transformer ops (fusion.h): attention, rotary, QKV projections.
const Pass& fuse_rotary_embedding_pass();
const Pass& fuse_attention_pass();
const Pass& fuse_qkv_projections_pass();
const Pass& fuse_pad_into_conv_pass();
const Pass& fuse_conv_batchnorm_pass();
const Pass& annotate_conv_activation_pass();
const Pass& fuse_matmul_add_pass();
const Pass& eliminate_duplicate_constants_pass();
const Pass& eliminate_dead_nodes_pass();
const Pass& eliminate_unused_initializers_pass();
const Pass& decompose_layer_norm_pass();
const Pass& decompose_rms_norm_pass();
const Pass& decompose_gelu_pass();
const Pass& decompose_swish_pass();
const Pass& decompose_rotary_embedding_pass();
const Pass& decompose_attention_pass();

}  // namespace onnxforge::passes
