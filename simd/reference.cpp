// Scalar double-accumulating references (see reference.h). Deliberately independent of the
// vectorized code: own broadcasting, own index arithmetic, std:: math in double.
#include "simd/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

namespace onnxforge::simd::ref {
namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t product(std::span<const std::int64_t> d) {
  std::int64_t n = 1;
  for (std::int64_t v : d) n *= v;
  return n;
}

Dims row_major_strides(std::span<const std::int64_t> shape) {
  Dims s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Output shape and, for each input, per-output-dim strides (0 where broadcast).
struct Broadcast {
  Dims out, sa, sb;

  // Element offsets into a and b of the output's flat index o.
  std::pair<std::int64_t, std::int64_t> offsets(std::int64_t o) const {
    std::int64_t oa = 0, ob = 0;
    for (std::size_t d = out.size(); d-- > 0;) {
      const std::int64_t i = o % out[d];
      o /= out[d];
      oa += i * sa[d];
      ob += i * sb[d];
    }
    return {oa, ob};
  }
};

Broadcast broadcast(Shape a, Shape b) {
  const std::size_t r = std::max(a.size(), b.size());
  Broadcast bc;
  bc.out.assign(r, 1);
  bc.sa.assign(r, 0);
  bc.sb.assign(r, 0);
  const Dims ta = row_major_strides(a), tb = row_major_strides(b);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const std::int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1) throw std::invalid_argument("ref::broadcast: incompatible shapes");
    bc.out[i] = da == 1 ? db : da;
    if (i + a.size() >= r && da != 1) bc.sa[i] = ta[i + a.size() - r];
    if (i + b.size() >= r && db != 1) bc.sb[i] = tb[i + b.size() - r];
  }
  return bc;
}

template <class TA, class TY, class F>
void broadcast_apply(Shape a_shape, const TA* a, Shape b_shape, const TA* b, TY* y, F f) {
  const Broadcast bc = broadcast(a_shape, b_shape);
  const std::int64_t n = product(bc.out);
  for (std::int64_t o = 0; o < n; ++o) {
    const auto [oa, ob] = bc.offsets(o);
    y[o] = f(a[oa], b[ob]);
  }
}

double act(const Epilogue& ep, double v) { return unary(ep.act, v); }

}  // namespace

void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, float alpha, const float* A,
          std::size_t lda, const float* B, std::size_t ldb, float beta, float* C, std::size_t ldc, const Epilogue& ep) {
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
      }
      double v = static_cast<double>(alpha) * s;
      if (beta != 0.f) v += static_cast<double>(beta) * C[i * ldc + j];
      if (ep.bias_kind == Bias::PerRow) v += ep.bias[i];
      if (ep.bias_kind == Bias::PerCol) v += ep.bias[j];
      C[i * ldc + j] = static_cast<float>(act(ep, v));
    }
}

void matmul(std::span<const std::int64_t> a_shape, const float* a, std::span<const std::int64_t> b_shape,
            const float* b, float* y) {
  // 1-D operands become [1, K] and [K, 1].
  const Dims as = a_shape.size() == 1 ? Dims{1, a_shape[0]} : Dims(a_shape.begin(), a_shape.end());
  const Dims bs = b_shape.size() == 1 ? Dims{b_shape[0], 1} : Dims(b_shape.begin(), b_shape.end());
  const std::int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) throw std::invalid_argument("ref::matmul: inner dims differ");
  const Dims abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  // Broadcast the batch dims by treating each batch index as an element offset.
  const Broadcast bc = broadcast(abatch, bbatch);
  const std::int64_t batches = product(bc.out);
  for (std::int64_t t = 0; t < batches; ++t) {
    const auto [oa, ob] = bc.offsets(t);
    const float* pa = a + oa * M * K;
    const float* pb = b + ob * K * N;
    float* py = y + t * M * N;
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += static_cast<double>(pa[i * K + k]) * pb[k * N + j];
        py[i * N + j] = static_cast<float>(s);
      }
  }
}

