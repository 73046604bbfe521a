// MatMul and Gemm (Einsum is in einsum.cpp, registered here). float32 through simd (packed GEMM
// with a fused activation), other numeric types through a plain loop.
#include <map>
#include <mutex>

#include "runtime/ops/common.h"
#include "simd/binary.h"
#include "simd/gemm.h"
#include "simd/transpose.h"

namespace onnxforge::rt {

double scalar_unary(const simd::Unary& u, double x);  // ops/elementwise.cpp
void einsum(OpContext& c);                            // ops/einsum.cpp

namespace {

// The fused activation on a non-float32 result (float32 applies it in the GEMM epilogue).
void apply_act(const OpContext& c, Tensor& y) {
  if (c.fused_act.op == simd::UnaryOp::Identity) return;
  dispatch_type(y.dtype, [&](auto v) {
    using T = decltype(v);
    for (int64_t i = 0, n = y.numel(); i < n; ++i)
      y.ptr<T>()[i] = static_cast<T>(scalar_unary(c.fused_act, static_cast<double>(y.ptr<T>()[i])));
  });
}

// A MatMul's or Gemm's constant B as the plan prepared it: packed (KernelDef::prepare), or read
// in place on every run (KernelDef::in_place_b, SessionOptions::pack_weights off) as column
// blocks of op(B). Either way the product is the same micro-kernels' in the same K order, so
// the results are bit-identical (tests/runtime: InPlaceWeights.*).
struct WeightB {
  std::shared_ptr<const simd::PackedB> packed;
  InPlaceB in_place;
  size_t k() const { return packed ? packed->k() : static_cast<size_t>(in_place.k); }
  size_t n() const { return packed ? packed->n() : static_cast<size_t>(in_place.n); }
};

// In-place weights that are all transposed ([n, K]: an export's Transpose(W), a fused QKV of
// them) are multiplied as C^T = W A^T from this many rows of A on: W is then the GEMM's A, read in
// place by the micro-kernels with no packing at all, and only A (a few rows) is packed, instead
// of every W panel being transposed into the tile's packing on every run. Each element is the
// same FMA chain over the same K blocks (the product's operands swapped, which FMA does not
// round differently), so the bits are the packed path's. Measured (perf, TinyLlama shapes
// 2048x2048, 5632x2048, 2048x5632, 6 weights each from DRAM, 3 runs, 2 threads): 128 rows
// 2.08 s against 2.60 in place and 2.55 packing once; 32 rows 0.72 / 1.10 / 1.29; 16 rows
// 0.52 / 0.78 / 1.02; 300 rows 4.53 / 5.47 / 4.80. Under 16 rows the product's columns would be
// fewer than one vector.
constexpr size_t kSwapMinRows = 16;

// C (rows x N, row stride N) = A (rows x K) @ B, with beta * C added and the epilogue applied.
void gemm_weight(const WeightB& w, size_t rows, const float* a, float beta, float* y, const simd::Epilogue& ep) {
  const size_t K = w.k(), N = w.n();
  if (w.packed) {
    simd::gemm_packed(false, rows, 1.f, a, K, *w.packed, beta, y, N, ep);
    return;
  }
  bool swap = rows >= kSwapMinRows && ep.act.op == simd::UnaryOp::Identity && ep.bias_kind != simd::Bias::PerRow;
  for (const InPlaceB::Block& b : w.in_place.blocks) swap = swap && b.trans;
  if (swap) {
    std::vector<float> ct(N * rows);  // C^T
    const int64_t c_shape[2] = {static_cast<int64_t>(rows), static_cast<int64_t>(N)};
    const int64_t ct_shape[2] = {static_cast<int64_t>(N), static_cast<int64_t>(rows)}, perm[2] = {1, 0};
    if (beta != 0.f) simd::transpose(sizeof(float), c_shape, y, perm, ct.data());
    size_t col = 0;
    for (const InPlaceB::Block& b : w.in_place.blocks) {
      const size_t n = static_cast<size_t>(b.t.shape[0]);
      simd::Epilogue e = ep;
      if (e.bias_kind == simd::Bias::PerCol) e.bias_kind = simd::Bias::PerRow, e.bias += col;
      simd::gemm(false, true, n, rows, K, 1.f, b.t.ptr<float>(), K, a, K, beta, ct.data() + col * rows, rows, e);
      col += n;
    }
    simd::transpose(sizeof(float), ct_shape, ct.data(), perm, y);
    return;
  }
  size_t col = 0;
  for (const InPlaceB::Block& b : w.in_place.blocks) {
    const size_t n = static_cast<size_t>(b.trans ? b.t.shape[0] : b.t.shape[1]);
    simd::Epilogue e = ep;
    if (e.bias_kind == simd::Bias::PerCol) e.bias += col;
    simd::gemm(false, b.trans, rows, n, K, 1.f, a, K, b.t.ptr<float>(), b.trans ? K : n, beta, y + col, N, e);
    col += n;
  }
}

std::shared_ptr<const void> in_place_matmul(const Graph&, NodeId, const InPlaceB& b) {
  auto w = std::make_shared<WeightB>();
  w->in_place = b;
  return w;
}

// Packed weights, shared by every plan that packs the same bytes the same way (verify runs the
// original and the optimized model, whose weights are mostly identical).
std::shared_ptr<const void> packed_weight(const float* b, bool trans, size_t K, size_t N, size_t ldb) {
  const size_t rows = trans ? N : K;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (K * 31 + N) ^ (trans ? 0x5555 : 0);
  const auto* bytes = reinterpret_cast<const unsigned char*>(b);
  const size_t n = (rows - 1) * ldb * 4 + (trans ? K : N) * 4;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    h = (h ^ w) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001B3ull;
  using Key = std::tuple<uint64_t, size_t, size_t, size_t, bool>;
  static std::mutex mu;
  static std::map<Key, std::weak_ptr<const simd::PackedB>> cache;
  Key key{h, K, N, ldb, trans};
  {
    std::lock_guard l(mu);
    if (auto it = cache.find(key); it != cache.end())
      if (auto p = it->second.lock()) {
        auto w = std::make_shared<WeightB>();
        w->packed = std::move(p);
        return w;
      }
  }
  auto p = std::make_shared<const simd::PackedB>(simd::pack_b(trans, K, N, b, ldb));
  {
    std::lock_guard l(mu);
    cache[key] = p;
  }
  auto w = std::make_shared<WeightB>();
  w->packed = std::move(p);
  return w;
}

std::shared_ptr<const void> prepare_matmul(const Graph&, NodeId, std::span<const Tensor* const> in) {
  if (in.size() < 2 || !in[1] || in[1]->dtype != DType::Float || in[1]->rank() != 2 || in[1]->numel() == 0)
    return nullptr;
  const auto K = static_cast<size_t>(in[1]->shape[0]), N = static_cast<size_t>(in[1]->shape[1]);
  return packed_weight(in[1]->ptr<float>(), false, K, N, N);
}

// B given as its transpose Bt [N, K] (KernelDef::prepare_transposed_b).
std::shared_ptr<const void> prepare_matmul_bt(const Graph&, NodeId, std::span<const Tensor* const> in) {
  if (in.size() < 2 || !in[1] || in[1]->dtype != DType::Float || in[1]->rank() != 2 || in[1]->numel() == 0)
    return nullptr;
  const auto N = static_cast<size_t>(in[1]->shape[0]), K = static_cast<size_t>(in[1]->shape[1]);
  return packed_weight(in[1]->ptr<float>(), true, K, N, K);
}

std::shared_ptr<const void> prepare_gemm(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  if (in.size() < 2 || !in[1] || in[1]->dtype != DType::Float || in[1]->rank() != 2 || in[1]->numel() == 0)
    return nullptr;
  const bool tb = g.attr_int(n, "transB", 0);
  const auto r = static_cast<size_t>(in[1]->shape[0]), c = static_cast<size_t>(in[1]->shape[1]);
  return packed_weight(in[1]->ptr<float>(), tb, tb ? c : r, tb ? r : c, c);
}

template <class T>
void matmul_generic(const Tensor& a, const Tensor& b, Tensor& y) {
  // Promote 1-D operands, broadcast batch dims, plain triple loop.
  Shape as = a.shape, bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  size_t r = std::max(abatch.size(), bbatch.size());
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - abatch.size() ? 1 : abatch[i - (r - abatch.size())];
    int64_t z = i < r - bbatch.size() ? 1 : bbatch[i - (r - bbatch.size())];
    batch[i] = x == 1 ? z : x;
  }
  auto sa = bcast_strides(abatch, batch), sb = bcast_strides(bbatch, batch);
  const T* pa = a.ptr<T>();
  const T* pb = b.ptr<T>();
  T* py = y.ptr<T>();
  for_each_broadcast<2>(batch, {sa, sb}, [&](int64_t bi, const std::array<int64_t, 2>& o) {
    const T* A = pa + o[0] * M * K;
    const T* B = pb + o[1] * K * N;
    T* Y = py + bi * M * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        T acc{};
        for (int64_t k = 0; k < K; ++k) acc = wrap_add(acc, wrap_mul(A[m * K + k], B[k * N + n]));
        Y[m * N + n] = acc;
      }
  });
}

