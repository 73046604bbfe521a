// Ops that only compute shapes or views: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Dropout, Shape, Size, Expand, ConstantOfShape, Constant, Range, EyeLike, NonZero.
#include <cstring>
#include <cmath>

#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

void reshape(OpContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> s =
      c.in(1) ? ints_of(*c.in(1)) : std::vector<int64_t>(c.attr_ints("shape").begin(), c.attr_ints("shape").end());
  const bool allowzero = c.attr_i("allowzero", 0);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 0 && !allowzero) {
      if (i >= x.shape.size()) c.error("shape " + shape_str(s) + ": 0 at a position past the input rank");
      s[i] = x.shape[i];
    }
    if (s[i] == -1) {
      if (infer >= 0) c.error("shape " + shape_str(s) + " has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (s[i] < -1) {
      // numel() of two negative dims could match the input's (-2 x -3 = 6).
      c.error("shape " + shape_str(s) + " has a negative dimension");
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      c.error("shape " + shape_str(s) + " has more elements than can be addressed");
    }
  }
  if (infer >= 0) s[static_cast<size_t>(infer)] = known ? x.numel() / known : 0;
  if (numel(s) != x.numel()) c.error("cannot reshape " + shape_str(x.shape) + " to " + shape_str(s));
  c.output_alias(0, 0, s);
}

void flatten(OpContext& c) {
  const Tensor& x = c.input(0);
  int64_t axis = c.attr_i("axis", 1);
  if (axis < -x.rank() || axis > x.rank())
    c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  if (axis < 0) axis += x.rank();
  int64_t a = 1;
  for (int64_t i = 0; i < axis; ++i) a = mul_dim(c, a, x.shape[static_cast<size_t>(i)]);
  c.output_alias(0, 0, {a, a ? x.numel() / a : 0});
}

void squeeze(OpContext& c) {
  const Tensor& x = c.input(0);
  bool given = false;
  auto axes = axes_of(c, 1, "axes", x.rank(), &given);
  Shape s;
  for (int64_t i = 0; i < x.rank(); ++i) {
    bool drop = given ? std::find(axes.begin(), axes.end(), i) != axes.end() : x.shape[static_cast<size_t>(i)] == 1;
    if (drop && x.shape[static_cast<size_t>(i)] != 1)
      c.error("cannot squeeze axis " + std::to_string(i) + " of " + shape_str(x.shape));
    if (!drop) s.push_back(x.shape[static_cast<size_t>(i)]);
  }
  c.output_alias(0, 0, s);
}

void unsqueeze(OpContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> axes =
      c.in(1) ? ints_of(*c.in(1)) : std::vector<int64_t>(c.attr_ints("axes").begin(), c.attr_ints("axes").end());
  const int64_t r = x.rank() + static_cast<int64_t>(axes.size());
  for (auto& a : axes) a = norm_axis(c, a, r);
  // A repeated axis would read the input's shape past its end (fuzz replay, ASan).
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) c.error("axes repeat an axis");
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end())
      s.push_back(1);
    else
      s.push_back(x.shape[k++]);
  }
  c.output_alias(0, 0, s);
}

void identity(OpContext& c) { c.output_alias(0, 0, c.input(0).shape); }

void dropout(OpContext& c) {
  c.output_alias(0, 0, c.input(0).shape);
  if (c.output_count() > 1 && c.has_output(1)) {
    // The mask is bool from opset 10; before, it has the input's type (all ones).
    if (c.opset < 10 && c.input(0).dtype != DType::Bool) {
      Tensor one = cast(Tensor::view(DType::Float, {}, std::array<float, 1>{1.f}.data()), c.input(0).dtype);
      Tensor& m = c.output(1, c.input(0).dtype, c.input(0).shape);
      const size_t es = dtype_size(m.dtype);
      for (int64_t i = 0; i < m.numel(); ++i) std::memcpy(m.data + static_cast<size_t>(i) * es, one.data, es);
      return;
    }
    Tensor& m = c.output(1, DType::Bool, c.input(0).shape);
    std::memset(m.data, 1, m.bytes());
  }
}

void shape(OpContext& c) {
  const Tensor& x = c.input(0);
  int64_t r = x.rank(), start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  int64_t n = std::max<int64_t>(end - start, 0);
  Tensor& y = c.output(0, DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i) y.ptr<int64_t>()[i] = x.shape[static_cast<size_t>(start + i)];
}

