#pragma once
// Serial kernels of attention over a block of keys read in place (decode steps: a few query
// rows against a long KV cache). The caller splits the keys into blocks, runs these on each
// block (one task per block) and merges the blocks' partial softmax sums (merge_partials):
// the flash-decoding scheme, with no packing or copy of K and V.
#include <cstddef>

namespace onnxforge::simd {

// s[r * lds + j] = scale * dot(q[r], k + j * ldk) over d elements, for r < rows, j < n.
void attention_scores(std::size_t rows, const float* const* q, std::size_t n, std::size_t d, const float* k,
                      std::size_t ldk, float scale, float* s, std::size_t lds);

// Per row r < rows of s (n elements, row stride lds): max[r] = the row's largest value, the row
// replaced by exp(s - max[r]), sum[r] = their sum. A row of -inf only: max -inf, zeros, sum 0.
void attention_exp(std::size_t rows, std::size_t n, float* s, std::size_t lds, float* max, float* sum);

// acc[r][e] += sum_j p[r * ldp + j] * v[j * ldv + e] for r < rows, e < dv, j < n.
void attention_values(std::size_t rows, std::size_t n, std::size_t dv, const float* p, std::size_t ldp, const float* v,
                      std::size_t ldv, float* const* acc);

// One query row's result from its blocks' partials: block c has max m[c], sum l[c] and the
// unnormalized output acc + c * ld_acc (dv elements). y = sum_c exp(m[c] - M) acc_c /
// sum_c exp(m[c] - M) l[c], M = max_c m[c]; zeros when every block is fully masked (M = -inf).
void merge_partials(std::size_t blocks, const float* m, const float* l, std::size_t ld_ml, const float* acc,
                    std::size_t ld_acc, std::size_t dv, float* y);

}  // namespace onnxforge::simd
