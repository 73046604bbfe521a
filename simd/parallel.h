#pragma once
// Parallel loops for the kernels, on TBB's worker threads, built so that a thread never sleeps
// inside a model run.
//
// Why not plain tbb::parallel_for: an idle TBB worker, and a master waiting for a stolen chunk,
// go to sleep after a few microseconds. On a virtual machine a sleeping vCPU is halted, the host
// hands its core to another guest, and getting it back takes milliseconds (BERT-base at 2 threads
// under host load: 1473 ms with tbb::parallel_for, 365 ms with both vCPUs kept busy; ONNX Runtime,
// whose pool threads spin, 167 ms; docs/benchmarks.md, "Measurements that decided the code").
//
// So a parallel region here is: the caller and up to (threads - 1) helper TBB tasks claim work
// items from one atomic counter (a late or descheduled helper delays nobody: the others take its
// items), and the caller busy-waits for helpers that are still finishing an item. Inside a
// WarmWorkers scope (one model run), every helper that runs out of items re-enqueues itself as
// a spinner that busy-waits for the next region, so the worker never sleeps between kernels.
// When other processes want the cores, a long wait parks instead (parallel.cpp, kSpinBeforePark).
// Results must not depend on which thread ran an item (the kernels write disjoint outputs).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace onnxforge::simd {

// Opens a warm scope for the calling thread's arena. A no-op when called from inside a TBB task
// (nested parallelism keeps the workers busy anyway, and a spinner would hold a worker the
// outer loop needs). Scopes nest; spinning stops when the last one closes or after 50 ms
// without a region.
class WarmWorkers {
 public:
  WarmWorkers();
  ~WarmWorkers();
  WarmWorkers(const WarmWorkers&) = delete;
  WarmWorkers& operator=(const WarmWorkers&) = delete;

 private:
  bool active_ = false;
};

// Threads a parallel region may use: the arena's concurrency capped by tbb::global_control,
// or 1 inside a SerialScope.
int max_threads();

// While one lives, parallel regions the calling thread opens run on it alone (max_threads() is 1
// there, so the GEMM also picks its single-thread tiling). For the items of an outer parallel
// loop that already has enough items for every thread: a nested region would only add its
// hand-off (BERT-base's Attention, 24 head blocks on 2 threads, each running 3 nested regions:
// the helper thread ran a tenth of the work and spun for the rest; see runtime/ops/transformer.cpp).
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;
};

// Spinner tasks currently enqueued or running (tests).
int warm_spinners();

// Waits so far that parked on a futex instead of spinning (tests): a spinner or a region's
// caller waiting more than 200 us while the process's threads are being descheduled, i.e.
// other processes want the cores.
long parked_waits();

namespace detail {
// Runs body(ctx, i) for every i < count on the caller and helper tasks; rethrows the first
// exception a body threw (remaining items are skipped).
void run_region(std::size_t count, void (*body)(void*, std::size_t), void* ctx);

template <class F>
void run_items(std::size_t count, F& f) {
  run_region(
      count, [](void* c, std::size_t i) { (*static_cast<F*>(c))(i); }, &f);
}
}  // namespace detail

// Calls f(begin, end) over [0, n) in chunks of at least `grain`; serial when one chunk would
// do or only one thread is available.
template <class F>
void parallel_chunks(std::size_t n, std::size_t grain, F&& f) {
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const auto threads = static_cast<std::size_t>(max_threads());
  if (n <= grain || threads == 1) {
    f(std::size_t{0}, n);
    return;
  }
  // About 8 chunks per thread balance uneven progress without much claiming traffic.
  const std::size_t chunk = std::max(grain, (n + threads * 8 - 1) / (threads * 8));
  auto item = [&](std::size_t i) { f(i * chunk, std::min(n, (i + 1) * chunk)); };
  detail::run_items((n + chunk - 1) / chunk, item);
}

// Calls f(i) for every i < n, one item per index (for coarse, uneven work items).
template <class F>
void parallel_each(std::size_t n, bool parallel, F&& f) {
  if (!parallel || n <= 1 || max_threads() == 1) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  auto item = [&](std::size_t i) { f(i); };
  detail::run_items(n, item);
}

// Calls f(i) for i in [0, n), for many cheap, even items.
template <class F>
void parallel_for(int64_t n, F&& f) {
  if (n <= 0) return;
  parallel_chunks(static_cast<std::size_t>(n), 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) f(static_cast<int64_t>(i));
  });
}

// Grain (in elements) that gives each task enough work to amortize scheduling: about
// 16K "element operations" for an op costing `cost` per element.
inline std::size_t elementwise_grain(std::size_t cost = 1) { return std::max<std::size_t>(16384 / cost, 1024); }

}  // namespace onnxforge::simd
