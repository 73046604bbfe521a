#include "simd/parallel.h"

#include <tbb/global_control.h>
#include <tbb/task.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace onnxforge::simd {
namespace {

std::atomic<int> g_scopes{0};
std::atomic<uint64_t> g_regions_started{0};
// Regions started without being published (nested ones, or a second top-level one while one is
// published): only these make a spinner leave for their helper tasks. Counting every region here
// made a spinner that polled between a published region's start and its publication leave too,
// and the region then ran on the caller alone until TBB handed the helper task over: on
// BERT-base's Attention (24 items of ~50 us per region) the helper thread ran 7% of the work
// and spun 42% of the samples (perf, 2 threads).
std::atomic<uint64_t> g_unpublished_started{0};
std::atomic<int> g_spinners{0};
// Regions the current thread is the caller of: a caller must never run a spinner (it would wait
// for a region only it can start).
thread_local int t_open_regions = 0;
thread_local int t_serial = 0;  // SerialScopes alive on this thread

struct Region {
  Region(std::size_t n, void (*f)(void*, std::size_t), void* c) : count(n), body(f), ctx(c) {}
  const std::size_t count;
  void (*const body)(void*, std::size_t);
  void* const ctx;
  std::atomic<std::size_t> next{0};
  std::atomic<int> busy{0};  // helpers between their first claim and their last item
  std::atomic<bool> failed{false};
  std::uint64_t id = 0;  // g_regions_started after this region's start
  std::mutex error_mutex;
  std::exception_ptr error;

