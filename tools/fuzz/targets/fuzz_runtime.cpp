// Reader + runtime on small inputs: every symbolic dim 2, inputs of at most 64 Ki elements.
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "tools/fuzz/targets/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxforge;
  auto model = fuzz::load_bytes(data, size);
  if (!model) return 0;
  try {
    rt::Session session(*model);
    std::map<std::string, int64_t> dims;
    const Graph& g = model->main();
    for (ValueId v : session.input_values()) {
      auto shape = g.shape(v);
      for (size_t i = 0; i < shape.size(); ++i)
        if (!shape[i].known())
          dims[shape[i].param.empty() ? std::string(str(g.value_name(v))) + ":" + std::to_string(i)
                                      : std::string(str(shape[i].param))] = 2;
    }
    rt::InputPlan plan;
    plan = rt::plan_inputs(g, session.input_values(), dims);
    for (const auto& in : plan.inputs) {
      int64_t n = 1;
      for (int64_t d : in.shape) {
        if (d > (1 << 16)) return 0;
        n *= d;
        if (n > (1 << 16)) return 0;  // "small inputs"
      }
    }
    session.run(rt::make_inputs(plan, 1));
  } catch (const Error&) {}
  return 0;
}
