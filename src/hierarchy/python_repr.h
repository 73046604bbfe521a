#pragma once
// A parser for the Python `repr` of a flat list of strings, as the dynamo exporter writes into
// `pkg.torch.onnx.name_scopes` / `pkg.torch.onnx.class_hierarchy`:
//   "['', 'encoder', \"it's\", 'a\\'b']"  ->  {"", "encoder", "it's", "a'b"}
// Either quote style, backslash escapes (\\ \' \" \n \t \r \xNN \uNNNN), None entries become "".
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace onnxforge::hier {

// nullopt when `text` is not a list of string literals.
std::optional<std::vector<std::string>> parse_python_str_list(std::string_view text);

}  // namespace onnxforge::hier
