// Reader + writer: any bytes either load or are refused with onnxforge::Error; what loads is
// saved (as convert does, and sorted as optimize does) and must load again.
#include "tools/fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxforge;
  auto model = fuzz::load_bytes(data, size);
  if (!model) return 0;
  for (bool keep : {true, false}) {
    SaveOptions o;
    o.keep_node_order = keep;
    const auto out = fuzz::scratch() / "out.onnx";
    try {
      save_model(*model, out, o);
    } catch (const Error&) {
      continue;  // e.g. a cycle found while sorting
    }
    // What we wrote must read back (a model onnxforge writes and then refuses is a finding).
    LoadOptions lo;
    lo.validate = keep;  // an unsorted model stays unsorted with keep_node_order
    auto again = load_model(out, lo);
    if (again->main().node_count() != model->main().node_count()) __builtin_trap();
  }
  return 0;
}
