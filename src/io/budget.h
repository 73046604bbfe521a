#pragma once
// The memory budget (command line --max-memory): how much the runtime may allocate for tensors
// before a hostile or oversized model stops with an error naming the node and the size, instead
// of an allocation failure or the OOM killer (a Loop of 2^62 iterations stacking scan outputs,
// Range to 2^62, an input declared with 2^31 elements). In core, not in the runtime, so that
// every command sets it the same way whichever components a build has.
#include <atomic>
#include <cstdint>
#include <string>

namespace onnxforge {

// 3/4 of the machine's RAM, or of the container's memory limit (cgroup) when that is lower.
uint64_t default_memory_budget();
void set_memory_budget(uint64_t bytes);
uint64_t memory_budget();  // default_memory_budget() until set

// Bytes the runtime holds now (its allocator reports every buffer it hands out and frees).
uint64_t memory_in_use();
void note_allocated(uint64_t bytes);
void note_released(uint64_t bytes);

// Throws onnxforge::Error (Kind::Memory) naming `what` and the sizes when `bytes` more would take
// the memory in use past the budget.
void check_memory(uint64_t bytes, const std::string& what);

// The time budget (command line --max-time): wall-clock seconds, counted from set_time_budget(),
// that the runtime's work may take. The runtime checks it before every node step and every
// Loop/Scan iteration, so a model whose compute is unbounded (a Loop of 2^62 trips that grows no
// memory, so the memory budget never stops it) ends with an error naming the node instead of
// running until killed. 0 (the default): no limit; verification has its own --verify-budget,
// which lowers the seed count instead of stopping.
void set_time_budget(double seconds);
double time_budget();
namespace detail {
extern std::atomic<int64_t> g_deadline_ns;  // steady clock; 0: no limit
int64_t steady_now_ns();
}  // namespace detail
// One relaxed load when no budget is set (the per-step cost), a clock read otherwise.
inline bool time_budget_spent() {
  const int64_t d = detail::g_deadline_ns.load(std::memory_order_relaxed);
  return d != 0 && detail::steady_now_ns() >= d;
}
// Throws onnxforge::Error: `where` (a node) stopped over the time budget, and how to raise it
// (or that the work was interrupted, after request_cancel()).
[[noreturn]] void fail_time_budget(const std::string& where);

// Cancellation (Python's KeyboardInterrupt while the engine works without the GIL): moves the
// deadline into the past, so the runtime's next check, at most one node step or Loop iteration
// away, stops the work with an Error saying it was interrupted. Process-wide, like the budgets:
// every engine call in flight stops. clear_cancel() restores the deadline set_time_budget gave.
void request_cancel();
bool cancel_requested();
void clear_cancel();

// How much work one Loop (or Scan) node may do (command line --max-loop-iterations), in node
// steps: iterations x (the body's nodes + 2), nested Loops spending from the outermost one's
// budget. A Loop's trip count comes from the file; 2^62 with no scan outputs neither allocates
// nor ends. The default 2^23 bounds a Loop of trivial compute at about 3 s whatever its body
// (runtime/ops/control.cpp has the measurement); real loops stay far under it (docs/cli.md).
inline constexpr uint64_t kDefaultLoopIterations = uint64_t{1} << 23;
void set_loop_iteration_limit(uint64_t n);
uint64_t loop_iteration_limit();

}  // namespace onnxforge
