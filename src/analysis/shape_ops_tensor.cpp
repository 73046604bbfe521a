// Shape-manipulating ops and the shape-tensor ops whose symbolic values feed them: Shape, Size,
// Constant, ConstantOfShape, Range, Reshape, Expand, Tile, Transpose, Flatten, Squeeze,
// Unsqueeze, Concat, Split, Slice, Gather*, Pad, Resize/Upsample, OneHot, NonZero, Compress.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/shape_engine.h"

namespace onnxforge::shape {
namespace {

using Dims = std::vector<SymDim>;

// Slices of a tracked value with constant bounds (also used by Split).
Dims sub(const Dims& v, size_t b, size_t e) { return Dims(v.begin() + b, v.begin() + e); }

// ---------------------------------------------------------------- shape tensors

void shape_(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, DType::Int64);
  int64_t r = static_cast<int64_t>(x.rank());
  auto clampi = [r](int64_t a) { return std::clamp(a < 0 ? a + r : a, int64_t{0}, r); };
  int64_t b = clampi(c.attr_int("start", 0)), e = clampi(c.attr_int("end", r));
  e = std::max(b, e);
  c.set(0, DType::Int64, {SymDim::constant(e - b)});
  c.set_value(0, sub(x.dims, b, e));
}

void size_(OpCtx& c) {
  c.set(0, DType::Int64, {});
  if (c.in(0).ranked) c.set_value(0, {product(c.in(0).dims)});
}

void constant(OpCtx& c) {
  for (const Attr& a : c.g.attrs(c.n)) {
    std::string_view name = str(a.name);
    if (name == "value" && a.type == AttrType::Tensor) {
      c.out(0) = c.eng.from_tensor(a.tensor, true);
    } else if (name == "value_float") {
      c.set(0, DType::Float, {});
    } else if (name == "value_floats") {
      c.set(0, DType::Float, {SymDim::constant(static_cast<int64_t>(a.list_count))});
    } else if (name == "value_int") {
      c.set(0, DType::Int64, {});
      c.set_value(0, {SymDim::constant(a.i)});
    } else if (name == "value_ints") {
      c.set(0, DType::Int64, {SymDim::constant(static_cast<int64_t>(a.list_count))});
      Dims v;
      for (int64_t x : c.g.ints(a)) v.push_back(SymDim::constant(x));
      c.set_value(0, v);
    } else if (name == "value_string") {
      c.set(0, DType::String, {});
    } else if (name == "value_strings") {
      c.set(0, DType::String, {SymDim::constant(static_cast<int64_t>(a.list_count))});
    }
  }
}

void constant_of_shape(OpCtx& c) {
  DType t = DType::Float;
  std::optional<int64_t> fill = 0;
  if (const Attr* a = c.g.attr(c.n, "value"); a && a->type == AttrType::Tensor) {
    VState v = c.eng.from_tensor(a->tensor, true);
    t = v.dtype;
    fill = v.val && v.val->size() == 1 ? std::optional<int64_t>(v.val->front().value()) : std::nullopt;
  }
  auto dims = shape_operand(c, 0);
  if (!dims) return c.set_dtype(0, t);
  c.set(0, t, *dims);
  if (fill && dims->size() <= 1 && (dims->empty() || dims->front().is_constant()))
    c.set_value(0, Dims(dims->empty() ? 1 : dims->front().value(), SymDim::constant(*fill)));
}

void range(OpCtx& c) {
  DType t = c.in(0).dtype;
  const auto *s = c.value(0), *l = c.value(1), *d = c.value(2);
  if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1 && d->front().is_constant() &&
      d->front().value() != 0) {
    int64_t step = d->front().value();
    SymDim start = s->front(), limit = l->front();
    // In 128 bits: the model's int64 values may be anything (fuzz: limit - start overflowed).
    const __int128 count =
        start.is_constant() && limit.is_constant()
            ? (static_cast<__int128>(limit.value()) - start.value() + step + (step > 0 ? -1 : 1)) / step
            : 0;
    if (start.is_constant() && limit.is_constant() && count > (__int128{1} << 62)) return c.set(0, t, {c.fresh()});
    if (start.is_constant() && limit.is_constant()) {
      int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
      c.set(0, t, {SymDim::constant(n)});
      Dims v;
      for (int64_t i = 0; i < n && v.size() <= c.eng.options().max_value_elements; ++i)
        v.push_back(SymDim::constant(start.value() + i * step));
      return c.set_value(0, v);
    }
    if (step > 0) return c.set(0, t, {ceil_div(limit - start, step)});  // assumes limit >= start
    return c.set(0, t, {c.fresh()});
  }
  auto fs = c.const_floats(0), fl = c.const_floats(1), fd = c.const_floats(2);
  if (fs && fl && fd && fs->size() == 1 && fl->size() == 1 && fd->size() == 1 && fd->front() != 0) {
    double n = std::ceil((fl->front() - fs->front()) / fd->front());
    if (std::isnan(n) || n > 0x1p62) return c.set(0, t, {c.fresh()});  // NaN or an absurd count: unknown, never UB
    return c.set(0, t, {SymDim::constant(std::max<int64_t>(0, static_cast<int64_t>(n)))});
  }
  c.set(0, t, {c.fresh()});
}

