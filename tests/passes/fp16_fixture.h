#pragma once
// Test support for float16 models: zoo models converted by tools/models/to_fp16.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/common/models.h"

namespace onnxforge::test {

// A zoo model converted to float16 (tools/models/to_fp16.py: weights and activations in float16,
// float32 inputs and outputs); `python` then runs on the converted `m` (onnx, np, nh imported)
// and the result is saved as NAME_fp16.onnx.
// With `bfloat16`, the same conversion to bfloat16 (NAME_bf16.onnx).
inline std::filesystem::path fp16_zoo_model(const std::string& name, const std::string& python = "",
                                            bool bfloat16 = false) {
  const std::string tag = bfloat16 ? "bf16" : "fp16";
  const auto dir = temp_dir(tag + "_" + name);
  const auto out = dir / (name + "_" + tag + ".onnx");
  std::string cmd = "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tools/models/to_fp16.py " + zoo_model(name).string() +
                    " " + out.string() + (bfloat16 ? " --bfloat16" : "") + " 2> /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  if (!python.empty()) {
    cmd =
        "/usr/bin/python3 -c 'import onnx, numpy as np; from onnx import numpy_helper as nh\n"
        "m = onnx.load(\"" +
        out.string() + "\")\n" + python + "\nonnx.save(m, \"" + out.string() + "\")'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  return out;
}

}  // namespace onnxforge::test
