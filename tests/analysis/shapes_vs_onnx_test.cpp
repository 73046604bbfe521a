// Shape inference checked against onnx.shape_inference (onnx 1.12, data_prop on) on every zoo
// model and on Debian's ONNX backend node tests. For every node output both infer: equal
// element type, equal rank, equal constant dims. Where onnx has a symbol or nothing and we have
// a constant or a named expression, we are "more specific"; the counts are printed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/shapes.h"
#include "io/model_io.h"
#include "tests/analysis/shape_builder.h"
#include "tests/common/models.h"

namespace fs = std::filesystem;
using namespace onnxforge;
using json = nlohmann::json;

namespace {

bool fresh_name(std::string_view s) { return s.rfind("unk__", 0) == 0; }

// onnx's types for a list of models, from one python run.
json reference(const std::vector<fs::path>& models, bool strip_outputs, const std::string& tag,
               const std::string& fix = "") {
  fs::path out = test::temp_dir(tag) / "ref.json";
  fs::path list = out.parent_path() / "models.txt";
  std::string cmd = "/usr/bin/python3 " ONNXFORGE_SOURCE_DIR "/tests/analysis/onnx_shapes.py ";
  if (strip_outputs) cmd += "--strip-outputs ";
  if (!fix.empty()) cmd += "'--fix=" + fix + "' ";
  cmd += out.string();
  for (const auto& m : models) cmd += " '" + m.string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "reference run failed: " << cmd.substr(0, 200);
    return json::object();
  }
  std::ifstream f(out);
  return json::parse(f);
}

struct Counts {
  size_t both = 0, dtype_diff = 0, rank_diff = 0, dim_diff = 0, more_specific = 0, less_specific = 0;
  size_t ours_only = 0, onnx_only = 0, ours_resolved = 0, onnx_resolved = 0, outputs = 0;
  std::vector<std::string> examples;

  void add(const Counts& o) {
    both += o.both, dtype_diff += o.dtype_diff, rank_diff += o.rank_diff, dim_diff += o.dim_diff;
    more_specific += o.more_specific, less_specific += o.less_specific, ours_only += o.ours_only;
    onnx_only += o.onnx_only, ours_resolved += o.ours_resolved, onnx_resolved += o.onnx_resolved;
    outputs += o.outputs;
  }
  std::string str() const {
    std::ostringstream os;
    os << outputs << " outputs, both typed " << both << ", dtype diff " << dtype_diff << ", rank diff " << rank_diff
       << ", dim diff " << dim_diff << ", more specific " << more_specific << ", less specific " << less_specific
       << ", only ours " << ours_only << ", only onnx " << onnx_only << ", resolved ours/onnx " << ours_resolved << "/"
       << onnx_resolved;
    return os.str();
  }
};

bool onnx_resolved(const json& dims) {
  if (dims.is_null()) return false;
  for (const auto& d : dims)
    if (d.is_null() || (d.is_string() && fresh_name(d.get<std::string>()))) return false;
  return true;
}

void note(Counts& c, const std::string& what) {
  if (c.examples.size() < 8) c.examples.push_back(what);
}

std::string describe(const Graph& g, ValueId v) {
  std::string s = std::string(dtype_name(g.dtype(v))) + "[";
  for (size_t i = 0; i < g.shape(v).size(); ++i) {
    const Dim& d = g.shape(v)[i];
    s += (i ? "," : "") + (d.known() ? std::to_string(d.value) : d.param.empty() ? "?" : std::string(str(d.param)));
  }
  return s + "]";
}

