#include "runtime/tensor_io.h"

#include <charconv>

#include <cmath>
#include <cstring>
#include <regex>

#include <minizip/unzip.h>

#include "io/budget.h"
#include "io/mapped_file.h"
#include "io/safe_file.h"
#include "ir/error.h"

namespace onnxforge::rt {

InputFileBytes read_input_file(const std::filesystem::path& path) {
  // MappedFile::open refuses anything but a regular file and opens without blocking (a FIFO
  // given as an input file must not hang the command); the parsers copy what they keep, and
  // each copy is checked against the memory budget, so the mapping bounds nothing by itself.
  try {
    auto f = MappedFile::open(path);
    return {f->view(), std::move(f)};
  } catch (const Error& e) { throw e.about(path.string()); }
}

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw Error(path + ": " + what, Error::Kind::Input, path);
}

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kNpy[] = {
    {"<f4", DType::Float},  {"<f8", DType::Double}, {"<f2", DType::Float16}, {"<i8", DType::Int64},
    {"<i4", DType::Int32},  {"<i2", DType::Int16},  {"|i1", DType::Int8},    {"|u1", DType::Uint8},
    {"<u2", DType::Uint16}, {"<u4", DType::Uint32}, {"<u8", DType::Uint64},  {"|b1", DType::Bool},
};

}  // namespace

std::string escape_file_name(std::string_view name) {
  std::string s(name);
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-')) ch = '_';
  return s;
}

static Tensor parse_npy_impl(std::string_view buf, const std::string& where) {
  const std::filesystem::path path(where);
  if (buf.size() < 10 || buf.compare(0, 6, "\x93NUMPY") != 0) fail("not a .npy file");
  const int major = static_cast<unsigned char>(buf[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(buf[8]) | static_cast<size_t>(static_cast<unsigned char>(buf[9])) << 8;
    hstart = 10;
  } else {
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(buf[8 + i])) << (8 * i);
    if (buf.size() < 12) fail("truncated .npy header");
    hstart = 12;
  }
  if (hlen > buf.size() - hstart) fail("truncated .npy header");
  std::string header(buf.substr(hstart, hlen));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'"))) fail(path.string(), ": no descr");
  std::string descr = m[1];
  if (descr.empty()) fail("empty .npy dtype");
  if (descr[0] == '=') descr[0] = '<';
  if (descr == "<i1" || descr == "<u1" || descr == "<b1") descr[0] = '|';
  DType dt = DType::Undefined;
  for (auto& n : kNpy)
    if (descr == n.descr) dt = n.dtype;
  if (dt == DType::Undefined) fail(path.string(), ": unsupported .npy dtype '", descr, "'");
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    fail(path.string(), ": Fortran order is not supported");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)"))) fail(path.string(), ": no shape");
  Shape shape;
  std::string dims = m[1];
  std::regex num("[0-9]+");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it) {
    int64_t d = 0;
    const std::string text = it->str();
    if (std::from_chars(text.data(), text.data() + text.size(), d).ec != std::errc())
      fail(path.string(), ": dimension ", text, " is too large");
    shape.push_back(d);
  }
  // The file's bytes must hold the shape before anything is allocated for it.
  const uint64_t need = checked_bytes(dt, shape);
  if (buf.size() < hstart + hlen || buf.size() - hstart - hlen < need)
    fail(path.string(), ": truncated data (shape ", shape_str(shape), " needs ", need, " bytes)");
  Tensor t = Tensor::alloc(dt, shape);
  std::memcpy(t.data, buf.data() + hstart + hlen, t.bytes());
  return t;
}

// Errors of a file's parse carry the file (`--json` reports it) and say its name once.
template <class F>
Tensor with_file(const std::string& where, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::Memory) throw e.about(where);
    std::string msg = e.what();
    if (!msg.starts_with(where)) msg = where + ": " + msg;
    throw e.reworded(msg).about(where);
  }
}

Tensor parse_npy(std::string_view bytes, const std::string& where) {
  return with_file(where, [&] { return parse_npy_impl(bytes, where); });
}

Tensor read_npy(const std::filesystem::path& path) {
  auto bytes = read_input_file(path);
  return parse_npy(bytes.view, path.string());
}

