#pragma once
// Symbolic dimensions: a dim is an integer constant or a canonical expression over named
// symbols — a sum of products with integer coefficients, where a factor is a named symbol or a
// floor division of an expression by a positive constant:
//
//     seq*12     batch*seq     seq+1     (seq+1)/2     batch*(seq/2)     seq*2-1
//
// The canonical text of an expression is its identity: it is interned as a Sym, so two SymDims
// are equal exactly when their canonical forms are equal (one integer compare). The text is
// what is written into an ONNX dim_param, and parse() reads it back, so expressions survive a
// save/load round trip. Arithmetic is process-wide and thread-safe.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/types.h"

namespace onnxforge {

class SymDim {
 public:
  SymDim() = default;  // the constant 0
  static SymDim constant(int64_t v) {
    SymDim d;
    d.c_ = v;
    return d;
  }
  // A plain named symbol (no parsing: any text is one atom).
  static SymDim symbol(std::string_view name);
  // Reads canonical expression text (what str() writes). Text that is not an expression in
  // that syntax (e.g. "sequence length", "batch_size") is one named symbol.
  static SymDim parse(std::string_view text);
  // From a graph Dim: constant, parsed dim_param, or nullopt when unknown.
  static std::optional<SymDim> from_dim(const Dim& d);

  bool is_constant() const { return e_.empty(); }
  int64_t value() const { return c_; }  // only when is_constant()
  bool is_constant(int64_t v) const { return e_.empty() && c_ == v; }
  // A single named symbol (not an expression).
  bool is_symbol() const;
  Sym expr() const { return e_; }  // canonical text; empty for constants
  std::string str() const;
  Dim to_dim() const { return is_constant() ? Dim::of(c_) : Dim::symbol(e_); }

  // Named symbols occurring in the expression (inside floor divisions too).
  std::vector<Sym> symbols() const;
  // Replaces named symbols by constants and re-canonicalizes.
  SymDim substitute(const std::unordered_map<Sym, int64_t>& values) const;

  friend SymDim operator+(SymDim a, SymDim b);
  friend SymDim operator-(SymDim a, SymDim b);
  friend SymDim operator*(SymDim a, SymDim b);
  friend SymDim operator-(SymDim a) { return SymDim::constant(0) - a; }
  // floor(a / d) for a constant d > 0.
  friend SymDim floor_div(SymDim a, int64_t d);
  friend SymDim ceil_div(SymDim a, int64_t d) { return floor_div(a + SymDim::constant(d - 1), d); }
  // a / b when the division is exact as polynomials (b a constant, a monomial, or equal to a).
  friend std::optional<SymDim> exact_div(SymDim a, SymDim b);
  // Product of factors divided by the product of others; equal factors cancel first, so
  // (batch*(seq+1)*768) / ((seq+1)*12) = batch*64.
  static std::optional<SymDim> quotient(std::vector<SymDim> num, std::vector<SymDim> den);

  bool operator==(const SymDim& o) const { return c_ == o.c_ && e_ == o.e_; }
  size_t hash() const { return std::hash<int64_t>{}(c_)*31 + e_.v; }

 private:
  int64_t c_ = 0;
  Sym e_;
};

SymDim product(std::span<const SymDim> dims);
std::string to_string(std::span<const SymDim> dims);  // "[batch, seq, 768]"

}  // namespace onnxforge

template <>
struct std::hash<onnxforge::SymDim> {
  size_t operator()(const onnxforge::SymDim& d) const noexcept { return d.hash(); }
};
