// Data movement: Transpose, Concat, Split, Slice, Tile, Pad, Trilu, DepthToSpace, SpaceToDepth.
#include "runtime/ops/common.h"
#include "io/budget.h"
#include "simd/pad.h"
#include "simd/parallel.h"
#include "simd/transpose.h"

namespace onnxforge::rt {

// dst (contiguous, `shape`) = src elements at base + sum(i_d * strides[d]) (strides may be < 0).
void copy_strided(size_t es, const Shape& shape, const std::byte* base, const std::vector<int64_t>& strides,
                  std::byte* dst) {
  const int64_t total = numel(shape);
  if (total == 0) return;
  const size_t r = shape.size();
  if (r == 0) {
    std::memcpy(dst, base, es);
    return;
  }
  const int64_t inner = shape[r - 1], is = strides[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t row = 0, rows = total / inner; row < rows; ++row) {
    const std::byte* s = base + off * static_cast<int64_t>(es);
    if (is == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * es);
      dst += static_cast<size_t>(inner) * es;
    } else {
      for (int64_t i = 0; i < inner; ++i, dst += es) std::memcpy(dst, s + i * is * static_cast<int64_t>(es), es);
    }
    for (size_t d = r - 1; d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

namespace {

void transpose(OpContext& c) {
  const Tensor& x = c.input(0);
  auto p = c.attr_ints("perm");
  std::vector<int64_t> perm(p.begin(), p.end());
  if (perm.empty())
    for (int64_t i = x.rank(); i-- > 0;) perm.push_back(i);
  // The transpose walks the input by perm: anything but a permutation of the axes would index
  // past the shape or the buffer.
  if (static_cast<int64_t>(perm.size()) != x.rank())
    c.error("perm has " + std::to_string(perm.size()) + " values for rank " + std::to_string(x.rank()));
  std::vector<bool> seen(perm.size(), false);
  Shape ys;
  for (auto a : perm) {
    if (a < 0 || a >= x.rank() || seen[static_cast<size_t>(a)])
      c.error("perm " + shape_str(perm) + " is not a permutation of the axes");
    seen[static_cast<size_t>(a)] = true;
    ys.push_back(x.shape[static_cast<size_t>(a)]);
  }
  Tensor& y = c.output(0, x.dtype, ys);
  simd::transpose(dtype_size(x.dtype), x.shape, x.data, perm, y.data);
}

// Plan time: a Concat along the channel axis works on channels-last inputs (U-Net skip
// connections): each input is a slice of channels of every output pixel.
bool concat_takes_nhwc(const Graph& g, NodeId n) {
  const int64_t axis = g.attr_int(n, "axis", 0);
  return axis == 1 || axis == -3;  // channels-last values have rank 4
}

// y (channels-last [N, H, W, sum C]) = the inputs' channels side by side, each input either
// layout (an NCHW one transposed on the way).
// Copies n bytes with inline 16-byte moves: a channels-last concat copies a few dozen to a few
// hundred bytes per pixel and input, where a call to memcpy per segment dominated.
inline void copy_segment(std::byte* dst, const std::byte* src, size_t n) {
  size_t k = 0;
  for (; k + 16 <= n; k += 16) std::memcpy(dst + k, src + k, 16);
  if (k < n) std::memcpy(dst + k, src + k, n - k);
}

void concat_channels_last(OpContext& c, const std::vector<const Tensor*>& xs, const Shape& ys) {
  Tensor& y = c.output(0, xs[0]->dtype, ys);
  const size_t es = dtype_size(y.dtype);
  const int64_t N = ys[0], HW = ys[2] * ys[3], ctot = ys[1];
  const size_t out_px = static_cast<size_t>(ctot) * es;
  std::vector<Tensor> held;
  held.reserve(xs.size());
  std::vector<const std::byte*> srcs;
  std::vector<size_t> bytes;
  for (const Tensor* x : xs) {
    const int64_t ci = x->shape[1];
    if (!x->nhwc && ci > 1 && HW > 1) {
      Tensor& t = held.emplace_back(Tensor::alloc(x->dtype, {N, HW, ci}));
      const int64_t perm[] = {0, 2, 1};
      const int64_t in_shape[] = {N, ci, HW};
      simd::transpose(es, in_shape, x->data, perm, t.data);
      x = &t;
    }
    srcs.push_back(x->data);
    bytes.push_back(static_cast<size_t>(ci) * es);
  }
  // One pass over the output pixels, each written whole (every input's channels in turn): a
  // pass per input wrote each output line once per input (ISNet fp16's 89 concats: 49 ms, ORT 22).
  simd::parallel_chunks(static_cast<size_t>(N * HW), 1024, [&](size_t b, size_t e) {
    for (size_t p = b; p < e; ++p) {
      std::byte* dst = y.data + p * out_px;
      for (size_t i = 0; i < srcs.size(); ++i) {
        copy_segment(dst, srcs[i] + p * bytes[i], bytes[i]);
        dst += bytes[i];
      }
    }
  });
  y.nhwc = true;
}

void concat(OpContext& c) {
  const Tensor& x0 = c.input(0);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x0.rank());
  Shape ys = x0.shape;
  ys[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < c.input_count(); ++i) {
    const Tensor& xi = c.input(i);
    if (xi.rank() != x0.rank() || xi.dtype != x0.dtype) c.error("inputs differ in rank or type");
    // Other dims that differ would copy rows of the wrong length (past the smaller input).
    for (int64_t d = 0; d < x0.rank(); ++d)
      if (d != axis && xi.shape[static_cast<size_t>(d)] != x0.shape[static_cast<size_t>(d)])
        c.error("input shapes " + shape_str(x0.shape) + " and " + shape_str(xi.shape) + " differ outside axis " +
                std::to_string(axis));
    if (__builtin_add_overflow(ys[static_cast<size_t>(axis)], xi.shape[static_cast<size_t>(axis)],
                               &ys[static_cast<size_t>(axis)]))
      c.error("the concatenated axis is out of range");
  }
  std::vector<const Tensor*> xs(c.input_count());
  bool any_nhwc = false;
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = &c.input(i);
    any_nhwc = any_nhwc || xs[i]->nhwc;
  }
  std::vector<Tensor> plain;
  if (any_nhwc) {
    if (c.prefer_nhwc && axis == 1 && x0.rank() == 4) {
      concat_channels_last(c, xs, ys);
      return;
    }
    plain.reserve(xs.size());
    for (auto& x : xs)
      if (x->nhwc) x = &plain.emplace_back(to_nchw(*x));
  }
  Tensor& y = c.output(0, x0.dtype, ys);
  const size_t es = dtype_size(x0.dtype);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= ys[static_cast<size_t>(i)];
  const int64_t row = y.numel() / std::max<int64_t>(outer, 1);
  int64_t col = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& xi = *xs[i];
    const int64_t n = outer ? xi.numel() / outer : 0;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y.data + static_cast<size_t>(o * row + col) * es, xi.data + static_cast<size_t>(o * n) * es,
                  static_cast<size_t>(n) * es);
    col += n;
  }
}

