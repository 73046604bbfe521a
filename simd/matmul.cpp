// ONNX MatMul (numpy.matmul semantics) on top of the GEMM driver.
#include <stdexcept>
#include <string>
#include <vector>

#include "simd/binary.h"
#include "simd/gemm.h"

namespace onnxforge::simd {
namespace {

struct MatmulDims {
  std::vector<std::int64_t> a_batch, b_batch, batch;  // batch dims of a, b and the result
  std::int64_t M = 0, N = 0, K = 0;
  bool a_vector = false, b_vector = false;
};

MatmulDims analyze(std::span<const std::int64_t> a, std::span<const std::int64_t> b) {
  if (a.empty() || b.empty()) throw std::invalid_argument("simd::matmul: operands must have rank >= 1");
  MatmulDims d;
  d.a_vector = a.size() == 1;
  d.b_vector = b.size() == 1;
  d.M = d.a_vector ? 1 : a[a.size() - 2];
  d.K = a.back();
  const std::int64_t kb = d.b_vector ? b[0] : b[b.size() - 2];
  d.N = d.b_vector ? 1 : b.back();
  if (kb != d.K)
    throw std::invalid_argument("simd::matmul: inner dims differ (" + std::to_string(d.K) + " vs " +
                                std::to_string(kb) + ")");
  if (!d.a_vector) d.a_batch.assign(a.begin(), a.end() - 2);
  if (!d.b_vector) d.b_batch.assign(b.begin(), b.end() - 2);
  d.batch = broadcast_shape(d.a_batch, d.b_batch);
  return d;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  std::int64_t n = 1;
  for (std::int64_t x : v) n *= x;
  return n;
}

// Element offset of batch index `t` (of the broadcast batch shape) into an operand with batch
// dims `dims` and `matrix` elements per batch.
std::int64_t batch_offset(std::int64_t t, const std::vector<std::int64_t>& batch, const std::vector<std::int64_t>& dims,
                          std::int64_t matrix) {
  std::int64_t off = 0, stride = matrix;
  for (std::size_t i = batch.size(); i-- > 0;) {
    const std::int64_t idx = t % batch[i];
    t /= batch[i];
    const std::size_t lead = batch.size() - dims.size();
    if (i >= lead) {
      const std::int64_t d = dims[i - lead];
      if (d != 1) off += idx * stride;
      stride *= d;
    }
  }
  return off;
}

}  // namespace

std::vector<std::int64_t> matmul_shape(std::span<const std::int64_t> a_shape, std::span<const std::int64_t> b_shape) {
  const MatmulDims d = analyze(a_shape, b_shape);
  std::vector<std::int64_t> out = d.batch;
  if (!d.a_vector) out.push_back(d.M);
  if (!d.b_vector) out.push_back(d.N);
  return out;
}

void matmul(std::span<const std::int64_t> a_shape, const float* a, std::span<const std::int64_t> b_shape,
            const float* b, float* y, const Epilogue& ep) {
  const MatmulDims d = analyze(a_shape, b_shape);
  const auto M = static_cast<std::size_t>(d.M), N = static_cast<std::size_t>(d.N), K = static_cast<std::size_t>(d.K);
  const std::int64_t batches = product(d.batch);
  if (batches == 0 || M == 0 || N == 0) return;
  // Weights without batch dims (the Linear-layer case): one GEMM over all rows of a.
  if (product(d.b_batch) == 1 && ep.bias_kind != Bias::PerRow) {
    gemm(false, false, static_cast<std::size_t>(product(d.a_batch)) * M, N, K, 1.f, a, K, b, N, 0.f, y, N, ep);
    return;
  }
  std::vector<const float*> pa(static_cast<std::size_t>(batches)), pb(pa.size());
  std::vector<float*> py(pa.size());
  for (std::int64_t t = 0; t < batches; ++t) {
    pa[static_cast<std::size_t>(t)] = a + batch_offset(t, d.batch, d.a_batch, d.M * d.K);
    pb[static_cast<std::size_t>(t)] = b + batch_offset(t, d.batch, d.b_batch, d.K * d.N);
    py[static_cast<std::size_t>(t)] = y + t * d.M * d.N;
  }
  gemm_batched(pa.size(), false, false, M, N, K, 1.f, pa.data(), K, pb.data(), N, 0.f, py.data(), N, ep);
}

}  // namespace onnxforge::simd
