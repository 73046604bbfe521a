#pragma once
// Small TBB helpers shared by the drivers.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstddef>

namespace onnxforge::simd::detail {

inline int max_threads() { return tbb::this_task_arena::max_concurrency(); }

// Calls f(begin, end) over [0, n) in chunks of at least `grain`; serial when one chunk would
// do or only one thread is available.
template <class F>
void parallel_chunks(std::size_t n, std::size_t grain, F&& f) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  if (n <= grain || max_threads() == 1) {
    f(std::size_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, grain),
                    [&](const tbb::blocked_range<std::size_t>& r) { f(r.begin(), r.end()); });
}

// Calls f(i) for every i < n, one task per index (for coarse, uneven work items).
template <class F>
void parallel_each(std::size_t n, bool parallel, F&& f) {
  if (!parallel || n <= 1 || max_threads() == 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n, 1),
                    [&](const tbb::blocked_range<std::size_t>& r) {
                      for (std::size_t i = r.begin(); i != r.end(); ++i) f(i);
                    },
                    tbb::simple_partitioner());
}

// Grain (in elements) that gives each task enough work to amortize scheduling: about
// 16K "element operations" for an op costing `cost` per element.
inline std::size_t elementwise_grain(std::size_t cost = 1) { return std::max<std::size_t>(16384 / cost, 1024); }

}  // namespace onnxforge::simd::detail