void write_npy(const std::filesystem::path& path, const Tensor& t0, const WriteRules& rules) {
  Tensor t = t0.dtype == DType::BFloat16 ? cast(t0, DType::Float) : t0;
  const char* descr = nullptr;
  for (auto& n : kNpy)
    if (n.dtype == t.dtype) descr = n.descr;
  if (!descr) fail("cannot write ", dtype_name(t.dtype), " tensors as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i)
    shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : i + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const uint16_t hl = static_cast<uint16_t>(header.size());
  std::string head = std::string("\x93NUMPY\x01\x00", 8);
  head += static_cast<char>(hl & 0xff);
  head += static_cast<char>(hl >> 8);
  head += header;
  try {
    check_output(path, rules);
    AtomicFile f(path, rules);
    f.write(head.data(), head.size());
    f.write(t.data, t.bytes());
    f.commit();
  } catch (const Error& e) { throw e.about(path.string()); }
}

// ------------------------------------------------------------------ TensorProto (wire format)

namespace {

struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  uint64_t varint() {
    uint64_t v = 0;
    for (int s = 0; p < end && s < 64; s += 7) {
      uint8_t b = *p++;
      v |= static_cast<uint64_t>(b & 0x7f) << s;
      if (!(b & 0x80)) return v;
    }
    fail("malformed TensorProto");
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (n > static_cast<uint64_t>(end - p)) fail("malformed TensorProto");
    return fixed(static_cast<size_t>(n));
  }
  std::string_view fixed(size_t n) {
    if (n > static_cast<size_t>(end - p)) fail("malformed TensorProto");
    std::string_view s(reinterpret_cast<const char*>(p), n);
    p += n;
    return s;
  }
};

}  // namespace

static Tensor parse_tensor_pb_impl(std::string_view buf, const std::string& where, std::string* name) {
  const std::filesystem::path path(where);
  Wire w{reinterpret_cast<const uint8_t*>(buf.data()), reinterpret_cast<const uint8_t*>(buf.data()) + buf.size()};
  Shape dims;
  DType dt = DType::Undefined;
  std::string_view raw;
  std::vector<uint64_t> ints;  // int32_data / int64_data / uint64_data (varints)
  std::string fixed;           // float_data / double_data bytes
  bool have_raw = false;
  while (w.p < w.end) {
    uint64_t key = w.varint();
    uint32_t field = static_cast<uint32_t>(key >> 3), type = key & 7;
    auto read_varints = [&](std::vector<uint64_t>& out) {
      if (type == 2) {
        auto s = w.bytes();
        Wire sub{reinterpret_cast<const uint8_t*>(s.data()), reinterpret_cast<const uint8_t*>(s.data()) + s.size()};
        while (sub.p < sub.end) out.push_back(sub.varint());
      } else {
        out.push_back(w.varint());
      }
    };
    switch (field) {
      case 1: {
        std::vector<uint64_t> d;
        read_varints(d);
        for (auto x : d) dims.push_back(static_cast<int64_t>(x));
        break;
      }
      case 2: {
        const uint64_t t = w.varint();
        if (t == 0 || t > static_cast<uint64_t>(DType::Float4E2M1))
          fail("TensorProto data_type ", t, " is not an ONNX type");
        dt = static_cast<DType>(t);
        break;
      }
      case 4:
      case 10: {
        if (type == 2) {
          auto s = w.bytes();
          fixed.append(s);
        } else {
          size_t n = field == 4 ? 4 : 8;
          fixed.append(w.fixed(n));
        }
        break;
      }
      case 5:
      case 7:
      case 11: read_varints(ints); break;
      case 8: {
        auto s = w.bytes();
        if (name) *name = std::string(s);
        break;
      }
      case 9:
        raw = w.bytes();
        have_raw = true;
        break;
      default:
        if (type == 0)
          w.varint();
        else if (type == 2)
          w.bytes();
        else if (type == 5)
          w.fixed(4);
        else if (type == 1)
          w.fixed(8);
        else
          fail(path.string(), ": malformed TensorProto");
    }
  }
  if (dt == DType::String) fail(path.string(), ": string tensors are not supported");
  {  // sizes checked before anything is allocated for the dims
    const uint64_t need = checked_bytes(dt, dims), es = dtype_size(dt);
    if (have_raw ? raw.size() != need : !fixed.empty() ? fixed.size() != need : ints.size() != need / es)
      fail(path.string(), ": holds ",
           have_raw         ? raw.size()
           : !fixed.empty() ? fixed.size()
                            : ints.size() * es,
           " bytes of data for shape ", shape_str(dims), ", which needs ", need);
  }
  Tensor t = Tensor::alloc(dt, dims);
  const size_t n = static_cast<size_t>(t.numel());
  if (have_raw) {
    if (raw.size() != t.bytes()) fail(path.string(), ": raw_data has ", raw.size(), " bytes, expected ", t.bytes());
    std::memcpy(t.data, raw.data(), raw.size());
  } else if (!fixed.empty()) {
    if (fixed.size() != t.bytes()) fail(path.string(), ": data size mismatch");
    std::memcpy(t.data, fixed.data(), fixed.size());
  } else {
    if (ints.size() != n) fail(path.string(), ": has ", ints.size(), " values, expected ", n);
    const size_t es = dtype_size(dt);
    for (size_t i = 0; i < n; ++i) {
      uint64_t v = ints[i];
      if (dt == DType::Float16 || dt == DType::BFloat16 || es <= 4) {
        uint32_t u = static_cast<uint32_t>(v);
        std::memcpy(t.data + i * es, &u, es);  // little-endian low bytes
      } else {
        std::memcpy(t.data + i * es, &v, es);
      }
    }
  }
  return t;
}

