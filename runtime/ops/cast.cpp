// Cast and CastLike (numeric types, bool, float16, bfloat16).
#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

void cast_to(OpContext& c, DType to) {
  const Tensor& x = c.input(0);
  if (x.dtype == to) {
    c.output_alias(0, 0, x.shape);
    return;
  }
  Tensor& y = c.output(0, to, x.shape);
  cast_into(x, y);
}

void cast_op(OpContext& c) {
  const int64_t to = c.attr_i("to", 1);
  if (to <= 0 || to > 23 || !dtype_known(static_cast<int32_t>(to)) || static_cast<DType>(to) == DType::String)
    c.error("'to' = " + std::to_string(to) + " is not a numeric tensor type");
  cast_to(c, static_cast<DType>(to));
}
void cast_like(OpContext& c) { cast_to(c, c.input(1).dtype); }

}  // namespace

void register_cast(Registry& r) {
  // Elementwise in layout: a float16 model's Cast pairs around float32 ops (ISNet's Resizes)
  // stay inside channels-last chains.
  r.add("", "Cast", {.run = cast_op, .float_compute = false, .layout = LayoutUse::Elementwise});
  r.add("", "CastLike", {.run = cast_like, .float_compute = false});
}

}  // namespace onnxforge::rt
