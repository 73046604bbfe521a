// Reductions: the shape is canonicalized to alternating kept/reduced groups (size-1 dims
// dropped, neighbours with the same role merged). One reduced group is an [outer, R, inner]
// problem: a row reduction when inner == 1, else an elementwise accumulation of R rows of
// `inner` values. Several reduced groups are first transposed to [kept..., reduced...].
#include "simd/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"
#include "simd/detail/scratch.h"
#include "simd/transpose.h"

namespace onnxforge::simd {
namespace {

struct Group {
  std::int64_t size;
  bool reduced;
};

struct Canonical {
  std::vector<Group> groups;
  std::size_t outputs = 1;  // product of kept dims
  std::size_t reduced = 1;  // product of reduced dims
};

Canonical canonicalize(std::span<const std::int64_t> shape, std::span<const std::int64_t> axes) {
  std::vector<bool> is_reduced(shape.size(), false);
  for (std::int64_t a : axes) {
    if (a < 0 || static_cast<std::size_t>(a) >= shape.size())
      throw std::invalid_argument("simd::reduce: axis " + std::to_string(a) + " is out of range for rank " +
                                  std::to_string(shape.size()) + " (normalize negative axes first)");
    is_reduced[static_cast<std::size_t>(a)] = true;
  }
  Canonical c;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) throw std::invalid_argument("simd::reduce: negative dim");
    (is_reduced[d] ? c.reduced : c.outputs) *= static_cast<std::size_t>(shape[d]);
    if (shape[d] == 1) continue;
    if (!c.groups.empty() && c.groups.back().reduced == is_reduced[d]) {
      c.groups.back().size *= shape[d];
    } else {
      c.groups.push_back({shape[d], is_reduced[d]});
    }
  }
  return c;
}

// The problem as [outer, R, inner] over `data` (x, or x transposed into `storage`).
struct Problem {
  const void* data;
  std::size_t outer, r, inner;
};

// `storage` receives the transposed copy when one is needed.
template <class T>
Problem to_problem(const Canonical& c, const T* x, std::unique_ptr<detail::Scratch>& storage) {
  std::size_t reduced_groups = 0;
  for (const Group& g : c.groups) reduced_groups += g.reduced;
  if (reduced_groups == 0) return {x, c.outputs, 1, 1};
  if (reduced_groups == 1) {
    std::size_t outer = 1, inner = 1;
    bool after = false;
    for (const Group& g : c.groups) {
      if (g.reduced) {
        after = true;
      } else {
        (after ? inner : outer) *= static_cast<std::size_t>(g.size);
      }
    }
    return {x, outer, c.reduced, inner};
  }
  std::vector<std::int64_t> sizes, perm;
  for (const Group& g : c.groups) sizes.push_back(g.size);
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t i = 0; i < c.groups.size(); ++i)
      if (c.groups[i].reduced == (pass == 1)) perm.push_back(static_cast<std::int64_t>(i));
  storage = std::make_unique<detail::Scratch>((c.outputs * c.reduced * sizeof(T) + sizeof(float) - 1) / sizeof(float));
  transpose(sizeof(T), sizes, x, perm, storage->data());
  return {storage->data(), c.outputs, c.reduced, 1};
}

// ---- float ----

detail::RowReduce row_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max: return detail::RowReduce::Max;
    case ReduceOp::Min: return detail::RowReduce::Min;
    case ReduceOp::Prod: return detail::RowReduce::Prod;
    case ReduceOp::L1: return detail::RowReduce::SumAbs;
    case ReduceOp::L2:
    case ReduceOp::SumSquare: return detail::RowReduce::SumSquare;
    default: return detail::RowReduce::Sum;
  }
}

// Starting value of an accumulation.
float start_of(detail::RowReduce op) {
  switch (op) {
    case detail::RowReduce::Max: return -std::numeric_limits<float>::infinity();
    case detail::RowReduce::Min: return std::numeric_limits<float>::infinity();
    case detail::RowReduce::Prod: return 1.f;
    default: return 0.f;
  }
}

// Result of reducing an empty set.
float empty_result(ReduceOp op) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (op) {
    case ReduceOp::Max:
    case ReduceOp::LogSum:
    case ReduceOp::LogSumExp: return -inf;
    case ReduceOp::Min: return inf;
    case ReduceOp::Prod: return 1.f;
    case ReduceOp::Mean: return std::numeric_limits<float>::quiet_NaN();
    default: return 0.f;
  }
}

float finish(ReduceOp op, float v, std::size_t r) {
  switch (op) {
    case ReduceOp::Mean: return v / static_cast<float>(r);
    case ReduceOp::L2: return std::sqrt(v);
    case ReduceOp::LogSum: return std::log(v);
    default: return v;
  }
}

float lse_finish(float max, float sum) { return std::isinf(max) ? max : max + std::log(sum); }

void reduce_rows(const detail::KernelTable& kt, ReduceOp op, const float* x, std::size_t outer, std::size_t r,
                 float* y) {
  detail::parallel_chunks(outer, std::max<std::size_t>(1, 16384 / r), [&](std::size_t b, std::size_t e) {
    for (std::size_t o = b; o < e; ++o) {
      const float* row = x + o * r;
      if (op == ReduceOp::LogSumExp) {
        const float max = kt.reduce_row(detail::RowReduce::Max, row, r);
        y[o] = std::isinf(max) ? max : lse_finish(max, kt.sum_exp_shifted(row, r, max));
      } else {
        y[o] = finish(op, kt.reduce_row(row_op(op), row, r), r);
      }
    }
  });
}

