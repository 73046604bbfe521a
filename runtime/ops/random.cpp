// Random ops: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli,
// Multinomial. Draws are deterministic so that an original model and its optimized copy draw the
// same numbers wherever the node survives: each node's stream is seeded from its `seed`
// attribute when it has one, else from its name (or, nameless, its first output's name), mixed
// with the run's seed (SessionOptions::random_seed, which verification sets per seed). The
// generator is our own (SplitMix64 + Box-Muller), identical on every platform and library; the
// numbers are not ONNX Runtime's, whose streams are unspecified.
#include <cmath>
#include <cstring>

#include "runtime/ops/common.h"

namespace onnxforge::rt {
namespace {

struct Stream {
  uint64_t state;
  uint64_t next() {  // SplitMix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53, u2 = uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }
};

Stream stream_of(const OpContext& c) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (char ch : s) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  };
  if (c.has_attr("seed")) {
    const float seed = c.attr_f("seed", 0);
    uint32_t bits;
    std::memcpy(&bits, &seed, sizeof bits);
    h ^= 0xA5A5A5A5ull + bits;
    h *= 1099511628211ull;
  } else {
    const std::string_view name = str(c.graph.node_name(c.node));
    mix(name.empty() ? str(c.graph.value_name(c.graph.output(c.node, 0))) : name);
  }
  h ^= c.random_seed * 0x9E3779B97F4A7C15ull;
  return Stream{h};
}

DType dtype_attr(const OpContext& c, DType fallback) {
  const int64_t d = c.attr_i("dtype", static_cast<int64_t>(fallback));
  if (d <= 0 || d > 23 || !dtype_known(static_cast<int32_t>(d)))
    c.error("dtype " + std::to_string(d) + " is not a tensor type");
  const DType t = static_cast<DType>(d);
  return t;
}

// Fills output 0 of `dtype` and `shape` with draws of `draw`, converted from double.
template <class F>
void fill(OpContext& c, DType dtype, const Shape& shape, F&& draw) {
  if (!is_float_dtype(dtype))
    c.error(std::string("output type ") + std::string(dtype_name(dtype)) + " is not a float type");
  Tensor& y = c.output(0, dtype, shape);
  std::vector<double> v(static_cast<size_t>(y.numel()));
  for (double& x : v) x = draw();
  cast_into(Tensor::view(DType::Double, shape, v.data()), y);
}

Shape shape_attr(const OpContext& c) {
  if (!c.has_attr("shape")) c.error("the 'shape' attribute is required");
  Shape s(c.attr_ints("shape").begin(), c.attr_ints("shape").end());
  for (int64_t d : s)
    if (d < 0) c.error("shape " + shape_str(s) + " has a negative dimension");
  return s;
}

void normal(OpContext& c, DType dtype, const Shape& shape) {
  Stream r = stream_of(c);
  const double mean = c.attr_f("mean", 0.f), scale = c.attr_f("scale", 1.f);
  fill(c, dtype, shape, [&] { return mean + scale * r.normal(); });
}

void uniform(OpContext& c, DType dtype, const Shape& shape) {
  Stream r = stream_of(c);
  const double low = c.attr_f("low", 0.f), high = c.attr_f("high", 1.f);
  fill(c, dtype, shape, [&] { return low + (high - low) * r.uniform(); });
}

void random_normal(OpContext& c) { normal(c, dtype_attr(c, DType::Float), shape_attr(c)); }
void random_uniform(OpContext& c) { uniform(c, dtype_attr(c, DType::Float), shape_attr(c)); }
void random_normal_like(OpContext& c) { normal(c, dtype_attr(c, c.input(0).dtype), c.input(0).shape); }
void random_uniform_like(OpContext& c) { uniform(c, dtype_attr(c, c.input(0).dtype), c.input(0).shape); }

void bernoulli(OpContext& c) {
  const Tensor& p = c.input(0);
  const DType dt = dtype_attr(c, p.dtype);
  Stream r = stream_of(c);
  Tensor& y = c.output(0, dt, p.shape);
  std::vector<double> v(static_cast<size_t>(p.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = r.uniform() < p.get_f64(static_cast<int64_t>(i)) ? 1.0 : 0.0;
  cast_into(Tensor::view(DType::Double, p.shape, v.data()), y);
}

// Multinomial: input [batch, classes] of unnormalized log-probabilities; output [batch,
// sample_size] class indices drawn from softmax(input) (int32 by default, or int64).
void multinomial(OpContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 2) c.error("input must be 2-D [batch, classes], got " + shape_str(x.shape));
  const DType dt = dtype_attr(c, DType::Int32);
  if (dt != DType::Int32 && dt != DType::Int64) c.error("dtype must be int32 or int64");
  const int64_t samples = c.attr_i("sample_size", 1);
  if (samples < 0) c.error("sample_size must not be negative");
  const int64_t batch = x.shape[0], classes = x.shape[1];
  Stream r = stream_of(c);
  Tensor& y = c.output(0, dt, {batch, samples});
  std::vector<double> cdf(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    double top = -INFINITY, sum = 0;
    for (int64_t k = 0; k < classes; ++k) top = std::max(top, x.get_f64(b * classes + k));
    for (int64_t k = 0; k < classes; ++k)
      cdf[static_cast<size_t>(k)] = sum += std::exp(x.get_f64(b * classes + k) - top);
    for (int64_t s = 0; s < samples; ++s) {
      const double u = r.uniform() * sum;
      int64_t k = static_cast<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      k = std::min(k, classes - 1);
      if (dt == DType::Int32)
        y.ptr<int32_t>()[b * samples + s] = static_cast<int32_t>(k);
      else
        y.ptr<int64_t>()[b * samples + s] = k;
    }
  }
}

}  // namespace

void register_random(Registry& r) {
  // float_compute off: the kernels read only the input's shape and dtype (Bernoulli and
  // Multinomial read values through get_f64) and write the requested type themselves.
  r.add("", "RandomNormal", {.run = random_normal, .float_compute = false});
  r.add("", "RandomUniform", {.run = random_uniform, .float_compute = false});
  r.add("", "RandomNormalLike", {.run = random_normal_like, .float_compute = false});
  r.add("", "RandomUniformLike", {.run = random_uniform_like, .float_compute = false});
  r.add("", "Bernoulli", {.run = bernoulli, .float_compute = false});
  r.add("", "Multinomial", {.run = multinomial, .float_compute = false});
}

}  // namespace onnxforge::rt
