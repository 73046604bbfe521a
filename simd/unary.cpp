// Elementwise unary driver: chunks the span over TBB and calls the active ISA's kernel.
#include "simd/unary.h"

#include "simd/detail/kernel_table.h"
#include "simd/detail/parallel.h"

namespace onnxforge::simd {
namespace {

// Relative cost per element, to size the parallel chunks.
std::size_t cost_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::Identity:
    case UnaryOp::Abs:
    case UnaryOp::Neg:
    case UnaryOp::Relu:
    case UnaryOp::LeakyRelu:
    case UnaryOp::Clip:
    case UnaryOp::ThresholdedRelu:
    case UnaryOp::HardSigmoid:
    case UnaryOp::HardSwish:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round: return 1;
    default: return 8;
  }
}

}  // namespace

void unary(const Unary& f, const float* x, float* y, std::size_t n) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(n, detail::elementwise_grain(cost_of(f.op)),
                          [&](std::size_t b, std::size_t e) { kt.unary(f, x + b, y + b, e - b); });
}

// Memory-bound: 64 Ki elements a chunk, as the float16 conversions (resample.cpp).
void bf16_to_float(const std::uint16_t* x, float* y, std::size_t n) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(n, std::size_t{1} << 16,
                          [&](std::size_t b, std::size_t e) { kt.bf16_to_float(x + b, y + b, e - b); });
}
void float_to_bf16(const float* x, std::uint16_t* y, std::size_t n) {
  const detail::KernelTable& kt = detail::active_table();
  detail::parallel_chunks(n, std::size_t{1} << 16,
                          [&](std::size_t b, std::size_t e) { kt.float_to_bf16(x + b, y + b, e - b); });
}

namespace vmath {
void exp(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Exp), x, y, n); }
void log(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Log), x, y, n); }
void erf(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Erf), x, y, n); }
void tanh(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Tanh), x, y, n); }
void sigmoid(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Sigmoid), x, y, n); }
void gelu(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Gelu), x, y, n); }
void gelu_tanh(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::GeluTanh), x, y, n); }
void silu(const float* x, float* y, std::size_t n) { unary(Unary::of(UnaryOp::Silu), x, y, n); }
}  // namespace vmath

}  // namespace onnxforge::simd