void split(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = norm_axis(c, c.attr_i("axis", 0), x.rank());
  const int64_t len = x.shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (c.in(1))
    sizes = ints_of(*c.in(1));
  else if (c.has_attr("split"))
    sizes.assign(c.attr_ints("split").begin(), c.attr_ints("split").end());
  const int64_t n = static_cast<int64_t>(c.output_count());
  if (!sizes.empty() && static_cast<int64_t>(sizes.size()) != n)
    c.error("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) + " outputs");
  if (sizes.empty()) {
    int64_t chunk = (len + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, len - i * chunk)));
  }
  // Sizes that are negative or do not add up to the axis would copy past the input's end.
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0 || __builtin_add_overflow(total, v, &total))
      c.error("split sizes must be non-negative and add up to the axis, got " + std::to_string(v));
  }
  if (total != len) c.error("split sizes add up to " + std::to_string(total) + ", the axis has " + std::to_string(len));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.shape[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.shape[static_cast<size_t>(i)];
  const size_t es = dtype_size(x.dtype);
  const size_t parts = std::min(sizes.size(), c.output_count());
  std::vector<std::byte*> ys(parts);
  std::vector<int64_t> starts(parts);
  int64_t start = 0;
  for (size_t k = 0; k < parts; ++k) {
    Shape s = x.shape;
    s[static_cast<size_t>(axis)] = sizes[k];
    ys[k] = c.output(k, x.dtype, s).data;
    starts[k] = start;
    start += sizes[k];
  }
  // One item per (outer index, output) row, in parallel chunks of about 64 KB: a fused QKV
  // projection's Split (BERT-base, 128 rows x 3 parts of 3 KB) took 0.26 ms on one thread.
  const auto count = static_cast<size_t>(outer) * parts;
  const size_t row_bytes = static_cast<size_t>(std::max<int64_t>(len * inner, 1)) * es / std::max<size_t>(parts, 1);
  simd::parallel_chunks(count, std::max<size_t>(1, (size_t{64} << 10) / std::max<size_t>(row_bytes, 1)),
                        [&](size_t b, size_t e) {
                          for (size_t i = b; i < e; ++i) {
                            const int64_t o = static_cast<int64_t>(i / parts);
                            const size_t k = i % parts;
                            std::memcpy(ys[k] + static_cast<size_t>(o * sizes[k] * inner) * es,
                                        x.data + static_cast<size_t>((o * len + starts[k]) * inner) * es,
                                        static_cast<size_t>(sizes[k] * inner) * es);
                          }
                        });
}