// y[o, i] = reduction over k of x[o, k, i], for inner chunks of at most kChunk columns.
void reduce_columns(const detail::KernelTable& kt, ReduceOp op, const float* x, std::size_t outer, std::size_t r,
                    std::size_t inner, float* y) {
  constexpr std::size_t kChunk = 2048;
  const std::size_t chunks = (inner + kChunk - 1) / kChunk;
  const std::size_t work = std::min(inner, kChunk) * r;
  detail::parallel_chunks(outer * chunks, std::max<std::size_t>(1, 16384 / work), [&](std::size_t b, std::size_t e) {
    for (std::size_t u = b; u < e; ++u) {
      const std::size_t o = u / chunks, c0 = (u % chunks) * kChunk, w = std::min(kChunk, inner - c0);
      const float* xs = x + o * r * inner + c0;
      float* ys = y + o * inner + c0;
      // Log-sum-exp first takes the max, then sums exp(x - max) separately.
      const bool lse = op == ReduceOp::LogSumExp;
      const detail::RowReduce rop = lse ? detail::RowReduce::Max : row_op(op);
      std::fill(ys, ys + w, start_of(rop));
      for (std::size_t k = 0; k < r; ++k) kt.reduce_accumulate(rop, xs + k * inner, ys, w);
      if (lse) {
        detail::Scratch sum(w);
        std::fill(sum.data(), sum.data() + w, 0.f);
        for (std::size_t k = 0; k < r; ++k) kt.accumulate_exp_shifted(xs + k * inner, ys, sum.data(), w);
        for (std::size_t i = 0; i < w; ++i) ys[i] = lse_finish(ys[i], sum.data()[i]);
      } else {
        for (std::size_t i = 0; i < w; ++i) ys[i] = finish(op, ys[i], r);
      }
    }
  });
}

// No reduced dim: each output is the op over one element.
float single(ReduceOp op, float v) {
  switch (op) {
    case ReduceOp::L1:
    case ReduceOp::L2: return std::fabs(v);
    case ReduceOp::SumSquare: return v * v;
    case ReduceOp::LogSum: return std::log(v);
    default: return v;
  }
}

// ---- integers: plain loops ----

template <class T>
T int_identity(ReduceOp op) {
  if (op == ReduceOp::Max) return std::numeric_limits<T>::lowest();
  if (op == ReduceOp::Min) return std::numeric_limits<T>::max();
  if (op == ReduceOp::Prod) return 1;
  return 0;
}

template <class T>
T int_step(ReduceOp op, T acc, T v) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::Max: return v > acc ? v : acc;
    case ReduceOp::Min: return v < acc ? v : acc;
    case ReduceOp::Prod: return static_cast<T>(static_cast<U>(acc) * static_cast<U>(v));
    case ReduceOp::L1:
      return static_cast<T>(static_cast<U>(acc) + (v < 0 ? U{0} - static_cast<U>(v) : static_cast<U>(v)));
    case ReduceOp::SumSquare: return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v) * static_cast<U>(v));
    default: return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
  }
}

template <class T>
void reduce_int(ReduceOp op, std::span<const std::int64_t> shape, const T* x, std::span<const std::int64_t> axes,
                T* y) {
  switch (op) {
    case ReduceOp::L2:
    case ReduceOp::LogSum:
    case ReduceOp::LogSumExp: throw std::invalid_argument("simd::reduce: L2, LogSum and LogSumExp are float-only");
    default: break;
  }
  const Canonical c = canonicalize(shape, axes);
  if (c.outputs == 0) return;
  std::unique_ptr<detail::Scratch> storage;
  const Problem p = c.reduced == 0 ? Problem{x, c.outputs, 0, 1} : to_problem(c, x, storage);
  const T* data = static_cast<const T*>(p.data);
  const T init = int_identity<T>(op);
  detail::parallel_chunks(p.outer, std::max<std::size_t>(1, 16384 / std::max<std::size_t>(p.r * p.inner, 1)),
                          [&](std::size_t b, std::size_t e) {
                            for (std::size_t o = b; o < e; ++o) {
                              T* ys = y + o * p.inner;
                              std::fill(ys, ys + p.inner, init);
                              for (std::size_t k = 0; k < p.r; ++k) {
                                const T* xs = data + (o * p.r + k) * p.inner;
                                for (std::size_t i = 0; i < p.inner; ++i) ys[i] = int_step(op, ys[i], xs[i]);
                              }
                              if (op == ReduceOp::Mean)
                                for (std::size_t i = 0; i < p.inner; ++i)
                                  ys[i] = p.r == 0 ? T{0} : static_cast<T>(ys[i] / static_cast<T>(p.r));
                            }
                          });
}

}  // namespace

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const float* x, std::span<const std::int64_t> axes,
            float* y) {
  const Canonical c = canonicalize(shape, axes);
  if (c.outputs == 0) return;
  if (c.reduced == 0) {
    std::fill(y, y + c.outputs, empty_result(op));
    return;
  }
  const detail::KernelTable& kt = detail::active_table();
  std::unique_ptr<detail::Scratch> storage;
  const Problem p = to_problem(c, x, storage);
  const auto* data = static_cast<const float*>(p.data);
  if (p.r == 1) {
    detail::parallel_chunks(p.outer * p.inner, detail::elementwise_grain(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) y[i] = single(op, data[i]);
    });
  } else if (p.inner == 1) {
    reduce_rows(kt, op, data, p.outer, p.r, y);
  } else {
    reduce_columns(kt, op, data, p.outer, p.r, p.inner, y);
  }
}

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int64_t* x, std::span<const std::int64_t> axes,
            std::int64_t* y) {
  reduce_int(op, shape, x, axes, y);
}

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int32_t* x, std::span<const std::int64_t> axes,
            std::int32_t* y) {
  reduce_int(op, shape, x, axes, y);
}

}  // namespace onnxforge::simd
