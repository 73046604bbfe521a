#pragma once
// onnxforge::Error: every failure the engine reports to its caller (a file that cannot be read, a
// model that is malformed, an option that makes no sense). The message says what is wrong, where,
// and (when there is one) what to do about it; the command line prints it and exits with 2.
#include <stdexcept>

#if defined(__GNUC__)
#define ONNXFORGE_API __attribute__((visibility("default")))
#else
#define ONNXFORGE_API
#endif

namespace onnxforge {

class ONNXFORGE_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace onnxforge
