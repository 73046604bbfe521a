#pragma once
// Run-time tensors for the runtime tests (graphs come from tests/common/graph_builder.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/tensor.h"

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

}  // namespace onnxforge::test
