// ISA detection, switching, and the ONNXFORGE_ISA override (checked in a child process, since
// the variable is read once per process).
#include <cstdio>
#include <string>

#include <unistd.h>

#include "simd/isa.h"
#include "tests/simd/simd_test_util.h"

namespace onnxforge::simd::test {
namespace {

TEST(Isa, AvailableLevelsAreOrderedAndSwitchable) {
  const std::vector<Isa> isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Sse);
  EXPECT_EQ(isas.back(), cpu_isa());
  const Isa saved = active_isa_level();
  for (Isa isa : isas) {
    ASSERT_TRUE(set_isa(isa));
    EXPECT_EQ(active_isa_level(), isa);
    EXPECT_STREQ(active_isa(), isa_name(isa));
  }
  if (cpu_isa() != Isa::Avx512) { EXPECT_FALSE(set_isa(Isa::Avx512)); }
  set_isa(saved);
  EXPECT_STREQ(isa_name(Isa::Sse), "sse");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
}

// Run by the test below in a child process; prints the level it starts with.
TEST(Isa, ChildReportsActiveIsa) { std::printf("active_isa=%s\n", active_isa()); }

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string child_output(const std::string& env_value) {
  const std::string cmd =
      "ONNXFORGE_ISA=" + env_value + " '" + self_path() + "' --gtest_filter=Isa.ChildReportsActiveIsa 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
    pclose(f);
  }
  return out;
}

TEST(Isa, EnvironmentVariableCapsTheLevel) {
  EXPECT_NE(child_output("sse").find("active_isa=sse"), std::string::npos);
  const std::string best = isa_name(cpu_isa());
  // Asking for more than the CPU has falls back to the best level.
  EXPECT_NE(child_output("avx512").find("active_isa=" + best), std::string::npos);
  if (cpu_isa() >= Isa::Avx2) { EXPECT_NE(child_output("avx2").find("active_isa=avx2"), std::string::npos); }
  const std::string bogus = child_output("avx9000");
  EXPECT_NE(bogus.find("ignoring ONNXFORGE_ISA=avx9000"), std::string::npos);
  EXPECT_NE(bogus.find("active_isa=" + best), std::string::npos);
}

}  // namespace
}  // namespace onnxforge::simd::test
