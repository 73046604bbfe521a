// Less common ops: BitShift, Compress, ReverseSequence, Hann/Hamming/BlackmanWindow, Det.
#include <array>
#include <cmath>

#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

void bit_shift(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  need_same_type(c, a, b);
  const bool left = c.attr_s("direction") == "LEFT";
  Tensor& y = c.output(0, a.dtype, broadcast_shapes(c, a.shape, b.shape));
  dispatch_type(a.dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      for_each_broadcast_pair(a.shape, b.shape, y.shape, [&](int64_t i, int64_t ia, int64_t ib) {
        T x = a.ptr<T>()[ia], s = b.ptr<T>()[ib];
        y.ptr<T>()[i] = s >= sizeof(T) * 8 ? T{0} : static_cast<T>(left ? x << s : x >> s);
      });
    } else {
      c.error("BitShift needs unsigned integers");
    }
  });
}

void compress(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& cond = c.input(1);
  if (cond.dtype != DType::Bool) c.error("condition must be bool, got " + std::string(dtype_name(cond.dtype)));
  const size_t es = dtype_size(x.dtype);
  if (!c.has_attr("axis")) {
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < std::min(x.numel(), cond.numel()); ++i)
      if (cond.get_i64(i)) keep.push_back(i);
    Tensor& y = c.output(0, x.dtype, {static_cast<int64_t>(keep.size())});
    for (size_t i = 0; i < keep.size(); ++i)
      std::memcpy(y.data + i * es, x.data + static_cast<size_t>(keep[i]) * es, es);
    return;
  }
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < std::min(x.shape[static_cast<size_t>(axis)], cond.numel()); ++i)
    if (cond.get_i64(i)) keep.push_back(i);
  Shape ys = x.shape;
  ys[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor& y = c.output(0, x.dtype, ys);
  const AroundAxis around = around_axis(x.shape, axis);
  const int64_t outer = around.outer, n = around.n, inner = around.inner;
  const int64_t k = static_cast<int64_t>(keep.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(y.data + static_cast<size_t>((o * k + j) * inner) * es,
                  x.data + static_cast<size_t>((o * n + keep[static_cast<size_t>(j)]) * inner) * es,
                  static_cast<size_t>(inner) * es);
}

void reverse_sequence(OpContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& lens = c.input(1);
  const int64_t ba = c.attr_i("batch_axis", 1), ta = c.attr_i("time_axis", 0);
  // The walk below indexes the shape by both axes and reads a length per batch entry, each at
  // most the time axis: anything else would read past the shape, lens or the input.
  if (x.rank() < 2 || (ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    c.error("batch_axis " + std::to_string(ba) + " and time_axis " + std::to_string(ta) +
            " must be 0 and 1 of an input of rank >= 2, got " + shape_str(x.shape));
  const int64_t nb = x.shape[static_cast<size_t>(ba)], nt = x.shape[static_cast<size_t>(ta)];
  if (lens.numel() != nb || is_float_dtype(lens.dtype))
    c.error("sequence_lens must hold " + std::to_string(nb) + " integers, got " + shape_str(lens.shape));
  for (int64_t b = 0; b < nb; ++b)
    if (lens.get_i64(b) < 0 || lens.get_i64(b) > nt)
      c.error("sequence_lens values must lie in [0, " + std::to_string(nt) + "]");
  Tensor& y = c.output(0, x.dtype, x.shape);
  const size_t es = dtype_size(x.dtype);
  auto st = contiguous_strides(x.shape);
  std::vector<int64_t> idx(x.shape.size(), 0);
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    int64_t b = idx[static_cast<size_t>(ba)], t = idx[static_cast<size_t>(ta)], len = lens.get_i64(b);
    int64_t src = i;
    if (t < len) src += (len - 1 - 2 * t) * st[static_cast<size_t>(ta)];
    std::memcpy(y.data + static_cast<size_t>(i) * es, x.data + static_cast<size_t>(src) * es, es);
    next_index(idx, x.shape);
  }
}

template <int KIND>  // 0 Hann, 1 Hamming, 2 Blackman
void window(OpContext& c) {
  if (c.input(0).numel() != 1) c.error("size must hold one value, got " + shape_str(c.input(0).shape));
  const int64_t n = ints_of(c.input(0))[0];
  if (n < 0) c.error("size must not be negative, got " + std::to_string(n));
  const bool periodic = c.attr_i("periodic", 1);
  const int64_t dti = c.attr_i("output_datatype", 1);
  if (dti <= 0 || dti > 23 || !dtype_known(static_cast<int32_t>(dti)))
    c.error("output_datatype " + std::to_string(dti) + " is not a tensor type");
  const DType dt = static_cast<DType>(dti);
  Tensor& y = c.output(0, dt, {n});  // first: the memory budget refuses a hostile size before the staging buffer
  std::vector<double> w(static_cast<size_t>(n));
  const double den = static_cast<double>(periodic ? n : n - 1);
  for (int64_t i = 0; i < n; ++i) {
    const double x = 2 * M_PI * static_cast<double>(i) / den;
    if (KIND == 0)
      w[static_cast<size_t>(i)] = 0.5 - 0.5 * std::cos(x);
    else if (KIND == 1)
      w[static_cast<size_t>(i)] = 25.0 / 46 - (1 - 25.0 / 46) * std::cos(x);
    else
      w[static_cast<size_t>(i)] = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
  }
  cast_into(Tensor::view(DType::Double, {n}, w.data()), y);
}

void det(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() < 2 || x.shape[x.shape.size() - 2] != x.shape.back())
    c.error("input must be square matrices, got " + shape_str(x.shape));
  const int64_t M = x.shape.back(), MM = mul_dim(c, M, M), mats = M ? x.numel() / MM : 0;
  if (mats == 0) {  // an empty batch: no staging matrix (M may be huge)
    c.output(0, x.dtype, Shape(x.shape.begin(), x.shape.end() - 2));
    return;
  }
  Shape ys(x.shape.begin(), x.shape.end() - 2);
  std::vector<double> out(static_cast<size_t>(mats));
  std::vector<double> a(static_cast<size_t>(M * M));
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < M * M; ++i) a[static_cast<size_t>(i)] = x.get_f64(m * M * M + i);
    double d = 1;
    for (int64_t k = 0; k < M; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < M; ++i)
        if (std::fabs(a[static_cast<size_t>(i * M + k)]) > std::fabs(a[static_cast<size_t>(p * M + k)])) p = i;
      if (a[static_cast<size_t>(p * M + k)] == 0) {
        d = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < M; ++j) std::swap(a[static_cast<size_t>(p * M + j)], a[static_cast<size_t>(k * M + j)]);
        d = -d;
      }
      d *= a[static_cast<size_t>(k * M + k)];
      for (int64_t i = k + 1; i < M; ++i) {
        double f = a[static_cast<size_t>(i * M + k)] / a[static_cast<size_t>(k * M + k)];
        for (int64_t j = k; j < M; ++j) a[static_cast<size_t>(i * M + j)] -= f * a[static_cast<size_t>(k * M + j)];
      }
    }
    out[static_cast<size_t>(m)] = d;
  }
  cast_into(Tensor::view(DType::Double, ys, out.data()), c.output(0, x.dtype, ys));
}