void conv(const ConvParams& p, const float* x, const float* w, const float* bias, float* y, const Unary& f) {
  const std::int64_t G = p.group, Cg = p.in_channels / G, Mg = p.out_channels / G;
  std::int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1},
               pb[3] = {0, 0, 0};
  // Right-align the spatial dims into 3-D so one loop nest serves every rank.
  for (int i = 0; i < p.rank; ++i) {
    const int j = 3 - p.rank + i;
    in[j] = p.in[i], k[j] = p.kernel[i], out[j] = p.out(i), s[j] = p.stride[i], d[j] = p.dilation[i];
    pb[j] = p.pad_begin[i];
  }
  const std::int64_t in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2], k_sp = k[0] * k[1] * k[2];
  for (std::int64_t n = 0; n < p.batch; ++n)
    for (std::int64_t m = 0; m < p.out_channels; ++m) {
      const std::int64_t g = m / Mg;
      for (std::int64_t o0 = 0; o0 < out[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < out[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = bias != nullptr ? bias[m] : 0.0;
            for (std::int64_t c = 0; c < Cg; ++c)
              for (std::int64_t k0 = 0; k0 < k[0]; ++k0)
                for (std::int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (std::int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const std::int64_t i0 = o0 * s[0] - pb[0] + k0 * d[0];
                    const std::int64_t i1 = o1 * s[1] - pb[1] + k1 * d[1];
                    const std::int64_t i2 = o2 * s[2] - pb[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    const std::int64_t ci = g * Cg + c;
                    const double xv = x[(n * p.in_channels + ci) * in_sp + (i0 * in[1] + i1) * in[2] + i2];
                    const double wv = w[(m * Cg + c) * k_sp + (k0 * k[1] + k1) * k[2] + k2];
                    acc += xv * wv;
                  }
            y[(n * p.out_channels + m) * out_sp + (o0 * out[1] + o1) * out[2] + o2] = static_cast<float>(unary(f, acc));
          }
    }
}

double unary(const Unary& f, double x) {
  if (std::isnan(x)) return x;
  // x * (something that vanishes faster): the limit at -inf is 0, not -inf * 0.
  const bool gated =
      f.op == UnaryOp::Gelu || f.op == UnaryOp::GeluTanh || f.op == UnaryOp::Silu || f.op == UnaryOp::Mish;
  if (gated && std::isinf(x) && x < 0) return -0.0;
  const double a = f.alpha, b = f.beta;
  auto softplus = [](double v) { return v > 30 ? v : std::log1p(std::exp(v)); };
  switch (f.op) {
    case UnaryOp::Identity: return x;
    case UnaryOp::Abs: return std::fabs(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Relu: return x > 0 ? x : 0.0;
    case UnaryOp::LeakyRelu: return x < 0 ? a * x : x;
    case UnaryOp::Clip: return std::min(std::max(x, a), b);
    case UnaryOp::ThresholdedRelu: return x > a ? x : 0.0;
    case UnaryOp::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::HardSigmoid: return std::max(0.0, std::min(1.0, a * x + b));
    case UnaryOp::HardSwish: return x * std::max(0.0, std::min(1.0, a * x + b));
    case UnaryOp::Tanh: return std::tanh(x);
    case UnaryOp::Exp: return std::exp(x);
    case UnaryOp::Log: return std::log(x);
    case UnaryOp::Erf: return std::erf(x);
    case UnaryOp::Sqrt: return std::sqrt(x);
    case UnaryOp::Reciprocal: return 1.0 / x;
    case UnaryOp::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case UnaryOp::GeluTanh: {
      const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * u));
    }
    case UnaryOp::Silu: return x / (1.0 + std::exp(-x));
    case UnaryOp::Softplus: return softplus(x);
    case UnaryOp::Softsign: return x / (1.0 + std::fabs(x));
    case UnaryOp::Mish: return x * std::tanh(softplus(x));
    case UnaryOp::Elu: return x < 0 ? a * std::expm1(x) : x;
    case UnaryOp::Selu: return b * (x <= 0 ? a * std::expm1(x) : x);
    case UnaryOp::Floor: return std::floor(x);
    case UnaryOp::Ceil: return std::ceil(x);
    case UnaryOp::Round: return std::nearbyint(x);
    case UnaryOp::Sin: return std::sin(x);
    case UnaryOp::Cos: return std::cos(x);
  }
  return x;
}

void unary(const Unary& f, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<float>(unary(f, static_cast<double>(x[i])));
}

double binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Max: return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
    case BinaryOp::Min: return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
    case BinaryOp::Pow: return std::pow(a, b);
  }
  return 0;
}

