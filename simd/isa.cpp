// ISA detection, the ONNXFORGE_ISA override, and the three kernel tables.
#include "simd/isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/detail/kernel_table.h"

namespace onnxforge::simd {
namespace {

bool cpu_supports(Isa isa) noexcept {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::Sse: return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
    case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && cpu_supports(Isa::Avx2);
  }
  return false;
}

detail::KernelTable build_table(Isa isa) {
  detail::KernelTable t;
  t.isa = isa;
  switch (isa) {
    case Isa::Sse:
      detail::sse::install_gemm(t), detail::sse::install_eltwise(t), detail::sse::install_rows(t),
          detail::sse::install_depthwise(t), detail::sse::install_pool(t);
      detail::sse::install_resample(t), detail::sse::install_pad(t);
      break;
    case Isa::Avx2:
      detail::avx2::install_gemm(t), detail::avx2::install_eltwise(t), detail::avx2::install_rows(t),
          detail::avx2::install_depthwise(t), detail::avx2::install_pool(t);
      detail::avx2::install_resample(t), detail::avx2::install_pad(t);
      break;
    case Isa::Avx512:
      detail::avx512::install_gemm(t), detail::avx512::install_eltwise(t), detail::avx512::install_rows(t),
          detail::avx512::install_depthwise(t), detail::avx512::install_pool(t);
      detail::avx512::install_resample(t), detail::avx512::install_pad(t);
      break;
  }
  return t;
}

// Installers compiled for a level the CPU lacks are never run: even filling a table may use
// that level's instructions.
const detail::KernelTable* tables() noexcept {
  static const detail::KernelTable t[3] = {
      build_table(Isa::Sse),
      cpu_isa() >= Isa::Avx2 ? build_table(Isa::Avx2) : detail::KernelTable{},
      cpu_isa() >= Isa::Avx512 ? build_table(Isa::Avx512) : detail::KernelTable{},
  };
  return t;
}

Isa initial_isa() noexcept {
  Isa isa = cpu_isa();
  const char* env = std::getenv("ONNXFORGE_ISA");
  if (env == nullptr || *env == '\0') return isa;
  Isa want;
  if (std::strcmp(env, "sse") == 0) {
    want = Isa::Sse;
  } else if (std::strcmp(env, "avx2") == 0) {
    want = Isa::Avx2;
  } else if (std::strcmp(env, "avx512") == 0) {
    want = Isa::Avx512;
  } else {
    std::fprintf(stderr, "onnxforge: ignoring ONNXFORGE_ISA=%s (expected sse, avx2 or avx512)\n", env);
    return isa;
  }
  return want < isa ? want : isa;
}

std::atomic<const detail::KernelTable*>& active_slot() noexcept {
  static std::atomic<const detail::KernelTable*> slot{&tables()[static_cast<int>(initial_isa())]};
  return slot;
}

}  // namespace

const char* isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::Sse: return "sse";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

Isa cpu_isa() noexcept {
  static const Isa best = cpu_supports(Isa::Avx512) ? Isa::Avx512 : cpu_supports(Isa::Avx2) ? Isa::Avx2 : Isa::Sse;
  return best;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Sse, Isa::Avx2, Isa::Avx512})
    if (isa <= cpu_isa()) out.push_back(isa);
  return out;
}

Isa active_isa_level() noexcept { return active_slot().load(std::memory_order_acquire)->isa; }

const char* active_isa() noexcept { return isa_name(active_isa_level()); }

bool set_isa(Isa isa) noexcept {
  if (isa > cpu_isa()) return false;
  active_slot().store(&tables()[static_cast<int>(isa)], std::memory_order_release);
  return true;
}

namespace detail {

const KernelTable& active_table() noexcept { return *active_slot().load(std::memory_order_acquire); }

const KernelTable& table_for(Isa isa) noexcept { return tables()[static_cast<int>(isa)]; }

}  // namespace detail
}  // namespace onnxforge::simd
