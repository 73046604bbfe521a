#pragma once
// Depthwise 8-bit convolution: QLinearConv / ConvInteger with group == C == M (one output channel
// per input channel), NC[D]HW, 1-D to 3-D, any kernel, stride, dilation and padding.
//
//   y[c][o] = sum_t (x[c][i(o, t)] - zx) * w[c][t]      (int32, wrapping like the spec's int32)
//
// stored as a Conv8Output says (simd/int8_gemm.h: int32; float with the multiplier, bias and
// Relu/Clip; or requantized 8-bit, in the store, no int32 tensor between), channel c at
// out.ld * c with its own multiplier / bias when they have C values.
//
// How: each channel's input is widened once to int16 (x - zx, the padding 0: the zero point)
// into a per-thread plane split into stride phases as conv8_nd splits its input, so that every
// tap reads a run of the plane at the output position's index q plus the tap's offset (outputs
// are counted over the phase's padded rows, the pad columns computed and discarded). Taps whose
// offsets differ by one share an int16 pair, and one pmaddwd-style multiply-add (vpdpwssd with
// AVX512-VNNI, vpmaddwd + vpaddd with AVX2) sums the pair into each int32 lane: two loads, one
// at q and one at q + 1, give the even and the odd output positions, so no lane shuffles are
// needed in the tap loop. Exact: |x - zx| <= 255 and |w| <= 32767 give pair sums below 2^24,
// added modulo 2^32. (Not vpdpbusd: its u8 x s8 products need the offset zero-point terms,
// here a box sum over every window, and 4-byte cells of four taps interleaved per output.)
//
// Kernels, by the active int8 kernel (simd/int8_gemm.h's active_int8_kernel()): avx512-vnni
// (64 positions per step), avx2-vpmaddwd (32), scalar (the twin, the same arithmetic in C++).
// With avx512-vnni on a CPU with AVX512-VBMI2, planes of rows up to 64 columns are built by
// vpexpandb and short 8-bit output rows packed by vpcompressb (the same bytes).
#include <cstdint>

#include "simd/int8_gemm.h"

namespace onnxforge::simd {

// x: [C][D][H][W] (missing leading dims 1), int8 when x_signed else uint8, zero point zx (in x's
// range); w: [C][KD * KH * KW], the weights minus their zero points, each in int16 range.
// parallel: split the channels over threads (simd/parallel.h).
void conv8_depthwise(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx, const std::int32_t* w,
                     const Conv8Output& out, bool parallel = true);

// The same sums by int64 loops over the unpadded input, truncated to int32 (tests, and the
// spec's meaning): acc [C][OD * OH * OW].
void conv8_depthwise_reference(const Conv8Shape& s, const std::uint8_t* x, bool x_signed, std::int32_t zx,
                               const std::int32_t* w, std::int32_t* acc);

}  // namespace onnxforge::simd
