// Linear algebra: MatMul (batched, broadcasting), Gemm, integer/quantized matmuls, Einsum.
#include <algorithm>
#include <map>

#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

// Records a contraction-dim mismatch between two constants; symbols are trusted.
void check_k(OpCtx& c, const SymDim& a, const SymDim& b) {
  if (a.is_constant() && b.is_constant() && a != b)
    c.conflict("inner dimensions differ: " + a.str() + " vs " + b.str());
  else if (a != b)
    c.relate(a, b, /*broadcast=*/false);  // probs [.., seq, total] @ values [.., past+seq, ..]
}

std::optional<std::vector<SymDim>> matmul_shape(OpCtx& c, std::vector<SymDim> a, std::vector<SymDim> b,
                                                bool trans_a = false, bool trans_b = false) {
  if (a.empty() || b.empty()) {
    c.conflict("MatMul of a scalar");
    return std::nullopt;
  }
  bool vec_a = a.size() == 1, vec_b = b.size() == 1;
  if (vec_a) a.insert(a.begin(), SymDim::constant(1));
  if (vec_b) b.push_back(SymDim::constant(1));
  size_t ra = a.size(), rb = b.size();
  if (trans_a) std::swap(a[ra - 1], a[ra - 2]);
  if (trans_b) std::swap(b[rb - 1], b[rb - 2]);
  check_k(c, a[ra - 1], b[rb - 2]);
  std::vector<std::vector<SymDim>> batch{{a.begin(), a.end() - 2}, {b.begin(), b.end() - 2}};
  std::vector<SymDim> out = broadcast(c, batch);
  if (!vec_a) out.push_back(a[ra - 2]);
  if (!vec_b) out.push_back(b[rb - 1]);
  return out;
}

void matmul_typed(OpCtx& c, DType t, size_t ia, size_t ib, bool ta = false, bool tb = false) {
  const VState &a = c.in(ia), &b = c.in(ib);
  if (!a.ranked || !b.ranked) return c.set_dtype(0, t);
  if (auto s = matmul_shape(c, a.dims, b.dims, ta, tb))
    c.set(0, t, *s);
  else
    c.set_dtype(0, t);
}

void matmul(OpCtx& c) { matmul_typed(c, c.in(0).dtype, 0, 1); }
void matmul_integer(OpCtx& c) { matmul_typed(c, DType::Int32, 0, 1); }
void qlinear_matmul(OpCtx& c) { matmul_typed(c, c.in(7).dtype, 0, 3); }
// com.microsoft MatMulIntegerToFloat(A, B, ...) and DynamicQuantizeMatMul(A, B, ...): float32.
void matmul_to_float(OpCtx& c) { matmul_typed(c, DType::Float, 0, 1); }
void fused_matmul(OpCtx& c) {
  matmul_typed(c, c.in(0).dtype, 0, 1, c.attr_int("transA", 0) != 0, c.attr_int("transB", 0) != 0);
}

// com.microsoft QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp): Gemm's shape; 8-bit
// (y_zp's type, else A's) with y_scale, float without.
void qgemm(OpCtx& c) {
  const VState &a = c.in(0), &b = c.in(3);
  const DType t = !c.has_input(7) ? DType::Float : c.has_input(8) ? c.in(8).dtype : a.dtype;
  if (!a.ranked || !b.ranked || a.rank() != 2 || b.rank() != 2) return c.set_dtype(0, t);
  bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  check_k(c, a.dims[ta ? 0 : 1], b.dims[tb ? 1 : 0]);
  c.set(0, t, {a.dims[ta ? 1 : 0], b.dims[tb ? 0 : 1]});
}

void gemm(OpCtx& c) {
  const VState &a = c.in(0), &b = c.in(1);
  DType t = a.dtype;
  if (!a.ranked || !b.ranked || a.rank() != 2 || b.rank() != 2) return c.set_dtype(0, t);
  bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  SymDim m = a.dims[ta ? 1 : 0], ka = a.dims[ta ? 0 : 1];
  SymDim kb = b.dims[tb ? 1 : 0], n = b.dims[tb ? 0 : 1];
  check_k(c, ka, kb);
  c.set(0, t, {m, n});
}

// ---------------------------------------------------------------- Einsum

std::vector<std::string> split_terms(std::string_view s) {
  std::vector<std::string> out(1);
  for (char ch : s) {
    if (ch == ' ') continue;
    if (ch == ',')
      out.emplace_back();
    else
      out.back() += ch;
  }
  return out;
}

// Replaces "..." by a single '.'.
std::string compact_ellipsis(std::string s) {
  if (auto p = s.find("..."); p != std::string::npos) s.replace(p, 3, ".");
  return s;
}

void einsum(OpCtx& c) {
  DType t = c.in(0).dtype;
  std::string eq(c.attr_string("equation"));
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    lhs = eq.substr(0, p);
    rhs = compact_ellipsis(eq.substr(p + 2));
    rhs.erase(std::remove(rhs.begin(), rhs.end(), ' '), rhs.end());
    explicit_out = true;
  }
  std::vector<std::string> terms = split_terms(lhs);
  if (terms.size() != c.num_inputs()) return c.set_dtype(0, t);
  std::map<char, SymDim> size;
  std::map<char, int> uses;
  std::vector<std::vector<SymDim>> ellipses;
  for (size_t i = 0; i < terms.size(); ++i) {
    const VState& s = c.in(i);
    if (!s.ranked) return c.set_dtype(0, t);
    std::string term = compact_ellipsis(terms[i]);
    size_t letters = term.size() - (term.find('.') != std::string::npos);
    if (letters > s.rank()) return c.set_dtype(0, t);
    size_t ell = s.rank() - letters, d = 0;
    for (char ch : term) {
      if (ch == '.') {
        ellipses.emplace_back(s.dims.begin() + d, s.dims.begin() + d + ell);
        d += ell;
        continue;
      }
      const SymDim& dim = s.dims[d++];
      ++uses[ch];
      auto it = size.find(ch);
      if (it == size.end() || it->second.is_constant(1)) size[ch] = dim;
    }
  }
  std::vector<SymDim> ell = broadcast(c, ellipses);
  if (!explicit_out) {
    rhs = ellipses.empty() ? "" : ".";
    for (auto& [ch, n] : uses)
      if (n == 1) rhs += ch;
  }
  std::vector<SymDim> out;
  for (char ch : rhs) {
    if (ch == '.')
      out.insert(out.end(), ell.begin(), ell.end());
    else if (size.count(ch))
      out.push_back(size[ch]);
    else
      return c.set_dtype(0, t);
  }
  c.set(0, t, out);
}

}  // namespace

void register_linalg(const Registrar& reg) {
  reg("MatMul", matmul);
  reg("MatMulInteger", matmul_integer);
  reg("QLinearMatMul", qlinear_matmul);
  reg("com.microsoft::FusedMatMul", fused_matmul);
  reg("com.microsoft::MatMulIntegerToFloat", matmul_to_float);
  reg("com.microsoft::DynamicQuantizeMatMul", matmul_to_float);
  reg("Gemm", gemm);
  reg("com.microsoft::QGemm", qgemm);
  reg("Einsum", einsum);
}

}  // namespace onnxforge::shape
