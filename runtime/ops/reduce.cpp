// Reductions (Reduce*), ArgMax/ArgMin, TopK, CumSum.
#include <cmath>
#include <numeric>

#include "runtime/ops/common.h"
#include "simd/reduce.h"

namespace onnxforge::rt {
namespace {

using simd::ReduceOp;

template <ReduceOp OP>
void reduce(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  // Axes moved from attribute to input: ReduceSum at 13, the others at 18.
  const bool axes_input = OP == ReduceOp::Sum ? c.opset >= 13 : c.opset >= 18;
  std::vector<int64_t> axes;
  if (axes_input) {
    if (const Tensor* t = c.in(1)) axes = ints_of(*t);
  } else {
    axes.assign(c.attr_ints("axes").begin(), c.attr_ints("axes").end());
  }
  for (auto& a : axes) a = norm_axis(c, a, std::max<int64_t>(r, 1));
  // A scalar has no axis to index (axis 0 of rank 0 would be written past the shape); a repeated
  // axis reduces once.
  if (r == 0) axes.clear();
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) {
    if (c.attr_i("noop_with_empty_axes", 0) || r == 0) {
      Tensor& y = c.output(0, x.dtype, x.shape);
      std::memcpy(y.data, x.data, x.bytes());
      return;
    }
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  const bool keep = c.attr_i("keepdims", 1);
  Shape ys;
  for (int64_t i = 0; i < r; ++i) {
    bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!red)
      ys.push_back(x.shape[static_cast<size_t>(i)]);
    else if (keep)
      ys.push_back(1);
  }
  Tensor& y = c.output(0, x.dtype, ys);
  switch (x.dtype) {
    case DType::Float: simd::reduce(OP, x.shape, x.ptr<float>(), axes, y.ptr<float>()); return;
    case DType::Int64: simd::reduce(OP, x.shape, x.ptr<int64_t>(), axes, y.ptr<int64_t>()); return;
    case DType::Int32: simd::reduce(OP, x.shape, x.ptr<int32_t>(), axes, y.ptr<int32_t>()); return;
    default: break;
  }
  // Other types: through float64.
  Tensor xd = cast(x, DType::Double);
  Shape kshape = x.shape;
  for (auto a : axes) kshape[static_cast<size_t>(a)] = 1;
  std::vector<double> acc(static_cast<size_t>(numel(kshape)), 0.0);
  std::vector<int64_t> cnt(acc.size(), 0);
  const bool minmax = OP == ReduceOp::Max || OP == ReduceOp::Min;
  if (OP == ReduceOp::Prod) std::fill(acc.begin(), acc.end(), 1.0);
  if (minmax) std::fill(acc.begin(), acc.end(), OP == ReduceOp::Max ? -INFINITY : INFINITY);
  for_each_broadcast<1>(x.shape, {bcast_strides(kshape, x.shape)}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    double v = xd.ptr<double>()[i];
    double& a = acc[static_cast<size_t>(o[0])];
    ++cnt[static_cast<size_t>(o[0])];
    switch (OP) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: a += v; break;
      case ReduceOp::Max: a = std::max(a, v); break;
      case ReduceOp::Min: a = std::min(a, v); break;
      case ReduceOp::Prod: a *= v; break;
      case ReduceOp::L1: a += std::fabs(v); break;
      case ReduceOp::L2:
      case ReduceOp::SumSquare: a += v * v; break;
      case ReduceOp::LogSum: a += v; break;
      case ReduceOp::LogSumExp: a += std::exp(v); break;
    }
  });
  for (size_t i = 0; i < acc.size(); ++i) {
    if (OP == ReduceOp::Mean) acc[i] /= static_cast<double>(cnt[i]);
    if (OP == ReduceOp::L2) acc[i] = std::sqrt(acc[i]);
    if (OP == ReduceOp::LogSum || OP == ReduceOp::LogSumExp) acc[i] = std::log(acc[i]);
  }
  cast_into(Tensor::view(DType::Double, ys, acc.data()), y);
}

