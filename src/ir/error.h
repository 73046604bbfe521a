#pragma once
// onnxforge::Error: every user-facing failure. The message says what is wrong, where, and
// (when there is one) what to do about it. The CLI prints it and exits non-zero.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace onnxforge {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

}  // namespace onnxforge