std::int64_t binary(BinaryOp op, std::int64_t a, std::int64_t b, int bits) {
  const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
  const std::int64_t lo =
      bits == 32 ? std::numeric_limits<std::int32_t>::min() : std::numeric_limits<std::int64_t>::min();
  std::int64_t r = 0;
  switch (op) {
    case BinaryOp::Add: r = static_cast<std::int64_t>(ua + ub); break;
    case BinaryOp::Sub: r = static_cast<std::int64_t>(ua - ub); break;
    case BinaryOp::Mul: r = static_cast<std::int64_t>(ua * ub); break;
    case BinaryOp::Div: r = b == 0 ? 0 : (a == lo && b == -1) ? lo : a / b; break;
    case BinaryOp::Max: r = std::max(a, b); break;
    case BinaryOp::Min: r = std::min(a, b); break;
    case BinaryOp::Pow: {
      if (b < 0) {
        r = a == 1 ? 1 : a == -1 ? (b % 2 == 0 ? 1 : -1) : 0;
        break;
      }
      std::uint64_t acc = 1;
      for (std::int64_t i = 0; i < b && i < 64; ++i) acc *= ua;
      r = static_cast<std::int64_t>(acc);
      // Past 64 factors only 0, 1 and -1 stay exact; the loop result is right for those.
      break;
    }
  }
  return bits == 32 ? static_cast<std::int64_t>(static_cast<std::int32_t>(r)) : r;
}

bool compare(CompareOp op, double a, double b) {
  switch (op) {
    case CompareOp::Equal: return a == b;
    case CompareOp::NotEqual: return a != b;
    case CompareOp::Less: return a < b;
    case CompareOp::LessOrEqual: return a <= b;
    case CompareOp::Greater: return a > b;
    case CompareOp::GreaterOrEqual: return a >= b;
  }
  return false;
}

void binary(BinaryOp op, Shape as, const float* a, Shape bs, const float* b, float* y) {
  broadcast_apply(as, a, bs, b, y, [op](float u, float v) { return static_cast<float>(binary(op, u, v)); });
}
void binary(BinaryOp op, Shape as, const std::int32_t* a, Shape bs, const std::int32_t* b, std::int32_t* y) {
  broadcast_apply(as, a, bs, b, y,
                  [op](std::int32_t u, std::int32_t v) { return static_cast<std::int32_t>(binary(op, u, v, 32)); });
}
void binary(BinaryOp op, Shape as, const std::int64_t* a, Shape bs, const std::int64_t* b, std::int64_t* y) {
  broadcast_apply(as, a, bs, b, y, [op](std::int64_t u, std::int64_t v) { return binary(op, u, v, 64); });
}
void compare(CompareOp op, Shape as, const float* a, Shape bs, const float* b, std::uint8_t* y) {
  broadcast_apply(as, a, bs, b, y, [op](float u, float v) { return static_cast<std::uint8_t>(compare(op, u, v)); });
}
void compare(CompareOp op, Shape as, const std::int64_t* a, Shape bs, const std::int64_t* b, std::uint8_t* y) {
  broadcast_apply(as, a, bs, b, y, [op](std::int64_t u, std::int64_t v) {
    return static_cast<std::uint8_t>(op == CompareOp::Equal         ? u == v
                                     : op == CompareOp::NotEqual    ? u != v
                                     : op == CompareOp::Less        ? u < v
                                     : op == CompareOp::LessOrEqual ? u <= v
                                     : op == CompareOp::Greater     ? u > v
                                                                    : u >= v);
  });
}

void layer_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, const float* bias, float eps,
                float* y, float* mean_out, float* inv_std_out) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<double>(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
    if (inv_std_out != nullptr) inv_std_out[r] = static_cast<float>(inv);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>((xr[c] - mean) * inv * scale[c] + (bias != nullptr ? bias[c] : 0.0));
  }
}

void rms_norm(std::size_t rows, std::size_t cols, const float* x, const float* scale, float eps, float* y,
              float* inv_rms) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double ms = 0;
    for (std::size_t c = 0; c < cols; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(cols) + eps);
    if (inv_rms != nullptr) inv_rms[r] = static_cast<float>(inv);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(xr[c] * inv * (scale != nullptr ? scale[c] : 1.0));
  }
}

