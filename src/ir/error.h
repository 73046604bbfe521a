#pragma once
// onnxforge::Error: every user-facing failure. The message says what is wrong, where, and
// (when there is one) what to do about it. The CLI prints it and exits non-zero (docs/cli.md):
// 2 for an Error (bad input, bad usage, over the memory budget), 3 for anything else (a bug).
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "onnxforge/error.h"  // the class itself is part of the public API (include/onnxforge)

namespace onnxforge {

template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

// A bad command line found after parsing (a --dim naming no dimension, conflicting options).
template <class... Parts>
[[noreturn]] void fail_usage(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str(), Error::Kind::Usage);
}

}  // namespace onnxforge
