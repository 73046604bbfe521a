// Indexing: Gather, GatherElements, GatherND, ScatterND, ScatterElements, OneHot.
#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

int64_t fix_index(const OpContext& c, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim)
    c.error("index " + std::to_string(i) + " is out of range for a dimension of " + std::to_string(dim));
  return i < 0 ? i + dim : i;
}

void gather(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  need_index_type(c, ind, "indices");
  Shape ys(x.shape.begin(), x.shape.begin() + axis);
  ys.insert(ys.end(), ind.shape.begin(), ind.shape.end());
  ys.insert(ys.end(), x.shape.begin() + axis + 1, x.shape.end());
  Tensor& y = c.output(0, x.dtype, ys);
  const AroundAxis around = around_axis(x.shape, axis);
  const int64_t outer = around.outer, dim = around.n, inner = around.inner;
  const int64_t n = ind.numel();
  const size_t es = dtype_size(x.dtype), chunk = static_cast<size_t>(inner) * es;
  std::vector<int64_t> idx = ints_of(ind);
  for (auto& i : idx) i = fix_index(c, i, dim);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(y.data + static_cast<size_t>(o * n + k) * chunk,
                  x.data + static_cast<size_t>(o * dim + idx[static_cast<size_t>(k)]) * chunk, chunk);
}

// GatherElements / ScatterElements: indices of the data's rank, no larger than the data on the
// axes other than `axis`, updates shaped like the indices. A hostile model breaks any of these
// (fuzz_runtime: reads and writes past the buffers), so they are checked before the loop.
void check_elementwise_indices(OpContext& c, const Tensor& x, const Tensor& ind, int64_t axis, const Tensor* upd) {
  need_index_type(c, ind, "indices");
  if (ind.rank() != x.rank())
    c.error("indices " + shape_str(ind.shape) + " and data " + shape_str(x.shape) + " differ in rank");
  for (size_t d = 0; d < ind.shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ind.shape[d] > x.shape[d])
      c.error("indices " + shape_str(ind.shape) + " exceed data " + shape_str(x.shape) + " on axis " +
              std::to_string(d));
  if (upd && (upd->shape != ind.shape || upd->dtype != x.dtype))
    c.error("updates " + shape_str(upd->shape) + " should have the indices' shape " + shape_str(ind.shape));
}

void gather_elements(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  check_elementwise_indices(c, x, ind, axis, nullptr);
  Tensor& y = c.output(0, x.dtype, ind.shape);
  const size_t es = dtype_size(x.dtype);
  auto xs = contiguous_strides(x.shape);
  const size_t r = ind.shape.size();
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0, n = ind.numel(); i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d)
      off += (static_cast<int64_t>(d) == axis ? fix_index(c, ind.get_i64(i), x.shape[d]) : idx[d]) * xs[d];
    std::memcpy(y.data + static_cast<size_t>(i) * es, x.data + static_cast<size_t>(off) * es, es);
    next_index(idx, ind.shape);
  }
}

void gather_nd(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  need_index_type(c, ind, "indices");
  const int64_t b = c.attr_i("batch_dims", 0), q = ind.rank();
  if (q < 1 || b < 0 || b >= q || b >= x.rank())
    c.error("batch_dims " + std::to_string(b) + " does not fit indices " + shape_str(ind.shape) + " and data " +
            shape_str(x.shape));
  const int64_t k = ind.shape.back();
  if (k < 1 || b + k > x.rank())
    c.error("indices' last dimension " + std::to_string(k) + " does not fit data " + shape_str(x.shape));
  for (int64_t i = 0; i < b; ++i)
    if (ind.shape[static_cast<size_t>(i)] != x.shape[static_cast<size_t>(i)])
      c.error("batch dimensions of indices and data differ");
  Shape ys(ind.shape.begin(), ind.shape.end() - 1);
  ys.insert(ys.end(), x.shape.begin() + b + k, x.shape.end());
  Tensor& y = c.output(0, x.dtype, ys);
  const size_t es = dtype_size(x.dtype);
  int64_t batch = 1, inner = 1;
  for (int64_t i = 0; i < b; ++i) batch *= x.shape[static_cast<size_t>(i)];
  for (int64_t i = b + k; i < x.rank(); ++i) inner *= x.shape[static_cast<size_t>(i)];
  const int64_t per_batch_x = batch ? x.numel() / batch : 0;
  const int64_t lookups = numel(Shape(ind.shape.begin(), ind.shape.end() - 1)), per_batch = batch ? lookups / batch : 0;
  auto xs = contiguous_strides(x.shape);
  (void)q;
  for (int64_t l = 0; l < lookups; ++l) {
    int64_t off = (per_batch ? l / per_batch : 0) * per_batch_x;
    for (int64_t j = 0; j < k; ++j) {
      size_t d = static_cast<size_t>(b + j);
      off += fix_index(c, ind.get_i64(l * k + j), x.shape[d]) * xs[d];
    }
    std::memcpy(y.data + static_cast<size_t>(l * inner) * es, x.data + static_cast<size_t>(off) * es,
                static_cast<size_t>(inner) * es);
  }
}