void slice(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts.assign(c.attr_ints("starts").begin(), c.attr_ints("starts").end());
    ends.assign(c.attr_ints("ends").begin(), c.attr_ints("ends").end());
    axes.assign(c.attr_ints("axes").begin(), c.attr_ints("axes").end());
  } else {
    starts = ints_of(c.input(1));
    ends = ints_of(c.input(2));
    if (c.in(3)) axes = ints_of(*c.in(3));
    if (c.in(4)) steps = ints_of(*c.in(4));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  // Lists of other lengths would be read past their end; a repeated axis is invalid (ONNX).
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.error("starts, ends, axes and steps have " + std::to_string(starts.size()) + ", " + std::to_string(ends.size()) +
            ", " + std::to_string(axes.size()) + " and " + std::to_string(steps.size()) + " values");
  std::vector<bool> sliced(static_cast<size_t>(r), false);
  Shape ys = x.shape;
  std::vector<int64_t> first(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = static_cast<size_t>(norm_axis(c, axes[i], r));
    if (sliced[a]) c.error("axes repeat axis " + std::to_string(a));
    sliced[a] = true;
    const int64_t d = x.shape[a];
    // A step past the axis takes one element at most: clamping it keeps the arithmetic below
    // (and the stride step * axis stride) from overflowing for a hostile step of +-2^63.
    const int64_t st = std::clamp<int64_t>(steps[i], -std::max<int64_t>(d, 1), std::max<int64_t>(d, 1));
    if (st == 0) c.error("slice step is 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      ys[a] = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      ys[a] = s > e ? (s - e - 1) / (-st) + 1 : 0;
    }
    first[a] = s;
    step[a] = st;
  }
  Tensor& y = c.output(0, x.dtype, ys);
  if (y.numel() == 0) return;
  auto cs = contiguous_strides(x.shape);
  int64_t off = 0;
  std::vector<int64_t> strides(static_cast<size_t>(r));
  for (size_t a = 0; a < static_cast<size_t>(r); ++a) {
    off += first[a] * cs[a];
    strides[a] = cs[a] * step[a];
  }
  const size_t es = dtype_size(x.dtype);
  copy_strided(es, ys, x.data + off * static_cast<int64_t>(es), strides, y.data);
}

void tile(OpContext& c) {
  const Tensor& x = c.input(0);
  auto reps = ints_of(c.input(1));
  if (reps.size() != x.shape.size())
    c.error("repeats has " + std::to_string(reps.size()) + " values for rank " + std::to_string(x.rank()));
  Shape ys = x.shape;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = mul_dim(c, ys[i], reps[i]);
  Tensor& y = c.output(0, x.dtype, ys);
  const size_t es = dtype_size(x.dtype);
  auto cs = contiguous_strides(x.shape);
  const size_t r = ys.size();
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0, n = y.numel(); i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += (idx[d] % x.shape[d]) * cs[d];
    std::memcpy(y.data + static_cast<size_t>(i) * es, x.data + static_cast<size_t>(off) * es, es);
    next_index(idx, ys);
  }
}

// Plan time: a 4-D Pad pads channels-last input in its layout (any pads: the physical
// [N, H, W, C] bytes, the pads permuted alike) when every reader of its output takes
// channels-last input too. Otherwise it would convert its input back, and saying yes would only
// lure its producer into writing NHWC for nothing (tf2onnx's Pads feed depthwise convs, which
// run NCHW).
bool pad_takes_nhwc(const Graph& g, NodeId n) {
  const int r = g.rank(g.input(n, 0));
  const ValueId y = g.output(n, 0);
  if ((r >= 0 && r != 4) || g.is_graph_output(y)) return false;
  const Registry& reg = Registry::get();
  bool any = false;
  for (NodeId m : g.nodes())
    for (size_t k = 0; k < g.inputs(m).size(); ++k) {
      if (g.input(m, k) != y) continue;
      const std::string_view dom = str(g.domain(m));
      const KernelDef* d = reg.find(dom == "ai.onnx" ? std::string_view{} : dom, str(g.op_type(m)));
      if (!d || d->layout != LayoutUse::Aware || !d->takes_nhwc || !(k == 0 || d->nhwc_all_inputs) ||
          !d->takes_nhwc(g, m))
        return false;
      any = true;
    }
  return any;
}

