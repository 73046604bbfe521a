#pragma once
// onnxforge::Error: every failure the engine reports to its caller (a file that cannot be read, a
// model that is malformed, an option that makes no sense, a tensor over the memory budget). The
// message says what is wrong, where, and (when there is one) what to do about it; the command line
// prints it and exits with 2 (docs/cli.md), 3 being left for anything else (a bug).
#include <stdexcept>
#include <string>
#include <utility>

#if defined(__GNUC__)
#define ONNXFORGE_API __attribute__((visibility("default")))
#else
#define ONNXFORGE_API
#endif

namespace onnxforge {

class ONNXFORGE_API Error : public std::runtime_error {
 public:
  // What the error is about, for `--json` output ({"error": {"kind", "message", "file", "node"}}).
  enum class Kind { Input, Usage, Memory };

  using std::runtime_error::runtime_error;
  Error(const std::string& message, Kind kind, std::string file = {}, std::string node = {})
      : std::runtime_error(message), kind_(kind), file_(std::move(file)), node_(std::move(node)) {}

  Kind kind() const { return kind_; }
  // The file the error is about (a model, an external-data file, an input file), when known.
  const std::string& file() const { return file_; }
  // The name of the node the error is about (a node with no kernel, a kernel that refused its
  // inputs), when known: the innermost one for a node in an If/Loop/Scan body.
  const std::string& node() const { return node_; }
  // The same error, now known to be about `file` (kept when one is already set).
  Error about(const std::string& file) const { return Error(what(), kind_, file_.empty() ? file : file_, node_); }
  // The same error (kind, file, node) with another message: context added on the way out.
  Error reworded(const std::string& message) const { return Error(message, kind_, file_, node_); }
  // The same error, now known to be about node `node` (kept when one is already set).
  Error at_node(const std::string& node) const { return Error(what(), kind_, file_, node_.empty() ? node : node_); }

 private:
  Kind kind_ = Kind::Input;
  std::string file_;
  std::string node_;
};

}  // namespace onnxforge
