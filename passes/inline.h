#pragma once
// `optimize --inline-functions`: every call of a model-local function expanded
// (ir/inline_functions.h) and the functions dropped. A function whose default-domain import is
// below the model's opset is first raised to it by upgrade_opset (its adapters are bit-identical);
// one above is refused by the inliner, naming the --target-opset that would raise the model to it.
#include "ir/inline_functions.h"
#include "passes/pass.h"

namespace onnxforge::passes {

InlineReport inline_model_functions(Model& m);

}  // namespace onnxforge::passes
