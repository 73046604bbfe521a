#pragma once
// Instruction-set selection for the simd kernels.
//
// The library is built for x86-64-v2; the hot kernels are also compiled for AVX2+FMA and for
// AVX-512 (F/BW/DQ/VL) and the best level the CPU supports is picked at first use. The
// environment variable ONNXFORGE_ISA=sse|avx2|avx512 caps the level (a request above what the
// CPU supports falls back to the best supported level; an unknown value is ignored with a
// warning on stderr).
#include <cstdint>
#include <vector>

namespace onnxforge::simd {

enum class Isa : std::uint8_t { Sse = 0, Avx2 = 1, Avx512 = 2 };

// "sse", "avx2" or "avx512".
const char* isa_name(Isa isa) noexcept;

// Best level this CPU (and OS) supports, ignoring ONNXFORGE_ISA.
Isa cpu_isa() noexcept;

// Levels the CPU supports, lowest first (always contains Isa::Sse).
std::vector<Isa> available_isas();

// Level used by the kernels now, and its name.
Isa active_isa_level() noexcept;
const char* active_isa() noexcept;

// Switches the active level (tests and benchmarks). Returns false, and changes nothing, if the
// CPU does not support `isa`. Not meant to be called while kernels run on other threads: a
// kernel already running keeps the level it started with.
bool set_isa(Isa isa) noexcept;

}  // namespace onnxforge::simd