  void work() {
    for (;;) {
      // acq_rel: a caller that claims past the end has seen every helper's busy increment that
      // preceded a claim, so its wait on `busy` cannot miss a helper still inside an item.
      const std::size_t i = next.fetch_add(1, std::memory_order_acq_rel);
      if (i >= count || failed.load(std::memory_order_relaxed)) return;
      try {
        body(ctx, i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  }
};

// The published region (at most one at a time: a top-level region opened inside a warm scope).
// A spinner joins it directly, claiming items from the same counter, instead of leaving its
// spin loop and waiting for TBB to hand it the region's helper task: that hand-off took long
// enough that at 2 threads on BERT-base the helper ran 37% of the GEMM micro-kernel samples and
// spun for as long as it worked (docs/benchmarks.md, "Measurements that decided the code").
// Lifetime: a spinner counts itself in g_joiners before it checks g_current, and the caller
// clears g_current and waits for g_joiners to drain before the region leaves its stack
// (sequentially consistent on both sides, so one of them sees the other).
std::atomic<Region*> g_current{nullptr};
std::atomic<std::uint64_t> g_current_id{0};
std::atomic<int> g_joiners{0};

// Runs the published region's remaining items if it is still region `id`.
void join(std::uint64_t id) {
  g_joiners.fetch_add(1, std::memory_order_seq_cst);
  Region* r = g_current.load(std::memory_order_seq_cst);
  if (r != nullptr && r->id == id) {
    // Counted as an open region here: a region nested in r's items must not be published (its
    // caller would wait for g_joiners to drain while counted in it itself).
    ++t_open_regions;
    r->work();
    --t_open_regions;
  }
  g_joiners.fetch_sub(1, std::memory_order_seq_cst);
}

// A spinner gives up after this long without a new region: a serial stretch that long makes the
// wake-up cost small in comparison, and a forgotten scope cannot burn a core for ever.
constexpr auto kMaxSpin = std::chrono::milliseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

void spin(uint64_t seen) {
  if (t_open_regions == 0) {
    auto until = std::chrono::steady_clock::now() + kMaxSpin;
    std::uint64_t joined = 0;
    for (unsigned n = 1;; ++n) {
      if (g_scopes.load(std::memory_order_relaxed) == 0) break;
      // A published region: join it and go on spinning for the next one.
      const std::uint64_t id = g_current_id.load(std::memory_order_acquire);
      if (id != 0 && id != joined) {
        join(id);
        joined = id;
        seen = g_unpublished_started.load(std::memory_order_relaxed);
        until = std::chrono::steady_clock::now() + kMaxSpin;
        continue;
      }
      // Any other region is served through its helper tasks: leave, so TBB can run one here.
      if (g_unpublished_started.load(std::memory_order_relaxed) != seen) break;
      if (n % 1024 == 0 && std::chrono::steady_clock::now() > until) break;
      cpu_relax();
    }
  }
  g_spinners.fetch_sub(1, std::memory_order_relaxed);
}

// Inside a warm scope, enqueues spinners until every worker can have one.
void arm() {
  if (g_scopes.load(std::memory_order_relaxed) == 0) return;
  const int want = max_threads() - 1;
  int have = g_spinners.load(std::memory_order_relaxed);
  while (have < want) {
    if (!g_spinners.compare_exchange_weak(have, have + 1, std::memory_order_relaxed)) continue;
    const uint64_t seen = g_unpublished_started.load(std::memory_order_relaxed);
    tbb::this_task_arena::enqueue([seen] { spin(seen); });
    ++have;
  }
}

}  // namespace

int max_threads() {
  if (t_serial > 0) return 1;
  const auto cap = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  return static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(tbb::this_task_arena::max_concurrency()), cap));
}

WarmWorkers::WarmWorkers() {
  if (tbb::task::current_context() != nullptr || max_threads() == 1) return;
  active_ = true;
  g_scopes.fetch_add(1, std::memory_order_relaxed);
  arm();
}

WarmWorkers::~WarmWorkers() {
  if (active_) g_scopes.fetch_sub(1, std::memory_order_relaxed);
}

SerialScope::SerialScope() { ++t_serial; }
SerialScope::~SerialScope() { --t_serial; }

int warm_spinners() { return g_spinners.load(std::memory_order_relaxed); }

namespace detail {

void run_region(std::size_t count, void (*body)(void*, std::size_t), void* ctx) {
  const std::size_t helpers = std::min<std::size_t>(count, static_cast<std::size_t>(max_threads())) - 1;
  if (helpers == 0 || count == 0) {
    for (std::size_t i = 0; i < count; ++i) body(ctx, i);
    return;
  }
  Region r(count, body, ctx);
  ++t_open_regions;
  r.id = g_regions_started.fetch_add(1, std::memory_order_relaxed) + 1;
  // Publish a top-level region for the warm spinners (join()).
  bool published = false;
  if (t_open_regions == 1 && g_spinners.load(std::memory_order_relaxed) > 0) {
    Region* none = nullptr;
    published = g_current.compare_exchange_strong(none, &r, std::memory_order_seq_cst);
    if (published) g_current_id.store(r.id, std::memory_order_release);
  }
  if (!published) g_unpublished_started.fetch_add(1, std::memory_order_relaxed);
  tbb::task_group helper_tasks;
  for (std::size_t h = 0; h < helpers; ++h)
    helper_tasks.run([&r] {
      r.busy.fetch_add(1, std::memory_order_acq_rel);
      r.work();
      r.busy.fetch_sub(1, std::memory_order_acq_rel);
      arm();  // this worker goes on spinning instead of sleeping
    });
  r.work();
  if (published) {  // no spinner may touch r once this returns
    g_current_id.store(0, std::memory_order_relaxed);
    g_current.store(nullptr, std::memory_order_seq_cst);
    while (g_joiners.load(std::memory_order_seq_cst) != 0) cpu_relax();
  }
  // Helpers still inside an item: wait awake. Helpers not started yet find nothing to claim;
  // wait() runs the ones still in this thread's deque at once.
  while (r.busy.load(std::memory_order_acquire) > 0) cpu_relax();
  helper_tasks.wait();
  --t_open_regions;
  arm();
  if (r.error) std::rethrow_exception(r.error);
}

}  // namespace detail
}  // namespace onnxforge::simd
