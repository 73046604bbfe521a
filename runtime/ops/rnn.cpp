// Recurrent layers: RNN, GRU, LSTM (opset 7-14: directions, sequence_lens, layout, clip,
// custom activations, peepholes, linear_before_reset, input_forget). The general path computes
// in float64, element by element; a float32 LSTM with the default activations runs on the GEMM
// (lstm_fast below).
#include <cmath>
#include <functional>

#include "runtime/ops/common.h"
#include "simd/gemm.h"
#include "simd/unary.h"

namespace onnxforge::rt {
namespace {

enum class Cell { Rnn, Gru, Lstm };

using Act = std::function<double(double)>;

Act make_act(const OpContext& c, std::string_view name, std::span<const float> alpha, std::span<const float> beta,
             size_t& ai, size_t& bi) {
  auto take = [](std::span<const float> v, size_t& i, double dflt) {
    return i < v.size() ? static_cast<double>(v[i++]) : dflt;
  };
  if (name == "Relu") return [](double x) { return x > 0 ? x : 0; };
  if (name == "Tanh") return [](double x) { return std::tanh(x); };
  if (name == "Sigmoid") return [](double x) { return 1 / (1 + std::exp(-x)); };
  if (name == "Softsign") return [](double x) { return x / (1 + std::fabs(x)); };
  if (name == "Softplus") return [](double x) { return std::log1p(std::exp(x)); };
  if (name == "Affine") {
    double a = take(alpha, ai, 1), b = take(beta, bi, 0);
    return [a, b](double x) { return a * x + b; };
  }
  if (name == "LeakyRelu") {
    double a = take(alpha, ai, 0.01);
    return [a](double x) { return x < 0 ? a * x : x; };
  }
  if (name == "ThresholdedRelu") {
    double a = take(alpha, ai, 1);
    return [a](double x) { return x > a ? x : 0; };
  }
  if (name == "ScaledTanh") {
    double a = take(alpha, ai, 1), b = take(beta, bi, 1);
    return [a, b](double x) { return a * std::tanh(b * x); };
  }
  if (name == "HardSigmoid") {
    double a = take(alpha, ai, 0.2), b = take(beta, bi, 0.5);
    return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
  }
  if (name == "Elu") {
    double a = take(alpha, ai, 1);
    return [a](double x) { return x < 0 ? a * (std::exp(x) - 1) : x; };
  }
  c.error("unsupported activation '" + std::string(name) + "'");
}

template <Cell K>
void rnn(OpContext& c) {
  constexpr int G = K == Cell::Rnn ? 1 : K == Cell::Gru ? 3 : 4;
  constexpr int NA = K == Cell::Rnn ? 1 : K == Cell::Gru ? 2 : 3;
  const Tensor& X = c.input(0);
  const Tensor& W = c.input(1);
  const Tensor& R = c.input(2);
  const Tensor* B = c.in(3);
  const Tensor* lens = c.in(4);
  const Tensor* h0 = c.in(5);
  const Tensor* c0 = K == Cell::Lstm ? c.in(6) : nullptr;
  const Tensor* P = K == Cell::Lstm ? c.in(7) : nullptr;
  const bool layout = c.attr_i("layout", 0) == 1;
  if (X.rank() != 3 || R.rank() != 3)
    c.error("X and R must be 3-D, got " + shape_str(X.shape) + " and " + shape_str(R.shape));
  const int64_t S = X.shape[layout ? 1 : 0], N = X.shape[layout ? 0 : 1], I = X.shape[2];
  const int64_t H = c.attr_i("hidden_size", R.shape[2]);
  std::string_view dir = c.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.error("unknown direction '" + std::string(dir) + "'");
  const int64_t D = dir == "bidirectional" ? 2 : 1;
  // Every weight, bias and state is read at the sizes the attributes and X imply; a hostile
  // model's shorter tensors would be read past their end (fuzz_runtime).
  if (H <= 0 || H != R.shape[2])
    c.error("hidden_size " + std::to_string(H) + " does not match R " + shape_str(R.shape));
  const int64_t GH = mul_dim(c, G, H);
  need_elements(c, W, mul_dim(c, mul_dim(c, D, GH), I), W.dtype, "W");
  need_elements(c, R, mul_dim(c, mul_dim(c, D, GH), H), R.dtype, "R");
  if (B) need_elements(c, *B, mul_dim(c, 2 * D, GH), B->dtype, "B");
  if (h0) need_elements(c, *h0, mul_dim(c, mul_dim(c, D, N), H), h0->dtype, "initial_h");
  if (c0) need_elements(c, *c0, mul_dim(c, mul_dim(c, D, N), H), c0->dtype, "initial_c");
  if (P) need_elements(c, *P, mul_dim(c, 3 * D, H), P->dtype, "P");
  if (lens) {
    need_elements(c, *lens, N, lens->dtype, "sequence_lens");
    for (int64_t n = 0; n < N; ++n)
      if (lens->get_i64(n) < 0 || lens->get_i64(n) > S)
        c.error("sequence_lens values must lie in [0, " + std::to_string(S) + "]");
  }
  const double clip = c.has_attr("clip") ? c.attr_f("clip", 0) : 0;
  const bool lbr = c.attr_i("linear_before_reset", 0), input_forget = c.attr_i("input_forget", 0);
  std::vector<Act> acts;
  {
    const Attr* a = c.graph.typed_attr(c.node, "activations", AttrType::Strings);
    auto alpha = c.attr_floats("activation_alpha"), beta = c.attr_floats("activation_beta");
    size_t ai = 0, bi = 0;
    std::vector<std::string> names;
    if (a)
      for (Sym s : c.graph.strings(*a)) names.emplace_back(str(s));
    const char* dflt[3] = {K == Cell::Rnn ? "Tanh" : "Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < D; ++d)
      for (int k = 0; k < NA; ++k) {
        size_t idx = static_cast<size_t>(d * NA + k);
        acts.push_back(make_act(c, idx < names.size() ? std::string_view(names[idx]) : std::string_view(dflt[k]), alpha,
                                beta, ai, bi));
      }
  }
  auto xat = [&](int64_t t, int64_t n, int64_t i) {
    return X.get_f64(layout ? (n * S + t) * I + i : (t * N + n) * I + i);
  };
  std::vector<double> Y(static_cast<size_t>(S * D * N * H), 0.0), Yh(static_cast<size_t>(D * N * H)), Yc(Yh.size());
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    const Act& f = acts[static_cast<size_t>(d * NA)];
    const Act& g = acts[static_cast<size_t>(d * NA + (NA > 1 ? 1 : 0))];
    const Act& h = acts[static_cast<size_t>(d * NA + (NA > 2 ? 2 : 0))];
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> hs(static_cast<size_t>(H)), cs(static_cast<size_t>(H));
      for (int64_t j = 0; j < H; ++j) {
        auto hidx = layout ? (n * D + d) * H + j : (d * N + n) * H + j;
        hs[static_cast<size_t>(j)] = h0 ? h0->get_f64(hidx) : 0;
        cs[static_cast<size_t>(j)] = c0 ? c0->get_f64(hidx) : 0;
      }
      const int64_t len = lens ? lens->get_i64(n) : S;
      std::vector<double> gx(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H));
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        for (int64_t r = 0; r < G * H; ++r) {
          double ax = B ? B->get_f64(d * 2 * G * H + r) : 0, ah = B ? B->get_f64(d * 2 * G * H + G * H + r) : 0;
          for (int64_t i = 0; i < I; ++i) ax += xat(t, n, i) * W.get_f64((d * G * H + r) * I + i);
          for (int64_t k = 0; k < H; ++k) ah += hs[static_cast<size_t>(k)] * R.get_f64((d * G * H + r) * H + k);
          gx[static_cast<size_t>(r)] = ax;
          gh[static_cast<size_t>(r)] = ah;
        }
        auto cl = [&](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
        std::vector<double> nh(static_cast<size_t>(H)), rv(static_cast<size_t>(H)), ghh(static_cast<size_t>(H));
        if constexpr (K == Cell::Gru) {
          for (int64_t j = 0; j < H; ++j)
            rv[static_cast<size_t>(j)] = f(cl(gx[static_cast<size_t>(H + j)] + gh[static_cast<size_t>(H + j)]));
          if (!lbr)
            for (int64_t j = 0; j < H; ++j) {
              double acc = B ? B->get_f64(d * 2 * G * H + G * H + 2 * H + j) : 0;
              for (int64_t k = 0; k < H; ++k)
                acc += rv[static_cast<size_t>(k)] * hs[static_cast<size_t>(k)] *
                       R.get_f64((d * G * H + 2 * H + j) * H + k);
              ghh[static_cast<size_t>(j)] = acc;
            }
        }
        for (int64_t j = 0; j < H; ++j) {
          auto u = static_cast<size_t>(j);
          if constexpr (K == Cell::Rnn) {
            nh[u] = f(cl(gx[u] + gh[u]));
          } else if constexpr (K == Cell::Gru) {
            double z = f(cl(gx[u] + gh[u]));
            double hh =
                g(cl(gx[u + 2 * static_cast<size_t>(H)] + (lbr ? rv[u] * gh[u + 2 * static_cast<size_t>(H)] : ghh[u])));
            nh[u] = (1 - z) * hh + z * hs[u];
          } else {
            const double pi = P ? P->get_f64(d * 3 * H + j) : 0, po = P ? P->get_f64(d * 3 * H + H + j) : 0,
                         pf = P ? P->get_f64(d * 3 * H + 2 * H + j) : 0;
            double it = f(cl(gx[u] + gh[u] + pi * cs[u]));
            double ft =
                input_forget
                    ? 1 - it
                    : f(cl(gx[u + 2 * static_cast<size_t>(H)] + gh[u + 2 * static_cast<size_t>(H)] + pf * cs[u]));
            double ct = g(cl(gx[u + 3 * static_cast<size_t>(H)] + gh[u + 3 * static_cast<size_t>(H)]));
            double cn = ft * cs[u] + it * ct;
            double ot = f(cl(gx[u + static_cast<size_t>(H)] + gh[u + static_cast<size_t>(H)] + po * cn));
            cs[u] = cn;
            nh[u] = ot * h(cn);
          }
        }
        hs = nh;
        for (int64_t j = 0; j < H; ++j)
          Y[static_cast<size_t>(((t * D + d) * N + n) * H + j)] = hs[static_cast<size_t>(j)];
      }
      for (int64_t j = 0; j < H; ++j) {
        Yh[static_cast<size_t>((d * N + n) * H + j)] = hs[static_cast<size_t>(j)];
        Yc[static_cast<size_t>((d * N + n) * H + j)] = cs[static_cast<size_t>(j)];
      }
    }
  }
  const DType dt = X.dtype;
  if (c.output_count() > 0 && c.has_output(0)) {
    if (!layout) {
      cast_into(Tensor::view(DType::Double, {S, D, N, H}, Y.data()), c.output(0, dt, {S, D, N, H}));
    } else {  // [S, D, N, H] -> [N, S, D, H]
      std::vector<double> t(Y.size());
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < H; ++j)
              t[static_cast<size_t>(((n * S + s) * D + d) * H + j)] =
                  Y[static_cast<size_t>(((s * D + d) * N + n) * H + j)];
      cast_into(Tensor::view(DType::Double, {N, S, D, H}, t.data()), c.output(0, dt, {N, S, D, H}));
    }
  }
  auto state_out = [&](size_t i, std::vector<double>& v) {
    if (c.output_count() <= i || !c.has_output(i)) return;
    if (!layout) {
      cast_into(Tensor::view(DType::Double, {D, N, H}, v.data()), c.output(i, dt, {D, N, H}));
      return;
    }
    std::vector<double> t(v.size());
    for (int64_t d = 0; d < D; ++d)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < H; ++j)
          t[static_cast<size_t>((n * D + d) * H + j)] = v[static_cast<size_t>((d * N + n) * H + j)];
    cast_into(Tensor::view(DType::Double, {N, D, H}, t.data()), c.output(i, dt, {N, D, H}));
  };
  state_out(1, Yh);
  if (K == Cell::Lstm) state_out(2, Yc);
}

