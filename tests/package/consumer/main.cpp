// consumer MODEL OUT_DIR: loads, optimizes (with verification), saves, reloads and verifies the
// result against the original through onnxforge's public C++ API; checks the numbers agree and that
// bad input is an onnxforge::Error. Prints one summary line; exits non-zero on any mismatch.
#include <onnxforge/onnxforge.h>

#include <cstdio>
#include <filesystem>
#include <string>

static int failures = 0;
#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "consumer: check failed: %s (line %d)\n", #cond, __LINE__); \
      ++failures;                                                                      \
    }                                                                                  \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer MODEL OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path model_path = argv[1], out_dir = argv[2];
  std::filesystem::create_directories(out_dir);
  try {
    onnxforge::LoadedModel model = onnxforge::load(model_path);
    const int64_t nodes = model.nodes();
    CHECK(nodes > 0);

    onnxforge::OptimizeOptions options;
    options.seeds = 2;
    onnxforge::OptimizeResult r = onnxforge::optimize(model, options);
    CHECK(r.report.verified && r.report.verification_passed);
    CHECK(r.report.nodes_before == nodes);
    CHECK(r.report.nodes_after == r.model.nodes());
    CHECK(r.report.nodes_after < r.report.nodes_before);
    CHECK(!r.report.passes.empty());
    CHECK(r.report.json.find("\"verification\"") != std::string::npos);
    CHECK(model.nodes() == nodes);  // the input is unchanged

    const auto out = out_dir / "optimized.onnx";
    onnxforge::save(r.model, out);
    onnxforge::LoadedModel reloaded = onnxforge::load(out);
    CHECK(reloaded.nodes() == r.report.nodes_after);
    onnxforge::VerifyOptions vo;
    vo.seeds = 3;
    onnxforge::VerifyReport v = onnxforge::verify(model, reloaded, vo);
    CHECK(v.pass);
    CHECK(v.seeds == 3);
    CHECK(!v.outputs.empty());
    CHECK(v.max_diff <= r.report.max_diff * 10 + 1e-4);

    // In memory: bytes in, bytes out, same model.
    onnxforge::LoadedModel from_bytes = onnxforge::load_bytes(onnxforge::to_bytes(reloaded));
    CHECK(from_bytes.nodes() == reloaded.nodes());
    CHECK(from_bytes.initializer_bytes() == reloaded.initializer_bytes());
    onnxforge::OptimizeOptions only;
    only.passes = {"eliminate_dead_nodes"};
    only.threads = 1;
    onnxforge::OptimizeResult again = onnxforge::optimize(from_bytes, only);
    CHECK(again.report.nodes_after == again.report.nodes_before);

    // The opset upgrade (bert_small is exported at opset 14): the fusions it unlocks fuse more.
    onnxforge::OptimizeOptions upgrade;
    upgrade.target_opset = 24;
    upgrade.seeds = 1;
    onnxforge::OptimizeResult up = onnxforge::optimize(model, upgrade);
    CHECK(up.report.verification_passed);
    CHECK(up.report.json.find("\"upgrade\"") != std::string::npos);
    CHECK(up.report.nodes_after <= r.report.nodes_after);

    // Bad input is an onnxforge::Error naming the problem.
    bool threw = false;
    try {
      onnxforge::load_bytes("not a model");
    } catch (const onnxforge::Error& e) {
      threw = std::string(e.what()).find("<bytes>") != std::string::npos || std::string(e.what()).size() > 10;
    }
    CHECK(threw);
    threw = false;
    try {
      onnxforge::OptimizeOptions bad;
      bad.passes = {"no_such_pass"};
      onnxforge::optimize(model, bad);
    } catch (const onnxforge::Error& e) { threw = std::string(e.what()).find("no_such_pass") != std::string::npos; }
    CHECK(threw);

    std::printf("consumer: onnxforge %s: %s: nodes %lld -> %lld, verified max_diff %g (%d seeds), %zu passes\n",
                onnxforge::version(), model_path.filename().c_str(), static_cast<long long>(r.report.nodes_before),
                static_cast<long long>(r.report.nodes_after), v.max_diff, v.seeds, r.report.passes.size());
  } catch (const onnxforge::Error& e) {
    std::fprintf(stderr, "consumer: onnxforge error: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
