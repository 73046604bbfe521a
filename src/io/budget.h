#pragma once
// The memory budget (command line --max-memory): how much the runtime may allocate for tensors
// before a hostile or oversized model stops with an error naming the node and the size, instead
// of an allocation failure or the OOM killer (a Loop of 2^62 iterations stacking scan outputs,
// Range to 2^62, an input declared with 2^31 elements). In core, not in the runtime, so that
// every command sets it the same way whichever components a build has.
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

}  // namespace onnxforge
