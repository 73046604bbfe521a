#pragma once
// onnxforge::simd — the reference engine's compute kernels: plain functions over raw pointers
// (no graph knowledge), vectorized with xsimd for SSE4.2 / AVX2+FMA / AVX-512 with run-time
// dispatch (simd/isa.h), parallel with TBB inside when the work is large enough.
//
// Common contract:
//  - Tensors are float32 (some ops also int32/int64) and row-major contiguous unless a function
//    takes leading dimensions or strides. Shapes are int64 spans as in ONNX.
//  - Axes are non-negative: the caller normalizes negative ONNX axes.
//  - Zero-size dims are valid everywhere and make the call a no-op (or write the identity of a
//    reduction). Inputs and outputs must not overlap unless the function says so.
//  - Invalid arguments throw std::invalid_argument with a message naming the argument.
//  - All functions may be called concurrently from several threads; set_isa() is the
//    exception (tests and benchmarks only).
//  - simd/reference.h has scalar double-accumulating versions of every kernel, for tests and for
//    callers that want a second opinion.
#include "simd/binary.h"
#include "simd/conv.h"
#include "simd/gemm.h"
#include "simd/isa.h"
#include "simd/nhwc.h"
#include "simd/norm.h"
#include "simd/parallel.h"
#include "simd/reduce.h"
#include "simd/transpose.h"
#include "simd/unary.h"
