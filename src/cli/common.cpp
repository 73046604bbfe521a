#include "cli/common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "io/input_dims.h"
#include "io/units.h"
#include "ir/error.h"

namespace onnxforge::cli {

void add_dim_options(CLI::App& app, DimOptions& o, const std::string& what) {
  app.add_option("--dim", o.dims, "NAME=N: the size of symbolic dimension NAME" + what + " (repeatable)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_dim_spec(s) ? "" : "expects NAME=N with a non-negative integer N, got '" + s + "'";
          },
          "NAME=N"));
  app.add_option("--input-shape", o.input_shapes,
                 "NAME:D0,D1,...: the whole shape of input NAME, for dims without a name" + what + " (repeatable)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_input_shape_spec(s) ? "" : "expects NAME:D0,D1,... with non-negative integers, got '" + s + "'";
          },
          "NAME:D0,D1,..."));
}

std::map<std::string, int64_t> resolve_dims(const DimOptions& o, const std::vector<Model*>& models) {
  return resolve_input_dims(parse_dim_specs(o.dims), o.input_shapes, models);
}

void add_output_options(CLI::App& app, OutputOption& o, const std::string& help) {
  auto* opt = app.add_option("-o,--output", o.option, help);
  auto* pos = app.add_option("output", o.positional, help + " (instead of -o)");
  opt->excludes(pos);
  pos->excludes(opt);
}

const std::string& OutputOption::required(const char* command) const {
  if (path().empty()) fail_usage(command, " needs an output: -o OUT, or OUT after the input");
  return path();
}

void check_writable(const std::string& path, const char* option) {
  std::filesystem::path p(path);
  std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  std::error_code ec;
  if (p.filename().empty() || std::filesystem::is_directory(p, ec))
    fail_usage(option, " ", path, ": is a directory; give a file name");
  if (!std::filesystem::is_directory(dir, ec)) fail_usage(option, " ", path, ": folder '", dir.string(), "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    fail_usage(option, " ", path, ": cannot write in '", dir.string(), "': ", std::strerror(errno));
  if (std::filesystem::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    fail_usage(option, " ", path, ": the file is not writable: ", std::strerror(errno));
}

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::filesystem::path tmp = dir / ("." + path.filename().string() + ".onnxforge-tmp." + std::to_string(::getpid()) + ".0");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write '" + path.string() + "': " + std::strerror(errno), Error::Kind::Input, path.string());
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write '" + path.string() + "': " + std::strerror(e), Error::Kind::Input, path.string());
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path.string() + "': " + std::strerror(e), Error::Kind::Input, path.string());
  }
}

CLI::Validator size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return parse_bytes(s) ? "" : "expects a size such as 512M, 2G or 1048576, got '" + s + "'";
      },
      "SIZE");
}

}  // namespace onnxforge::cli