// Pad on simd::pad: pads from the attribute (opset < 11; `paddings` in opset 1) or input 1,
// over the axes of input 3 (opset 18) or all; negative pads crop first, as ONNX Runtime does.
void pad(OpContext& c) {
  const Tensor& x = c.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> pads;
  if (c.opset < 11) {
    auto a = c.has_attr("pads") || c.opset >= 2 ? c.attr_ints("pads") : c.attr_ints("paddings");
    pads.assign(a.begin(), a.end());
  } else {
    pads = ints_of(c.input(1));
  }
  std::vector<int64_t> axes;
  if (c.in(3)) {
    axes = ints_of(*c.in(3));
    for (auto& a : axes) a = norm_axis(c, a, r);
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  std::vector<int64_t> pb(static_cast<size_t>(r), 0), pe(static_cast<size_t>(r), 0);
  std::vector<uint8_t> seen(static_cast<size_t>(r), 0);
  const size_t na = axes.size();
  if (pads.size() != 2 * na)
    c.error("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(na) + " axes");
  for (size_t i = 0; i < na; ++i) {
    const auto a = static_cast<size_t>(axes[i]);
    if (seen[a]++) c.error("axis " + std::to_string(axes[i]) + " is listed twice in axes");
    pb[a] = pads[i];
    pe[a] = pads[i + na];
  }
  std::string_view m = c.attr_s("mode", "constant");
  simd::PadMode mode = simd::PadMode::Constant;
  if (m == "reflect")
    mode = simd::PadMode::Reflect;
  else if (m == "edge")
    mode = simd::PadMode::Edge;
  else if (m == "wrap")
    mode = simd::PadMode::Wrap;
  else if (m != "constant")
    c.error("unknown mode '" + std::string(m) + "'");
  Shape ys = x.shape;
  for (size_t d = 0; d < ys.size(); ++d) {
    int64_t kept = 0;
    if (__builtin_add_overflow(x.shape[d], std::min<int64_t>(pb[d], 0), &kept) ||
        __builtin_add_overflow(kept, std::min<int64_t>(pe[d], 0), &kept) || kept < 0)
      c.error("pads " + shape_str(pads) + " crop more than axis " + std::to_string(d) + " of " + shape_str(x.shape) +
              " holds");
    if (kept == 0 && mode != simd::PadMode::Constant && (pb[d] > 0 || pe[d] > 0))
      c.error("mode '" + std::string(m) + "' cannot pad axis " + std::to_string(d) + ", which is empty");
    if (__builtin_add_overflow(ys[d], pb[d], &ys[d]) || __builtin_add_overflow(ys[d], pe[d], &ys[d]))
      c.error("pads make axis " + std::to_string(d) + " of " + shape_str(x.shape) + " too large");
  }
  // The output is sized by the model's pads: refused over the memory budget before it is allocated.
  check_memory(checked_bytes(x.dtype, ys), c.where() + ": output " + shape_str(ys));
  const size_t es = dtype_size(x.dtype);
  std::vector<std::byte> cv(es, std::byte{0});
  if (mode == simd::PadMode::Constant) {
    if (c.opset < 11) {
      Tensor v = cast(Tensor::view(DType::Float, {}, std::array<float, 1>{c.attr_f("value", 0.f)}.data()), x.dtype);
      std::memcpy(cv.data(), v.data, es);
    } else if (const Tensor* v = c.in(2); v && v->numel()) {
      need_same_type(c, x, *v);
      std::memcpy(cv.data(), v->data, es);
    }
  }
  // Channels-last input for a channels-last reader: pad the [N, H, W, C] bytes and stay so.
  const bool channels_last = x.nhwc && r == 4 && c.prefer_nhwc;
  const Tensor xp = channels_last ? x : to_nchw(x);
  Tensor& y = c.output(0, x.dtype, ys);
  if (channels_last) {
    const int64_t perm[] = {0, 2, 3, 1};
    std::array<int64_t, 4> phys{}, b{}, e{};
    for (size_t d = 0; d < 4; ++d) {
      phys[d] = x.shape[static_cast<size_t>(perm[d])];
      b[d] = pb[static_cast<size_t>(perm[d])];
      e[d] = pe[static_cast<size_t>(perm[d])];
    }
    simd::pad(es, phys, xp.data, b, e, mode, cv.data(), y.data);
    y.nhwc = true;
    return;
  }
  simd::pad(es, xp.shape, xp.data, pb, pe, mode, cv.data(), y.data);
}

void trilu(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() < 2) c.error("input must have rank >= 2, got " + shape_str(x.shape));
  if (c.in(1) && c.in(1)->numel() != 1) c.error("k must hold one value, got " + shape_str(c.in(1)->shape));
  const int64_t R = x.shape[x.shape.size() - 2], C = x.shape.back(), mats = (R != 0 && C != 0) ? x.numel() / R / C : 0;
  // Beyond +-(R + C) every k keeps all or nothing: clamped, i + k cannot overflow.
  const int64_t k = std::clamp<int64_t>(c.in(1) ? ints_of(*c.in(1))[0] : 0, -R - C - 1, R + C + 1);
  const bool upper = c.attr_i("upper", 1);
  Tensor& y = c.output(0, x.dtype, x.shape);
  const size_t es = dtype_size(x.dtype);
  // Per row, columns [lo, hi) are kept (a contiguous run), the rest zeroed.
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < R; ++i) {
      const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, C) : 0;
      const int64_t hi = upper ? C : std::clamp<int64_t>(i + k + 1, 0, C);
      const size_t row = static_cast<size_t>((m * R + i) * C) * es;
      const auto ulo = static_cast<size_t>(lo) * es, uhi = static_cast<size_t>(std::max(lo, hi)) * es,
                 end = static_cast<size_t>(C) * es;
      std::memset(y.data + row, 0, ulo);
      if (uhi > ulo) std::memmove(y.data + row + ulo, x.data + row + ulo, uhi - ulo);
      std::memset(y.data + row + uhi, 0, end - uhi);
    }
}

