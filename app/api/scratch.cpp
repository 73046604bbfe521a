#include "api/scratch.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include "ir/error.h"

namespace onnxforge::api {

ScratchDir::ScratchDir() {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "onnxforge-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    fail("cannot create a temporary folder in ", base.string(), ": ", std::strerror(errno),
         " (set TMPDIR to a writable folder)");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // mappings of files in it stay valid after unlink
}

std::filesystem::path ScratchDir::write(std::string_view name, std::string_view bytes) const {
  std::filesystem::path p = path_ / name;
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) fail("cannot write ", bytes.size(), " bytes to ", p.string(), " (is $TMPDIR full?)");
  return p;
}

std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read ", path.string());
  std::string out;
  f.seekg(0, std::ios::end);
  out.resize(static_cast<size_t>(f.tellg()));
  f.seekg(0);
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f) fail("cannot read ", path.string());
  return out;
}

std::string model_bytes(const Model& model, std::string_view what) {
  ScratchDir dir;
  SaveOptions so;
  so.placement = WeightPlacement::Embed;
  std::filesystem::path p = dir.path() / "model.onnx";
  try {
    save_model(model, p, so);
  } catch (const Error& e) {
    fail(what, " cannot be returned as one serialized ModelProto: ", e.what(), "; write it to a file instead");
  }
  return read_file_bytes(p);
}

}  // namespace onnxforge::api