void compare_value(Counts& c, const Graph& g, ValueId v, const json* ref) {
  std::string name(str(g.value_name(v)));
  bool ours = g.has_type(v) && g.dtype(v) != DType::Undefined;
  ++c.outputs;
  bool ours_res = ours && g.has_shape(v);
  for (const Dim& d : g.shape(v))
    if (!d.known() && (d.param.empty() || fresh_name(str(d.param)))) ours_res = false;
  c.ours_resolved += ours_res;
  if (!ref) {
    c.ours_only += ours;
    return;
  }
  const json& dims = (*ref)[1];
  c.onnx_resolved += onnx_resolved(dims);
  if (!ours) {
    ++c.onnx_only;
    note(c, "only onnx " + name + ": " + ref->dump());
    return;
  }
  ++c.both;
  if (static_cast<int>(g.dtype(v)) != (*ref)[0].get<int>()) {
    ++c.dtype_diff;
    note(c, name + ": dtype " + describe(g, v) + " vs onnx " + ref->dump());
  }
  if (dims.is_null() || !g.has_shape(v)) {
    c.more_specific += dims.is_null() && g.has_shape(v);
    c.less_specific += !dims.is_null() && !g.has_shape(v);
    if (!dims.is_null() && !g.has_shape(v)) note(c, "less specific (no rank) " + name + ": " + ref->dump());
    return;
  }
  if (dims.size() != g.shape(v).size()) {
    ++c.rank_diff;
    note(c, name + ": " + describe(g, v) + " vs onnx " + ref->dump());
    return;
  }
  bool more = false, less = false, diff = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = g.shape(v)[i];
    const json& r = dims[i];
    bool ours_named = d.known() || (!d.param.empty() && !fresh_name(str(d.param)));
    if (r.is_number()) {
      if (d.known() && d.value != r.get<int64_t>()) diff = true;
      if (!d.known()) less = true;
    } else if (ours_named && (r.is_null() || fresh_name(r.get<std::string>()) || d.known())) {
      more = true;
    }
  }
  if (diff) {
    ++c.dim_diff;
    note(c, name + ": " + describe(g, v) + " vs onnx " + ref->dump());
  }
  c.more_specific += more && !diff;
  c.less_specific += less && !diff;
  if (less && !diff) note(c, "less specific " + name + ": " + describe(g, v) + " vs onnx " + ref->dump());
}

// Every node output of every graph reachable from the main graph.
Counts compare_model(const Model& m, const json& values) {
  Counts c;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached() || g.is_function_body()) continue;
    for (NodeId n : g.nodes())
      for (ValueId v : g.outputs(n)) {
        if (!v.valid() || !g.type_raw(v).empty()) continue;
        auto it = values.find(std::string(str(g.value_name(v))));
        compare_value(c, g, v, it == values.end() ? nullptr : &*it);
      }
  }
  return c;
}

struct Declared {
  DType dtype;
  std::vector<Dim> dims;
};

std::string describe(const Declared& d) {
  std::string s = std::string(dtype_name(d.dtype)) + "[";
  for (size_t i = 0; i < d.dims.size(); ++i)
    s += (i ? "," : "") + (d.dims[i].known() ? std::to_string(d.dims[i].value) : std::string(str(d.dims[i].param)));
  return s + "]";
}

// Different type, rank, or a different constant dim (a symbol is only less specific).
bool contradicts(const Graph& g, ValueId v, const Declared& want) {
  if (g.dtype(v) != want.dtype || g.shape(v).size() != want.dims.size()) return true;
  for (size_t i = 0; i < want.dims.size(); ++i)
    if (want.dims[i].known() && g.shape(v)[i].known() && want.dims[i].value != g.shape(v)[i].value) return true;
  return false;
}

bool is_transformer(const std::string& stem) {
  for (const char* t : {"bert", "gpt", "llama", "whisper", "vit"})
    if (stem.find(t) != std::string::npos) return true;
  return false;
}

}  // namespace

static void compare_zoo(const std::vector<fs::path>& models, const std::string& tag) {
  json ref = reference(models, false, tag);
  Counts total;
  for (const auto& path : models) {
    SCOPED_TRACE(path.filename().string());
    const json& r = ref[path.string()];
    ASSERT_TRUE(r.contains("values")) << "onnx failed: " << r.dump();
    auto model = load_model(path);
    ShapeReport rep = infer_shapes(*model);
    Counts c = compare_model(*model, r["values"]);
    total.add(c);
    std::cout << "[zoo] " << path.stem().string() << ": " << c.str() << "; " << rep.summary() << "\n";
    for (const auto& e : c.examples) std::cout << "    " << e << "\n";
    EXPECT_EQ(c.dtype_diff, 0u);
    EXPECT_EQ(c.rank_diff, 0u);
    EXPECT_EQ(c.dim_diff, 0u);
    EXPECT_EQ(c.onnx_only, 0u);
    EXPECT_TRUE(rep.conflicts.empty()) << rep.conflicts.front().message;
    EXPECT_TRUE(rep.unknown_ops.empty());
    if (is_transformer(path.stem().string())) { EXPECT_GE(c.ours_resolved, c.onnx_resolved); }
  }
  std::cout << "[zoo] total: " << total.str() << "\n";
}

TEST(ShapesVsOnnx, ZooModels) { compare_zoo(test::zoo_models(), "zoo_ref"); }