// Both block ops read a 4-D input and split a dimension by the block size; anything else would
// index past the shape or transpose a buffer of the wrong size (fuzz_runtime, ASan).
void check_block_op(OpContext& c, const Tensor& x, int64_t b, bool to_depth) {
  if (x.rank() != 4) c.error("input must be 4-D, got " + shape_str(x.shape));
  if (b <= 0) c.error("blocksize must be positive, got " + std::to_string(b));
  int64_t bb = 0, cbb = 0;
  if (__builtin_mul_overflow(b, b, &bb) || __builtin_mul_overflow(x.shape[1], bb, &cbb) ||
      (to_depth ? (x.shape[2] % b != 0 || x.shape[3] % b != 0) : x.shape[1] % bb != 0))
    c.error("blocksize " + std::to_string(b) + " does not divide the input " + shape_str(x.shape));
}

void depth_to_space(OpContext& c) {
  const Tensor& x = c.input(0);
  check_block_op(c, x, c.attr_i("blocksize", 1), false);
  const int64_t b = c.attr_i("blocksize", 1), N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const bool crd = c.attr_s("mode", "DCR") == "CRD";
  Shape tmp = crd ? Shape{N, C / (b * b), b, b, H, W} : Shape{N, b, b, C / (b * b), H, W};
  std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  Tensor& y = c.output(0, x.dtype, {N, C / (b * b), mul_dim(c, H, b), mul_dim(c, W, b)});
  simd::transpose(dtype_size(x.dtype), tmp, x.data, perm, y.data);
}

void space_to_depth(OpContext& c) {
  const Tensor& x = c.input(0);
  check_block_op(c, x, c.attr_i("blocksize", 1), true);
  const int64_t b = c.attr_i("blocksize", 1), N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  Shape tmp{N, C, H / b, b, W / b, b};
  std::vector<int64_t> perm{0, 3, 5, 1, 2, 4};
  Tensor& y = c.output(0, x.dtype, {N, mul_dim(c, C, b * b), H / b, W / b});
  simd::transpose(dtype_size(x.dtype), tmp, x.data, perm, y.data);
}

}  // namespace

void register_movement(Registry& r) {
  const std::pair<const char*, KernelFn> ops[] = {{"Transpose", transpose},
                                                  {"Split", split},
                                                  {"Slice", slice},
                                                  {"Tile", tile},
                                                  {"Trilu", trilu},
                                                  {"DepthToSpace", depth_to_space},
                                                  {"SpaceToDepth", space_to_depth}};
  r.add_each({.float_compute = false}, ops);
  r.add("", "Pad", {.run = pad, .float_compute = false, .layout = LayoutUse::Aware, .takes_nhwc = pad_takes_nhwc});
  r.add("", "Concat",
        {.run = concat,
         .float_compute = false,
         .layout = LayoutUse::Aware,
         .takes_nhwc = concat_takes_nhwc,
         .nhwc_all_inputs = true});
}

}  // namespace onnxforge::rt
