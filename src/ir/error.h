#pragma once
// onnxforge::Error: every user-facing failure. The message says what is wrong, where, and
// (when there is one) what to do about it. The CLI prints it and exits non-zero (docs/cli.md):
// 2 for an Error (bad input, bad usage, over the memory budget), 3 for anything else (a bug).
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace onnxforge {

class Error : public std::runtime_error {
 public:
  // What the error is about, for `--json` output ({"error": {"kind", "message", "file"}}).
  enum class Kind { Input, Usage, Memory };

  using std::runtime_error::runtime_error;
  Error(const std::string& message, Kind kind, std::string file = {})
      : std::runtime_error(message), kind_(kind), file_(std::move(file)) {}

  Kind kind() const { return kind_; }
  // The file the error is about (a model, an external-data file, an input file), when known.
  const std::string& file() const { return file_; }
  // The same error, now known to be about `file` (kept when one is already set).
  Error about(const std::string& file) const { return Error(what(), kind_, file_.empty() ? file : file_); }

 private:
  Kind kind_ = Kind::Input;
  std::string file_;
};

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