template <bool MAX>
void arg_reduce(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  const bool keep = c.attr_i("keepdims", 1), last = c.attr_i("select_last_index", 0);
  Shape ys = x.shape;
  if (keep)
    ys[static_cast<size_t>(axis)] = 1;
  else
    ys.erase(ys.begin() + axis);
  Tensor& y = c.output(0, DType::Int64, ys);
  const AroundAxis around = around_axis(x.shape, axis);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    const T* X = x.ptr<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < n; ++k) {
          T a = X[(o * n + k) * inner + i], b = X[(o * n + best) * inner + i];
          if (MAX ? (a > b || (last && a == b)) : (a < b || (last && a == b))) best = k;
        }
        y.ptr<int64_t>()[o * inner + i] = best;
      }
  });
}

void topk(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.attr_i("axis", -1), x.rank());
  if (c.opset >= 10 && c.input(1).numel() != 1) c.error("K must hold one value, got " + shape_str(c.input(1).shape));
  const int64_t k = c.opset < 10 ? c.attr_i("k", 1) : ints_of(c.input(1))[0];
  const bool largest = c.attr_i("largest", 1);
  const AroundAxis around = around_axis(x.shape, axis);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  if (k < 0 || k > n) c.error("k = " + std::to_string(k) + " is out of range");
  Shape ys = x.shape;
  ys[static_cast<size_t>(axis)] = k;
  Tensor& vals = c.output(0, x.dtype, ys);
  Tensor& idx = c.output(1, DType::Int64, ys);
  if (x.numel() == 0) return;  // nothing to sort (the axis may be huge next to a zero dim)
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    const T* X = x.ptr<T>();
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        std::iota(order.begin(), order.end(), 0);
        auto at = [&](int64_t j) { return X[(o * n + j) * inner + i]; };
        auto cmp = [&](int64_t a, int64_t b) {
          T va = at(a), vb = at(b);
          if (va != vb) return largest ? va > vb : va < vb;
          return a < b;  // ties: the lower index first, as ONNX requires
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
        for (int64_t j = 0; j < k; ++j) {
          vals.ptr<T>()[(o * k + j) * inner + i] = at(order[static_cast<size_t>(j)]);
          idx.ptr<int64_t>()[(o * k + j) * inner + i] = order[static_cast<size_t>(j)];
        }
      }
  });
}

void cumsum(OpContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).numel() != 1 || is_float_dtype(c.input(1).dtype))
    c.error("axis must be one integer, got " + shape_str(c.input(1).shape));
  const int64_t axis = norm_axis(c, c.input(1).get_i64(0), x.rank());
  const bool excl = c.attr_i("exclusive", 0), rev = c.attr_i("reverse", 0);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const AroundAxis around = around_axis(x.shape, axis);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T acc{};
        for (int64_t s = 0; s < n; ++s) {
          int64_t k = rev ? n - 1 - s : s;
          size_t off = static_cast<size_t>((o * n + k) * inner + i);
          T cur = x.ptr<T>()[off];
          const T next = wrap_add(acc, cur);
          y.ptr<T>()[off] = excl ? acc : next;
          acc = next;
        }
      }
  });
}

}  // namespace

void register_reduce(Registry& r) {
  r.add("", "ReduceSum", {.run = reduce<ReduceOp::Sum>});
  r.add("", "ReduceMean", {.run = reduce<ReduceOp::Mean>});
  r.add("", "ReduceMax", {.run = reduce<ReduceOp::Max>});
  r.add("", "ReduceMin", {.run = reduce<ReduceOp::Min>});
  r.add("", "ReduceProd", {.run = reduce<ReduceOp::Prod>});
  r.add("", "ReduceL1", {.run = reduce<ReduceOp::L1>});
  r.add("", "ReduceL2", {.run = reduce<ReduceOp::L2>});
  r.add("", "ReduceSumSquare", {.run = reduce<ReduceOp::SumSquare>});
  r.add("", "ReduceLogSum", {.run = reduce<ReduceOp::LogSum>});
  r.add("", "ReduceLogSumExp", {.run = reduce<ReduceOp::LogSumExp>});
  r.add("", "ArgMax", {.run = arg_reduce<true>});
  r.add("", "ArgMin", {.run = arg_reduce<false>});
  r.add("", "TopK", {.run = topk});
  r.add("", "CumSum", {.run = cumsum});
}

}  // namespace onnxforge::rt
