#include "analysis/inspect.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "analysis/shapes.h"
#include "ir/error.h"
#include "io/mapped_file.h"
#include "io/model_io.h"
#include "io/units.h"
#include "ir/uses.h"

namespace onnxforge {
namespace {

std::string op_key(const Graph& g, NodeId n) {
  std::string_view d = str(g.domain(n));
  if (d.empty() || d == "ai.onnx") return std::string(str(g.op_type(n)));
  return std::string(d) + "::" + std::string(str(g.op_type(n)));
}

// Counts producer→consumer edges where the producer is `a`, the consumer is `b`, and `b` is
// the only reader of the edge (what a fusion needs).
uint64_t count_pairs(const Graph& g, const Uses& uses, std::string_view a, std::string_view b, int input = -1) {
  uint64_t count = 0;
  for (NodeId n : g.nodes()) {
    if (!g.is_op(n, b)) continue;
    auto ins = g.inputs(n);
    for (size_t i = 0; i < ins.size(); ++i) {
      if (input >= 0 && static_cast<int>(i) != input) continue;
      ValueId v = ins[i];
      if (!v.valid() || !g.producer(v).valid()) continue;
      if (g.is_op(g.producer(v), a) && uses.single(v)) {
        ++count;
        break;
      }
    }
  }
  return count;
}

void relevance(const Model& m, ModelSummary& s) {
  const Graph& g = m.main();
  Uses uses(g);
  std::map<std::string, uint64_t> c;
  for (const OpCount& o : s.ops) c[o.op] = o.count;
  auto line = [&](std::string family, std::string text) {
    s.relevance.emplace_back(std::move(family), std::move(text));
  };
  auto n = [](uint64_t v) { return std::to_string(v); };
  line("Transpose", n(c["Transpose"]) + " Transpose, " + n(count_pairs(g, uses, "Transpose", "Transpose")) +
                        " Transpose→Transpose pairs (cancel/merge)");
  line("Constant", n(c["Constant"]) + " Constant nodes (become initializers; foldable inputs)");
  line("Reshape+Shape", n(c["Reshape"]) + " Reshape, " + n(c["Shape"]) + " Shape, " +
                            n(count_pairs(g, uses, "Reshape", "Reshape", 0)) +
                            " Reshape→Reshape chains (shape-chain folding)");
  line("Conv+BatchNormalization", n(c["Conv"]) + " Conv, " + n(c["BatchNormalization"]) + " BatchNormalization, " +
                                      n(count_pairs(g, uses, "Conv", "BatchNormalization", 0)) +
                                      " Conv→BN pairs (foldable)");
  line("Relu+Clip", n(c["Relu"]) + " Relu, " + n(c["Clip"]) + " Clip, " +
                        n(count_pairs(g, uses, "Conv", "Relu") + count_pairs(g, uses, "Conv", "Clip", 0)) +
                        " directly after a Conv (activation fusion)");
  line("MatMul+Add+Gemm", n(c["MatMul"]) + " MatMul, " + n(c["Add"]) + " Add, " + n(c["Gemm"]) + " Gemm, " +
                              n(count_pairs(g, uses, "MatMul", "Add")) + " MatMul→Add pairs (bias fusion)");
}

}  // namespace

namespace {
std::vector<PortSummary> ports(const Graph& g, bool inputs) {
  std::vector<PortSummary> out;
  for (ValueId v : inputs ? g.graph_inputs() : g.graph_outputs()) {
    if (inputs && g.is_initializer(v)) continue;
    PortSummary p;
    p.name = std::string(str(g.value_name(v)));
    p.dtype = g.has_type(v) && g.type_raw(v).empty() ? std::string(dtype_name(g.dtype(v)))
              : g.type_raw(v).empty()                ? "?"
                                                     : "(non-tensor type)";
    p.known_rank = g.has_shape(v);
    for (const Dim& d : g.shape(v))
      p.shape.push_back(d.known() ? std::to_string(d.value) : d.param.empty() ? "?" : std::string(str(d.param)));
    out.push_back(std::move(p));
  }
  return out;
}

nlohmann::json ports_json(const std::vector<PortSummary>& ps) {
  nlohmann::json a = nlohmann::json::array();
  for (const PortSummary& p : ps) {
    nlohmann::json shape = nlohmann::json::array();
    for (const std::string& d : p.shape) {
      if (!d.empty() && std::all_of(d.begin(), d.end(), ::isdigit))
        shape.push_back(std::stoll(d));
      else
        shape.push_back(d == "?" ? nlohmann::json() : nlohmann::json(d));
    }
    a.push_back({{"name", p.name}, {"dtype", p.dtype}, {"shape", p.known_rank ? shape : nlohmann::json()}});
  }
  return a;
}

std::string shape_text(const PortSummary& p) {
  if (!p.known_rank) return "(shape unknown)";
  std::string s = "[";
  for (size_t i = 0; i < p.shape.size(); ++i) s += (i ? ", " : "") + p.shape[i];
  return s + "]";
}
}  // namespace

ModelSummary summarize(const Model& m) {
  ModelSummary s;
  s.ir_version = m.ir_version;
  for (const OpsetImport& o : m.opsets) s.opsets.emplace_back(std::string(str(o.domain)), o.version);
  s.producer = std::string(str(m.producer_name));
  s.producer_version = std::string(str(m.producer_version));
  if (!m.files.empty()) s.file_bytes = m.files[0]->size();
  const Graph& main = m.main();
  s.nodes = main.node_count();
  s.initializers = main.initializers().size();
  s.sparse_initializers = main.sparse_initializers().size();
  s.inputs = main.graph_inputs().size();
  s.outputs = main.graph_outputs().size();
  s.value_infos = main.value_infos().size();
  s.functions = m.functions.size();
  std::map<std::string, uint64_t> ops, external;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (gi > 0 && !g.is_function_body()) ++s.subgraphs;
    s.nodes_total += g.node_count();
    s.initializers_total += g.initializers().size();
    for (NodeId n : g.nodes()) ++ops[op_key(g, n)];
    for (ValueId v : g.initializers()) {
      const auto& e = m.tensors.entry(g.initializer(v));
      s.initializer_bytes += e.size;
      if (e.storage == TensorStorage::External && e.source.file)
        external[std::filesystem::path(e.source.file->path()).filename().string()] += e.size;
    }
  }
  for (auto& [op, count] : ops) s.ops.push_back({op, count});
  std::stable_sort(s.ops.begin(), s.ops.end(), [](auto& a, auto& b) { return a.count > b.count; });
  for (auto& [f, bytes] : external) s.external_files.emplace_back(f, bytes);
  relevance(m, s);
  s.graph_inputs = ports(m.main(), true);
  s.graph_outputs = ports(m.main(), false);
  s.topologically_sorted = nodes_topologically_sorted(m);
  return s;
}