void softmax_axis(std::size_t outer, std::size_t n, std::size_t inner, const float* x, float* y, bool log) {
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      const float* xp = x + o * n * inner + i;
      float* yp = y + o * n * inner + i;
      double max = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (std::size_t k = 0; k < n; ++k) {
        nan |= std::isnan(xp[k * inner]);
        max = std::max(max, static_cast<double>(xp[k * inner]));
      }
      if (nan) max = std::numeric_limits<double>::quiet_NaN();
      double sum = 0;
      for (std::size_t k = 0; k < n; ++k) sum += std::exp(xp[k * inner] - max);
      for (std::size_t k = 0; k < n; ++k) {
        const double v = xp[k * inner] - max;
        yp[k * inner] = static_cast<float>(log ? v - std::log(sum) : std::exp(v) / sum);
      }
    }
}

void softmax(std::size_t rows, std::size_t cols, const float* x, float* y) { softmax_axis(rows, cols, 1, x, y); }

void log_softmax(std::size_t rows, std::size_t cols, const float* x, float* y) {
  softmax_axis(rows, cols, 1, x, y, true);
}

namespace {

// Maps each input element to its output element; calls visit(out_index, in_index).
template <class Visit>
void for_each_reduced(std::span<const std::int64_t> shape, std::span<const std::int64_t> axes, Visit visit) {
  std::vector<bool> reduced(shape.size(), false);
  for (std::int64_t a : axes) reduced.at(static_cast<std::size_t>(a)) = true;
  const std::int64_t n = product(shape);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rem = i, out = 0, scale = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      const std::int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (!reduced[d]) {
        out += idx * scale;
        scale *= shape[d];
      }
    }
    visit(out, i);
  }
}

std::int64_t output_size(std::span<const std::int64_t> shape, std::span<const std::int64_t> axes) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(d)) == axes.end()) n *= shape[d];
  return n;
}

}  // namespace

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const float* x, std::span<const std::int64_t> axes,
            float* y) {
  const std::int64_t outs = output_size(shape, axes);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(static_cast<std::size_t>(outs)), shift(static_cast<std::size_t>(outs), -inf);
  std::vector<std::int64_t> count(static_cast<std::size_t>(outs), 0);
  const double init = op == ReduceOp::Max ? -inf : op == ReduceOp::Min ? inf : op == ReduceOp::Prod ? 1.0 : 0.0;
  std::fill(acc.begin(), acc.end(), init);
  if (op == ReduceOp::LogSumExp)
    for_each_reduced(shape, axes, [&](std::int64_t o, std::int64_t i) {
      const double v = x[i];
      if (std::isnan(v) || std::isnan(shift[o])) {
        shift[o] = std::numeric_limits<double>::quiet_NaN();
      } else {
        shift[o] = std::max(shift[o], v);
      }
    });
  for_each_reduced(shape, axes, [&](std::int64_t o, std::int64_t i) {
    const double v = x[i];
    double& a = acc[o];
    ++count[o];
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean:
      case ReduceOp::LogSum: a += v; break;
      case ReduceOp::Max: a = std::isnan(a) || std::isnan(v) ? a + v : std::max(a, v); break;
      case ReduceOp::Min: a = std::isnan(a) || std::isnan(v) ? a + v : std::min(a, v); break;
      case ReduceOp::Prod: a *= v; break;
      case ReduceOp::L1: a += std::fabs(v); break;
      case ReduceOp::L2:
      case ReduceOp::SumSquare: a += v * v; break;
      case ReduceOp::LogSumExp: a += std::exp(v - shift[o]); break;
    }
  });
  for (std::int64_t o = 0; o < outs; ++o) {
    double v = acc[o];
    if (op == ReduceOp::Mean) v /= static_cast<double>(count[o]);
    if (op == ReduceOp::L2) v = std::sqrt(v);
    if (op == ReduceOp::LogSum) v = std::log(v);
    if (op == ReduceOp::LogSumExp) v = std::isinf(shift[o]) ? shift[o] : shift[o] + std::log(v);
    y[o] = static_cast<float>(v);
  }
}

