// Memory read bandwidth of this machine, STREAM-like: a sum over a buffer far larger than the
// caches (1 GiB, touched once before timing), on 1 thread and on every thread. A decode step of
// an LLM reads every weight once per token, so weight bytes ÷ this bandwidth is the floor a
// decode step's time is judged against (perf/decode_vs_ort.sh prints it beside the figures).
//
//   build/perf/bench_stream --benchmark_min_time=2
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

constexpr size_t kBytes = size_t{1} << 30;

const float* buffer() {
  static float* b = [] {
    auto* p = static_cast<float*>(std::aligned_alloc(64, kBytes));
    std::memset(p, 1, kBytes);  // resident before any timing
    return p;
  }();
  return b;
}

// Read-only sum with several independent accumulators, the shape of a GEMV's weight stream.
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

void BM_ReadBandwidth(benchmark::State& state) {
  const float* p = buffer();
  // Each thread reads its own slice: the threads together read the whole buffer once per iteration.
  const size_t per = kBytes / sizeof(float) / static_cast<size_t>(state.threads());
  const float* mine = p + per * static_cast<size_t>(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(sum_avx2(mine, per));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(per * sizeof(float)));
}

const int kAllThreads = static_cast<int>(std::thread::hardware_concurrency());

BENCHMARK(BM_ReadBandwidth)
    ->Name("stream_read")
    ->Threads(1)
    ->Threads(kAllThreads)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