bool reads_shape_only(const Graph&, NodeId) { return true; }

void size(OpContext& c) { c.output(0, DType::Int64, {}).ptr<int64_t>()[0] = c.input(0).numel(); }

void expand(OpContext& c) {
  const Tensor& x = c.input(0);
  Shape target = ints_of(c.input(1));
  Shape out = broadcast_shapes(c, x.shape, target);
  Tensor& y = c.output(0, x.dtype, out);
  const size_t es = dtype_size(x.dtype);
  auto st = bcast_strides(x.shape, out);
  if (es == 4) {
    for_each_broadcast<1>(
        out, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) { y.ptr<uint32_t>()[i] = x.ptr<uint32_t>()[o[0]]; });
  } else if (es == 8) {
    for_each_broadcast<1>(
        out, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) { y.ptr<uint64_t>()[i] = x.ptr<uint64_t>()[o[0]]; });
  } else if (es == 1) {
    for_each_broadcast<1>(
        out, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) { y.ptr<uint8_t>()[i] = x.ptr<uint8_t>()[o[0]]; });
  } else {
    for_each_broadcast<1>(out, {st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      std::memcpy(y.data + static_cast<size_t>(i) * es, x.data + static_cast<size_t>(o[0]) * es, es);
    });
  }
}

void fill_from_attr_tensor(OpContext& c, TensorId t, const Shape& shape) {
  const TensorStore& ts = c.graph.model().tensors;
  Tensor& y = c.output(0, ts.dtype(t), shape);
  const size_t es = dtype_size(y.dtype);
  // A value tensor without its one element would be read past its end.
  if (ts.dtype(t) == DType::String || ts.bytes(t).size() < es) c.error("value must hold one element of a numeric type");
  const std::byte* v = ts.bytes(t).data();
  const auto n = static_cast<size_t>(y.numel());
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    T x;
    std::memcpy(&x, v, sizeof(T));
    std::fill(y.ptr<T>(), y.ptr<T>() + n, x);
  };
  switch (es) {
    case 1: fill(uint8_t{}); break;
    case 2: fill(uint16_t{}); break;
    case 4: fill(uint32_t{}); break;
    case 8: fill(uint64_t{}); break;
    default:
      for (size_t i = 0; i < n; ++i) std::memcpy(y.data + i * es, v, es);
  }
}

void constant_of_shape(OpContext& c) {
  Shape s = ints_of(c.input(0));
  if (TensorId t = c.graph.attr_tensor(c.node, "value"); t.valid()) {
    fill_from_attr_tensor(c, t, s);
  } else {
    Tensor& y = c.output(0, DType::Float, s);
    std::memset(y.data, 0, y.bytes());
  }
}

void constant(OpContext& c) {
  const TensorStore& ts = c.graph.model().tensors;
  if (TensorId t = c.graph.attr_tensor(c.node, "value"); t.valid()) {
    auto dims = ts.dims(t);
    if (ts.dtype(t) == DType::String) c.error("string constants are not supported");
    c.set_output(0, Tensor::view(ts.dtype(t), Shape(dims.begin(), dims.end()), ts.bytes(t).data()).clone());
  } else if (c.has_attr("value_float")) {
    c.output(0, DType::Float, {}).ptr<float>()[0] = c.attr_f("value_float", 0);
  } else if (c.has_attr("value_int")) {
    c.output(0, DType::Int64, {}).ptr<int64_t>()[0] = c.attr_i("value_int", 0);
  } else if (c.has_attr("value_floats")) {
    auto f = c.attr_floats("value_floats");
    Tensor& y = c.output(0, DType::Float, {static_cast<int64_t>(f.size())});
    std::copy(f.begin(), f.end(), y.ptr<float>());
  } else if (c.has_attr("value_ints")) {
    auto f = c.attr_ints("value_ints");
    Tensor& y = c.output(0, DType::Int64, {static_cast<int64_t>(f.size())});
    std::copy(f.begin(), f.end(), y.ptr<int64_t>());
  } else {
    c.error("unsupported Constant attribute (sparse or string values)");
  }
}