nlohmann::json ModelSummary::to_json() const {
  nlohmann::json j;
  j["ir_version"] = ir_version;
  for (auto& [d, v] : opsets) j["opsets"][d.empty() ? "ai.onnx" : d] = v;
  j["producer"] = producer;
  j["producer_version"] = producer_version;
  j["file_bytes"] = file_bytes;
  j["nodes"] = nodes;
  j["nodes_total"] = nodes_total;
  j["initializers"] = initializers;
  j["initializers_total"] = initializers_total;
  j["sparse_initializers"] = sparse_initializers;
  j["initializer_bytes"] = initializer_bytes;
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["value_infos"] = value_infos;
  j["subgraphs"] = subgraphs;
  j["functions"] = functions;
  j["external_files"] = nlohmann::json::object();
  for (auto& [f, b] : external_files) j["external_files"][f] = b;
  j["ops"] = nlohmann::json::object();
  for (auto& o : ops) j["ops"][o.op] = o.count;
  j["pass_relevance"] = nlohmann::json::object();
  for (auto& [k, v] : relevance) j["pass_relevance"][k] = v;
  j["graph_inputs"] = ports_json(graph_inputs);
  j["graph_outputs"] = ports_json(graph_outputs);
  j["topologically_sorted"] = topologically_sorted;
  if (!warnings.empty()) j["warnings"] = warnings;
  return j;
}

