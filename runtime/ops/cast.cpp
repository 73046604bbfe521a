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

void cast_op(OpContext& c) { cast_to(c, static_cast<DType>(c.attr_i("to", 1))); }
void cast_like(OpContext& c) { cast_to(c, c.input(1).dtype); }

}  // namespace

void register_cast(Registry& r) {
  r.add("", "Cast", {.run = cast_op, .float_compute = false});
  r.add("", "CastLike", {.run = cast_like, .float_compute = false});
}

}  // namespace onnxforge::rt