// ---------------------------------------------------------------- Reshape family

void reshape(OpCtx& c) {
  const VState& x = c.in(0);
  DType t = x.dtype;
  std::optional<Dims> target;
  if (c.has_input(1))
    target = shape_operand(c, 1);
  else if (c.has_attr("shape")) {  // opset 1-4
    target.emplace();
    for (int64_t v : c.attr_ints("shape")) target->push_back(SymDim::constant(v));
  }
  if (!target) return c.set_dtype(0, t);
  Dims out = *target;
  bool allowzero = c.attr_int("allowzero", 0) != 0;
  std::optional<size_t> infer;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_constant(0) && !allowzero)
      out[i] = x.ranked && i < x.rank() ? x.dims[i] : c.fresh();
    else if (out[i].is_constant(-1))
      infer = i;
  }
  if (infer) {
    std::optional<SymDim> q;
    if (x.ranked) {
      Dims others;
      for (size_t i = 0; i < out.size(); ++i)
        if (i != *infer) others.push_back(out[i]);
      q = SymDim::quotient(x.dims, others);
    }
    out[*infer] = q ? *q : c.fresh();
  } else if (x.ranked && c.relating()) {
    // Without a -1 the target must hold x's elements: x [n] -> [2, m] needs n = 2·m.
    SymDim px = SymDim::constant(1), po = SymDim::constant(1);
    for (const SymDim& d : x.dims) px = px * d;
    for (const SymDim& d : out) po = po * d;
    if (px != po) c.relate(px, po, /*broadcast=*/false);
  }
  c.set(0, t, out);
  if (const auto* v = c.value(0); v && out.size() <= 1) c.set_value(0, *v);
}

void expand(OpCtx& c) {
  const VState& x = c.in(0);
  auto target = shape_operand(c, 1);
  if (!x.ranked || !target) return c.set_dtype(0, x.dtype);
  std::vector<Dims> shapes{x.dims, *target};
  c.set(0, x.dtype, broadcast(c, shapes));
  const auto* v = c.value(0);
  if (v && target->size() == 1 && target->front().is_constant()) {
    if (v->size() == static_cast<size_t>(target->front().value()))
      c.set_value(0, *v);
    else if (v->size() == 1)
      c.set_value(0, Dims(target->front().value(), v->front()));
  }
}

void tile(OpCtx& c) {
  const VState& x = c.in(0);
  const auto* r = c.value(1);
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  Dims out = x.dims;
  for (size_t i = 0; i < out.size(); ++i) out[i] = r && r->size() == out.size() ? out[i] * (*r)[i] : c.fresh();
  c.set(0, x.dtype, out);
}

