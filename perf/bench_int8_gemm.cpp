// Int8 GEMM (simd/int8_gemm.h) against the fp32 GEMM on the same shapes, and against the
// machine's int8 peak, measured in alternation: every round times the register-only vpdpbusd
// loop, the int8 GEMM and the fp32 GEMM back to back on the same threads; reported are medians
// over rounds (the machine is shared: separate runs would compare different machines).
//
//   build/perf/bench_int8_gemm [ROUNDS] [THREADS] [gemm|conv] [SHAPE SUBSTRING]
//     (default 15 rounds, 1 and 2 threads, both sections, every shape)
//
// ops = 2 * M * N * K (a multiply and an add per MAC, the fp32 convention). Weights are packed
// once (as the runtime does per plan); A is packed per call inside gemm8 (as at run time).
// Shapes: BERT-base's projections at 128 tokens, and an im2col'ed 3x3 conv of a ResNet stage.
//
// The conv section times the runtime's int8 conv (simd::conv8_nd, weights packed once) against
// the fp32 conv the runtime runs for the same shape (simd::conv_packed or conv, bias + Relu in
// its epilogue), on ResNet-50's and ISNet's shapes including the strided ones; the int8 conv
// once with the int32 store (ConvInteger) and once with the dequantize epilogue (float * scale
// + bias, Relu: ConvInteger -> Cast -> Mul -> Add -> Relu as the plan fuses it). ops counts the
// real multiply-adds (padding taps included, as both convs compute them). The last three columns:
// the dynamic chain's float input quantized into a uint8 tensor then the conv (dq+f32), against
// conv8_nd_quantizing (fused), both with the float store; Gop/s of the conv's ops.
#include <immintrin.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "simd/conv.h"
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
    __asm__ volatile(""
                     : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
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

struct ConvShape {
  const char* name;
  std::size_t C, M, H, W, k, stride, dil;
};

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Calls f until 50 ms have passed; seconds per call. With one thread (g_cpu_clock), the
// thread's CPU time instead of the wall clock: on a loaded machine at nice 19 the wall clock
// mostly measures how long the scheduler left the thread off the core.
bool g_cpu_clock = false;
template <class F>
double time_call(F&& f) {
  auto clock = [] { return g_cpu_clock ? thread_cpu() : now(); };
  const double t = clock();
  int reps = 0;
  do f(), ++reps;
  while (clock() - t < 0.05);
  return (clock() - t) / reps;
}

double vnni_peak(int threads) {
  constexpr std::int64_t kIters = 1 << 20;
  auto clock = [] { return g_cpu_clock ? thread_cpu() : now(); };
  const double t = clock();
  simd::parallel_each(static_cast<std::size_t>(threads), true, [&](std::size_t) {
    volatile int sink = vnni_loop(kIters);
    (void)sink;
  });
  return static_cast<double>(threads) * 12.0 * 128.0 * kIters / (clock() - t);
}

void conv_section(int rounds, int threads, bool vnni, const std::string& only) {
  const ConvShape shapes[] = {{"resnet 64x56x56 3x3", 64, 64, 56, 56, 3, 1, 1},
                              {"resnet 256>64 56x56 1x1", 256, 64, 56, 56, 1, 1, 1},
                              {"resnet 64>256 56x56 1x1", 64, 256, 56, 56, 1, 1, 1},
                              {"resnet 512>128 28x28 1x1", 512, 128, 28, 28, 1, 1, 1},
                              {"resnet 128 56>28 3x3 s2", 128, 128, 56, 56, 3, 2, 1},
                              {"resnet 256>512 56>28 1x1 s2", 256, 512, 56, 56, 1, 2, 1},
                              {"isnet 64x256x256 3x3", 64, 64, 256, 256, 3, 1, 1},
                              {"isnet 64x128x128 3x3 d2", 64, 64, 128, 128, 3, 1, 2}};
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  g_cpu_clock = threads == 1;
  std::printf("\nconv, %d thread(s)%s\n%-28s %9s %9s %9s %8s %8s %9s %8s %9s %9s %8s\n", threads,
              threads == 1 ? " (thread CPU time)" : "", "shape", "i32 Gop/s", "f32 Gop/s", "fp32 Gop", "i32/fp32",
              "f32/fp32", "peak Gop", "of peak", "dq+f32", "fused", "fused/dq");
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal;
  for (const ConvShape& s : shapes) {
    if (!only.empty() && std::string(s.name).find(only) == std::string::npos) continue;
    const std::size_t pad = s.dil * (s.k / 2), K = s.C * s.k * s.k;
    simd::ConvParams p;
    p.in_channels = static_cast<std::int64_t>(s.C), p.out_channels = static_cast<std::int64_t>(s.M);
    p.in = {static_cast<std::int64_t>(s.H), static_cast<std::int64_t>(s.W), 1};
    p.kernel = {static_cast<std::int64_t>(s.k), static_cast<std::int64_t>(s.k), 1};
    p.stride = {static_cast<std::int64_t>(s.stride), static_cast<std::int64_t>(s.stride), 1};
    p.dilation = {static_cast<std::int64_t>(s.dil), static_cast<std::int64_t>(s.dil), 1};
    p.pad_begin = p.pad_end = {static_cast<std::int64_t>(pad), static_cast<std::int64_t>(pad), 0};
    const auto P = static_cast<std::size_t>(p.out_spatial());
    std::vector<float> xf(s.C * s.H * s.W), wf(s.M * K), bf(s.M), yf(s.M * P);
    for (auto& v : xf) v = normal(rng);
    for (auto& v : wf) v = 0.05f * normal(rng);
    for (auto& v : bf) v = normal(rng);
    std::vector<std::uint8_t> x8(xf.size()), w8(wf.size());
    for (auto& v : x8) v = static_cast<std::uint8_t>(byte(rng));
    for (auto& v : w8) v = static_cast<std::uint8_t>(byte(rng));
    std::vector<std::int32_t> y32(s.M * P);
    std::vector<float> yq(s.M * P), mult(s.M, 1e-4f);
    const std::int32_t zw = 131;  // uint8 weights with a zero point, as quantize_dynamic writes them
    const simd::PackedW8 pw = simd::pack_w8(s.M, K, w8.data(), K, false, &zw, 1);
    const simd::Conv8Shape cs{s.C,           {1, s.H, s.W},     {1, s.k, s.k},          {0, pad, pad},
                              {0, pad, pad}, {1, s.dil, s.dil}, {1, s.stride, s.stride}};
    simd::Conv8Output oi, of;
    oi.i32 = y32.data(), oi.ld = P;
    of.f32 = yq.data(), of.ld = P, of.mult = mult.data(), of.mult_count = s.M, of.bias = bf.data(), of.bias_count = s.M;
    of.act = simd::Unary::relu();
    const bool packed = simd::conv_prefers_packed(p) || simd::conv_prefers_direct(p);
    const simd::ConvPackedWeights pf = packed ? simd::pack_conv_weights(p, wf.data()) : simd::ConvPackedWeights{};
    const double ops = 2.0 * static_cast<double>(s.M * K * P);
    // The dynamic chain's two forms (the range pass, the same in both, left out): the float
    // input quantized into a uint8 tensor by DynamicQuantizeLinear's span and then the conv with
    // the float store, against the conv quantizing while it packs (conv8_nd_quantizing).
    const float dq_scale = 8.f / 255.f;
    const std::uint8_t dq_zero = 128;
    std::vector<std::uint8_t> xq(xf.size());
    std::vector<double> ri, rf, r32, rpeak, rdq, rfused;
    simd::WarmWorkers warm;
    for (int r = -2; r < rounds; ++r) {
      const double ti = time_call([&] { simd::conv8_nd(cs, x8.data(), false, 117, pw, oi); });
      const double tq = time_call([&] { simd::conv8_nd(cs, x8.data(), false, 117, pw, of); });
      const double tdq = time_call([&] {
        simd::parallel_chunks(xf.size(), 1 << 16, [&](std::size_t b, std::size_t e) {
          simd::dynamic_quantize_span(xf.data() + b, xq.data() + b, e - b, dq_scale, dq_zero);
        });
        simd::conv8_nd(cs, xq.data(), false, dq_zero, pw, of);
      });
      const double tfu = time_call([&] { simd::conv8_nd_quantizing(cs, xf.data(), dq_scale, dq_zero, pw, of); });
      const double tf = time_call([&] {
        if (packed)
          simd::conv_packed(p, xf.data(), pf, bf.data(), yf.data(), simd::Unary::relu());
        else
          simd::conv(p, xf.data(), wf.data(), bf.data(), yf.data(), simd::Unary::relu());
      });
      const double peak = vnni ? vnni_peak(threads) : 0;
      if (r < 0) continue;
      ri.push_back(ops / ti * 1e-9), rf.push_back(ops / tq * 1e-9), r32.push_back(ops / tf * 1e-9);
      rpeak.push_back(peak * 1e-9);
      rdq.push_back(ops / tdq * 1e-9), rfused.push_back(ops / tfu * 1e-9);
    }
    const double mi = median(ri), mq = median(rf), m32 = median(r32), mp = median(rpeak), mdq = median(rdq),
                 mfu = median(rfused);
    std::printf("%-28s %9.1f %9.1f %9.1f %7.2fx %7.2fx %9.1f %7.0f%% %9.1f %9.1f %7.2fx\n", s.name, mi, mq, m32,
                mi / m32, mq / m32, mp, mp > 0 ? 100 * mi / mp : 0, mdq, mfu, mfu / mdq);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  std::vector<int> thread_counts;
  if (argc > 2)
    thread_counts.push_back(std::atoi(argv[2]));
  else
    thread_counts = {1, 2};
  const bool vnni = simd::cpu_has_vnni() && simd::active_isa_level() == simd::Isa::Avx512;
  const std::string section = argc > 3 ? argv[3] : "";
  std::printf("int8 kernel: %s, fp32 level: %s, %d rounds (medians)\n",
              simd::int8_kernel_name(simd::active_int8_kernel()), simd::active_isa(), rounds);
  const Shape shapes[] = {{"bert qkv/out 128x768x768", 128, 768, 768},
                          {"bert fc1 128x3072x768", 128, 3072, 768},
                          {"bert fc2 128x768x3072", 128, 768, 3072},
                          {"conv3x3 3136x64x576", 3136, 64, 576},
                          {"square 512x512x512", 512, 512, 512}};
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal;
  for (int threads : thread_counts) {
    if (section == "conv") continue;
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    g_cpu_clock = threads == 1;
    std::printf("\n%d thread(s)%s\n%-26s %11s %11s %7s %11s %8s\n", threads, g_cpu_clock ? " (thread CPU time)" : "",
                "shape", "int8 Gop/s", "fp32 Gop/s", "ratio", "peak Gop/s", "of peak");
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
        const double t8 = time_call([&] { simd::gemm8(s.M, a8.data(), s.K, false, 3, p8, c8.data(), s.N); });
        const double tf =
            time_call([&] { simd::gemm_packed(false, s.M, 1.f, af.data(), s.K, pf, 0.f, cf.data(), s.N); });
        // The peak loop on every thread at once (threads x one core's rate).
        const double peak = vnni ? vnni_peak(threads) : 0;
        if (r < 0) continue;  // warm-up rounds
        r8.push_back(ops / t8 * 1e-9), rf.push_back(ops / tf * 1e-9), rpeak.push_back(peak * 1e-9);
      }
      const double m8 = median(r8), mf = median(rf), mp = median(rpeak);
      std::printf("%-26s %11.1f %11.1f %6.2fx %11.1f %7.0f%%\n", s.name, m8, mf, m8 / mf, mp,
                  mp > 0 ? 100 * m8 / mp : 0);
    }
  }
  if (section != "gemm")
    for (int threads : thread_counts) conv_section(rounds, threads, vnni, argc > 4 ? argv[4] : "");
  return 0;
}