// Our symbolic expressions, evaluated: specialise every named input dim (batch 2, others 7) on
// both sides; onnx then infers static shapes that every expression must reproduce.
TEST(ShapesVsOnnx, ZooModelsSpecialised) {
  Counts total;
  for (const auto& path : test::zoo_models()) {
    SCOPED_TRACE(path.filename().string());
    test::SpecialisedModel s = test::load_specialised(path);
    std::string fix;
    for (const std::string& d : s.dims) fix += (fix.empty() ? "" : ",") + d;
    json ref = reference({path}, false, "zoo_fix", fix);
    const json& r = ref[path.string()];
    ASSERT_TRUE(r.contains("values")) << "onnx failed: " << r.dump();
    ShapeReport rep = infer_shapes(*s.model, s.options);
    Counts c = compare_model(*s.model, r["values"]);
    total.add(c);
    std::cout << "[zoo " << fix << "] " << path.stem().string() << ": " << c.str() << "\n";
    for (const auto& e : c.examples) std::cout << "    " << e << "\n";
    EXPECT_EQ(c.dtype_diff + c.rank_diff + c.dim_diff, 0u);
    EXPECT_TRUE(rep.conflicts.empty()) << rep.conflicts.front().message;
  }
  std::cout << "[zoo specialised] total: " << total.str() << "\n";
}

// Full-size exports that share the zoo folder (bert_base, tinyllama_2l...), when present.
TEST(ShapesVsOnnx, FullSizeZooModels) {
  auto small = test::zoo_models();
  std::vector<fs::path> models;
  for (const auto& e : fs::directory_iterator(test::model_dir()))
    if (e.path().extension() == ".onnx" && std::find(small.begin(), small.end(), e.path()) == small.end())
      models.push_back(e.path());
  if (models.empty()) GTEST_SKIP() << "no full-size models in " << test::model_dir();
  std::sort(models.begin(), models.end());
  compare_zoo(models, "zoo_full_ref");
}

// Backend tests (node, pytorch-converted, pytorch-operator, simple) declare the exact shapes of their outputs: both
// inferences run with those cleared, then each is compared with onnx's and with the declaration (the ground truth).
TEST(ShapesVsOnnx, BackendNodeTests) {
  std::vector<fs::path> models;
  for (const char* set : {"node", "pytorch-converted", "pytorch-operator", "simple", "real"}) {
    if (!fs::exists(test::backend_data_dir() / set)) continue;
    for (const auto& e : fs::directory_iterator(test::backend_data_dir() / set))
      if (fs::exists(e.path() / "model.onnx")) models.push_back(e.path() / "model.onnx");
  }
  std::sort(models.begin(), models.end());
  ASSERT_GT(models.size(), 100u);
  json ref = reference(models, true, "node_ref");
  Counts total;
  size_t compared = 0, truth_checked = 0, truth_wrong = 0, load_failed = 0;
  std::vector<std::string> wrong;
  for (const auto& path : models) {
    const json& r = ref[path.string()];
    if (!r.contains("values")) continue;  // onnx 1.12 cannot infer it either
    std::unique_ptr<Model> model;
    try {
      model = load_model(path);
    } catch (const std::exception&) {
      ++load_failed;
      continue;
    }
    Graph& g = model->main();
    std::map<ValueId, Declared> truth;
    for (ValueId v : g.graph_outputs()) {
      if (!g.has_shape(v)) continue;
      truth[v] = Declared{g.dtype(v), {g.shape(v).begin(), g.shape(v).end()}};
      g.clear_shape(v);
    }
    ShapeReport rep = infer_shapes(*model);
    Counts c = compare_model(*model, r["values"]);
    total.add(c);
    ++compared;
    std::string test = path.parent_path().filename().string();
    for (const auto& e : c.examples)
      if (c.dtype_diff + c.rank_diff + c.dim_diff || std::getenv("SHAPE_VERBOSE")) wrong.push_back(test + ": " + e);
    for (auto& [v, want] : truth) {
      if (!g.has_shape(v)) continue;
      ++truth_checked;
      if (contradicts(g, v, want)) {
        ++truth_wrong;
        wrong.push_back(test + ": output " + std::string(str(g.value_name(v))) + " " + describe(g, v) + ", declared " +
                        describe(want));
      }
    }
  }
  std::cout << "[node] " << compared << " models compared (" << load_failed << " not loadable): " << total.str()
            << "\n";
  std::cout << "[node] declared outputs checked " << truth_checked << ", contradicted " << truth_wrong << "\n";
  for (const auto& w : wrong) std::cout << "    " << w << "\n";
  EXPECT_EQ(truth_wrong, 0u);
  EXPECT_EQ(total.dtype_diff + total.rank_diff + total.dim_diff, 0u);
}
