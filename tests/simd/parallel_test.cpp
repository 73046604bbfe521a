// simd/parallel.h: every item runs exactly once, nested regions, exceptions, and the warm-worker
// spinners (armed inside a scope, gone after it, never inside a TBB task).
#include "simd/parallel.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace onnxforge::simd {
namespace {

std::vector<int> run_chunks(std::size_t n, std::size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  parallel_chunks(n, grain, [&](std::size_t b, std::size_t e) {
    EXPECT_LT(b, e);
    EXPECT_LE(e, n);
    for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  std::vector<int> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = hits[i].load();
  return out;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(Parallel, ChunksCoverEveryIndexOnce) {
  for (std::size_t n : {0, 1, 2, 7, 1000, 16384, 100003})
    for (std::size_t grain : {0, 1, 3, 1024, 200000})
      EXPECT_EQ(run_chunks(n, grain), std::vector<int>(n, 1)) << "n=" << n << " grain=" << grain;
}

TEST(Parallel, ChunksRespectTheGrain) {
  std::atomic<std::size_t> smallest{~std::size_t{0}};
  std::atomic<int> last_chunks{0};
  const std::size_t n = 10000, grain = 700;
  parallel_chunks(n, grain, [&](std::size_t b, std::size_t e) {
    if (e == n)
      last_chunks.fetch_add(1);
    else
      smallest.store(std::min(smallest.load(), e - b));
  });
  EXPECT_GE(smallest.load(), grain);
  EXPECT_EQ(last_chunks.load(), 1);
}

TEST(Parallel, EachAndForRunEveryItemOnceAtEveryThreadCount) {
  for (int threads : {1, 2, 4}) {
    tbb::global_control cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    EXPECT_LE(max_threads(), threads);
    for (std::size_t n : {1, 2, 3, 64, 1001}) {
      std::vector<std::atomic<int>> each(n), loop(n);
      parallel_each(n, true, [&](std::size_t i) { each[i].fetch_add(1); });
      parallel_for(static_cast<int64_t>(n), [&](int64_t i) { loop[static_cast<std::size_t>(i)].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(each[i].load(), 1) << "threads=" << threads << " n=" << n << " i=" << i;
        ASSERT_EQ(loop[i].load(), 1) << "threads=" << threads << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(Parallel, OneThreadRunsInOrderOnTheCaller) {
  tbb::global_control cap(tbb::global_control::max_allowed_parallelism, 1);
  const auto caller = std::this_thread::get_id();
  std::vector<std::size_t> order;
  parallel_each(50, true, [&](std::size_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  ASSERT_EQ(order.size(), 50u);
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
}

// Inside a SerialScope every region the thread opens runs on it alone, in order, and
// max_threads() says 1 (the GEMM tiles for one thread); the scope is per thread and nests.
TEST(Parallel, SerialScopeRunsRegionsOnTheCallerAlone) {
  const int threads = max_threads();
  std::vector<std::atomic<int>> hits(4 * 300);
  std::atomic<int> elsewhere{0};
  parallel_each(4, true, [&](std::size_t o) {
    SerialScope serial;
    EXPECT_EQ(max_threads(), 1);
    const auto me = std::this_thread::get_id();
    std::size_t expect = 0;
    parallel_chunks(300, 1, [&](std::size_t b, std::size_t e) {
      EXPECT_EQ(b, expect);  // one chunk after the other, on this thread
      expect = e;
      if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
      for (std::size_t i = b; i < e; ++i) hits[o * 300 + i].fetch_add(1);
    });
    {
      SerialScope nested;
      EXPECT_EQ(max_threads(), 1);
    }
    EXPECT_EQ(max_threads(), 1);
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(max_threads(), threads);
}

TEST(Parallel, NestedRegionsCoverEverything) {
  const std::size_t outer = 9, inner = 333;
  std::vector<std::atomic<int>> hits(outer * inner);
  parallel_each(outer, true, [&](std::size_t o) {
    parallel_chunks(inner, 10, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) hits[o * inner + i].fetch_add(1);
    });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(Parallel, TheFirstExceptionReachesTheCallerAndLaterItemsAreSkipped) {
  // Whether items are skipped depends on timing: a thread preempted between the throw and its
  // capture lets the other run every remaining item (seen once under load on 2 cores). So the
  // exception must reach the caller every time, and skipping must show in at least one of 20 runs.
  int fewest = 10000;
  for (int attempt = 0; attempt < 20 && fewest == 10000; ++attempt) {
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_each(10000, true,
                               [&](std::size_t i) {
                                 ran.fetch_add(1);
                                 if (i == 3) throw std::runtime_error("item 3");
                               }),
                 std::runtime_error);
    fewest = std::min(fewest, ran.load());
  }
  EXPECT_LT(fewest, 10000);
  // The machinery is still usable afterwards.
  EXPECT_EQ(run_chunks(5000, 100), std::vector<int>(5000, 1));
}

TEST(Parallel, WarmScopeKeepsSpinnersOnlyWhileOpen) {
  if (max_threads() < 2) GTEST_SKIP() << "needs two threads";
  {
    WarmWorkers warm;
    EXPECT_EQ(warm_spinners(), max_threads() - 1);
    for (int r = 0; r < 500; ++r) EXPECT_EQ(run_chunks(257, 16), std::vector<int>(257, 1));
    EXPECT_GE(warm_spinners(), 1);  // re-armed after each region
  }
  EXPECT_TRUE(wait_until([] { return warm_spinners() == 0; }, std::chrono::seconds(5)));
}

// Inside a warm scope a spinner joins the published top-level region itself. Its items open
// nested regions after the caller has run out of items and withdrawn the publication: such a
// nested region must not be published in turn (its caller, counted as a joiner, waited for the
// joiners to drain: a self-deadlock, seen on BERT-base's Attention, whose items run GEMMs).
TEST(Parallel, WarmSpinnersJoinRegionsAndTheirNestedRegionsFinish) {
  if (max_threads() < 2) GTEST_SKIP() << "needs two threads";
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {  // a deadlock fails the test instead of hanging the suite
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!finished.load()) {
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "parallel regions under a warm scope did not finish in 120 s (deadlock)";
        std::_Exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::size_t elsewhere = 0;
  {
    WarmWorkers warm;
    const auto caller = std::this_thread::get_id();
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> hits(4 * 64);
      std::atomic<std::size_t> other{0};
      parallel_each(4, true, [&](std::size_t o) {
        if (std::this_thread::get_id() != caller) other.fetch_add(1);
        if (o % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));  // outlast the caller
        parallel_chunks(64, 4, [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) hits[o * 64 + i].fetch_add(1);
        });
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      elsewhere += other.load();
    }
  }
  finished = true;
  watchdog.join();
  EXPECT_GT(elsewhere, 0u);  // the other thread took part
  EXPECT_TRUE(wait_until([] { return warm_spinners() == 0; }, std::chrono::seconds(5)));
}

// Keeps the calling thread on its core for `d` (work, as the scheduler sees it).
void busy_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {}
}

// With every core wanted by a busy thread of the test, the serial millisecond before each region
// makes the spinner park (a thread of the process is being descheduled); the region's start must
// wake it: every item still runs once, the other thread still takes part in many of them,
// nothing hangs.
TEST(Parallel, ParkedSpinnersWakeForTheNextRegion) {
  if (max_threads() < 2) GTEST_SKIP() << "needs two threads";
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (unsigned t = 0; t < std::max(2u, std::thread::hardware_concurrency()); ++t)
    busy.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {}
    });
  const long parked_before = parked_waits();
  // Woken by each region, the helper joined 49-60 of 100 regions here (it has half a core);
  // with the wake-up removed, 13-22 (it joins only when its check finds no recent preemption,
  // or after its 50 ms timeout). Other jobs on the machine can take the helper's half too, so
  // the bound is loose and the best of three attempts counts: it catches a helper that stays
  // parked, not a slow wake-up.
  int best_joined = 0;
  for (int attempt = 0; attempt < 3 && best_joined < 20; ++attempt) {
    int rounds_joined = 0;
    WarmWorkers warm;
    const auto caller = std::this_thread::get_id();
    for (int round = 0; round < 100; ++round) {
      busy_for(std::chrono::milliseconds(1));  // serial work between regions
      std::vector<std::atomic<int>> hits(64);
      std::atomic<std::size_t> other{0};
      parallel_each(64, true, [&](std::size_t i) {
        if (std::this_thread::get_id() != caller) other.fetch_add(1);
        hits[i].fetch_add(1);
        busy_for(std::chrono::microseconds(20));
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      rounds_joined += other.load() > 0 ? 1 : 0;
    }
    best_joined = std::max(best_joined, rounds_joined);
  }
  stop = true;
  for (auto& t : busy) t.join();
  EXPECT_GT(parked_waits(), parked_before);
  EXPECT_GE(best_joined, 20);
  EXPECT_TRUE(wait_until([] { return warm_spinners() == 0; }, std::chrono::seconds(5)));
}

TEST(Parallel, WarmScopeInsideATaskDoesNothing) {
  if (max_threads() < 2) GTEST_SKIP() << "needs two threads";
  std::atomic<int> seen{-1};
  tbb::parallel_for(0, 1, [&](int) {
    WarmWorkers warm;
    seen = warm_spinners();
  });
  EXPECT_EQ(seen.load(), 0);
}

TEST(Parallel, SpinnersGiveUpWhenNoRegionComes) {
  if (max_threads() < 2) GTEST_SKIP() << "needs two threads";
  WarmWorkers warm;
  EXPECT_GE(warm_spinners(), 1);
  // The scope stays open, but after 50 ms without a region every spinner returns.
  EXPECT_TRUE(wait_until([] { return warm_spinners() == 0; }, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace onnxforge::simd