Tensor parse_tensor_pb(std::string_view bytes, const std::string& where, std::string* name) {
  return with_file(where, [&] { return parse_tensor_pb_impl(bytes, where, name); });
}

Tensor read_tensor_pb(const std::filesystem::path& path, std::string* name) {
  auto bytes = read_input_file(path);
  return parse_tensor_pb(bytes.view, path.string(), name);
}

// ------------------------------------------------------------------ .npz (a zip of .npy files)

namespace {

// minizip reads the archive from memory through these (the file was opened by read_input_file).
struct MemZip {
  std::string_view bytes;
  uint64_t pos = 0;
};
voidpf ZCALLBACK zip_open(voidpf opaque, const void*, int) { return opaque; }
uLong ZCALLBACK zip_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* z = static_cast<MemZip*>(stream);
  const uint64_t n = std::min<uint64_t>(size, z->pos < z->bytes.size() ? z->bytes.size() - z->pos : 0);
  std::memcpy(buf, z->bytes.data() + z->pos, n);
  z->pos += n;
  return static_cast<uLong>(n);
}
uLong ZCALLBACK zip_write(voidpf, voidpf, const void*, uLong) { return 0; }
ZPOS64_T ZCALLBACK zip_tell(voidpf, voidpf stream) { return static_cast<MemZip*>(stream)->pos; }
long ZCALLBACK zip_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* z = static_cast<MemZip*>(stream);
  uint64_t base = origin == ZLIB_FILEFUNC_SEEK_SET ? 0 : origin == ZLIB_FILEFUNC_SEEK_CUR ? z->pos : z->bytes.size();
  if (offset > z->bytes.size() || base + offset > z->bytes.size()) return -1;
  z->pos = base + offset;
  return 0;
}
int ZCALLBACK zip_close(voidpf, voidpf) { return 0; }
int ZCALLBACK zip_error(voidpf, voidpf) { return 0; }

}  // namespace

std::vector<std::pair<std::string, Tensor>> read_npz(const std::filesystem::path& path) {
  const std::string where = path.string();
  auto file = read_input_file(path);
  MemZip mem{file.view, 0};
  zlib_filefunc64_def io{zip_open, zip_read, zip_write, zip_tell, zip_seek, zip_close, zip_error, &mem};
  unzFile zf = unzOpen2_64(where.c_str(), &io);
  if (!zf) bad_file(where, "not a .npz file (no zip archive)");
  std::unique_ptr<void, int (*)(unzFile)> close(zf, unzClose);
  std::vector<std::pair<std::string, Tensor>> out;
  for (int rc = unzGoToFirstFile(zf); rc != UNZ_END_OF_LIST_OF_FILE; rc = unzGoToNextFile(zf)) {
    if (rc != UNZ_OK) bad_file(where, "malformed zip archive");
    unz_file_info64 info{};
    char name[1024];
    if (unzGetCurrentFileInfo64(zf, &info, name, sizeof name, nullptr, 0, nullptr, 0) != UNZ_OK)
      bad_file(where, "malformed zip entry");
    std::string entry(name);
    if (entry.ends_with("/")) continue;
    if (!entry.ends_with(".npy")) bad_file(where, "entry '" + entry + "' is not a .npy array");
    // The declared size bounds what is inflated: a short or long stream is a malformed archive.
    check_memory(info.uncompressed_size, where + ": entry '" + entry + "'");
    std::string data(static_cast<size_t>(info.uncompressed_size), '\0');
    if (unzOpenCurrentFile(zf) != UNZ_OK) bad_file(where, "cannot open entry '" + entry + "' (encrypted or malformed)");
    int64_t got = 0;
    while (static_cast<uint64_t>(got) < data.size()) {
      const unsigned chunk =
          static_cast<unsigned>(std::min<uint64_t>(data.size() - static_cast<uint64_t>(got), 1u << 30));
      int n = unzReadCurrentFile(zf, data.data() + got, chunk);
      if (n <= 0) break;
      got += n;
    }
    char extra;
    const bool longer = unzReadCurrentFile(zf, &extra, 1) > 0;
    if (unzCloseCurrentFile(zf) != UNZ_OK || static_cast<uint64_t>(got) != data.size() || longer)
      bad_file(where, "entry '" + entry + "' is corrupt (CRC or size mismatch)");
    entry.resize(entry.size() - 4);
    out.emplace_back(entry, parse_npy(data, where + ": entry '" + entry + ".npy'"));
  }
  if (out.empty()) bad_file(where, "the archive holds no arrays");
  return out;
}

Tensor read_tensor_file(const std::filesystem::path& path) {
  if (path.extension() == ".npy") return read_npy(path);
  return read_tensor_pb(path);
}

Checksum checksum(const Tensor& t) {
  Checksum c;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    double v = t.get_f64(i);
    c.sum += v;
    c.abs_sum += std::fabs(v);
  }
  return c;
}

}  // namespace onnxforge::rt
