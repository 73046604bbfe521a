// Losses: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (computed in float64).
#include <cmath>

#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

// Loss over log-probabilities lp [N, C, d...] (row-major doubles) with int labels.
void nll(OpContext& c, const std::vector<double>& lp, const Shape& shape, DType out_type, const Tensor& target,
         const Tensor* weight) {
  if (shape.size() < 2) c.error("input must have rank >= 2, got " + shape_str(shape));
  const int64_t N = shape[0], C = shape[1];
  need_index_type(c, target, "target");
  const int64_t D = numel(shape) / std::max<int64_t>(mul_dim(c, N, C), 1);
  if (target.numel() != N * D)
    c.error("target " + shape_str(target.shape) + " does not match input " + shape_str(shape));
  if (weight && weight->numel() < C) c.error("weight " + shape_str(weight->shape) + " has fewer than C elements");
  const bool has_ignore = c.has_attr("ignore_index");
  const int64_t ignore = c.attr_i("ignore_index", 0);
  std::string_view red = c.attr_s("reduction", "mean");
  std::vector<double> loss(static_cast<size_t>(N * D));
  double wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t t = target.get_i64(n * D + d);
      if (has_ignore && t == ignore) continue;
      if (t < 0 || t >= C) c.error("target " + std::to_string(t) + " is out of range");
      const double w = weight ? weight->get_f64(t) : 1.0;
      loss[static_cast<size_t>(n * D + d)] = -lp[static_cast<size_t>((n * C + t) * D + d)] * w;
      wsum += w;
    }
  if (red == "none") {
    Shape ls{N};
    ls.insert(ls.end(), shape.begin() + 2, shape.end());
    cast_into(Tensor::view(DType::Double, ls, loss.data()), c.output(0, out_type, ls));
    return;
  }
  double s = 0;
  for (double v : loss) s += v;
  if (red == "mean") s = wsum == 0 ? 0 : s / wsum;
  cast_into(Tensor::view(DType::Double, {}, &s), c.output(0, out_type, {}));
}

void nll_loss(OpContext& c) {
  const Tensor& x = c.input(0);
  std::vector<double> lp(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) lp[static_cast<size_t>(i)] = x.get_f64(i);
  nll(c, lp, x.shape, x.dtype, c.input(1), c.in(2));
}

void softmax_ce(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() < 2) c.error("input must have rank >= 2, got " + shape_str(x.shape));
  const int64_t N = x.shape[0], C = x.shape[1], D = x.numel() / std::max<int64_t>(N * C, 1);
  std::vector<double> lp(static_cast<size_t>(x.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < C; ++k) mx = std::max(mx, x.get_f64((n * C + k) * D + d));
      for (int64_t k = 0; k < C; ++k) sum += std::exp(x.get_f64((n * C + k) * D + d) - mx);
      for (int64_t k = 0; k < C; ++k)
        lp[static_cast<size_t>((n * C + k) * D + d)] = x.get_f64((n * C + k) * D + d) - mx - std::log(sum);
    }
  nll(c, lp, x.shape, x.dtype, c.input(1), c.in(2));
  if (c.output_count() > 1 && c.has_output(1))
    cast_into(Tensor::view(DType::Double, x.shape, lp.data()), c.output(1, x.dtype, x.shape));
}

}  // namespace

void register_loss(Registry& r) {
  r.add("", "NegativeLogLikelihoodLoss", {.run = nll_loss});
  r.add("", "SoftmaxCrossEntropyLoss", {.run = softmax_ce});
}

}  // namespace onnxforge::rt