// y = a @ b into `y` (float32: with epilogue `ep` and, for packed weights, `beta` * y added).
void matmul_into(OpContext& c, const Tensor& a, const Tensor& b, Tensor& y, const simd::Epilogue& ep, float beta) {
  if (a.dtype == DType::Float && c.state) {
    const auto& w = *static_cast<const WeightB*>(c.state);
    const size_t K = w.k(), rows = K ? static_cast<size_t>(a.numel()) / K : 0;
    gemm_weight(w, rows, a.ptr<float>(), beta, y.ptr<float>(), ep);
    return;
  }
  if (a.dtype == DType::Float) {
    if (beta != 0.f) c.error("internal: accumulating MatMul without packed weights");
    simd::matmul(a.shape, a.ptr<float>(), b.shape, b.ptr<float>(), y.ptr<float>(), ep);
    return;
  }
  dispatch_arithmetic(c, a.dtype, "bool operands are not supported",
                      [&](auto v) { matmul_generic<decltype(v)>(a, b, y); });
}

// MatMul with a fused Add (KernelDef::residual_input = 2) and then the fused activation:
// a bias row becomes the GEMM's per-column bias, a same-shape residual is accumulated onto
// (packed weights), anything else is added after the product.
void matmul_residual(OpContext& c, const Shape& ys) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const Tensor& r = *c.in(2);
  const bool flt = a.dtype == DType::Float && r.dtype == DType::Float;
  const int64_t N = ys.empty() ? 1 : ys.back();
  auto overlap = [](const Tensor& x, const Tensor& t) {
    return x.data < t.data + t.bytes() && t.data < x.data + x.bytes();
  };
  simd::Epilogue ep;
  if (flt && a.rank() >= 2 && b.rank() >= 2 && r.rank() >= 1 && r.rank() <= static_cast<int64_t>(ys.size()) &&
      r.shape.back() == N && r.numel() == N && N > 1) {
    Tensor& y = c.output(0, DType::Float, ys);
    // At one row (a decode step: [1,1,N]) a same-shape residual is also a bias row, and the
    // plan may have given y the residual's slot: the GEMM would overwrite the bias it reads.
    Tensor rcopy;
    if (overlap(y, r)) rcopy = r.clone();
    ep.bias_kind = simd::Bias::PerCol;
    ep.bias = rcopy.data ? rcopy.ptr<float>() : r.ptr<float>();
    ep.act = c.fused_act;
    Tensor acopy;
    if (overlap(y, a)) acopy = a.clone();  // y took the slot of a residual that views a
    matmul_into(c, acopy.data ? acopy : a, b, y, ep, 0.f);
    return;
  }
  if (flt && c.state && r.shape == ys) {
    Tensor& y = c.output(0, DType::Float, ys);
    Tensor acopy;
    const Tensor* pa = &a;
    if (overlap(y, a)) {  // y took the slot of a residual that views a
      acopy = a.clone();
      pa = &acopy;
    }
    if (y.data != r.data) std::memmove(y.data, r.data, y.bytes());
    ep.act = c.fused_act;
    matmul_into(c, *pa, b, y, ep, 1.f);
    return;
  }
  // General: the product into a temporary, then the broadcasting Add, then the activation.
  if (a.dtype != r.dtype) c.error("operand types differ");
  Tensor tmp = Tensor::alloc(a.dtype, ys);
  matmul_into(c, a, b, tmp, ep, 0.f);
  Shape out = broadcast_shapes(c, ys, r.shape);
  Tensor& y = c.output(0, a.dtype, out);
  Tensor rcopy;
  const Tensor* pr = &r;
  if (overlap(y, r)) {
    rcopy = r.clone();
    pr = &rcopy;
  }
  if (flt) {
    simd::binary(simd::BinaryOp::Add, tmp.shape, tmp.ptr<float>(), pr->shape, pr->ptr<float>(), y.ptr<float>());
    if (c.fused_act.op != simd::UnaryOp::Identity)
      simd::unary(c.fused_act, y.ptr<float>(), y.ptr<float>(), static_cast<size_t>(y.numel()));
    return;
  }
  dispatch_arithmetic(c, a.dtype, "bool operands are not supported", [&](auto v) {
    using T = decltype(v);
    const T* p0 = tmp.ptr<T>();
    const T* p1 = pr->ptr<T>();
    T* py = y.ptr<T>();
    for_each_broadcast<2>(y.shape, {bcast_strides(tmp.shape, y.shape), bcast_strides(pr->shape, y.shape)},
                          [&](int64_t i, const std::array<int64_t, 2>& o) { py[i] = wrap_add(p0[o[0]], p1[o[1]]); });
  });
  apply_act(c, y);
}