void transpose(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  auto perm = c.attr_ints("perm");
  Dims out;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (perm.empty()) {
      out.push_back(x.dims[x.rank() - 1 - i]);
    } else {
      if (perm.size() != x.rank())
        return c.conflict("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(x.rank()));
      auto a = c.axis(perm[i], x.rank());
      if (!a) return;
      out.push_back(x.dims[*a]);
    }
  }
  c.set(0, x.dtype, out);
}

void flatten(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  int64_t a = c.attr_int("axis", 1);
  if (a < 0) a += static_cast<int64_t>(x.rank());
  if (a < 0 || a > static_cast<int64_t>(x.rank())) return c.conflict("Flatten axis out of range");
  c.set(0, x.dtype, {product(sub(x.dims, 0, a)), product(sub(x.dims, a, x.rank()))});
}

void squeeze(OpCtx& c) {
  const VState& x = c.in(0);
  auto axes = c.ints_attr_or_input("axes", 1);
  if (!x.ranked || !axes) return c.set_dtype(0, x.dtype);
  std::vector<uint8_t> drop(x.rank(), 0);
  if (axes->empty()) {
    for (size_t i = 0; i < x.rank(); ++i) drop[i] = x.dims[i].is_constant(1);  // symbols assumed != 1
  }
  for (int64_t a : *axes) {
    auto k = c.axis(a, x.rank());
    if (!k) return;
    if (x.dims[*k].is_constant() && !x.dims[*k].is_constant(1))
      return c.conflict("Squeeze of a dim of size " + x.dims[*k].str());
    drop[*k] = 1;
  }
  Dims out;
  for (size_t i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dims[i]);
  c.set(0, x.dtype, out);
  if (const auto* v = c.value(0)) c.set_value(0, *v);
}

void unsqueeze(OpCtx& c) {
  const VState& x = c.in(0);
  auto axes = c.ints_attr_or_input("axes", 1);
  if (!x.ranked || !axes) return c.set_dtype(0, x.dtype);
  size_t r = x.rank() + axes->size();
  std::vector<uint8_t> add(r, 0);
  for (int64_t a : *axes) {
    auto k = c.axis(a, r);
    if (!k) return;
    add[*k] = 1;
  }
  Dims out;
  for (size_t i = 0, j = 0; i < r; ++i) out.push_back(add[i] ? SymDim::constant(1) : x.dims[j++]);
  c.set(0, x.dtype, out);
  if (const auto* v = c.value(0)) c.set_value(0, *v);
}

void concat(OpCtx& c) {
  DType t = c.in(0).dtype;
  std::optional<Dims> out;
  Dims values;
  bool track = true;
  int64_t axis = c.attr_int("axis", 0);
  std::optional<size_t> a;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const VState& s = c.in(i);
    if (!s.ranked) return c.set_dtype(0, t);
    if (!a) a = c.axis(axis, s.rank());
    if (!a) return;
    if (!out) {
      out = s.dims;
    } else {
      if (out->size() != s.rank()) return c.conflict("Concat inputs of different ranks");
      (*out)[*a] = (*out)[*a] + s.dims[*a];
      for (size_t k = 0; k < s.rank(); ++k) {
        if (k == *a) continue;
        if ((*out)[k] != s.dims[k]) c.relate((*out)[k], s.dims[k], /*broadcast=*/false);
        if (!(*out)[k].is_constant() && s.dims[k].is_constant()) (*out)[k] = s.dims[k];
      }
    }
    if (const auto* v = c.value(i))
      values.insert(values.end(), v->begin(), v->end());
    else
      track = false;
  }
  if (!out) return c.set_dtype(0, t);
  c.set(0, t, *out);
  if (track) c.set_value(0, values);
}

