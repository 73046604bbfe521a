#pragma once
// Operator categories for tagging coverage (design revision R17): compute categories must reach
// 95%, tensor manipulation 85%; constants, casts and comparison/logic are context-dependent
// (often created by the exporter outside any module) and have no threshold.
#include <optional>
#include <string_view>

#include "ir/op_traits.h"

namespace onnxforge::hier {

using onnxforge::OpCategory;  // the enum lives with the op facts (ir/op_traits.h)

// The category of an op type, from the op traits table (the domain is not consulted: a
// com.microsoft Gelu is an activation too).
OpCategory categorize(std::string_view domain, std::string_view op_type);
std::string_view category_name(OpCategory c);
bool is_compute(OpCategory c);
// Required fraction of tagged nodes, nullopt when context-dependent.
std::optional<double> category_threshold(OpCategory c);

}  // namespace onnxforge::hier
