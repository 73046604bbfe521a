// Reader + the whole pass pipeline (with constant folding through the runtime) + writer.
#include "passes/driver.h"
#include "passes/evaluator.h"
#include "passes/registry.h"
#include "tools/fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxforge;
  auto model = fuzz::load_bytes(data, size);
  if (!model) return 0;
  try {
    passes::RunOptions ro;
    ro.pass.evaluator = passes::runtime_evaluator();
    ro.max_rounds = 4;
    passes::run_passes(*model, passes::all_passes(), ro);
    save_model(*model, fuzz::scratch() / "out.onnx");
  } catch (const Error&) {
  }
  return 0;
}