// com.microsoft QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input): Concat's shape of
// the X inputs in Y's type.
void qlinear_concat(OpCtx& c) {
  const DType t = c.has_input(1) ? c.in(1).dtype : c.in(2).dtype;
  std::optional<Dims> out;
  std::optional<size_t> a;
  for (size_t i = 2; i < c.num_inputs(); i += 3) {
    const VState& s = c.in(i);
    if (!s.ranked) return c.set_dtype(0, t);
    if (!a) a = c.axis(c.attr_int("axis", 0), s.rank());
    if (!a) return;
    if (!out)
      out = s.dims;
    else if (out->size() != s.rank())
      return c.conflict("QLinearConcat inputs of different ranks");
    else
      (*out)[*a] = (*out)[*a] + s.dims[*a];
  }
  if (!out) return c.set_dtype(0, t);
  c.set(0, t, *out);
}

void split(OpCtx& c) {
  const VState& x = c.in(0);
  size_t n = c.num_outputs();
  if (!x.ranked) {
    for (size_t i = 0; i < n; ++i) c.set_dtype(i, x.dtype);
    return;
  }
  auto a = c.axis(c.attr_int("axis", 0), x.rank());
  if (!a) return;
  std::optional<Dims> sizes;
  if (c.has_attr("split")) {
    sizes.emplace();
    for (int64_t s : c.attr_ints("split")) sizes->push_back(SymDim::constant(s));
  } else if (c.has_input(1)) {
    if (const auto* v = c.value(1)) sizes = *v;
  } else {
    SymDim d = x.dims[*a];
    int64_t parts = static_cast<int64_t>(n);
    if (auto q = exact_div(d, SymDim::constant(parts))) {
      sizes = Dims(n, *q);
    } else if (d.is_constant()) {  // opset 18 num_outputs: ceil, last part smaller
      int64_t each = (d.value() + parts - 1) / parts;
      sizes = Dims(n, SymDim::constant(each));
      sizes->back() = SymDim::constant(d.value() - each * (parts - 1));
    }
  }
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    Dims out = x.dims;
    out[*a] = sizes && sizes->size() == n ? (*sizes)[i] : c.fresh();
    c.set(i, x.dtype, out);
    const auto* v = c.value(0);
    if (v && x.rank() == 1 && out[0].is_constant() && offset + out[0].value() <= static_cast<int64_t>(v->size()))
      c.set_value(i, sub(*v, offset, offset + out[0].value()));
    if (out[*a].is_constant()) offset += out[*a].value();
  }
}

// ---------------------------------------------------------------- Slice

constexpr int64_t kBig = std::numeric_limits<int32_t>::max();

// Length of x[start:end:step] along one axis. Symbolic bounds assume they lie in range.
SymDim slice_len(OpCtx& c, const SymDim& d, SymDim s, SymDim e, int64_t k) {
  if (d.is_constant() && s.is_constant() && e.is_constant()) {
    int64_t n = d.value(), b = s.value(), f = e.value();
    if (b < 0) b += n;
    if (f < 0) f += n;
    if (k > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      f = std::clamp<int64_t>(f, 0, n);
      // In 128 bits: a step of +-2^63 (fuzz, slice_step_int64_limits) overflows int64 here.
      return SymDim::constant(static_cast<int64_t>(std::max<__int128>(0, (__int128{f} - b + k - 1) / k)));
    }
    b = std::clamp<int64_t>(b, 0, n - 1);
    f = std::clamp<int64_t>(f, -1, n - 1);
    return SymDim::constant(static_cast<int64_t>(std::max<__int128>(0, (__int128{b} - f - k - 1) / -__int128{k})));
  }
  if (k < 0) {
    bool full = (s.is_constant(-1) || (s.is_constant() && s.value() >= kBig)) && e.is_constant() && e.value() <= -kBig;
    return full && k != std::numeric_limits<int64_t>::min() ? ceil_div(d, -k) : c.fresh();
  }
  // Symbolic bounds and constant starts are assumed to lie in [0, d]; a constant end on a
  // symbolic dim would be min(end, d), which is not an expression here.
  auto norm = [&](SymDim v, bool is_end) -> std::optional<SymDim> {
    if (!v.is_constant()) return v;
    if (v.value() >= kBig) return d;
    if (v.value() < 0) return v.value() <= -kBig ? SymDim::constant(0) : d + v;
    if (d.is_constant()) return SymDim::constant(std::min(v.value(), d.value()));
    if (v.value() == 0 || !is_end) return v;
    return std::nullopt;
  };
  auto b = norm(s, false), f = norm(e, true);
  if (!b || !f) return c.fresh();
  SymDim len = *f - *b;
  if (len.is_constant() && len.value() < 0) return SymDim::constant(0);
  return ceil_div(len, k);
}

