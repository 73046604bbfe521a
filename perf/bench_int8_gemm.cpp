// Int8 GEMM (simd/int8_gemm.h) against the fp32 GEMM on the same shapes, and against the
// machine's int8 peak, measured in alternation: every round times the register-only vpdpbusd
// loop, the int8 GEMM and the fp32 GEMM back to back on the same threads; reported are medians
// over rounds (the machine is shared: separate runs would compare different machines).
//
//   build/perf/bench_int8_gemm [ROUNDS] [THREADS]     (default 15 rounds, 1 and 2 threads)
//
// ops = 2 * M * N * K (a multiply and an add per MAC, the fp32 convention). Weights are packed
// once (as the runtime does per plan); A is packed per call inside gemm8 (as at run time).
// Shapes: BERT-base's projections at 128 tokens, and an im2col'ed 3x3 conv of a ResNet stage.
#include <immintrin.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "simd/gemm.h"
#include "simd/int8_gemm.h"
#include "simd/parallel.h"

namespace {

using namespace onnxforge;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// 12 independent vpdpbusd chains in named registers (an array of vectors makes GCC copy it
// between register sets every iteration): the int8 peak of one core, 64 MACs = 128 ops each.
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx512f,avx512vnni"))) int vnni_loop(std::int64_t iters) {
#define INIT(i) __m512i a##i = _mm512_set1_epi32(i);
  CHAINS(INIT)
#undef INIT
  const __m512i x = _mm512_set1_epi32(0x01010101), y = _mm512_set1_epi32(0x02020202);
  for (std::int64_t it = 0; it < iters; ++it) {
#define STEP(i) a##i = _mm512_dpbusd_epi32(a##i, x, y);
    CHAINS(STEP)
#undef STEP
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                     "+v"(a9), "+v"(a10), "+v"(a11));
  }
  __m512i s = a0;
#define SUM(i) s = _mm512_add_epi32(s, a##i);
  CHAINS(SUM)
#undef SUM
  alignas(64) int out[16];
  _mm512_store_si512(out, s);
  return out[0] + out[15];
}
#undef CHAINS

struct Shape {
  const char* name;
  std::size_t M, N, K;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  std::vector<int> thread_counts;
  if (argc > 2) thread_counts.push_back(std::atoi(argv[2]));
  else thread_counts = {1, 2};
  const bool vnni = simd::cpu_has_vnni() && simd::active_isa_level() == simd::Isa::Avx512;
  std::printf("int8 kernel: %s, fp32 level: %s, %d rounds (medians)\n", simd::int8_kernel_name(simd::active_int8_kernel()),
              simd::active_isa(), rounds);
  const Shape shapes[] = {{"bert qkv/out 128x768x768", 128, 768, 768},
                          {"bert fc1 128x3072x768", 128, 3072, 768},
                          {"bert fc2 128x768x3072", 128, 768, 3072},
                          {"conv3x3 3136x64x576", 3136, 64, 576},
                          {"square 512x512x512", 512, 512, 512}};
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal;
  for (int threads : thread_counts) {
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    std::printf("\n%d thread(s)\n%-26s %11s %11s %7s %11s %8s\n", threads, "shape", "int8 Gop/s", "fp32 Gop/s", "ratio",
                "peak Gop/s", "of peak");
    for (const Shape& s : shapes) {
      std::vector<std::uint8_t> a8(s.M * s.K), b8(s.K * s.N);
      for (auto& v : a8) v = static_cast<std::uint8_t>(byte(rng));
      for (auto& v : b8) v = static_cast<std::uint8_t>(byte(rng));
      std::vector<float> af(s.M * s.K), bf(s.K * s.N), cf(s.M * s.N);
      for (auto& v : af) v = normal(rng);
      for (auto& v : bf) v = normal(rng);
      std::vector<std::int32_t> c8(s.M * s.N);
      const std::int32_t zb = 0;
      simd::PackedB8 p8 = simd::pack_b8(false, s.K, s.N, b8.data(), s.N, true, &zb, 1);
      simd::PackedB pf = simd::pack_b(false, s.K, s.N, bf.data(), s.N);
      const double ops = 2.0 * static_cast<double>(s.M * s.N * s.K);
      std::vector<double> r8, rf, rpeak;
      simd::WarmWorkers warm;
      for (int r = -2; r < rounds; ++r) {
        double t = now();
        int reps8 = 0;
        do simd::gemm8(s.M, a8.data(), s.K, false, 3, p8, c8.data(), s.N), ++reps8;
        while (now() - t < 0.05);
        const double t8 = (now() - t) / reps8;
        t = now();
        int repsf = 0;
        do simd::gemm_packed(false, s.M, 1.f, af.data(), s.K, pf, 0.f, cf.data(), s.N), ++repsf;
        while (now() - t < 0.05);
        const double tf = (now() - t) / repsf;
        double peak = 0;
        if (vnni) {
          // The peak loop on every thread at once (threads x one core's rate).
          constexpr std::int64_t kIters = 1 << 20;
          t = now();
          simd::parallel_each(static_cast<std::size_t>(threads), true, [&](std::size_t) {
            volatile int sink = vnni_loop(kIters);
            (void)sink;
          });
          peak = static_cast<double>(threads) * 12.0 * 128.0 * kIters / (now() - t);
        }
        if (r < 0) continue;  // warm-up rounds
        r8.push_back(ops / t8 * 1e-9), rf.push_back(ops / tf * 1e-9), rpeak.push_back(peak * 1e-9);
      }
      const double m8 = median(r8), mf = median(rf), mp = median(rpeak);
      std::printf("%-26s %11.1f %11.1f %6.2fx %11.1f %7.0f%%\n", s.name, m8, mf, m8 / mf, mp, mp > 0 ? 100 * m8 / mp : 0);
    }
  }
  return 0;
}
