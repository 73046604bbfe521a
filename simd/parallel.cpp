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
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
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

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// A spinner gives up after this long without a new region: a serial stretch that long makes the
// wake-up cost small in comparison, and a forgotten scope cannot burn a core for ever.
constexpr auto kMaxSpin = std::chrono::milliseconds(50);
// After this long without a region, a spinner parks on a futex until the next region starts
// (or kMaxSpin ends) if a thread of the process was descheduled lately: the caller it waits for
// is then likely off its core, other processes wanting the cores. Spinning through that absence
// spends this thread's share of its core for nothing and leaves it to be preempted just when the
// caller comes back with work; parked, it leaves the core to the others and is run as soon as
// the region's wake-up comes. On a calm machine nothing is descheduled and it spins as before
// (a parked helper would have to be woken, and a halted vCPU takes long to wake).
constexpr auto kSpinBeforePark = std::chrono::microseconds(200);

#if defined(__linux__)
// Threads parked (spinners, callers waiting for helpers), and the word they sleep on (bumped by
// every wake-up).
std::atomic<int> g_parked{0};
std::atomic<long> g_parked_waits{0};
std::atomic<std::uint32_t> g_wake_word{0};
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

// Wakes the parked threads after a change one may wait for (a region started, the last scope
// closed, a helper left a region). Sequentially consistent against park(): the waker stores the
// change, then reads g_parked; the parker counts itself, then re-reads the state; one of them
// sees the other.
void wake_parked() {
  if (g_parked.load(std::memory_order_seq_cst) == 0) return;
  g_wake_word.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&g_wake_word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
          0);
}

// Whether a thread of this process was descheduled against its will since this thread's
// previous call (the process's involuntary context switches went up). Called once per wait
// longer than kSpinBeforePark, so its system call costs time that would have been spun away.
bool descheduled_lately() {
  thread_local long last = -1;
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return false;
  const long prev = std::exchange(last, u.ru_nivcsw);
  return prev >= 0 && u.ru_nivcsw != prev;
}

// Sleeps until wake_parked() or `timeout`, unless `still_idle` (re-read after counting this
// thread as parked) says a wake-up already happened.
template <class Idle>
void park(std::chrono::nanoseconds timeout, Idle&& still_idle) {
  g_parked.fetch_add(1, std::memory_order_seq_cst);
  g_parked_waits.fetch_add(1, std::memory_order_relaxed);
  const std::uint32_t word = g_wake_word.load(std::memory_order_seq_cst);
  if (still_idle() && timeout.count() > 0) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&g_wake_word), FUTEX_WAIT_PRIVATE, word, &ts, nullptr, 0);
  }
  g_parked.fetch_sub(1, std::memory_order_seq_cst);
}
#else
void wake_parked() {}
#endif

// The caller's wait for helpers still inside an item: spins, then parks (a helper that long in
// its item has been descheduled; see kSpinBeforePark). Every decrement of `count` wakes it.
void wait_for_zero(const std::atomic<int>& count) {
  const auto start = std::chrono::steady_clock::now();
  int may_park = -1;  // not asked yet
  for (unsigned n = 1; count.load(std::memory_order_seq_cst) != 0; ++n) {
#if defined(__linux__)
    if (n % 256 == 0 && may_park != 0 && std::chrono::steady_clock::now() - start > kSpinBeforePark) {
      if (may_park < 0) may_park = descheduled_lately() ? 1 : 0;
      if (may_park == 1) {
        park(std::chrono::milliseconds(10), [&] { return count.load(std::memory_order_seq_cst) != 0; });
        continue;
      }
    }
#endif
    cpu_relax();
  }
}

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
  wake_parked();
}

void spin(uint64_t seen) {
  if (t_open_regions == 0) {
    auto idle_since = std::chrono::steady_clock::now();
    std::uint64_t joined = 0;
    int may_park = -1;  // not asked yet in this wait
    for (unsigned n = 1;; ++n) {
      if (g_scopes.load(std::memory_order_relaxed) == 0) break;
      // A published region: join it and go on spinning for the next one.
      const std::uint64_t id = g_current_id.load(std::memory_order_acquire);
      if (id != 0 && id != joined) {
        join(id);
        joined = id;
        seen = g_unpublished_started.load(std::memory_order_relaxed);
        idle_since = std::chrono::steady_clock::now();
        may_park = -1;
        continue;
      }
      // Any other region is served through its helper tasks: leave, so TBB can run one here.
      if (g_unpublished_started.load(std::memory_order_relaxed) != seen) break;
      if (n % 256 == 0) {
        const auto idle = std::chrono::steady_clock::now() - idle_since;
        if (idle > kMaxSpin) break;
#if defined(__linux__)
        if (idle > kSpinBeforePark && may_park < 0) may_park = descheduled_lately() ? 1 : 0;
        if (may_park == 1) {
          park(kMaxSpin - idle, [&] {
            const std::uint64_t now_id = g_current_id.load(std::memory_order_seq_cst);
            return g_scopes.load(std::memory_order_seq_cst) != 0 && (now_id == 0 || now_id == joined) &&
                   g_unpublished_started.load(std::memory_order_seq_cst) == seen;
          });
        }
#endif
      }
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
  if (active_ && g_scopes.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_parked();
}

SerialScope::SerialScope() { ++t_serial; }
SerialScope::~SerialScope() { --t_serial; }

int warm_spinners() { return g_spinners.load(std::memory_order_relaxed); }

long parked_waits() {
#if defined(__linux__)
  return g_parked_waits.load(std::memory_order_relaxed);
#else
  return 0;
#endif
}

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
    if (published) g_current_id.store(r.id, std::memory_order_seq_cst);
  }
  if (!published) g_unpublished_started.fetch_add(1, std::memory_order_seq_cst);
  wake_parked();
  tbb::task_group helper_tasks;
  for (std::size_t h = 0; h < helpers; ++h)
    helper_tasks.run([&r] {
      r.busy.fetch_add(1, std::memory_order_acq_rel);
      r.work();
      r.busy.fetch_sub(1, std::memory_order_seq_cst);
      wake_parked();
      arm();  // this worker goes on spinning instead of sleeping
    });
  r.work();
  if (published) {  // no spinner may touch r once this returns
    g_current_id.store(0, std::memory_order_relaxed);
    g_current.store(nullptr, std::memory_order_seq_cst);
    wait_for_zero(g_joiners);
  }
  // Helpers still inside an item: wait (awake unless the process is being descheduled). Helpers
  // not started yet find nothing to claim;
  // wait() runs the ones still in this thread's deque at once.
  wait_for_zero(r.busy);
  helper_tasks.wait();
  --t_open_regions;
  arm();
  if (r.error) std::rethrow_exception(r.error);
}

}  // namespace detail
}  // namespace onnxforge::simd