void reduce(ReduceOp op, std::span<const std::int64_t> shape, const std::int64_t* x, std::span<const std::int64_t> axes,
            std::int64_t* y) {
  const std::int64_t outs = output_size(shape, axes);
  const std::int64_t init = op == ReduceOp::Max    ? std::numeric_limits<std::int64_t>::min()
                            : op == ReduceOp::Min  ? std::numeric_limits<std::int64_t>::max()
                            : op == ReduceOp::Prod ? 1
                                                   : 0;
  std::vector<std::int64_t> acc(static_cast<std::size_t>(outs), init), count(static_cast<std::size_t>(outs), 0);
  for_each_reduced(shape, axes, [&](std::int64_t o, std::int64_t i) {
    const std::int64_t v = x[i];
    std::int64_t& a = acc[o];
    ++count[o];
    const auto ua = static_cast<std::uint64_t>(a), uv = static_cast<std::uint64_t>(v);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: a = static_cast<std::int64_t>(ua + uv); break;
      case ReduceOp::Max: a = std::max(a, v); break;
      case ReduceOp::Min: a = std::min(a, v); break;
      case ReduceOp::Prod: a = static_cast<std::int64_t>(ua * uv); break;
      case ReduceOp::L1: a = static_cast<std::int64_t>(ua + static_cast<std::uint64_t>(v < 0 ? -v : v)); break;
      case ReduceOp::SumSquare: a = static_cast<std::int64_t>(ua + uv * uv); break;
      default: throw std::invalid_argument("ref::reduce: op not defined for integers");
    }
  });
  for (std::int64_t o = 0; o < outs; ++o)
    y[o] = op == ReduceOp::Mean ? (count[o] == 0 ? 0 : acc[o] / count[o]) : acc[o];
}

void transpose(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
               std::span<const std::int64_t> perm, void* y, std::span<const std::int64_t> in_strides) {
  const std::size_t r = in_shape.size();
  const Dims strides = in_strides.empty() ? row_major_strides(in_shape) : Dims(in_strides.begin(), in_strides.end());
  Dims out(r);
  for (std::size_t d = 0; d < r; ++d) out[d] = in_shape[static_cast<std::size_t>(perm[d])];
  const std::int64_t n = product(out);
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(y);
  for (std::int64_t o = 0; o < n; ++o) {
    std::int64_t rem = o, off = 0;
    for (std::size_t d = r; d-- > 0;) {
      const std::int64_t i = rem % out[d];
      rem /= out[d];
      off += i * strides[static_cast<std::size_t>(perm[d])];
    }
    std::memcpy(dst + o * static_cast<std::int64_t>(elem_size), src + off * static_cast<std::int64_t>(elem_size),
                elem_size);
  }
}

void pad(std::size_t elem_size, std::span<const std::int64_t> in_shape, const void* x,
         std::span<const std::int64_t> begin, std::span<const std::int64_t> end, PadMode mode, const void* value,
         void* y) {
  const std::size_t r = in_shape.size();
  const Dims strides = row_major_strides(in_shape);
  Dims out(r), lo(r), len(r);
  for (std::size_t d = 0; d < r; ++d) {
    lo[d] = begin[d] < 0 ? -begin[d] : 0;  // first input index kept
    len[d] = in_shape[d] - lo[d] - (end[d] < 0 ? -end[d] : 0);
    if (len[d] < 0) throw std::invalid_argument("ref::pad: crop exceeds the axis");
    out[d] = len[d] + std::max<std::int64_t>(begin[d], 0) + std::max<std::int64_t>(end[d], 0);
  }
  const std::int64_t n = product(out);
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(y);
  for (std::int64_t o = 0; o < n; ++o) {
    std::int64_t rem = o, off = 0;
    bool inside = true;
    for (std::size_t d = r; d-- > 0;) {
      std::int64_t i = rem % out[d] - std::max<std::int64_t>(begin[d], 0);
      rem /= out[d];
      if (i < 0 || i >= len[d]) {
        if (mode == PadMode::Constant) {
          inside = false;
        } else if (len[d] == 0) {
          throw std::invalid_argument("ref::pad: empty axis");
        } else if (mode == PadMode::Edge) {
          i = i < 0 ? 0 : len[d] - 1;
        } else if (mode == PadMode::Wrap) {
          while (i < 0) i += len[d];
          while (i >= len[d]) i -= len[d];
        } else {  // Reflect: bounce off the borders one step at a time
          if (len[d] == 1) i = 0;
          while (i < 0 || i >= len[d]) i = i < 0 ? -i : 2 * (len[d] - 1) - i;
        }
      }
      off += (i + lo[d]) * strides[d];
    }
    std::memcpy(dst + o * static_cast<std::int64_t>(elem_size),
                inside ? src + off * static_cast<std::int64_t>(elem_size) : static_cast<const unsigned char*>(value),
                elem_size);
  }
}

}  // namespace onnxforge::simd::ref