void non_max_suppression(OpContext& c) {
  const Tensor& boxes = c.input(0);
  const Tensor& scores = c.input(1);
  const int64_t max_out = c.in(2) && c.in(2)->numel() ? ints_of(*c.in(2))[0] : 0;
  const double iou_th = c.in(3) && c.in(3)->numel() ? c.in(3)->get_f64(0) : 0;
  const bool has_score_th = c.in(4) && c.in(4)->numel();
  const double score_th = has_score_th ? c.in(4)->get_f64(0) : 0;
  const bool center = c.attr_i("center_point_box", 0);
  if (boxes.rank() != 3 || scores.rank() != 3 || boxes.shape[0] != scores.shape[0] ||
      boxes.shape[1] != scores.shape[2] || boxes.shape[2] != 4)
    c.error("boxes must be [B, N, 4] and scores [B, C, N], got " + shape_str(boxes.shape) + " and " +
            shape_str(scores.shape));
  const int64_t B = scores.shape[0], C = scores.shape[1], N = scores.shape[2];
  auto corners = [&](int64_t b, int64_t i) {
    double v[4];
    for (int k = 0; k < 4; ++k) v[k] = boxes.get_f64((b * N + i) * 4 + k);
    if (center) return std::array<double, 4>{v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    return std::array<double, 4>{std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
                                 std::max(v[1], v[3])};
  };
  auto iou = [](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double h = std::min(a[2], b[2]) - std::max(a[0], b[0]), w = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (h <= 0 || w <= 0) return 0.0;
    double inter = h * w, ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return ua <= 0 ? 0.0 : inter / ua;
  };
  std::vector<int64_t> sel;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t cl = 0; cl < C; ++cl) {
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_th || scores.get_f64((b * C + cl) * N + i) > score_th) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t x, int64_t y) {
        return scores.get_f64((b * C + cl) * N + x) > scores.get_f64((b * C + cl) * N + y);
      });
      std::vector<std::array<double, 4>> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        auto box = corners(b, i);
        bool ok = true;
        for (const auto& k : kept) ok &= !(iou(box, k) > iou_th);
        if (!ok) continue;
        kept.push_back(box);
        sel.insert(sel.end(), {b, cl, i});
      }
    }
  Tensor& y = c.output(0, DType::Int64, {static_cast<int64_t>(sel.size() / 3), 3});
  std::copy(sel.begin(), sel.end(), y.ptr<int64_t>());
}

}  // namespace

void register_misc(Registry& r) {
  r.add("", "NonMaxSuppression", {.run = non_max_suppression, .float_compute = false});
  r.add("", "BitShift", {.run = bit_shift, .float_compute = false});
  r.add("", "Compress", {.run = compress, .float_compute = false});
  r.add("", "ReverseSequence", {.run = reverse_sequence, .float_compute = false});
  r.add("", "HannWindow", {.run = window<0>, .float_compute = false});
  r.add("", "HammingWindow", {.run = window<1>, .float_compute = false});
  r.add("", "BlackmanWindow", {.run = window<2>, .float_compute = false});
  r.add("", "Det", {.run = det});
}

}  // namespace onnxforge::rt