// ------------------------------------------------------------------------- LSTM, float32
// silero VAD's LSTM (one step, batch 1, 128 -> 128) took 0.6 ms per call on the float64 path
// above (get_f64 per multiply-add: 59% of the model's time in perf); ONNX Runtime runs the whole
// model in 0.2 ms. Here the input projection of every time step is one GEMM against W packed at
// plan time (both biases as its per-column bias), each step one GEMM of h against packed R, and
// the gates run on the vectorized sigmoid/tanh in float32, as ONNX Runtime's LSTM does.

struct LstmPacked {
  int64_t D = 0, G4H = 0, I = 0, H = 0;
  std::vector<simd::PackedB> w, r;  // per direction: op(B) = W[d]^T (I x 4H), R[d]^T (H x 4H)
  std::vector<float> bias;          // per direction: Wb + Rb (4H), empty when B is absent
};

// Default activations (Sigmoid, Tanh, Tanh per direction), no alpha/beta: the fast path's only
// functions.
bool default_lstm_acts(const Graph& g, NodeId n) {
  if (g.attr(n, "activation_alpha") || g.attr(n, "activation_beta")) return false;
  const Attr* a = g.attr(n, "activations");
  if (!a) return true;
  size_t i = 0;
  for (Sym s : g.strings(*a)) {
    static constexpr std::string_view kDefault[3] = {"Sigmoid", "Tanh", "Tanh"};
    if (str(s) != kDefault[i % 3]) return false;
    ++i;
  }
  return true;
}

