#include "io/budget.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>

#include "io/units.h"
#include "ir/error.h"

namespace onnxforge {
namespace {

std::atomic<uint64_t> g_live{0};
std::atomic<uint64_t> g_budget{0};  // 0: not set yet
std::atomic<double> g_time_budget{0};
std::atomic<int64_t> g_time_start_ns{0};
std::atomic<uint64_t> g_loop_limit{kDefaultLoopIterations};

uint64_t read_u64_file(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  unsigned long long v = 0;
  int n = std::fscanf(f, "%llu", &v);  // "max" (no limit) reads as nothing
  std::fclose(f);
  return n == 1 ? v : 0;
}

}  // namespace

uint64_t default_memory_budget() {
  uint64_t ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const char* p : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"})
    if (uint64_t limit = read_u64_file(p); limit > 0 && limit < ram) ram = limit;
  if (ram == 0) ram = uint64_t{8} << 30;
  return ram / 4 * 3;
}

void set_memory_budget(uint64_t bytes) { g_budget.store(bytes); }

uint64_t memory_budget() {
  uint64_t b = g_budget.load();
  if (b == 0) {
    b = default_memory_budget();
    g_budget.store(b);
  }
  return b;
}

uint64_t memory_in_use() { return g_live.load(std::memory_order_relaxed); }
void note_allocated(uint64_t bytes) { g_live.fetch_add(bytes, std::memory_order_relaxed); }
void note_released(uint64_t bytes) { g_live.fetch_sub(bytes, std::memory_order_relaxed); }

void check_memory(uint64_t bytes, const std::string& what) {
  const uint64_t budget = memory_budget(), live = memory_in_use();
  if (bytes <= budget && live <= budget - bytes) return;
  std::string msg = what + " needs " + human_bytes(bytes);
  if (live > 0) msg += " with " + human_bytes(live) + " already in use";
  msg += ", over the memory budget of " + human_bytes(budget) + " (raise it with --max-memory SIZE)";
  throw Error(msg, Error::Kind::Memory);
}

namespace detail {
std::atomic<int64_t> g_deadline_ns{0};
int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

void set_time_budget(double seconds) {
  const int64_t now = detail::steady_now_ns();
  g_time_budget.store(seconds > 0 ? seconds : 0);
  g_time_start_ns.store(now);
  // Capped at about 292 years so that the deadline stays an int64.
  detail::g_deadline_ns.store(seconds > 0 ? now + static_cast<int64_t>(std::min(seconds, 9e9) * 1e9) : 0);
}

double time_budget() { return g_time_budget.load(); }

namespace {
std::atomic<bool> g_cancelled{false};
std::atomic<int64_t> g_deadline_before_cancel{0};
}  // namespace

void request_cancel() {
  if (g_cancelled.exchange(true)) return;
  g_deadline_before_cancel.store(detail::g_deadline_ns.load());
  detail::g_deadline_ns.store(1);  // the steady clock is past 1 ns: the next check stops
}

bool cancel_requested() { return g_cancelled.load(); }

void clear_cancel() {
  if (!g_cancelled.exchange(false)) return;
  detail::g_deadline_ns.store(g_deadline_before_cancel.load());
}

void fail_time_budget(const std::string& where) {
  if (g_cancelled.load()) throw Error(where + ": interrupted");
  const double spent = static_cast<double>(detail::steady_now_ns() - g_time_start_ns.load()) * 1e-9;
  throw Error(where + ": stopped after " + human_seconds(spent) + ", over the time budget of " +
              human_seconds(g_time_budget.load()) + " (raise it with --max-time SECONDS)");
}

void set_loop_iteration_limit(uint64_t n) { g_loop_limit.store(n); }
uint64_t loop_iteration_limit() { return g_loop_limit.load(); }

}  // namespace onnxforge