void slice(OpCtx& c) {
  const VState& x = c.in(0);
  DType t = x.dtype;
  if (!x.ranked) return c.set_dtype(0, t);
  std::optional<Dims> starts, ends;
  std::optional<std::vector<int64_t>> axes, steps;
  auto to_dims = [](std::span<const int64_t> v) {
    Dims out;
    for (int64_t i : v) out.push_back(SymDim::constant(i));
    return out;
  };
  if (c.has_attr("starts")) {  // opset 1-9
    starts = to_dims(c.attr_ints("starts"));
    ends = to_dims(c.attr_ints("ends"));
    axes = std::vector<int64_t>(c.attr_ints("axes").begin(), c.attr_ints("axes").end());
    steps = std::vector<int64_t>{};
  } else {
    if (const auto* v = c.value(1)) starts = *v;
    if (const auto* v = c.value(2)) ends = *v;
    axes = c.has_input(3) ? c.const_ints(3) : std::vector<int64_t>{};
    steps = c.has_input(4) ? c.const_ints(4) : std::vector<int64_t>{};
  }
  if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) {
    Dims out;  // rank is kept; dims not sliced are unknown without axes
    for (size_t i = 0; i < x.rank(); ++i) out.push_back(c.fresh());
    return c.set(0, t, out);
  }
  if (axes->empty())
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  if (steps->empty()) steps->assign(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    return c.conflict("Slice operands differ in length");
  Dims out = x.dims;
  for (size_t i = 0; i < axes->size(); ++i) {
    auto a = c.axis((*axes)[i], x.rank());
    if (!a) return;
    if ((*steps)[i] == 0) return c.conflict("Slice step 0");
    out[*a] = slice_len(c, x.dims[*a], (*starts)[i], (*ends)[i], (*steps)[i]);
  }
  c.set(0, t, out);
  const auto* v = c.value(0);
  if (!v || x.rank() != 1 || axes->size() != 1 || !(*starts)[0].is_constant() || !(*ends)[0].is_constant()) return;
  int64_t n = static_cast<int64_t>(v->size()), k = (*steps)[0];
  int64_t b = (*starts)[0].value(), e = (*ends)[0].value();
  if (b < 0) b += n;
  if (e < 0) e += n;
  Dims vals;
  if (k > 0)
    for (int64_t i = std::clamp<int64_t>(b, 0, n); i < std::clamp<int64_t>(e, 0, n); i += k) vals.push_back((*v)[i]);
  else
    for (int64_t i = std::clamp<int64_t>(b, 0, n - 1); i > std::clamp<int64_t>(e, -1, n - 1); i += k)
      vals.push_back((*v)[i]);
  c.set_value(0, vals);
}

// ---------------------------------------------------------------- Gather family