void add_declaration_warnings(Model& model, ModelSummary& s) {
  ShapeReport r;
  try {
    r = infer_shapes(model);
  } catch (const Error&) {
    return;  // nothing to say about declarations of a model inference cannot follow
  }
  const Graph& g = model.main();
  for (const ShapeIssue& c : r.conflicts)
    if (c.graph == g.id() && c.value.valid() && g.is_graph_output(c.value))
      s.warnings.push_back("graph output: " + c.message);
}

std::string format_summary(const ModelSummary& s, bool color) {
  std::ostringstream os;
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  os << bold << "model" << reset << "        ir_version " << s.ir_version << ", opsets";
  for (auto& [d, v] : s.opsets) os << " " << (d.empty() ? "ai.onnx" : d) << ":" << v;
  os << "\nproducer     " << (s.producer.empty() ? "(none)" : s.producer) << " " << s.producer_version << "\n";
  os << "file         " << human_bytes(s.file_bytes) << "\n";
  os << "nodes        " << s.nodes;
  if (s.nodes_total != s.nodes) os << " (" << s.nodes_total << " with subgraphs and functions)";
  os << "\ninitializers " << s.initializers << " (" << human_bytes(s.initializer_bytes) << ")";
  if (s.sparse_initializers) os << ", " << s.sparse_initializers << " sparse";
  os << "\nio           " << s.inputs << " inputs, " << s.outputs << " outputs, " << s.value_infos << " value_info\n";
  os << "subgraphs    " << s.subgraphs << ", functions " << s.functions << "\n";
  // Exporters may write one file per tensor: list the largest few, count the rest.
  auto files = s.external_files;
  std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.second > b.second; });
  uint64_t ext_total = 0;
  for (auto& [f, b] : files) ext_total += b;
  if (!files.empty()) os << "external     " << files.size() << " file(s), " << human_bytes(ext_total) << "\n";
  for (size_t i = 0; i < files.size() && i < 3; ++i)
    os << "             " << files[i].first << " (" << human_bytes(files[i].second) << ")\n";
  if (files.size() > 3) os << "             ... and " << files.size() - 3 << " more\n";
  os << "\n" << bold << "operators" << reset << "\n";
  uint64_t top = s.ops.empty() ? 1 : s.ops.front().count;
  size_t width = 4;
  for (auto& o : s.ops) width = std::max(width, o.op.size());
  for (auto& o : s.ops) {
    int bar = static_cast<int>((o.count * 40 + top - 1) / top);
    os << "  " << o.op << std::string(width - o.op.size() + 2, ' ');
    os.width(6);
    os << o.count << "  " << std::string(static_cast<size_t>(bar), '#') << "\n";
  }
  os << "\n" << bold << "pass relevance" << reset << "\n";
  for (auto& [k, v] : s.relevance) os << "  " << k << std::string(k.size() < 24 ? 24 - k.size() : 1, ' ') << v << "\n";
  size_t w = 4;
  for (const auto* list : {&s.graph_inputs, &s.graph_outputs})
    for (const PortSummary& p : *list) w = std::max(w, p.name.size());
  for (const auto& [title, list] : {std::pair{"inputs", &s.graph_inputs}, std::pair{"outputs", &s.graph_outputs}}) {
    os << "\n" << bold << title << reset << "\n";
    for (const PortSummary& p : *list)
      os << "  " << p.name << std::string(w - p.name.size() + 2, ' ') << p.dtype
         << std::string(p.dtype.size() < 9 ? 9 - p.dtype.size() : 1, ' ') << shape_text(p) << "\n";
  }
  if (!s.topologically_sorted)
    os << "\nnote: the nodes are not topologically sorted (ONNX requires it; `optimize` sorts them)\n";
  for (const std::string& w : s.warnings) os << "warning: " << w << "\n";
  return os.str();
}

}  // namespace onnxforge
