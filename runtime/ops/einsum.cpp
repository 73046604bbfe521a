// Einsum. float32 equations are contracted one pair of operands at a time on the GEMM: each
// operand is viewed as [batch, m, k] / [batch, k, n] (a transpose only where its layout is not
// already one of those, a reshape otherwise), labels that only one operand has are summed out
// first, and simd::gemm_batched does the rest. That covers what exporters emit (attention's
// `bhqd,bhkd->bhqk` and `bhqk,bhkd->bhqd`, `bij,bjk->bik`, `...ij,...jk->...ik`, transposes,
// reductions like `ij->i`, outer products, diagonals and traces). Other types go through the
// generic loop over every label combination, which is bounded (hostile equations are refused
// with the count instead of running for hours).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "runtime/ops/common.h"
#include "simd/gemm.h"
#include "simd/transpose.h"

namespace onnxforge::rt {

namespace {

// The equation with each operand's term (an ellipsis expanded to digit labels, right-aligned
// across operands as broadcasting aligns dims), the output's and each label's size.
struct Equation {
  std::string text;
  std::vector<std::string> terms;
  std::string out;
  std::map<char, int64_t> dim;
};

Equation parse(const OpContext& c) {
  Equation e;
  std::string eq(c.attr_s("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  e.text = eq;
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    lhs = eq.substr(0, p);
    rhs = eq.substr(p + 2);
    explicit_out = true;
  }
  std::vector<std::string>& terms = e.terms;
  for (size_t s = 0;;) {
    size_t end = lhs.find(',', s);
    terms.push_back(lhs.substr(s, end == std::string::npos ? std::string::npos : end - s));
    if (end == std::string::npos) break;
    s = end + 1;
  }
  if (terms.size() != c.input_count()) c.error("equation has " + std::to_string(terms.size()) + " operands");
  size_t ell_rank = 0;
  auto expand = [&](std::string t, int64_t rank) {
    auto p = t.find("...");
    if (p == std::string::npos) return t;
    if (t.find("...", p + 3) != std::string::npos || rank + 3 < static_cast<int64_t>(t.size()) ||
        rank - static_cast<int64_t>(t.size() - 3) > 10)
      c.error("the term '" + t + "' does not fit an operand of rank " + std::to_string(rank));
    size_t n = static_cast<size_t>(rank) - (t.size() - 3);
    ell_rank = std::max(ell_rank, n);
    std::string d;
    for (size_t i = 0; i < n; ++i) d += static_cast<char>('0' + (ell_rank - n + i));
    return t.substr(0, p) + d + t.substr(p + 3);
  };
  for (size_t i = 0; i < terms.size(); ++i) terms[i] = expand(terms[i], c.input(i).rank());
  // Digits were assigned right-aligned against the largest ellipsis so far: re-number them
  // against the final one.
  for (std::string& t : terms) {
    std::string fixed;
    size_t nd = std::count_if(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    size_t k = 0;
    for (char ch : t) fixed += (ch >= '0' && ch <= '9') ? static_cast<char>('0' + (ell_rank - nd + k++)) : ch;
    t = fixed;
  }
  std::map<char, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& x = c.input(i);
    if (static_cast<int64_t>(terms[i].size()) != x.rank()) c.error("operand " + std::to_string(i) + " rank mismatch");
    for (size_t d = 0; d < terms[i].size(); ++d) {
      char ch = terms[i][d];
      ++count[ch];
      auto [it, fresh] = e.dim.emplace(ch, x.shape[d]);
      if (!fresh && it->second != x.shape[d]) {
        if (it->second == 1)
          it->second = x.shape[d];
        else if (x.shape[d] != 1)
          c.error(std::string("dimension mismatch for label ") + ch);
      }
    }
  }
  if (explicit_out) {
    if (auto p = rhs.find("..."); p != std::string::npos) {
      std::string d;
      for (size_t i = 0; i < ell_rank; ++i) d += static_cast<char>('0' + i);
      rhs = rhs.substr(0, p) + d + rhs.substr(p + 3);
    }
    e.out = rhs;
  } else {
    for (size_t i = 0; i < ell_rank; ++i) e.out += static_cast<char>('0' + i);
    for (auto [ch, n] : count)
      if (n == 1 && !(ch >= '0' && ch <= '9')) e.out += ch;
  }
  for (size_t i = 0; i < e.out.size(); ++i) {
    if (!e.dim.count(e.out[i])) c.error(std::string("output label ") + e.out[i] + " is not in any operand");
    if (e.out.find(e.out[i], i + 1) != std::string::npos)
      c.error(std::string("output label ") + e.out[i] + " appears twice in '" + eq + "'");
  }
  return e;
}

// ---- float32: pairwise contraction on the GEMM ----

// An operand as distinct labels over strided float32 data. A label repeated within one term is
// its diagonal (the strides add); a dim of size 1 broadcasts, so it is left out (its index is
// always 0), and so is every label whose only size is 1 (it places no element anywhere).
struct View {
  std::string labels;
  std::vector<int64_t> size, stride;
  const float* data = nullptr;
  Tensor hold;  // the buffer, when the view is an intermediate result
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : size) n *= s;
    return n;
  }
  int64_t size_of(const std::string& ls) const {
    int64_t n = 1;
    for (char ch : ls) n *= size[labels.find(ch)];
    return n;
  }
};

View view_of(const OpContext& c, const Tensor& x, const std::string& term) {
  View v;
  v.data = x.ptr<float>();
  const auto cs = contiguous_strides(x.shape);
  for (size_t d = 0; d < term.size(); ++d) {
    if (x.shape[d] == 1) continue;
    auto p = v.labels.find(term[d]);
    if (p == std::string::npos) {
      v.labels += term[d];
      v.size.push_back(x.shape[d]);
      v.stride.push_back(cs[d]);
    } else {
      if (v.size[p] != x.shape[d]) c.error(std::string("dimension mismatch for the repeated label ") + term[d]);
      v.stride[p] += cs[d];
    }
  }
  return v;
}

// Whether v's elements are row-major contiguous in the label order `order` (v's labels permuted).
bool contiguous_in(const View& v, const std::string& order) {
  int64_t expect = 1;
  for (size_t i = order.size(); i-- > 0;) {
    const size_t p = v.labels.find(order[i]);
    if (v.stride[p] != expect) return false;
    expect *= v.size[p];
  }
  return true;
}

// v as row-major contiguous in `order` into `dst` (numel floats), or into a new buffer when
// dst is null. No copy at all when v already is.
View arrange(const View& v, const std::string& order, float* dst = nullptr) {
  View r;
  r.labels = order;
  for (char ch : order) r.size.push_back(v.size[v.labels.find(ch)]);
  r.stride = contiguous_strides(r.size);
  if (contiguous_in(v, order) && (!dst || dst == v.data)) {
    r.data = v.data;
    r.hold = v.hold;
    return r;
  }
  if (!dst) {
    r.hold = Tensor::alloc(DType::Float, r.size);
    dst = r.hold.ptr<float>();
  }
  std::vector<int64_t> perm;
  for (char ch : order) perm.push_back(static_cast<int64_t>(v.labels.find(ch)));
  simd::transpose(sizeof(float), v.size, v.data, perm, dst, v.stride);
  r.data = dst;
  return r;
}

// v summed over every label not in `keep` (v's labels to keep, in the order the result has).
View sum_out(const View& v, const std::string& keep) {
  std::string order = keep;
  for (char ch : v.labels)
    if (keep.find(ch) == std::string::npos) order += ch;
  if (order.size() == keep.size()) return v;
  const View x = arrange(v, order);
  View r;
  r.labels = keep;
  for (char ch : keep) r.size.push_back(x.size[x.labels.find(ch)]);
  r.stride = contiguous_strides(r.size);
  r.hold = Tensor::alloc(DType::Float, r.size);
  r.data = r.hold.ptr<float>();
  const int64_t rows = r.numel(), cols = x.numel() / rows;
  float* y = r.hold.ptr<float>();
  for (int64_t i = 0; i < rows; ++i) {  // a double sum: ij->i over a long row stays exact to float
    double s = 0;
    for (const float *p = x.data + i * cols, *e = p + cols; p < e; ++p) s += *p;
    y[i] = static_cast<float>(s);
  }
  return r;
}

std::string only(const std::string& labels, auto&& keep) {
  std::string r;
  for (char ch : labels)
    if (keep(ch)) r += ch;
  return r;
}

// a and b contracted over their shared labels that are not in `keep`; the result holds the
// labels of `keep` (in some order: `keep`'s own when `dst` is given, into dst).
View contract(View a, View b, const std::string& keep, float* dst) {
  auto in = [](const std::string& s, char ch) { return s.find(ch) != std::string::npos; };
  // Labels of one operand alone that the result does not keep are summed out first.
  a = sum_out(a, only(a.labels, [&](char ch) { return in(b.labels, ch) || in(keep, ch); }));
  b = sum_out(b, only(b.labels, [&](char ch) { return in(a.labels, ch) || in(keep, ch); }));
  // batch: in both and kept; m: a's kept; n: b's kept; k: in both, summed.
  auto is_batch = [&](char ch) { return in(a.labels, ch) && in(b.labels, ch) && in(keep, ch); };
  auto is_m = [&](char ch) { return in(a.labels, ch) && !in(b.labels, ch); };
  auto is_n = [&](char ch) { return in(b.labels, ch) && !in(a.labels, ch); };
  auto is_k = [&](char ch) { return in(a.labels, ch) && in(b.labels, ch) && !in(keep, ch); };
  // Each group's order as a, b or the result has it; the layout chosen is the one that copies
  // the fewest elements (none, for the attention forms, whose operands are [batch, m, k] and
  // [batch, n, k] as stored: the GEMM reads b transposed).
  std::vector<std::string> bt_o = {only(a.labels, is_batch), only(b.labels, is_batch), only(keep, is_batch)};
  std::vector<std::string> m_o = {only(a.labels, is_m), only(keep, is_m)};
  std::vector<std::string> n_o = {only(b.labels, is_n), only(keep, is_n)};
  std::vector<std::string> k_o = {only(a.labels, is_k), only(b.labels, is_k)};
  const int64_t na = a.numel(), nb = b.numel();
  const int64_t Bt = a.size_of(bt_o[0]), M = a.size_of(m_o[0]), N = b.size_of(n_o[0]), K = a.size_of(k_o[0]);
  struct Choice {
    std::string bt, m, n, k;
    bool ta = false, tb = false;
    int64_t cost = -1;
  } best;
  for (const auto& bt : bt_o)
    for (const auto& m : m_o)
      for (const auto& n : n_o)
        for (const auto& k : k_o)
          for (int t = 0; t < 4; ++t) {
            const bool ta = t & 1, tb = t & 2;
            int64_t cost = (contiguous_in(a, ta ? bt + k + m : bt + m + k) ? 0 : na) +
                           (contiguous_in(b, tb ? bt + n + k : bt + k + n) ? 0 : nb) +
                           (dst && bt + m + n != keep ? Bt * M * N : 0);
            if (best.cost < 0 || cost < best.cost) best = {bt, m, n, k, ta, tb, cost};
          }
  const View A = arrange(a, best.ta ? best.bt + best.k + best.m : best.bt + best.m + best.k);
  const View B = arrange(b, best.tb ? best.bt + best.n + best.k : best.bt + best.k + best.n);
  View C;
  C.labels = best.bt + best.m + best.n;
  for (char ch : C.labels) C.size.push_back(in(A.labels, ch) ? A.size[A.labels.find(ch)] : B.size[B.labels.find(ch)]);
  C.stride = contiguous_strides(C.size);
  float* out = dst && C.labels == keep ? dst : nullptr;
  if (!out) {
    C.hold = Tensor::alloc(DType::Float, C.size);
    out = C.hold.ptr<float>();
  }
  C.data = out;
  const auto u = [](int64_t v) { return static_cast<size_t>(v); };
  simd::gemm_batched(u(Bt), best.ta, best.tb, u(M), u(N), u(K), 1.f, A.data, u(best.ta ? M : K), B.data,
                     u(best.tb ? K : N), 0.f, out, u(N), {u(M * K), u(K * N), u(M * N)});
  return C;
}

void einsum_float(OpContext& c, const Equation& e, Tensor& y) {
  float* dst = y.ptr<float>();
  for (size_t i = 0; i < e.terms.size(); ++i)
    if (c.input(i).numel() == 0) {  // a label of size 0: an empty output, or a sum over nothing
      std::fill(dst, dst + y.numel(), 0.f);
      return;
    }
  std::vector<View> v;
  for (size_t i = 0; i < e.terms.size(); ++i) v.push_back(view_of(c, c.input(i), e.terms[i]));
  // The output's layout is that of its labels of size > 1 (the others are reshapes).
  const std::string out = only(e.out, [&](char ch) { return e.dim.at(ch) > 1; });
  if (v.size() == 1) {
    arrange(sum_out(v[0], out), out, dst);
    return;
  }
  // Left to right; each step keeps what the output or a later operand still needs.
  View cur = std::move(v[0]);
  for (size_t i = 1; i < v.size(); ++i) {
    const bool last = i + 1 == v.size();
    std::string keep = out;
    if (!last)
      for (const std::string* s : {&cur.labels, &v[i].labels})
        for (char ch : *s) {
          bool later = false;
          for (size_t j = i + 1; j < v.size(); ++j) later = later || v[j].labels.find(ch) != std::string::npos;
          if (later && keep.find(ch) == std::string::npos) keep += ch;
        }
    keep = only(keep, [&](char ch) {
      return cur.labels.find(ch) != std::string::npos || v[i].labels.find(ch) != std::string::npos;
    });
    cur = contract(std::move(cur), std::move(v[i]), keep, last ? dst : nullptr);
  }
  if (cur.data != dst) arrange(cur, out, dst);
}

// ---- other types: every label combination, bounded ----

// 2^30 operand reads take about 10-30 s here (more under ASan): no integer or float64 einsum an
// exporter leaves in a graph comes near, and a hostile one ("ab,cd" over two 64 Ki-element
// operands) is refused with its figures at once instead of running for hours.
constexpr int64_t kMaxGenericReads = int64_t{1} << 30;

void einsum_generic(OpContext& c, const Equation& e) {
  const std::vector<std::string>& terms = e.terms;
  std::string all = e.out;
  for (auto [ch, n] : e.dim)
    if (all.find(ch) == std::string::npos) all += ch;
  Shape full;
  for (char ch : all) full.push_back(e.dim.at(ch));
  int64_t combos = 1, reads = 0;
  bool over = false;
  for (int64_t d : full) over = over || __builtin_mul_overflow(combos, d, &combos);
  over = over || __builtin_mul_overflow(combos, static_cast<int64_t>(terms.size()), &reads) || reads > kMaxGenericReads;
  if (over) {
    std::string dims;
    for (size_t i = 0; i < all.size(); ++i)
      dims += (i ? ", " : "") + std::string(1, all[i]) + "=" + std::to_string(full[i]);
    c.error("the equation '" + e.text + "' on " + std::string(dtype_name(c.input(0).dtype)) + " sums over " +
            (combos > 0 && reads > 0 ? std::to_string(combos) : std::string("over 2^63")) + " label combinations (" +
            dims + ") for each of its " + std::to_string(terms.size()) +
            " operands: more than 2^30 operand reads, the limit of the generic Einsum (float32 runs on the GEMM; "
            "cast the operands to float32)");
  }
  Shape yshape;
  for (char ch : e.out) yshape.push_back(e.dim.at(ch));
  Tensor& y = c.output(0, c.input(0).dtype, yshape);
  check_memory(checked_bytes(DType::Double, yshape), "Einsum's float64 accumulator");
  std::vector<std::vector<int64_t>> strides(terms.size(), std::vector<int64_t>(all.size(), 0));
  for (size_t i = 0; i < terms.size(); ++i) {
    auto cs = contiguous_strides(c.input(i).shape);
    for (size_t d = 0; d < terms[i].size(); ++d)
      if (c.input(i).shape[d] != 1) strides[i][all.find(terms[i][d])] += cs[d];
  }
  std::vector<double> acc(static_cast<size_t>(numel(yshape)), 0.0);
  const int64_t inner = numel(Shape(full.begin() + static_cast<int64_t>(e.out.size()), full.end()));
  std::vector<int64_t> idx(all.size(), 0);
  for (int64_t flat = 0, total = numel(full); flat < total; ++flat) {
    if ((flat & 0xfffff) == 0xfffff && time_budget_spent()) fail_time_budget(c.where());
    double p = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < all.size(); ++d) off += idx[d] * strides[i][d];
      p *= c.input(i).get_f64(off);
    }
    acc[static_cast<size_t>(flat / inner)] += p;
    next_index(idx, full);
  }
  Tensor tmp = Tensor::view(DType::Double, yshape, acc.data());
  cast_into(tmp, y);
}

}  // namespace

void einsum(OpContext& c) {
  const Equation e = parse(c);
  for (size_t i = 1; i < e.terms.size(); ++i) need_same_type(c, c.input(0), c.input(i));
  if (c.input(0).dtype != DType::Float) {
    einsum_generic(c, e);
    return;
  }
  Shape yshape;
  for (char ch : e.out) yshape.push_back(e.dim.at(ch));
  einsum_float(c, e, c.output(0, DType::Float, yshape));
}

}  // namespace onnxforge::rt