void gather(OpCtx& c) {
  const VState &x = c.in(0), &idx = c.in(1);
  if (!x.ranked || !idx.ranked) return c.set_dtype(0, x.dtype);
  auto a = c.axis(c.attr_int("axis", 0), x.rank());
  if (!a) return;
  Dims out = sub(x.dims, 0, *a);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), x.dims.begin() + *a + 1, x.dims.end());
  c.set(0, x.dtype, out);
  const auto* v = c.value(0);
  auto ids = c.const_ints(1);
  if (!v || !ids || x.rank() != 1) return;
  Dims vals;
  int64_t n = static_cast<int64_t>(v->size());
  for (int64_t i : *ids) {
    if (i < 0) i += n;
    if (i < 0 || i >= n) return c.conflict("Gather index out of range");
    vals.push_back((*v)[i]);
  }
  c.set_value(0, vals);
}

void gather_elements(OpCtx& c) {
  const VState& idx = c.in(1);
  if (!idx.ranked) return c.set_dtype(0, c.in(0).dtype);
  c.set(0, c.in(0).dtype, idx.dims);
}

void gather_nd(OpCtx& c) {
  const VState &x = c.in(0), &idx = c.in(1);
  size_t b = static_cast<size_t>(c.attr_int("batch_dims", 0));
  if (!x.ranked || !idx.ranked || idx.rank() == 0 || !idx.dims.back().is_constant()) return c.set_dtype(0, x.dtype);
  size_t q = static_cast<size_t>(idx.dims.back().value());
  if (b + q > x.rank()) return c.conflict("GatherND index depth exceeds the data rank");
  Dims out = sub(idx.dims, 0, idx.rank() - 1);
  out.insert(out.end(), x.dims.begin() + b + q, x.dims.end());
  c.set(0, x.dtype, out);
}

// ---------------------------------------------------------------- Pad, Resize

void pad(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  std::optional<Dims> pads;
  if (c.has_attr("pads")) {
    pads.emplace();
    for (int64_t p : c.attr_ints("pads")) pads->push_back(SymDim::constant(p));
  } else if (const auto* v = c.value(1)) {
    pads = *v;
  }
  std::vector<int64_t> axes;
  if (c.has_input(3)) {
    auto a = c.const_ints(3);
    if (!a)
      pads.reset();
    else
      axes = *a;
  }
  if (axes.empty())
    for (size_t i = 0; i < x.rank(); ++i) axes.push_back(static_cast<int64_t>(i));
  Dims out = x.dims;
  if (!pads || pads->size() != 2 * axes.size()) {
    for (auto& d : out) d = c.fresh();
    return c.set(0, x.dtype, out);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    auto a = c.axis(axes[i], x.rank());
    if (!a) return;
    out[*a] = out[*a] + (*pads)[i] + (*pads)[i + axes.size()];
  }
  c.set(0, x.dtype, out);
}

SymDim scaled(OpCtx& c, const SymDim& d, double s) {
  if (d.is_constant()) return SymDim::constant(static_cast<int64_t>(std::floor(static_cast<double>(d.value()) * s)));
  if (s == std::floor(s) && s >= 0) return d * SymDim::constant(static_cast<int64_t>(s));
  return c.fresh();
}

void resize(OpCtx& c) {
  const VState& x = c.in(0);
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  bool upsample = c.g.is_op(c.n, "Upsample");
  size_t scales_at = upsample || c.opset() < 11 ? 1 : 2;
  std::vector<int64_t> axes(c.attr_ints("axes").begin(), c.attr_ints("axes").end());
  if (axes.empty())
    for (size_t i = 0; i < x.rank(); ++i) axes.push_back(static_cast<int64_t>(i));
  Dims out = x.dims;
  if (c.has_input(3) && !upsample && c.opset() >= 11) {
    const auto* sizes = c.value(3);
    if (sizes && sizes->size() == axes.size()) {
      for (size_t i = 0; i < axes.size(); ++i)
        if (auto a = c.axis(axes[i], x.rank())) out[*a] = (*sizes)[i];
      return c.set(0, x.dtype, out);
    }
  } else {
    std::optional<std::vector<double>> scales;
    if (c.has_attr("scales")) {
      auto f = c.g.attr_floats(c.n, "scales");
      scales = std::vector<double>(f.begin(), f.end());
    } else {
      scales = c.const_floats(scales_at);
    }
    if (scales && scales->size() == axes.size()) {
      for (size_t i = 0; i < axes.size(); ++i)
        if (auto a = c.axis(axes[i], x.rank())) out[*a] = scaled(c, x.dims[*a], (*scales)[i]);
      return c.set(0, x.dtype, out);
    }
  }
  for (auto& d : out) d = c.fresh();
  c.set(0, x.dtype, out);
}

