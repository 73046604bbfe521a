#pragma once
// Shared helpers for the hierarchy tests: small in-memory graphs and exporter runs.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "ir/graph.h"
#include "tests/common/models.h"

namespace onnxforge::test {

// Exports a zoo model with the hierarchy exporter (tools/export, HTP strategy, dynamic axes)
// once per process; returns the .onnx path (empty on failure).
inline std::filesystem::path htp_export(const std::string& zoo_name) {
  static std::map<std::string, std::filesystem::path> cache;
  auto it = cache.find(zoo_name);
  if (it != cache.end()) return it->second;
  static std::filesystem::path dir = temp_dir("htp");
  std::filesystem::path out = dir / (zoo_name + ".onnx");
  std::string cmd = "cd '" ONNXFORGE_SOURCE_DIR "' && /usr/bin/python3 -m tools.export --model " + zoo_name +
                    " --dynamic -q --out '" + out.string() + "' > '" + out.string() + ".log' 2>&1";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(out)) out.clear();
  cache[zoo_name] = out;
  return out;
}

// value name -> id, created on demand
struct GraphBuilderHelper {
  Model& m;
  Graph& g;
  std::map<std::string, ValueId> values;
  explicit GraphBuilderHelper(Model& model) : m(model), g(model.main()) {}
  ValueId v(const std::string& name) {
    auto it = values.find(name);
    if (it != values.end()) return it->second;
    ValueId id = g.add_value(intern(name));
    g.set_type(id, DType::Float, std::vector<Dim>{Dim::of(2)});
    return values[name] = id;
  }
  NodeId node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
              const std::string& name = {}, std::vector<std::pair<std::string, std::string>> meta = {}) {
    std::vector<ValueId> i, o;
    for (auto& s : ins) i.push_back(v(s));
    for (auto& s : outs) o.push_back(v(s));
    NodeId n = g.add_node(intern(op), Sym{}, intern(name), i, o);
    std::vector<MetadataEntry> md;
    for (auto& [k, val] : meta) md.push_back({intern(k), intern(val)});
    if (!md.empty()) g.set_metadata(n, md);
    return n;
  }
};

}  // namespace onnxforge::test
