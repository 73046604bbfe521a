// Reader + the whole pass pipeline (with constant folding through the runtime) + writer.
#include "passes/audit.h"
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"
#include "passes/upgrade_opset.h"
#include "tools/fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxforge;
  auto model = fuzz::load_bytes(data, size);
  if (!model) return 0;
  try {
    // One input in four also goes through `audit` (its own load, forensics and fusion census)
    // and the opset upgrade (`--target-opset`) before the pipeline.
    if (size % 4 == 0) {
      (void)passes::audit_model((fuzz::scratch() / "model.onnx").string());
      if (model->opset("") >= passes::kMinTargetOpset && model->opset("") < passes::kMaxRuntimeOpset)
        passes::upgrade_opset(*model, passes::kMaxRuntimeOpset);
    }
    passes::RunOptions ro;
    ro.pass.evaluator = passes::runtime_evaluator();
    ro.max_rounds = 4;
    passes::run_passes(*model, passes::all_passes(), ro);
    save_model(*model, fuzz::scratch() / "out.onnx");
  } catch (const Error&) {}
  return 0;
}
