// Ground truth: every intermediate shape of each zoo model as ONNX Runtime computes it (inputs
// with batch 2, other named dims 7), against our inference specialised to the same dims. This
// checks the values where we are more specific than onnx.shape_inference.
#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "tests/analysis/shape_builder.h"
#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using json = nlohmann::json;

namespace {

std::string run_capture(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  char buf[65536];
  while (p && fgets(buf, sizeof buf, p.get())) out += buf;
  return out;
}

}  // namespace

TEST(ShapesVsRuntime, ZooModelsMatchOrtShapes) {
  if (std::system("node --version >/dev/null 2>&1") != 0 || !onnxforge::test::ort_peer_installed())
    GTEST_SKIP() << "ONNX Runtime peer (tools/peers) not installed";
  size_t total = 0, exact = 0, symbolic = 0, wrong = 0;
  for (const auto& path : test::zoo_models()) {
    SCOPED_TRACE(path.filename().string());
    test::SpecialisedModel s = test::load_specialised(path);
    std::unique_ptr<Model>& model = s.model;
    std::string dims;
    for (const std::string& d : s.dims) dims += " --dim " + d;
    auto dir = test::temp_dir("ort_shapes");
    json ref = json::parse(run_capture("/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tests/analysis/ort_shapes.py '" +
                                       path.string() + "' " + dir.string() + dims));
    ASSERT_TRUE(ref.contains("shapes")) << ref.dump();
    // The symbolic result, evaluated at the same dims, must agree too (checks the expressions).
    auto sym_model = load_model(path);
    infer_shapes(*sym_model);
    std::unordered_map<Sym, int64_t> at;
    for (auto& [k, v] : s.options.dims) at[intern(k)] = v;
    infer_shapes(*model, s.options);
    const Graph& g = model->main();
    const Graph& gs = sym_model->main();
    size_t m_exact = 0, m_sym = 0, m_wrong = 0;
    for (NodeId n : g.nodes())
      for (ValueId v : g.outputs(n)) {
        auto it = ref["shapes"].find(std::string(str(g.value_name(v))));
        if (it == ref["shapes"].end()) continue;
        ++total;
        bool ranked = g.has_shape(v) && g.shape(v).size() == it->size(), diff = !ranked, sym = false;
        for (size_t i = 0; ranked && i < it->size(); ++i) {
          const Dim& d = g.shape(v)[i];
          if (!d.known())
            sym = true;
          else if (d.value != (*it)[i].get<int64_t>())
            diff = true;
        }
        for (size_t i = 0; !diff && ranked && i < it->size(); ++i) {
          auto e =
              gs.has_shape(v) && gs.shape(v).size() == it->size() ? SymDim::from_dim(gs.shape(v)[i]) : std::nullopt;
          SymDim got = e ? e->substitute(at) : SymDim::symbol("?");
          if (got.is_constant() && got.value() != (*it)[i].get<int64_t>()) {
            diff = true;
            ADD_FAILURE() << str(g.value_name(v)) << " dim " << i << ": expression " << e->str() << " = " << got.str()
                          << ", runtime " << (*it)[i];
          }
        }
        if (diff) {
          ++m_wrong;
          ADD_FAILURE() << str(g.value_name(v)) << ": runtime " << it->dump() << ", inferred rank "
                        << (g.has_shape(v) ? static_cast<int>(g.shape(v).size()) : -1);
        } else if (sym) {
          ++m_sym;
        } else {
          ++m_exact;
        }
      }
    std::cout << "[ort" << dims << "] " << path.stem().string() << ": " << m_exact << " exact, " << m_sym
              << " still symbolic, " << m_wrong << " wrong\n";
    exact += m_exact, symbolic += m_sym, wrong += m_wrong;
  }
  std::cout << "[ort] total " << total << " values: " << exact << " exact, " << symbolic << " still symbolic, " << wrong
            << " wrong\n";
  EXPECT_EQ(wrong, 0u);
}
