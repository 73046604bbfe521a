// Broadcasting driver for binary ops and comparisons.
//
// The shapes are reduced to a few merged dims: size-1 output dims are dropped, and neighbours
// where each input is either full in both or broadcast in both are merged. The innermost merged
// dim then runs as one span kernel call: vector-vector, vector-scalar or scalar-vector. So a
// scalar operand is a single call over everything, a row vector is a vv call per row, a column
// vector a vs call per row, and middle-axis broadcasts iterate the outer dims with an odometer.
#include "simd/binary.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"

namespace onnxforge::simd {
namespace {

std::string shape_str(Shape s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

struct Plan {
  std::vector<std::int64_t> dims;    // merged output dims, outermost first
  std::vector<std::int64_t> sa, sb;  // element strides per merged dim (0 = broadcast)
  std::int64_t total = 0;
};

Plan make_plan(Shape a, Shape b) {
  const std::vector<std::int64_t> out = broadcast_shape(a, b);
  Plan p;
  p.total = 1;
  for (std::int64_t d : out) p.total *= d;
  if (p.total == 0) return p;
  const std::size_t r = out.size();
  // Per dim: is each input full there (as opposed to broadcast)?
  std::vector<bool> fa, fb;
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < r; ++i) {
    if (out[i] == 1) continue;
    const bool a_full = i + a.size() >= r && a[i + a.size() - r] != 1;
    const bool b_full = i + b.size() >= r && b[i + b.size() - r] != 1;
    if (!dims.empty() && fa.back() == a_full && fb.back() == b_full) {
      dims.back() *= out[i];
      continue;
    }
    dims.push_back(out[i]);
    fa.push_back(a_full);
    fb.push_back(b_full);
  }
  if (dims.empty()) {  // every dim is 1: one element
    dims.push_back(1);
    fa.push_back(true);
    fb.push_back(true);
  }
  p.dims = dims;
  p.sa.assign(dims.size(), 0);
  p.sb.assign(dims.size(), 0);
  std::int64_t ra = 1, rb = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    if (fa[i]) p.sa[i] = ra, ra *= dims[i];
    if (fb[i]) p.sb[i] = rb, rb *= dims[i];
  }
  return p;
}

// Span kernels for one op and element type: vv(a, b, y, n), vs(a, s, y, n), sv(s, b, y, n).
template <class T, class TY>
struct Kernels {
  void (*vv)(const void* ctx, const T*, const T*, TY*, std::size_t);
  void (*vs)(const void* ctx, const T*, T, TY*, std::size_t);
  void (*sv)(const void* ctx, T, const T*, TY*, std::size_t);
  const void* ctx;
};

// Runs rows [r0, r1) of the outer iteration space; each row is one inner span.
template <class T, class TY>
void run_rows(const Plan& p, const T* a, const T* b, TY* y, std::size_t r0, std::size_t r1, std::size_t i0,
              std::size_t i1, const Kernels<T, TY>& k) {
  const std::size_t outer_rank = p.dims.size() - 1;
  const auto inner = static_cast<std::size_t>(p.dims.back());
  const bool a_vec = p.sa.back() != 0, b_vec = p.sb.back() != 0;
  std::vector<std::int64_t> idx(outer_rank, 0);
  std::int64_t oa = 0, ob = 0;
  std::size_t rem = r0;
  for (std::size_t d = outer_rank; d-- > 0;) {
    idx[d] = static_cast<std::int64_t>(rem % static_cast<std::size_t>(p.dims[d]));
    rem /= static_cast<std::size_t>(p.dims[d]);
    oa += idx[d] * p.sa[d];
    ob += idx[d] * p.sb[d];
  }
  for (std::size_t r = r0; r < r1; ++r) {
    const T* pa = a + oa;
    const T* pb = b + ob;
    TY* py = y + r * inner + i0;
    const std::size_t n = i1 - i0;
    if (a_vec && b_vec) {
      k.vv(k.ctx, pa + i0, pb + i0, py, n);
    } else if (a_vec) {
      k.vs(k.ctx, pa + i0, *pb, py, n);
    } else {
      k.sv(k.ctx, *pa, pb + i0, py, n);
    }
    for (std::size_t d = outer_rank; d-- > 0;) {  // odometer step
      oa += p.sa[d];
      ob += p.sb[d];
      if (++idx[d] < p.dims[d]) break;
      oa -= p.sa[d] * p.dims[d];
      ob -= p.sb[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

template <class T, class TY>
void run(Shape as, const T* a, Shape bs, const T* b, TY* y, const Kernels<T, TY>& k, std::size_t cost) {
  const Plan p = make_plan(as, bs);
  if (p.total == 0) return;
  const auto inner = static_cast<std::size_t>(p.dims.back());
  const std::size_t rows = static_cast<std::size_t>(p.total) / inner;
  const std::size_t grain = detail::elementwise_grain(cost);
  const auto threads = static_cast<std::size_t>(detail::max_threads());
  if (rows >= 4 * threads || inner < grain) {
    detail::parallel_chunks(rows, std::max<std::size_t>(1, grain / inner),
                            [&](std::size_t r0, std::size_t r1) { run_rows(p, a, b, y, r0, r1, 0, inner, k); });
    return;
  }
  for (std::size_t r = 0; r < rows; ++r)
    detail::parallel_chunks(inner, grain,
                            [&](std::size_t i0, std::size_t i1) { run_rows(p, a, b, y, r, r + 1, i0, i1, k); });
}

// ---- float: the active ISA's span kernels ----

struct FloatCtx {
  const detail::KernelTable* kt;
  BinaryOp op;
  CompareOp cmp;
};

Kernels<float, float> float_binary(const FloatCtx& c) {
  return {[](const void* x, const float* a, const float* b, float* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->binary_vv(f.op, a, b, y, n);
          },
          [](const void* x, const float* a, float b, float* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->binary_vs(f.op, a, b, y, n);
          },
          [](const void* x, float a, const float* b, float* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->binary_sv(f.op, a, b, y, n);
          },
          &c};
}

Kernels<float, std::uint8_t> float_compare(const FloatCtx& c) {
  return {[](const void* x, const float* a, const float* b, std::uint8_t* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->compare_vv(f.cmp, a, b, y, n);
          },
          [](const void* x, const float* a, float b, std::uint8_t* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->compare_vs(f.cmp, a, b, y, n);
          },
          [](const void* x, float a, const float* b, std::uint8_t* y, std::size_t n) {
            auto& f = *static_cast<const FloatCtx*>(x);
            f.kt->compare_sv(f.cmp, a, b, y, n);
          },
          &c};
}

// ---- integers: plain loops (the compiler vectorizes add/sub/mul/min/max) ----

template <BinaryOp op, class T>
T int_op(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if constexpr (op == BinaryOp::Add) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  if constexpr (op == BinaryOp::Sub) return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  if constexpr (op == BinaryOp::Mul) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  if constexpr (op == BinaryOp::Max) return a > b ? a : b;
  if constexpr (op == BinaryOp::Min) return a < b ? a : b;
  if constexpr (op == BinaryOp::Div) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));  // no trap on INT_MIN / -1
    return static_cast<T>(a / b);
  }
  if constexpr (op == BinaryOp::Pow) {
    if (b < 0) return a == 1 ? T{1} : a == -1 ? (b % 2 == 0 ? T{1} : T{-1}) : T{0};
    U acc = 1, base = static_cast<U>(a);
    for (T e = b; e > 0; e >>= 1) {  // square-and-multiply, wrapping
      if (e & 1) acc *= base;
      base *= base;
    }
    return static_cast<T>(acc);
  }
}

template <BinaryOp op, class T>
Kernels<T, T> int_kernels() {
  return {[](const void*, const T* a, const T* b, T* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_op<op>(a[i], b[i]);
          },
          [](const void*, const T* a, T b, T* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_op<op>(a[i], b);
          },
          [](const void*, T a, const T* b, T* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_op<op>(a, b[i]);
          },
          nullptr};
}

template <class T>
Kernels<T, T> int_binary(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return int_kernels<BinaryOp::Add, T>();
    case BinaryOp::Sub: return int_kernels<BinaryOp::Sub, T>();
    case BinaryOp::Mul: return int_kernels<BinaryOp::Mul, T>();
    case BinaryOp::Div: return int_kernels<BinaryOp::Div, T>();
    case BinaryOp::Max: return int_kernels<BinaryOp::Max, T>();
    case BinaryOp::Min: return int_kernels<BinaryOp::Min, T>();
    case BinaryOp::Pow: return int_kernels<BinaryOp::Pow, T>();
  }
  throw std::invalid_argument("simd::binary: unknown op");
}

template <CompareOp op, class T>
std::uint8_t int_cmp(T a, T b) {
  if constexpr (op == CompareOp::Equal) return a == b;
  if constexpr (op == CompareOp::NotEqual) return a != b;
  if constexpr (op == CompareOp::Less) return a < b;
  if constexpr (op == CompareOp::LessOrEqual) return a <= b;
  if constexpr (op == CompareOp::Greater) return a > b;
  if constexpr (op == CompareOp::GreaterOrEqual) return a >= b;
}

template <CompareOp op, class T>
Kernels<T, std::uint8_t> int_cmp_kernels() {
  return {[](const void*, const T* a, const T* b, std::uint8_t* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_cmp<op>(a[i], b[i]);
          },
          [](const void*, const T* a, T b, std::uint8_t* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_cmp<op>(a[i], b);
          },
          [](const void*, T a, const T* b, std::uint8_t* y, std::size_t n) {
            for (std::size_t i = 0; i < n; ++i) y[i] = int_cmp<op>(a, b[i]);
          },
          nullptr};
}

template <class T>
Kernels<T, std::uint8_t> int_compare(CompareOp op) {
  switch (op) {
    case CompareOp::Equal: return int_cmp_kernels<CompareOp::Equal, T>();
    case CompareOp::NotEqual: return int_cmp_kernels<CompareOp::NotEqual, T>();
    case CompareOp::Less: return int_cmp_kernels<CompareOp::Less, T>();
    case CompareOp::LessOrEqual: return int_cmp_kernels<CompareOp::LessOrEqual, T>();
    case CompareOp::Greater: return int_cmp_kernels<CompareOp::Greater, T>();
    case CompareOp::GreaterOrEqual: return int_cmp_kernels<CompareOp::GreaterOrEqual, T>();
  }
  throw std::invalid_argument("simd::compare: unknown op");
}

std::size_t float_cost(BinaryOp op) { return op == BinaryOp::Pow ? 8 : op == BinaryOp::Div ? 2 : 1; }

}  // namespace