void range(OpContext& c) {
  const Tensor &s = c.input(0), &l = c.input(1), &d = c.input(2);
  dispatch_type(s.dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>)
      c.error("bool is not supported");
    else {
      // memcpy: a scalar initializer can sit at any byte offset of the mapped file (UBSan's
      // misaligned load in the fuzz replay).
      // The schema types all three alike, each a scalar: another type or an empty tensor would
      // be read past its end.
      need_elements(c, s, 1, s.dtype, "start");
      need_elements(c, l, 1, s.dtype, "limit");
      need_elements(c, d, 1, s.dtype, "delta");
      T start, limit, delta;
      std::memcpy(&start, s.data, sizeof(T));
      std::memcpy(&limit, l.data, sizeof(T));
      std::memcpy(&delta, d.data, sizeof(T));
      if (delta == 0) c.error("delta is zero");
      const double len =
          std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
      // NaN or a count past int64 would make the conversion undefined (the budget refuses
      // anything this large anyway).
      if (std::isnan(len) || len >= 9.2e18)
        c.error("the range from start, limit and delta is not finite or has too many elements");
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(len));
      Tensor& y = c.output(0, s.dtype, {n});
      if constexpr (std::is_integral_v<T>) {
        // Wrapping arithmetic: start + i * delta of a hostile delta may pass the type's range
        // (signed overflow is undefined; the last value is past limit anyway).
        for (int64_t i = 0; i < n; ++i)
          y.ptr<T>()[i] =
              static_cast<T>(static_cast<uint64_t>(start) + static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
      } else {
        for (int64_t i = 0; i < n; ++i) y.ptr<T>()[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      }
    }
  });
}

void eye_like(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 2) c.error("input must be 2-D, got " + shape_str(x.shape));
  const int64_t dti = c.attr_i("dtype", static_cast<int64_t>(x.dtype));
  if (dti <= 0 || dti > 23 || !dtype_known(static_cast<int32_t>(dti)))
    c.error("dtype " + std::to_string(dti) + " is not a tensor type");
  const DType dt = static_cast<DType>(dti);
  // Beyond the matrix every k selects nothing: clamped, i + k cannot overflow.
  const int64_t k = std::clamp<int64_t>(c.attr_i("k", 0), -x.shape[0] - 1, x.shape[1] + 1);
  Tensor& y = c.output(0, dt, x.shape);
  std::memset(y.data, 0, y.bytes());
  Tensor one = cast(Tensor::view(DType::Float, {}, std::array<float, 1>{1.f}.data()), dt);
  const size_t es = dtype_size(dt);
  for (int64_t i = 0; i < x.shape[0]; ++i) {
    int64_t j = i + k;
    if (j >= 0 && j < x.shape[1]) std::memcpy(y.data + static_cast<size_t>(i * x.shape[1] + j) * es, one.data, es);
  }
}

void non_zero(OpContext& c) {
  const Tensor& x = c.input(0);
  // Counted first, then written into the output: a list of hits would be a second buffer as
  // large as the output (8 bytes per element of the input) outside the memory budget.
  int64_t h = 0;
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) h += x.get_f64(i) != 0;
  const int64_t r = x.rank();
  Tensor& y = c.output(0, DType::Int64, {r, h});
  auto st = contiguous_strides(x.shape);
  for (int64_t i = 0, j = 0; i < n; ++i) {
    if (x.get_f64(i) == 0) continue;
    for (int64_t d = 0; d < r; ++d)
      y.ptr<int64_t>()[d * h + j] = (i / st[static_cast<size_t>(d)]) % x.shape[static_cast<size_t>(d)];
    ++j;
  }
}

}  // namespace

void register_shape_ops(Registry& r) {
  const std::pair<const char*, KernelFn> ops[] = {
      {"Reshape", reshape},   {"Flatten", flatten}, {"Squeeze", squeeze},  {"Unsqueeze", unsqueeze},
      {"Identity", identity}, {"Dropout", dropout}, {"Expand", expand},    {"ConstantOfShape", constant_of_shape},
      {"Constant", constant}, {"Range", range},     {"EyeLike", eye_like}, {"NonZero", non_zero}};
  r.add_each({.float_compute = false}, ops);
  // Shape and Size read the logical shape only, the same in either layout: they take a
  // channels-last input as it is (ISNet reads the shape of every decoder level's activations
  // for its Resize sizes; as NCHW-only readers they kept all of them plain).
  const std::pair<const char*, KernelFn> shape_readers[] = {{"Shape", shape}, {"Size", size}};
  r.add_each({.float_compute = false, .layout = LayoutUse::Aware, .takes_nhwc = reads_shape_only}, shape_readers);
}

}  // namespace onnxforge::rt
