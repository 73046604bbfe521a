#pragma once
// Handles, interned strings, element types and dimensions: the vocabulary of the graph tables.
#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace onnxforge {

// A strongly typed index into one column of a table. Default-constructed handles are invalid.
template <class Tag>
struct Id {
  static constexpr uint32_t kNone = 0xffffffffu;
  uint32_t v = kNone;
  constexpr Id() = default;
  constexpr explicit Id(uint32_t index) : v(index) {}
  constexpr bool valid() const { return v != kNone; }
  constexpr uint32_t index() const { return v; }
  constexpr auto operator<=>(const Id&) const = default;
};

using NodeId = Id<struct NodeTag>;
using ValueId = Id<struct ValueTag>;
using TensorId = Id<struct TensorTag>;
using GraphId = Id<struct GraphTag>;

// Interned string. Sym{} is the empty string; equal strings have equal Syms process-wide, so Syms
// compare across models. Interning is thread-safe; str() is lock-free.
struct Sym {
  uint32_t v = 0;
  constexpr Sym() = default;
  constexpr explicit Sym(uint32_t index) : v(index) {}
  constexpr bool empty() const { return v == 0; }
  constexpr auto operator<=>(const Sym&) const = default;
};

Sym intern(std::string_view s);
std::optional<Sym> lookup(std::string_view s);  // without interning
std::string_view str(Sym s);

// TensorProto.DataType values.
enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  Uint8 = 2,
  Int8 = 3,
  Uint16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  Uint32 = 12,
  Uint64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  Uint4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
};

std::string_view dtype_name(DType t);
bool dtype_known(int32_t t);
// Bits per element (4 for the packed 4-bit types, 0 for String/Undefined).
int dtype_bits(DType t);
// Bytes needed for `count` elements; nullopt on overflow. Strings have no fixed size (nullopt).
std::optional<uint64_t> dtype_storage_bytes(DType t, uint64_t count);

// One dimension of a shape: a known size (value >= 0), a named symbol (param), or unknown.
struct Dim {
  int64_t value = -1;
  Sym param;
  bool known() const { return value >= 0; }
  static Dim of(int64_t v) { return Dim{v, Sym{}}; }
  static Dim symbol(Sym s) { return Dim{-1, s}; }
  bool operator==(const Dim&) const = default;
};

}  // namespace onnxforge

template <class Tag>
struct std::hash<onnxforge::Id<Tag>> {
  size_t operator()(onnxforge::Id<Tag> id) const noexcept { return std::hash<uint32_t>{}(id.v); }
};
template <>
struct std::hash<onnxforge::Sym> {
  size_t operator()(onnxforge::Sym s) const noexcept { return std::hash<uint32_t>{}(s.v); }
};