std::shared_ptr<const void> prepare_lstm(const Graph& g, NodeId n, std::span<const Tensor* const> in) {
  const Tensor* W = in.size() > 1 ? in[1] : nullptr;
  const Tensor* R = in.size() > 2 ? in[2] : nullptr;
  if (!W || !R || W->dtype != DType::Float || R->dtype != DType::Float || W->rank() != 3 || R->rank() != 3)
    return nullptr;
  if (!default_lstm_acts(g, n)) return nullptr;
  // B is an input the plan only knows when it is a constant; absent (no input 3) means zeros.
  const bool b_given = g.inputs(n).size() > 3 && g.input(n, 3).valid();
  const Tensor* B = in.size() > 3 ? in[3] : nullptr;
  if (b_given && (!B || B->dtype != DType::Float)) return nullptr;
  auto p = std::make_shared<LstmPacked>();
  p->D = W->shape[0], p->G4H = W->shape[1], p->I = W->shape[2], p->H = R->shape[2];
  if (p->G4H != 4 * p->H || R->shape[0] != p->D || R->shape[1] != p->G4H) return nullptr;
  if (B && (B->rank() != 2 || B->shape[0] != p->D || B->shape[1] != 2 * p->G4H)) return nullptr;
  const auto GH = static_cast<size_t>(p->G4H), I = static_cast<size_t>(p->I), H = static_cast<size_t>(p->H);
  for (int64_t d = 0; d < p->D; ++d) {
    const auto du = static_cast<size_t>(d);
    p->w.push_back(simd::pack_b(true, I, GH, W->ptr<float>() + du * GH * I, I));
    p->r.push_back(simd::pack_b(true, H, GH, R->ptr<float>() + du * GH * H, H));
  }
  if (B) {
    p->bias.resize(static_cast<size_t>(p->D) * GH);
    const float* b = B->ptr<float>();
    for (size_t d = 0; d < static_cast<size_t>(p->D); ++d)
      for (size_t j = 0; j < GH; ++j) p->bias[d * GH + j] = b[d * 2 * GH + j] + b[d * 2 * GH + GH + j];
  }
  return p;
}