void matmul(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  if (a.dtype != b.dtype) c.error("operand types differ");
  if (a.rank() == 0 || b.rank() == 0) c.error("MatMul operands must have rank >= 1");
  if (a.shape.back() != b.shape[b.rank() == 1 ? 0 : static_cast<size_t>(b.rank() - 2)])
    c.error("shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) + " do not match for MatMul");
  if (a.rank() > 2 && b.rank() > 2)  // the batch dims must broadcast (the generic path assumes it)
    broadcast_shapes(c, Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2));
  Shape ys = simd::matmul_shape(a.shape, b.shape);
  if (c.in(2)) {
    matmul_residual(c, ys);
    return;
  }
  Tensor& y = c.output(0, a.dtype, ys);
  simd::Epilogue ep;
  ep.act = c.fused_act;
  matmul_into(c, a, b, y, ep, 0.f);
  if (a.dtype != DType::Float) apply_act(c, y);
}

void gemm(OpContext& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  const Tensor* cc = c.in(2);
  const bool ta = c.attr_i("transA", 0), tb = c.attr_i("transB", 0);
  const float alpha = c.attr_f("alpha", 1.f), beta = c.attr_f("beta", 1.f);
  if (a.rank() != 2 || b.rank() != 2) c.error("Gemm operands must be 2-D");
  need_same_type(c, a, b);
  const int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  const int64_t N = tb ? b.shape[0] : b.shape[1], K2 = tb ? b.shape[1] : b.shape[0];
  if (K != K2) c.error("inner dimensions differ: " + shape_str(a.shape) + " x " + shape_str(b.shape));
  // C broadcasts to [M, N] (unidirectionally): another shape would be read past its end.
  if (cc && cc->numel() > 0 && !broadcasts_to(cc->shape, {M, N}))
    c.error("C " + shape_str(cc->shape) + " does not broadcast to [" + std::to_string(M) + ", " + std::to_string(N) +
            "]");
  Tensor& y = c.output(0, a.dtype, {M, N});
  if (a.dtype != DType::Float) {
    dispatch_arithmetic(c, a.dtype, "bool operands are not supported", [&](auto v) {
      using T = decltype(v);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          T acc{};
          for (int64_t k = 0; k < K; ++k)
            acc =
                wrap_add(acc, wrap_mul(a.ptr<T>()[ta ? k * M + m : m * K + k], b.ptr<T>()[tb ? n * K + k : k * N + n]));
          double r = alpha * static_cast<double>(acc);
          if (cc) {
            auto st = bcast_strides(cc->shape, {M, N});
            r += beta * cc->get_f64(m * st[0] + n * st[1]);
          }
          y.ptr<T>()[m * N + n] = from_double<T>(r);
        }
    });
    apply_act(c, y);
    return;
  }
  simd::Epilogue ep;
  ep.act = c.fused_act;
  float gemm_beta = 0.f;
  if (cc && beta != 0.f && cc->numel() > 0) {
    if (cc->dtype != DType::Float) c.error("C must be float32");
    const bool row = cc->numel() == N && (cc->rank() == 1 || cc->shape[0] == 1);
    if (row && beta == 1.f && N != 1) {
      ep.bias_kind = simd::Bias::PerCol;
      ep.bias = cc->ptr<float>();
    } else {
      Shape cs = cc->shape;
      auto st = bcast_strides(cs, {M, N});
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) y.ptr<float>()[m * N + n] = cc->ptr<float>()[m * st[0] + n * st[1]];
      gemm_beta = beta;
    }
  }
  if (c.state) {  // Gemm has no in_place_b: its state is always packed
    simd::gemm_packed(ta, static_cast<size_t>(M), alpha, a.ptr<float>(), static_cast<size_t>(a.shape[1]),
                      *static_cast<const WeightB*>(c.state)->packed, gemm_beta, y.ptr<float>(), static_cast<size_t>(N),
                      ep);
    return;
  }
  simd::gemm(ta, tb, static_cast<size_t>(M), static_cast<size_t>(N), static_cast<size_t>(K), alpha, a.ptr<float>(),
             static_cast<size_t>(a.shape[1]), b.ptr<float>(), static_cast<size_t>(b.shape[1]), gemm_beta,
             y.ptr<float>(), static_cast<size_t>(N), ep);
}

}  // namespace

void register_matmul(Registry& r) {
  r.add("", "MatMul",
        {.run = matmul,
         .inplace_input = 2,  // a fused Add's operand
         .fuses_activation = true,
         .prepare = prepare_matmul,
         .prepared_inputs = 1u << 1,
         .prepare_transposed_b = prepare_matmul_bt,
         .in_place_b = in_place_matmul,
         .residual_input = 2});
  r.add("", "Gemm", {.run = gemm, .fuses_activation = true, .prepare = prepare_gemm, .prepared_inputs = 1u << 1});
  r.add("", "Einsum", {.run = einsum});
}

}  // namespace onnxforge::rt