template <class T>
void reduce_into(T& dst, T src, std::string_view red) {
  if (red == "add")
    dst = wrap_add(dst, src);
  else if (red == "mul")
    dst = wrap_mul(dst, src);
  else if (red == "max")
    dst = std::max(dst, src);
  else if (red == "min")
    dst = std::min(dst, src);
  else
    dst = src;
}

void scatter_nd(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const Tensor& upd = c.input(2);
  std::string_view red = c.attr_s("reduction", "none");
  need_index_type(c, ind, "indices");
  if (ind.rank() < 1 || ind.shape.back() < 1 || ind.shape.back() > x.rank())
    c.error("indices " + shape_str(ind.shape) + " do not fit data " + shape_str(x.shape));
  {  // updates: indices.shape[:-1] + data.shape[k:]
    Shape us(ind.shape.begin(), ind.shape.end() - 1);
    us.insert(us.end(), x.shape.begin() + ind.shape.back(), x.shape.end());
    if (upd.shape != us || upd.dtype != x.dtype)
      c.error("updates " + shape_str(upd.shape) + " should be " + shape_str(us));
  }
  Tensor& y = c.output(0, x.dtype, x.shape);
  std::memcpy(y.data, x.data, x.bytes());
  const int64_t k = ind.shape.back(), lookups = ind.numel() / std::max<int64_t>(k, 1);
  int64_t inner = 1;
  for (int64_t i = k; i < x.rank(); ++i) inner *= x.shape[static_cast<size_t>(i)];
  auto xs = contiguous_strides(x.shape);
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    for (int64_t l = 0; l < lookups; ++l) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j)
        off += fix_index(c, ind.get_i64(l * k + j), x.shape[static_cast<size_t>(j)]) * xs[static_cast<size_t>(j)];
      for (int64_t i = 0; i < inner; ++i) reduce_into(y.ptr<T>()[off + i], upd.ptr<T>()[l * inner + i], red);
    }
  });
}

void scatter_elements(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& ind = c.input(1);
  const Tensor& upd = c.input(2);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  std::string_view red = c.attr_s("reduction", "none");
  check_elementwise_indices(c, x, ind, axis, &upd);
  Tensor& y = c.output(0, x.dtype, x.shape);
  std::memcpy(y.data, x.data, x.bytes());
  auto xs = contiguous_strides(x.shape);
  const size_t r = ind.shape.size();
  std::vector<int64_t> idx(r, 0);
  dispatch_type(x.dtype, [&](auto v) {
    using T = decltype(v);
    for (int64_t i = 0, n = ind.numel(); i < n; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < r; ++d)
        off += (static_cast<int64_t>(d) == axis ? fix_index(c, ind.get_i64(i), x.shape[d]) : idx[d]) * xs[d];
      reduce_into(y.ptr<T>()[off], upd.ptr<T>()[i], red);
      next_index(idx, ind.shape);
    }
  });
}

void one_hot(OpContext& c) {
  const Tensor& ind = c.input(0);
  const Tensor& vals = c.input(2);
  // depth is one value, values two (off, on): shorter tensors would be read past their end.
  if (c.input(1).numel() != 1 || vals.numel() != 2)
    c.error("depth must hold one value and values two, got " + shape_str(c.input(1).shape) + " and " +
            shape_str(vals.shape));
  const double depth_f = c.input(1).get_f64(0);
  if (!(depth_f >= 1 && depth_f < 9.2e18)) c.error("depth must be positive, got " + std::to_string(depth_f));
  const int64_t depth = static_cast<int64_t>(depth_f);
  const int64_t r = ind.rank() + 1;
  const int64_t axis = norm_axis(c, c.attr_i("axis", -1), r);
  Shape ys = ind.shape;
  ys.insert(ys.begin() + axis, depth);
  Tensor& y = c.output(0, vals.dtype, ys);
  const size_t es = dtype_size(vals.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= ys[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < r; ++i) inner *= ys[static_cast<size_t>(i)];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = ind.get_i64(o * inner + i);  // float indices (T1 is any numeric type) saturate
        // Before opset 11 an index outside [0, depth) is all off; from 11 negatives count back.
        if (c.opset < 11 && ind.get_f64(o * inner + i) < 0)
          v = depth;
        else if (v < 0)
          v += depth;
        std::memcpy(y.data + static_cast<size_t>((o * depth + d) * inner + i) * es, vals.data + (v == d ? es : 0), es);
      }
}

}  // namespace

void register_gather(Registry& r) {
  const std::pair<const char*, KernelFn> ops[] = {
      {"Gather", gather},        {"GatherElements", gather_elements},   {"GatherND", gather_nd},
      {"ScatterND", scatter_nd}, {"ScatterElements", scatter_elements}, {"Scatter", scatter_elements},
      {"OneHot", one_hot}};
  r.add_each({.float_compute = false}, ops);
}

}  // namespace onnxforge::rt
