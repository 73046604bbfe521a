// Reader + shape inference + inspect's summary.
#include "analysis/inspect.h"
#include "analysis/shapes.h"
#include "tools/fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxforge;
  auto model = fuzz::load_bytes(data, size);
  if (!model) return 0;
  try {
    summarize(*model);
    ShapeOptions so;
    so.add_value_info = true;
    so.dims["batch"] = 2;
    infer_shapes(*model, so);
    infer_shapes(*model, so);  // idempotent, and must not crash on its own output
  } catch (const Error&) {}
  return 0;
}
