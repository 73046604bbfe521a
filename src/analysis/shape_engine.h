#pragma once
// Internal to shape inference: the per-value state, the engine that walks graphs, and the
// context an op's inference function sees. Op families live in shape_ops_*.cpp.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/shapes.h"
#include "ir/graph.h"

namespace onnxforge {
struct DimRelation;  // analysis/dim_relations.h
}

namespace onnxforge::shape {

struct VState {
  DType dtype = DType::Undefined;
  bool ranked = false;
  std::vector<SymDim> dims;
  std::optional<std::vector<SymDim>> val;  // symbolic value of a small rank-0/1 integer tensor

  size_t rank() const { return dims.size(); }
};

class Engine;

// What an op's inference function reads and writes. Absent optional inputs read as an
// unknown state; writes to absent outputs are dropped.
class OpCtx {
 public:
  OpCtx(Engine& e, Graph& g, NodeId n) : eng(e), g(g), n(n) {}

  Engine& eng;
  Graph& g;
  NodeId n;

  size_t num_inputs() const { return g.inputs(n).size(); }
  size_t num_outputs() const { return g.outputs(n).size(); }
  bool has_input(size_t i) const { return g.input(n, i).valid(); }
  bool has_output(size_t i) const { return g.output(n, i).valid(); }
  const VState& in(size_t i) const;
  VState& out(size_t i);
  int64_t opset() const;

  int64_t attr_int(std::string_view name, int64_t fallback) const { return g.attr_int(n, name, fallback); }
  float attr_float(std::string_view name, float fallback) const { return g.attr_float(n, name, fallback); }
  std::string_view attr_string(std::string_view name, std::string_view fallback = {}) const {
    return g.attr_string(n, name, fallback);
  }
  std::span<const int64_t> attr_ints(std::string_view name) const { return g.attr_ints(n, name); }
  bool has_attr(std::string_view name) const { return g.attr(n, name) != nullptr; }

  // Tracked symbolic value of input i; nullptr when not tracked.
  const std::vector<SymDim>* value(size_t i) const;
  // Input i's value when every element is a known constant (tracked ints, or a constant
  // floating tensor read from an initializer/Constant for the float form).
  std::optional<std::vector<int64_t>> const_ints(size_t i) const;
  std::optional<std::vector<double>> const_floats(size_t i) const;
  // Axes from the attribute when present, else from input i (nullopt: not known).
  std::optional<std::vector<int64_t>> ints_attr_or_input(std::string_view attr, size_t input) const;

  void set(size_t i, DType t, std::vector<SymDim> dims);
  void set_dtype(size_t i, DType t);  // rank unknown
  void set_value(size_t i, std::vector<SymDim> v);
  SymDim fresh();
  void conflict(std::string message);
  // Records that the op needs `a` == `b` (or, `broadcast`, either of them 1): DimRelation.
  void relate(const SymDim& a, const SymDim& b, bool broadcast = true);
  // Whether relations are being recorded (dim_relations()): an op computes the sides of a costly
  // relation only then.
  bool relating() const;
  // Normalizes a possibly negative axis against `rank`; records a conflict when out of range.
  std::optional<size_t> axis(int64_t a, size_t rank);

 private:
  VState dummy_;
};

using InferFn = void (*)(OpCtx&);

// Registers the inference function of each op of a family (called once, from the registry).
using Registrar = std::function<void(std::string_view op, InferFn fn)>;
void register_elementwise(const Registrar& reg);
void register_linalg(const Registrar& reg);
void register_conv(const Registrar& reg);
void register_tensor(const Registrar& reg);
void register_reduce(const Registrar& reg);
void register_misc(const Registrar& reg);
void register_control(const Registrar& reg);
void register_transformer(const Registrar& reg);

// The target shape held by a 1-D shape operand (Reshape, Expand, ConstantOfShape...): its
// tracked value, else as many fresh dims as its length when that is a constant.
std::optional<std::vector<SymDim>> shape_operand(OpCtx& c, size_t input);
// Copies input `from` to output `to` (dtype `t`, or the input's when Undefined).
void same_as(OpCtx& c, size_t from, size_t to = 0, DType t = DType::Undefined);
// Broadcast of several shapes (numpy rules); records a conflict on incompatible constants.
std::vector<SymDim> broadcast(OpCtx& c, std::span<const std::vector<SymDim>> shapes);
// Element type of a TensorProto data type number attribute (e.g. Cast's `to`).
DType dtype_of(int64_t t);

class Engine {
 public:
  Engine(Model& m, const ShapeOptions& o, ShapeReport& r);
  void run();

  // Infers a subgraph with its formal inputs bound to `inputs` (captures read the current
  // state of the enclosing graphs); returns the states of its outputs.
  std::vector<VState> run_subgraph(Graph& body, const std::vector<VState>& inputs);

  VState& state(const Graph& g, ValueId v) { return states_[g.id().index()][v.index()]; }
  SymDim fresh();
  // Whether `d` is (or contains) a symbol inference made up (unk__N), not a name from the model.
  bool is_fresh(const SymDim& d) const;
  void conflict(const Graph& g, NodeId n, ValueId v, std::string message);
  void relate(const Graph& g, NodeId n, const SymDim& a, const SymDim& b, bool broadcast);
  // Where relate() records (dim_relations(); nothing when null).
  void collect_relations(std::vector<DimRelation>* out) { relations_ = out; }
  bool collecting_relations() const { return relations_ != nullptr; }
  std::optional<std::vector<double>> constant_floats(const Graph& g, ValueId v);
  // Type, shape and (small integer tensors) value of a stored tensor.
  VState from_tensor(TensorId t, bool track_value);
  const ShapeOptions& options() const { return opt_; }
  Model& model() { return m_; }
  // Infer without writing types back into the graph tables (see infer_values).
  void set_read_only() { read_only_ = true; }

 private:
  struct Declared {
    DType dtype = DType::Undefined;
    bool ranked = false;
    std::vector<std::optional<SymDim>> dims;
  };

  void run_graph(Graph& g, const std::vector<VState>* bound_inputs);
  void init_graph(Graph& g, const std::vector<VState>* bound_inputs);
  void infer_node(Graph& g, NodeId n);
  void infer_function_call(Graph& g, NodeId n, const Function& f);
  static constexpr size_t kMaxFunctionDepth = 64;
  std::vector<const Function*> calls_;  // the function calls being inferred, outermost first
  void merge_declared(Graph& g, NodeId n, ValueId v);
  void write_back(Graph& g);
  void count(Graph& g);
  Declared declared(const Graph& g, ValueId v);
  std::optional<SymDim> convert(const Dim& d);
  void collect_names(const Graph& g);

  Model& m_;
  const ShapeOptions& opt_;
  ShapeReport& rep_;
  std::unordered_map<Sym, int64_t> fixed_;
  std::vector<std::vector<VState>> states_;
  std::vector<std::vector<Declared>> declared_;
  std::unordered_set<std::string> taken_names_;
  std::unordered_set<Sym> fresh_set_;
  std::unordered_map<std::string, const Function*> functions_;
  std::vector<uint8_t> done_;  // graphs inferred at least once
  int64_t next_fresh_ = 0;
  bool read_only_ = false;
  std::vector<DimRelation>* relations_ = nullptr;
};

// infer_shapes() that only fills the report and writes nothing into the model, so it may run while
// other threads read the model (a pass's analysis). Run on a model infer_shapes() just updated, its
// values use the dim names written there.
ShapeReport infer_values(const Model& m, const ShapeOptions& options = {});

}  // namespace onnxforge::shape
