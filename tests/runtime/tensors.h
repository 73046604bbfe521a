#pragma once
// The runtime tests' helpers: run-time tensors here, graphs (tests/common/graph_builder.h) and
// seeded data (tests/common/random.h) through this one include.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/tensor.h"
#include "tests/common/graph_builder.h"
#include "tests/common/random.h"

namespace onnxforge::test {

template <class T>
rt::Tensor make(DType t, std::vector<int64_t> shape, std::vector<T> values) {
  rt::Tensor x = rt::Tensor::alloc(t, shape);
  EXPECT_EQ(static_cast<size_t>(x.numel()), values.size());
  std::memcpy(x.data, values.data(), values.size() * sizeof(T));
  return x;
}

template <class T>
std::vector<T> values(const rt::Tensor& t) {
  return std::vector<T>(t.ptr<T>(), t.ptr<T>() + t.numel());
}

// Same dtype, shape and bytes.
inline bool same_bits(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

}  // namespace onnxforge::test
