// Recurrent layers: RNN, GRU, LSTM (opset 7-14: directions, sequence_lens, layout, clip,
// custom activations, peepholes, linear_before_reset, input_forget). Computed in float64.
#include <cmath>
#include <functional>

#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

enum class Cell { Rnn, Gru, Lstm };

using Act = std::function<double(double)>;

Act make_act(const OpContext& c, std::string_view name, std::span<const float> alpha, std::span<const float> beta,
             size_t& ai, size_t& bi) {
  auto take = [](std::span<const float> v, size_t& i, double dflt) { return i < v.size() ? static_cast<double>(v[i++]) : dflt; };
  if (name == "Relu") return [](double x) { return x > 0 ? x : 0; };
  if (name == "Tanh") return [](double x) { return std::tanh(x); };
  if (name == "Sigmoid") return [](double x) { return 1 / (1 + std::exp(-x)); };
  if (name == "Softsign") return [](double x) { return x / (1 + std::fabs(x)); };
  if (name == "Softplus") return [](double x) { return std::log1p(std::exp(x)); };
  if (name == "Affine") { double a = take(alpha, ai, 1), b = take(beta, bi, 0); return [a, b](double x) { return a * x + b; }; }
  if (name == "LeakyRelu") { double a = take(alpha, ai, 0.01); return [a](double x) { return x < 0 ? a * x : x; }; }
  if (name == "ThresholdedRelu") { double a = take(alpha, ai, 1); return [a](double x) { return x > a ? x : 0; }; }
  if (name == "ScaledTanh") { double a = take(alpha, ai, 1), b = take(beta, bi, 1); return [a, b](double x) { return a * std::tanh(b * x); }; }
  if (name == "HardSigmoid") {
    double a = take(alpha, ai, 0.2), b = take(beta, bi, 0.5);
    return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
  }
  if (name == "Elu") { double a = take(alpha, ai, 1); return [a](double x) { return x < 0 ? a * (std::exp(x) - 1) : x; }; }
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
  const int64_t S = X.shape[layout ? 1 : 0], N = X.shape[layout ? 0 : 1], I = X.shape[2];
  const int64_t H = c.attr_i("hidden_size", R.shape[2]);
  std::string_view dir = c.attr_s("direction", "forward");
  const int64_t D = dir == "bidirectional" ? 2 : 1;
  const double clip = c.has_attr("clip") ? c.attr_f("clip", 0) : 0;
  const bool lbr = c.attr_i("linear_before_reset", 0), input_forget = c.attr_i("input_forget", 0);
  std::vector<Act> acts;
  {
    const Attr* a = c.graph.typed_attr(c.node, "activations", AttrType::Strings);
    auto alpha = c.attr_floats("activation_alpha"), beta = c.attr_floats("activation_beta");
    size_t ai = 0, bi = 0;
    std::vector<std::string> names;
    if (a) for (Sym s : c.graph.strings(*a)) names.emplace_back(str(s));
    const char* dflt[3] = {K == Cell::Rnn ? "Tanh" : "Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < D; ++d)
      for (int k = 0; k < NA; ++k) {
        size_t idx = static_cast<size_t>(d * NA + k);
        acts.push_back(make_act(c, idx < names.size() ? std::string_view(names[idx]) : std::string_view(dflt[k]), alpha, beta, ai, bi));
      }
  }
  auto xat = [&](int64_t t, int64_t n, int64_t i) { return X.get_f64(layout ? (n * S + t) * I + i : (t * N + n) * I + i); };
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
          for (int64_t j = 0; j < H; ++j) rv[static_cast<size_t>(j)] = f(cl(gx[static_cast<size_t>(H + j)] + gh[static_cast<size_t>(H + j)]));
          if (!lbr)
            for (int64_t j = 0; j < H; ++j) {
              double acc = B ? B->get_f64(d * 2 * G * H + G * H + 2 * H + j) : 0;
              for (int64_t k = 0; k < H; ++k)
                acc += rv[static_cast<size_t>(k)] * hs[static_cast<size_t>(k)] * R.get_f64((d * G * H + 2 * H + j) * H + k);
              ghh[static_cast<size_t>(j)] = acc;
            }
        }
        for (int64_t j = 0; j < H; ++j) {
          auto u = static_cast<size_t>(j);
          if constexpr (K == Cell::Rnn) {
            nh[u] = f(cl(gx[u] + gh[u]));
          } else if constexpr (K == Cell::Gru) {
            double z = f(cl(gx[u] + gh[u]));
            double hh = g(cl(gx[u + 2 * static_cast<size_t>(H)] + (lbr ? rv[u] * gh[u + 2 * static_cast<size_t>(H)] : ghh[u])));
            nh[u] = (1 - z) * hh + z * hs[u];
          } else {
            const double pi = P ? P->get_f64(d * 3 * H + j) : 0, po = P ? P->get_f64(d * 3 * H + H + j) : 0,
                         pf = P ? P->get_f64(d * 3 * H + 2 * H + j) : 0;
            double it = f(cl(gx[u] + gh[u] + pi * cs[u]));
            double ft = input_forget ? 1 - it : f(cl(gx[u + 2 * static_cast<size_t>(H)] + gh[u + 2 * static_cast<size_t>(H)] + pf * cs[u]));
            double ct = g(cl(gx[u + 3 * static_cast<size_t>(H)] + gh[u + 3 * static_cast<size_t>(H)]));
            double cn = ft * cs[u] + it * ct;
            double ot = f(cl(gx[u + static_cast<size_t>(H)] + gh[u + static_cast<size_t>(H)] + po * cn));
            cs[u] = cn;
            nh[u] = ot * h(cn);
          }
        }
        hs = nh;
        for (int64_t j = 0; j < H; ++j) Y[static_cast<size_t>(((t * D + d) * N + n) * H + j)] = hs[static_cast<size_t>(j)];
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
              t[static_cast<size_t>(((n * S + s) * D + d) * H + j)] = Y[static_cast<size_t>(((s * D + d) * N + n) * H + j)];
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
        for (int64_t j = 0; j < H; ++j) t[static_cast<size_t>((n * D + d) * H + j)] = v[static_cast<size_t>((d * N + n) * H + j)];
    cast_into(Tensor::view(DType::Double, {N, D, H}, t.data()), c.output(i, dt, {N, D, H}));
  };
  state_out(1, Yh);
  if (K == Cell::Lstm) state_out(2, Yc);
}

}  // namespace

void register_rnn(Registry& r) {
  r.add("", "RNN", {.run = rnn<Cell::Rnn>});
  r.add("", "GRU", {.run = rnn<Cell::Gru>});
  r.add("", "LSTM", {.run = rnn<Cell::Lstm>});
}

}  // namespace onnxforge::rt