// Whether the float32 path runs this call (else the general path does).
bool lstm_fast(OpContext& c) {
  const auto* p = static_cast<const LstmPacked*>(c.state);
  const Tensor& X = c.input(0);
  if (!p || X.dtype != DType::Float || X.rank() != 3) return false;
  const Tensor* lens = c.in(4);
  const Tensor* h0 = c.in(5);
  const Tensor* c0 = c.in(6);
  const Tensor* P = c.in(7);
  const bool layout = c.attr_i("layout", 0) == 1;
  const int64_t S = X.shape[layout ? 1 : 0], N = X.shape[layout ? 0 : 1];
  const int64_t H = p->H, D = p->D;
  if (X.shape[2] != p->I || c.attr_i("hidden_size", H) != H) return false;
  std::string_view dir = c.attr_s("direction", "forward");
  if ((dir == "bidirectional") != (D == 2)) return false;
  if (lens)
    for (int64_t i = 0; i < lens->numel(); ++i)
      if (lens->get_i64(i) != S) return false;  // ragged batches: the general path
  for (const Tensor* t : {h0, c0, P})
    if (t && t->dtype != DType::Float) return false;
  if (h0 && h0->numel() != D * N * H) return false;
  if (c0 && c0->numel() != D * N * H) return false;
  if (P && P->numel() != D * 3 * H) return false;
  const float clip = c.has_attr("clip") ? c.attr_f("clip", 0) : 0;
  const bool input_forget = c.attr_i("input_forget", 0) != 0;
  const auto Hs = static_cast<size_t>(H), GH = 4 * Hs, Ns = static_cast<size_t>(N), Ss = static_cast<size_t>(S);
  const auto Ds = static_cast<size_t>(D);

  const bool want_y = c.output_count() > 0 && c.has_output(0);
  const bool want_h = c.output_count() > 1 && c.has_output(1);
  const bool want_c = c.output_count() > 2 && c.has_output(2);
  float* Y = want_y ? c.output(0, DType::Float, layout ? Shape{N, S, D, H} : Shape{S, D, N, H}).ptr<float>() : nullptr;
  float* Yh = want_h ? c.output(1, DType::Float, layout ? Shape{N, D, H} : Shape{D, N, H}).ptr<float>() : nullptr;
  float* Yc = want_c ? c.output(2, DType::Float, layout ? Shape{N, D, H} : Shape{D, N, H}).ptr<float>() : nullptr;
  // Index of state (d, n) in the [D, N, H] (layout 0) or [N, D, H] (layout 1) tensors.
  auto sidx = [&](size_t d, size_t n) { return (layout ? n * Ds + d : d * Ns + n) * Hs; };

  std::vector<float> xw(Ss * Ns * GH), gates(Ns * GH), hs(Ns * Hs), cs(Ns * Hs), tmp(Hs);
  const float* x = X.ptr<const float>();
  for (size_t d = 0; d < Ds; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    // X rows are (t, n) for layout 0 and (n, t) for layout 1: one GEMM either way.
    simd::Epilogue ep;
    if (!p->bias.empty()) ep = {simd::Bias::PerCol, p->bias.data() + d * GH, {}};
    simd::gemm_packed(false, Ss * Ns, 1.f, x, static_cast<size_t>(p->I), p->w[d], 0.f, xw.data(), GH, ep);
    for (size_t n = 0; n < Ns; ++n) {
      const size_t s0 = sidx(d, n);
      for (size_t j = 0; j < Hs; ++j) {
        hs[n * Hs + j] = h0 ? h0->ptr<const float>()[s0 + j] : 0.f;
        cs[n * Hs + j] = c0 ? c0->ptr<const float>()[s0 + j] : 0.f;
      }
    }
    const float* pi = P ? P->ptr<const float>() + d * 3 * Hs : nullptr;
    const float* po = pi ? pi + Hs : nullptr;
    const float* pf = pi ? pi + 2 * Hs : nullptr;
    auto clamp = [&](float* v) {
      if (clip > 0)
        for (size_t j = 0; j < Hs; ++j) v[j] = std::clamp(v[j], -clip, clip);
    };
    for (size_t step = 0; step < Ss; ++step) {
      const size_t t = reverse ? Ss - 1 - step : step;
      for (size_t n = 0; n < Ns; ++n)
        std::memcpy(gates.data() + n * GH, xw.data() + (layout ? n * Ss + t : t * Ns + n) * GH, GH * sizeof(float));
      simd::gemm_packed(false, Ns, 1.f, hs.data(), Hs, p->r[d], 1.f, gates.data(), GH);
      for (size_t n = 0; n < Ns; ++n) {
        float* g = gates.data() + n * GH;  // gate order i, o, f, c
        float *gi = g, *go = g + Hs, *gf = g + 2 * Hs, *gc = g + 3 * Hs;
        float* cn = cs.data() + n * Hs;
        float* hn = hs.data() + n * Hs;
        if (pi)
          for (size_t j = 0; j < Hs; ++j) gi[j] += pi[j] * cn[j], gf[j] += pf[j] * cn[j];
        clamp(gi);
        simd::vmath::sigmoid(gi, gi, Hs);
        if (input_forget) {
          for (size_t j = 0; j < Hs; ++j) gf[j] = 1.f - gi[j];
        } else {
          clamp(gf);
          simd::vmath::sigmoid(gf, gf, Hs);
        }
        clamp(gc);
        simd::vmath::tanh(gc, gc, Hs);
        for (size_t j = 0; j < Hs; ++j) cn[j] = gf[j] * cn[j] + gi[j] * gc[j];
        if (po)
          for (size_t j = 0; j < Hs; ++j) go[j] += po[j] * cn[j];
        clamp(go);
        simd::vmath::sigmoid(go, go, Hs);
        simd::vmath::tanh(cn, tmp.data(), Hs);
        for (size_t j = 0; j < Hs; ++j) hn[j] = go[j] * tmp[j];
        if (Y)
          std::memcpy(Y + (layout ? ((n * Ss + t) * Ds + d) : ((t * Ds + d) * Ns + n)) * Hs, hn, Hs * sizeof(float));
      }
    }
    for (size_t n = 0; n < Ns; ++n) {
      if (Yh) std::memcpy(Yh + sidx(d, n), hs.data() + n * Hs, Hs * sizeof(float));
      if (Yc) std::memcpy(Yc + sidx(d, n), cs.data() + n * Hs, Hs * sizeof(float));
    }
  }
  return true;
}

void lstm(OpContext& c) {
  if (!lstm_fast(c)) rnn<Cell::Lstm>(c);
}

}  // namespace

void register_rnn(Registry& r) {
  r.add("", "RNN", {.run = rnn<Cell::Rnn>});
  r.add("", "GRU", {.run = rnn<Cell::Gru>});
  r.add("", "LSTM", {.run = lstm, .prepare = prepare_lstm});
}

}  // namespace onnxforge::rt
