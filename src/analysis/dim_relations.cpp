#include "analysis/dim_relations.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"

namespace onnxforge {
namespace {

using Values = std::unordered_map<Sym, int64_t>;

std::optional<int64_t> eval(const SymDim& d, const Values& v) {
  if (d.is_constant()) return d.value();
  SymDim r = d.substitute(v);
  if (!r.is_constant()) return std::nullopt;
  return r.value();
}

std::vector<Sym> symbols_of(const DimRelation& r) {
  std::vector<Sym> s = r.a.symbols();
  for (Sym x : r.b.symbols())
    if (std::find(s.begin(), s.end(), x) == s.end()) s.push_back(x);
  return s;
}

// The value of `s` that makes a == b with the other symbols at `v`, when the relation is linear
// in `s` (checked on three points, then the solution checked exactly: floor divisions are not
// linear everywhere). Non-negative only: it is a dim.
std::optional<int64_t> solve_for(const DimRelation& r, Sym s, Values v) {
  const SymDim f = r.a - r.b;
  int64_t at[3];
  for (int64_t x = 0; x < 3; ++x) {
    v[s] = x;
    auto e = eval(f, v);
    if (!e) return std::nullopt;
    at[x] = *e;
  }
  // Dims of hostile models reach 2^62: every step is checked, never signed overflow.
  int64_t k = 0, k2 = 0;
  if (__builtin_sub_overflow(at[1], at[0], &k) || __builtin_sub_overflow(at[2], at[1], &k2)) return std::nullopt;
  if (k == 0 || k2 != k || (k == -1 && at[0] == INT64_MIN) || at[0] % k != 0) return std::nullopt;
  if (at[0] == INT64_MIN) return std::nullopt;
  const int64_t x = -at[0] / k;
  if (x < 0) return std::nullopt;
  v[s] = x;
  if (eval(f, v) != 0) return std::nullopt;
  return x;
}

// Whether `s` is the sum of the relation's other symbols (total_sequence in total_sequence =
// past_sequence + sequence): its coefficient has the opposite sign of every other one. That dim
// is the one to re-derive, so the parts keep their defaults.
bool is_sum(const DimRelation& r, Sym s, const std::vector<Sym>& syms) {
  const SymDim f = r.a - r.b;
  Values zero;
  for (Sym x : syms) zero[x] = 0;
  auto base = eval(f, zero);
  if (!base) return false;
  auto coef = [&](Sym x) -> int64_t {
    Values v = zero;
    v[x] = 1;
    auto e = eval(f, v);
    int64_t c = 0;
    return e && !__builtin_sub_overflow(*e, *base, &c) ? c : 0;
  };
  const int64_t cs = coef(s);
  if (cs == 0) return false;
  for (Sym t : syms) {
    if (t == s) continue;
    const int64_t ct = coef(t);
    if (ct == 0 || (ct > 0) == (cs > 0)) return false;
  }
  return true;
}

}  // namespace

DimSolution solve_dims(const std::vector<DimRelation>& relations, const std::map<std::string, int64_t>& start,
                       const std::set<std::string>& fixed,
                       const std::function<std::string(const DimRelation&)>& where) {
  // One equation per distinct pair: a decoder repeats each relation once per layer.
  std::vector<const DimRelation*> rels;
  {
    std::unordered_set<std::string> seen;
    for (const DimRelation& r : relations)
      if (seen.insert(r.a.str() + "=" + r.b.str() + (r.broadcast ? "|b" : "")).second) rels.push_back(&r);
  }
  Values inputs;
  std::unordered_set<Sym> free_syms;  // input dims the user did not give
  std::vector<Sym> order;             // input dims in the caller's order, for messages
  for (const auto& [name, value] : start) {
    Sym s = intern(name);
    inputs[s] = value;
    order.push_back(s);
    if (!fixed.count(name)) free_syms.insert(s);
  }
  DimSolution out;
  std::unordered_set<Sym> rederived;
  for (size_t round = 0; round <= start.size(); ++round) {
    // Symbols no input has (unk__N) follow from the relations where one equation pins them.
    Values v = inputs;
    for (bool progress = true; progress;) {
      progress = false;
      for (const DimRelation* r : rels) {
        std::optional<Sym> open;
        int unknown = 0;
        for (Sym s : symbols_of(*r))
          if (!v.count(s)) ++unknown, open = s;
        if (unknown != 1) continue;
        if (auto x = solve_for(*r, *open, v)) {
          v[*open] = *x;
          progress = true;
        }
      }
    }
    const DimRelation* bad = nullptr;
    int64_t va = 0, vb = 0;
    for (const DimRelation* r : rels) {
      auto a = eval(r->a, v), b = eval(r->b, v);
      if (!a || !b || *a == *b || (r->broadcast && (*a == 1 || *b == 1))) continue;
      bad = r, va = *a, vb = *b;
      break;
    }
    if (!bad) {
      for (const auto& [name, value] : start) out.values[name] = inputs[intern(name)];
      return out;
    }
    // Re-derive one input dim of the failed relation: the sum first, then in input order.
    std::vector<Sym> syms = symbols_of(*bad);
    std::vector<Sym> candidates;
    for (Sym s : order)
      if (free_syms.count(s) && !rederived.count(s) && std::find(syms.begin(), syms.end(), s) != syms.end())
        candidates.push_back(s);
    std::stable_partition(candidates.begin(), candidates.end(), [&](Sym s) { return is_sum(*bad, s, syms); });
    bool fixed_one = false;
    for (Sym s : candidates) {
      Values others = v;
      others.erase(s);
      auto x = solve_for(*bad, s, others);
      if (!x || *x == 0) continue;
      inputs[s] = *x;
      rederived.insert(s);
      out.notes.push_back("dim '" + std::string(str(s)) + "' = " + std::to_string(*x) + " (the model needs " +
                          bad->a.str() + " = " + bad->b.str() + (where ? " at " + where(*bad) : std::string()) +
                          "; set with --dim " + std::string(str(s)) + "=N, or optimize's --verify-dim)");
      fixed_one = true;
      break;
    }
    if (!fixed_one)
      fail_usage("the input dims do not fit the model: it needs ", bad->a.str(), " = ", bad->b.str(),
                 where ? " (" + where(*bad) + ")" : std::string(), " but they are ", va, " and ", vb,
                 "; give consistent sizes with --dim NAME=N (optimize: --verify-dim NAME=N keeps them symbolic)");
  }
  fail_usage(
      "the input dims do not fit the model: no sizes satisfy every relation between its dynamic dims; "
      "give them with --dim NAME=N (optimize: --verify-dim NAME=N)");
}

}  // namespace onnxforge
