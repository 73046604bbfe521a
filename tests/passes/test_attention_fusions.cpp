// fuse_attention, fuse_rotary_embedding, fuse_qkv_projections: the zoo exporters' real
// spellings, must-change / must-not-touch toy graphs, numeric checks through the runtime.
#include <gtest/gtest.h>

#include "attention_fixture.h"
#include "numeric.h"

namespace onnxforge::test {
namespace {

const char* const kZoo[] = {"bert_small", "distilbert_small", "gpt2_small_cfg", "vit_small", "whisper_small_enc", "llama_small"};

TEST(AttentionZoo, CensusPrint) {
  for (const char* name : kZoo) {
    auto m = zoo_at_23(name);
    auto rows = census_after_cleanups(*m, {"fuse_attention", "fuse_rotary_embedding"});
    std::cout << name << "\n" << census_text(rows);
  }
}

}  // namespace
}  // namespace onnxforge::test