// ---------------------------------------------------------------- data-dependent sizes

void one_hot(OpCtx& c) {
  const VState& idx = c.in(0);
  DType t = c.in(2).dtype;
  if (!idx.ranked) return c.set_dtype(0, t);
  size_t r = idx.rank() + 1;
  auto a = c.axis(c.attr_int("axis", -1), r);
  if (!a) return;
  SymDim depth = c.fresh();
  if (const auto* v = c.value(1); v && v->size() == 1)
    depth = v->front();
  else if (auto f = c.const_floats(1); f && f->size() == 1)
    depth = SymDim::constant(static_cast<int64_t>(f->front()));
  Dims out = idx.dims;
  out.insert(out.begin() + *a, depth);
  c.set(0, t, out);
}

void non_zero(OpCtx& c) {
  const VState& x = c.in(0);
  c.set(0, DType::Int64, {x.ranked ? SymDim::constant(static_cast<int64_t>(x.rank())) : c.fresh(), c.fresh()});
}

void compress(OpCtx& c) {
  const VState& x = c.in(0);
  if (!c.has_attr("axis")) return c.set(0, x.dtype, {c.fresh()});
  if (!x.ranked) return c.set_dtype(0, x.dtype);
  auto a = c.axis(c.attr_int("axis", 0), x.rank());
  if (!a) return;
  Dims out = x.dims;
  out[*a] = c.fresh();
  c.set(0, x.dtype, out);
}

}  // namespace

namespace {

// RandomNormal / RandomUniform: the `shape` attribute, the `dtype` attribute (float by default).
void random_from_attrs(OpCtx& c) {
  Dims out;
  for (int64_t v : c.attr_ints("shape")) out.push_back(SymDim::constant(v));
  c.set(0, static_cast<DType>(c.attr_int("dtype", static_cast<int64_t>(DType::Float))), out);
}

// Multinomial: [batch, sample_size] class indices, int32 unless `dtype` says int64.
void multinomial(OpCtx& c) {
  const VState& x = c.in(0);
  const DType t = static_cast<DType>(c.attr_int("dtype", static_cast<int64_t>(DType::Int32)));
  c.set(0, t, {x.ranked && x.rank() == 2 ? x.dims[0] : c.fresh(), SymDim::constant(c.attr_int("sample_size", 1))});
}

}  // namespace

void register_tensor(const Registrar& reg) {
  reg("RandomNormal", random_from_attrs);
  reg("RandomUniform", random_from_attrs);
  reg("Multinomial", multinomial);
  reg("Shape", shape_);
  reg("Size", size_);
  reg("Constant", constant);
  reg("ConstantOfShape", constant_of_shape);
  reg("Range", range);
  reg("Reshape", reshape);
  reg("Expand", expand);
  reg("Tile", tile);
  reg("Transpose", transpose);
  reg("Flatten", flatten);
  reg("Squeeze", squeeze);
  reg("Unsqueeze", unsqueeze);
  reg("Concat", concat);
  reg("com.microsoft::QLinearConcat", qlinear_concat);
  reg("Split", split);
  reg("Slice", slice);
  reg("Gather", gather);
  reg("GatherElements", gather_elements);
  reg("GatherND", gather_nd);
  reg("Pad", pad);
  reg("Resize", resize);
  reg("Upsample", resize);
  reg("OneHot", one_hot);
  reg("NonZero", non_zero);
  reg("Compress", compress);
}

}  // namespace onnxforge::shape
