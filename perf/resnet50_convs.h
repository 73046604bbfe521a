#pragma once
// The distinct ResNet-50 conv shapes (batch 1, 224x224) shared by bench_conv (NCHW) and
// bench_conv_nhwc (channels-last), so that their tables compare line by line. `count` is how
// often the shape occurs in ResNet-50 (weight the times by it for the model's conv total).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "simd/conv.h"
#include "tests/common/random.h"

namespace onnxforge::perf {

inline std::vector<float> random_vector(std::size_t n, unsigned seed, float scale) {
  return test::noise(n, seed, -scale, scale);
}

struct ResNetConv {
  std::int64_t c, m, hw, k, s, acc, count;
};

inline constexpr ResNetConv kResNet50Convs[] = {
    {3, 64, 224, 7, 2, 0, 1},  // stem
    {64, 64, 56, 1, 1, 0, 1},     {64, 64, 56, 3, 1, 0, 3},    {64, 256, 56, 1, 1, 1, 3},
    {64, 256, 56, 1, 1, 0, 1},    {256, 64, 56, 1, 1, 0, 2},  // 56x56
    {256, 128, 56, 1, 1, 0, 1},   {128, 128, 56, 3, 2, 0, 1},  {128, 512, 28, 1, 1, 1, 4},
    {256, 512, 56, 1, 2, 0, 1},   {512, 128, 28, 1, 1, 0, 3},  {128, 128, 28, 3, 1, 0, 3},  // 28x28
    {512, 256, 28, 1, 1, 0, 1},   {256, 256, 28, 3, 2, 0, 1},  {256, 1024, 14, 1, 1, 1, 6},
    {512, 1024, 28, 1, 2, 0, 1},  {1024, 256, 14, 1, 1, 0, 5}, {256, 256, 14, 3, 1, 0, 5},  // 14x14
    {1024, 512, 14, 1, 1, 0, 1},  {512, 512, 14, 3, 2, 0, 1},  {512, 2048, 7, 1, 1, 1, 3},
    {1024, 2048, 14, 1, 2, 0, 1}, {2048, 512, 7, 1, 1, 0, 2},  {512, 512, 7, 3, 1, 0, 2},  // 7x7
};

// Benchmark args: in channels, out channels, input size, kernel, stride, accumulate, count,
// threads; every shape with 1 and 2 threads.
inline void resnet50_conv_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "M", "in", "k", "s", "acc", "count", "threads"});
  for (int threads : {1, 2})
    for (const ResNetConv& s : kResNet50Convs) b->Args({s.c, s.m, s.hw, s.k, s.s, s.acc, s.count, threads});
}

// Large-spatial 3x3 convs of a U-Net (ISNet at 1024x1024: 512x512 stages of 64 channels, their
// 128-channel decoder inputs, and a 256x256 stage), same argument layout (count 1), to compare
// the NCHW implicit GEMM with the channels-last one where the planes are megabytes apart.
inline void unet_conv_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "M", "in", "k", "s", "acc", "count", "threads"});
  constexpr std::int64_t kShapes[][3] = {{64, 64, 512}, {128, 64, 512}, {64, 64, 256}, {128, 128, 256}};
  for (int threads : {1, 2})
    for (const auto& s : kShapes) b->Args({s[0], s[1], s[2], 3, 1, 0, 1, threads});
}

// Registers a conv benchmark on the ResNet-50 shapes as NAME and on the U-Net shapes as NAME/unet.
inline int register_conv_shapes(const char* name, void (*fn)(benchmark::State&)) {
  benchmark::RegisterBenchmark(name, fn)->Apply(resnet50_conv_args)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark((std::string(name) + "/unet").c_str(), fn)
      ->Apply(unet_conv_args)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return 0;
}

// The conv of a benchmark's args ("same" padding).
inline simd::ConvParams resnet50_conv_params(const benchmark::State& state) {
  const std::int64_t c = state.range(0), m = state.range(1), hw = state.range(2), k = state.range(3),
                     s = state.range(4);
  simd::ConvParams p;
  p.rank = 2, p.batch = 1, p.in_channels = c, p.out_channels = m;
  p.in = {hw, hw, 1}, p.kernel = {k, k, 1}, p.stride = {s, s, 1};
  p.pad_begin = {k / 2, k / 2, 0}, p.pad_end = {k / 2, k / 2, 0};
  return p;
}

}  // namespace onnxforge::perf