std::vector<std::int64_t> broadcast_shape(Shape a, Shape b) {
  const std::size_t r = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const std::int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da < 0 || db < 0) throw std::invalid_argument("simd::broadcast_shape: negative dim");
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument("simd::broadcast_shape: shapes " + shape_str(a) + " and " + shape_str(b) +
                                  " do not broadcast (dim " + std::to_string(i) + ": " + std::to_string(da) + " vs " +
                                  std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void binary(BinaryOp op, Shape as, const float* a, Shape bs, const float* b, float* y) {
  const FloatCtx c{&detail::active_table(), op, CompareOp::Equal};
  run(as, a, bs, b, y, float_binary(c), float_cost(op));
}
void binary(BinaryOp op, Shape as, const std::int32_t* a, Shape bs, const std::int32_t* b, std::int32_t* y) {
  run(as, a, bs, b, y, int_binary<std::int32_t>(op), op == BinaryOp::Div || op == BinaryOp::Pow ? 8 : 1);
}
void binary(BinaryOp op, Shape as, const std::int64_t* a, Shape bs, const std::int64_t* b, std::int64_t* y) {
  run(as, a, bs, b, y, int_binary<std::int64_t>(op), op == BinaryOp::Div || op == BinaryOp::Pow ? 8 : 1);
}

void compare(CompareOp op, Shape as, const float* a, Shape bs, const float* b, std::uint8_t* y) {
  const FloatCtx c{&detail::active_table(), BinaryOp::Add, op};
  run(as, a, bs, b, y, float_compare(c), 1);
}
void compare(CompareOp op, Shape as, const std::int32_t* a, Shape bs, const std::int32_t* b, std::uint8_t* y) {
  run(as, a, bs, b, y, int_compare<std::int32_t>(op), 1);
}
void compare(CompareOp op, Shape as, const std::int64_t* a, Shape bs, const std::int64_t* b, std::uint8_t* y) {
  run(as, a, bs, b, y, int_compare<std::int64_t>(op), 1);
}

}  // namespace onnxforge::simd
