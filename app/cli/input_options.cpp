#include "cli/input_options.h"

#include <charconv>

namespace onnxforge::cli {

void add_input_options(CLI::App& app, InputOptions& o, const std::string& what) {
  app.add_option(
      "--inputs,--input", o.inputs,
      "Inputs " + what +
          ": NAME=FILE (.npy or TensorProto .pb; given once: every seed, k times: k input "
          "sets), FILE.npz (one set), or a folder of input_K.pb / test_data_set_N (a set each); sets are the "
          "first seeds (repeatable)");
  app.add_option("--input-value", o.values, "NAME=V: input NAME filled with the number V on every seed (repeatable)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            const auto eq = s.find('=');
            double v = 0;
            const char* end = s.data() + s.size();
            if (eq == std::string::npos || eq == 0 || eq + 1 == s.size() ||
                std::from_chars(s.data() + eq + 1, end, v).ptr != end)
              return "expects NAME=NUMBER (e.g. sr=16000), got '" + s + "'";
            return "";
          },
          "NAME=V"));
}

}  // namespace onnxforge::cli
