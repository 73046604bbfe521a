#include "analysis/symbolic.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace onnxforge {
namespace {

// Wrapping arithmetic on constants and coefficients: INT64_MAX "to the end" bounds flow through
// Add/Mul, and hostile dims (2^62 * 6) wrap instead of overflowing (undefined behaviour).
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Floor division; a divisor of 0 (a hostile attribute that got this far) gives 0, and
// INT64_MIN / -1 wraps, instead of trapping.
int64_t floor_div_int(int64_t a, int64_t d) {
  if (d == 0) return 0;
  if (d == -1) return wrap_sub(0, a);
  return a / d - ((a % d != 0) && ((a < 0) != (d < 0)));
}
int64_t floor_mod_int(int64_t a, int64_t d) { return wrap_sub(a, wrap_mul(floor_div_int(a, d), d)); }

// A product of atoms (sorted by their text, repeated for powers) times a coefficient.
struct Term {
  std::vector<Sym> atoms;
  int64_t coef = 0;
};

struct Poly {
  std::vector<Term> terms;  // canonical order, no zero coefficients, no constant term
  int64_t c = 0;
};

// An atom is a named symbol or floor(num / den). Its text is its identity.
struct Atom {
  bool floor = false;
  Sym num;  // expression text of the numerator
  int64_t den = 0;
};

bool atom_less(Sym a, Sym b) { return str(a) < str(b); }

// Canonical term order: higher degree first, then by the atoms' text.
bool term_less(const Term& a, const Term& b) {
  if (a.atoms.size() != b.atoms.size()) return a.atoms.size() > b.atoms.size();
  return std::lexicographical_compare(a.atoms.begin(), a.atoms.end(), b.atoms.begin(), b.atoms.end(), atom_less);
}

class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }

  std::optional<Poly> poly(Sym e) {
    std::shared_lock lock(mutex_);
    auto it = polys_.find(e.v);
    if (it == polys_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<Atom> atom(Sym a) {
    std::shared_lock lock(mutex_);
    auto it = atoms_.find(a.v);
    if (it == atoms_.end()) return std::nullopt;
    return it->second;
  }
  void add_poly(Sym e, const Poly& p) {
    std::unique_lock lock(mutex_);
    polys_.try_emplace(e.v, p);
  }
  void add_atom(Sym a, const Atom& info) {
    std::unique_lock lock(mutex_);
    atoms_.try_emplace(a.v, info);
  }

 private:
  std::shared_mutex mutex_;
  std::unordered_map<uint32_t, Poly> polys_;
  std::unordered_map<uint32_t, Atom> atoms_;
};

Sym named_atom(std::string_view name) {
  Sym s = intern(name);
  Registry::get().add_atom(s, Atom{});
  return s;
}

bool is_floor_atom(Sym a) {
  auto info = Registry::get().atom(a);
  return info && info->floor;
}

void print_term(std::string& out, const Term& t, bool first) {
  int64_t coef = t.coef;
  if (coef < 0) {
    out += '-';
    coef = -coef;
  } else if (!first) {
    out += '+';
  }
  bool wrap = t.atoms.size() > 1 || coef != 1;
  for (size_t i = 0; i < t.atoms.size(); ++i) {
    if (i) out += '*';
    bool paren = wrap && is_floor_atom(t.atoms[i]);
    if (paren) out += '(';
    out += str(t.atoms[i]);
    if (paren) out += ')';
  }
  if (coef != 1) out += "*" + std::to_string(coef);
}

std::string print(const Poly& p) {
  std::string out;
  for (size_t i = 0; i < p.terms.size(); ++i) print_term(out, p.terms[i], i == 0);
  if (p.c != 0 || p.terms.empty()) {
    if (p.c >= 0 && !p.terms.empty()) out += '+';
    out += std::to_string(p.c);
  }
  return out;
}

// Sorts terms and merges equal monomials.
Poly normalize(Poly p) {
  std::sort(p.terms.begin(), p.terms.end(), term_less);
  std::vector<Term> merged;
  for (Term& t : p.terms) {
    if (!merged.empty() && merged.back().atoms == t.atoms)
      merged.back().coef = wrap_add(merged.back().coef, t.coef);
    else
      merged.push_back(std::move(t));
  }
  std::erase_if(merged, [](const Term& t) { return t.coef == 0; });
  p.terms = std::move(merged);
  return p;
}

SymDim make(const Poly& raw) {
  Poly p = normalize(raw);
  if (p.terms.empty()) return SymDim::constant(p.c);
  Sym e = intern(print(p));
  Registry::get().add_poly(e, p);
  return SymDim::parse(str(e));  // known now: returns the SymDim of `e` without parsing
}

Poly to_poly(SymDim d) {
  if (d.is_constant()) return Poly{{}, d.value()};
  if (auto p = Registry::get().poly(d.expr())) return *p;
  return Poly{{Term{{d.expr()}, 1}}, 0};  // not reached: every expression SymDim is registered
}

Poly add(const Poly& a, const Poly& b, int64_t sign) {
  Poly r = a;
  for (const Term& t : b.terms) r.terms.push_back(Term{t.atoms, wrap_mul(sign, t.coef)});
  r.c = wrap_add(r.c, wrap_mul(sign, b.c));
  return r;
}

Poly mul(const Poly& a, const Poly& b) {
  Poly r;
  r.c = wrap_mul(a.c, b.c);
  auto scaled = [&](const Poly& p, int64_t k) {
    if (k == 0) return;
    for (const Term& t : p.terms) r.terms.push_back(Term{t.atoms, wrap_mul(t.coef, k)});
  };
  scaled(a, b.c);
  scaled(b, a.c);
  for (const Term& x : a.terms)
    for (const Term& y : b.terms) {
      Term t{x.atoms, wrap_mul(x.coef, y.coef)};
      t.atoms.insert(t.atoms.end(), y.atoms.begin(), y.atoms.end());
      std::sort(t.atoms.begin(), t.atoms.end(), atom_less);
      r.terms.push_back(std::move(t));
    }
  return r;
}

// ---------------------------------------------------------------- parser for canonical text

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  std::optional<SymDim> parse() {
    auto e = expr();
    if (!e || i_ != s_.size()) return std::nullopt;
    return e;
  }

 private:
  std::optional<SymDim> expr() {
    bool neg = eat('-');
    auto t = term();
    if (!t) return std::nullopt;
    SymDim acc = neg ? -*t : *t;
    while (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) {
      bool minus = s_[i_++] == '-';
      auto u = term();
      if (!u) return std::nullopt;
      acc = minus ? acc - *u : acc + *u;
    }
    return acc;
  }
  std::optional<SymDim> term() {
    auto f = factor();
    if (!f) return std::nullopt;
    SymDim acc = *f;
    while (eat('*')) {
      auto g = factor();
      if (!g) return std::nullopt;
      acc = acc * *g;
    }
    return acc;
  }
  std::optional<SymDim> factor() {
    auto p = primary();
    if (!p) return std::nullopt;
    if (eat('/')) {
      auto d = integer();
      if (!d || *d <= 0) return std::nullopt;
      return floor_div(*p, *d);
    }
    return p;
  }
  std::optional<SymDim> primary() {
    if (eat('(')) {
      auto e = expr();
      if (!e || !eat(')')) return std::nullopt;
      return e;
    }
    if (auto v = integer()) return SymDim::constant(*v);
    size_t b = i_;
    if (i_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) {
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.'))
        ++i_;
      return SymDim::symbol(s_.substr(b, i_ - b));
    }
    return std::nullopt;
  }
  std::optional<int64_t> integer() {
    size_t b = i_;
    int64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      if (v > (INT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ == b) return std::nullopt;
    return v;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
};

bool looks_like_expression(std::string_view s) { return s.find_first_of("+-*/()") != std::string_view::npos; }

}  // namespace

// ---------------------------------------------------------------- SymDim

SymDim SymDim::symbol(std::string_view name) {
  Sym a = named_atom(name);
  Registry::get().add_poly(a, Poly{{Term{{a}, 1}}, 0});
  SymDim d;
  d.e_ = a;
  return d;
}

SymDim SymDim::parse(std::string_view text) {
  if (auto known = lookup(text)) {
    if (Registry::get().poly(*known)) {
      SymDim d;
      d.e_ = *known;
      return d;
    }
  }
  if (looks_like_expression(text))
    if (auto e = Parser(text).parse()) return *e;
  return symbol(text);
}

std::optional<SymDim> SymDim::from_dim(const Dim& d) {
  if (d.known()) return constant(d.value);
  if (d.param.empty()) return std::nullopt;
  return parse(onnxforge::str(d.param));
}

bool SymDim::is_symbol() const {
  if (is_constant()) return false;
  auto a = Registry::get().atom(e_);
  return a && !a->floor;
}

std::string SymDim::str() const { return is_constant() ? std::to_string(c_) : std::string(onnxforge::str(e_)); }

std::vector<Sym> SymDim::symbols() const {
  std::vector<Sym> out;
  Poly p = to_poly(*this);
  for (const Term& t : p.terms)
    for (Sym a : t.atoms) {
      auto info = Registry::get().atom(a);
      if (info && info->floor) {
        for (Sym s : SymDim::parse(onnxforge::str(info->num)).symbols()) out.push_back(s);
      } else {
        out.push_back(a);
      }
    }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

SymDim SymDim::substitute(const std::unordered_map<Sym, int64_t>& values) const {
  if (is_constant() || values.empty()) return *this;
  Poly p = to_poly(*this);
  SymDim acc = constant(p.c);
  for (const Term& t : p.terms) {
    SymDim prod = constant(t.coef);
    for (Sym a : t.atoms) {
      auto info = Registry::get().atom(a);
      SymDim f;
      if (info && info->floor) {
        f = floor_div(SymDim::parse(onnxforge::str(info->num)).substitute(values), info->den);
      } else if (auto it = values.find(a); it != values.end()) {
        f = constant(it->second);
      } else {
        f.e_ = a;
      }
      prod = prod * f;
    }
    acc = acc + prod;
  }
  return acc;
}

SymDim operator+(SymDim a, SymDim b) {
  if (a.is_constant() && b.is_constant()) return SymDim::constant(wrap_add(a.c_, b.c_));
  if (b.is_constant(0)) return a;
  if (a.is_constant(0)) return b;
  return make(add(to_poly(a), to_poly(b), 1));
}

SymDim operator-(SymDim a, SymDim b) {
  if (a.is_constant() && b.is_constant()) return SymDim::constant(wrap_sub(a.c_, b.c_));
  if (b.is_constant(0)) return a;
  if (a == b) return SymDim::constant(0);
  return make(add(to_poly(a), to_poly(b), -1));
}

SymDim operator*(SymDim a, SymDim b) {
  if (a.is_constant() && b.is_constant()) return SymDim::constant(wrap_mul(a.c_, b.c_));
  if (a.is_constant(1)) return b;
  if (b.is_constant(1)) return a;
  if (a.is_constant(0) || b.is_constant(0)) return SymDim::constant(0);
  return make(mul(to_poly(a), to_poly(b)));
}

SymDim floor_div(SymDim a, int64_t d) {
  if (d == 1) return a;
  if (a.is_constant()) return SymDim::constant(floor_div_int(a.c_, d));
  // floor((d*q + r)/d) = q + floor(r/d) for integer-valued q: pull out every multiple of d.
  Poly p = to_poly(a), q, r;
  for (const Term& t : p.terms) {
    int64_t k = floor_div_int(t.coef, d), m = floor_mod_int(t.coef, d);
    if (k) q.terms.push_back(Term{t.atoms, k});
    if (m) r.terms.push_back(Term{t.atoms, m});
  }
  q.c = floor_div_int(p.c, d);
  r.c = floor_mod_int(p.c, d);
  SymDim quotient = make(q);
  if (r.terms.empty()) return quotient;  // 0 <= r.c < d
  SymDim num = make(r);
  std::string key = num.is_symbol() ? num.str() + "/" + std::to_string(d) : "(" + num.str() + ")/" + std::to_string(d);
  Sym atom = intern(key);
  Registry::get().add_atom(atom, Atom{true, num.e_, d});
  Registry::get().add_poly(atom, Poly{{Term{{atom}, 1}}, 0});
  SymDim f;
  f.e_ = atom;
  return quotient + f;
}

std::optional<SymDim> exact_div(SymDim a, SymDim b) {
  if (b.is_constant(0)) return std::nullopt;
  if (b.is_constant(1)) return a;
  if (a == b) return SymDim::constant(1);
  if (a.is_constant(0)) return SymDim::constant(0);
  Poly pa = to_poly(a), pb = to_poly(b);
  if (pb.terms.size() > 1 || (pb.terms.size() == 1 && pb.c != 0)) return std::nullopt;
  if (pb.terms.empty()) {  // constant divisor
    if (floor_mod_int(pa.c, pb.c)) return std::nullopt;
    for (const Term& t : pa.terms)
      if (floor_mod_int(t.coef, pb.c)) return std::nullopt;
    Poly r{{}, floor_div_int(pa.c, pb.c)};  // exact: floor is the quotient (and -1 cannot trap)
    for (const Term& t : pa.terms) r.terms.push_back(Term{t.atoms, floor_div_int(t.coef, pb.c)});
    return make(r);
  }
  const Term& m = pb.terms[0];  // monomial divisor: every term must contain it
  if (pa.c != 0) return std::nullopt;
  Poly r;
  for (const Term& t : pa.terms) {
    if (floor_mod_int(t.coef, m.coef)) return std::nullopt;
    std::vector<Sym> rest;
    auto it = t.atoms.begin();
    for (Sym x : m.atoms) {
      auto found = std::find(it, t.atoms.end(), x);
      if (found == t.atoms.end()) return std::nullopt;
      rest.insert(rest.end(), it, found);
      it = found + 1;
    }
    rest.insert(rest.end(), it, t.atoms.end());
    r.terms.push_back(Term{std::move(rest), floor_div_int(t.coef, m.coef)});
  }
  // A term whose atoms all cancelled is a constant.
  Poly out;
  for (Term& t : r.terms) {
    if (t.atoms.empty())
      out.c = wrap_add(out.c, t.coef);
    else
      out.terms.push_back(std::move(t));
  }
  return make(out);
}

std::optional<SymDim> SymDim::quotient(std::vector<SymDim> num, std::vector<SymDim> den) {
  for (auto it = den.begin(); it != den.end();) {
    auto found = std::find(num.begin(), num.end(), *it);
    if (found != num.end() && !it->is_constant()) {
      num.erase(found);
      it = den.erase(it);
    } else {
      ++it;
    }
  }
  return exact_div(product(num), product(den));
}

SymDim product(std::span<const SymDim> dims) {
  SymDim acc = SymDim::constant(1);
  for (const SymDim& d : dims) acc = acc * d;
  return acc;
}

std::string to_string(std::span<const SymDim> dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += dims[i].str();
  }
  return out + "]";
}

}  // namespace onnxforge
