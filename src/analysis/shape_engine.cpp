// The shape-inference engine: graph walking, declared-vs-inferred merging, write-back, report.
#include "analysis/shape_engine.h"

#include "analysis/dim_relations.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "ir/error.h"
#include "ir/topo.h"

namespace onnxforge {
namespace shape {
namespace {

bool is_int_type(DType t) { return t == DType::Int64 || t == DType::Int32; }

uint64_t op_key(Sym domain, Sym op) {
  if (str(domain) == "ai.onnx") domain = Sym{};
  return (uint64_t{domain.v} << 32) | op.v;
}

class Registry {
 public:
  static const Registry& get() {
    static const Registry r;
    return r;
  }
  InferFn find(Sym domain, Sym op) const {
    auto it = fns_.find(op_key(domain, op));
    return it == fns_.end() ? nullptr : it->second;
  }

 private:
  Registry() {
    Registrar reg = [this](std::string_view name, InferFn fn) {
      Sym domain;
      if (auto sep = name.find("::"); sep != std::string_view::npos) {
        domain = intern(name.substr(0, sep));
        name = name.substr(sep + 2);
      }
      fns_[op_key(domain, intern(name))] = fn;
    };
    register_elementwise(reg);
    register_linalg(reg);
    register_conv(reg);
    register_tensor(reg);
    register_reduce(reg);
    register_misc(reg);
    register_control(reg);
    register_transformer(reg);
  }
  std::unordered_map<uint64_t, InferFn> fns_;
};

std::string op_name(const Graph& g, NodeId n) {
  std::string d(str(g.domain(n)));
  if (d.empty() || d == "ai.onnx") return std::string(str(g.op_type(n)));
  return d + "::" + std::string(str(g.op_type(n)));
}

std::string describe(const Graph& g, NodeId n) {
  std::string s = op_name(g, n);
  if (!g.node_name(n).empty()) s += " '" + std::string(str(g.node_name(n))) + "'";
  return s;
}

std::string describe(const std::vector<std::optional<SymDim>>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + (dims[i] ? dims[i]->str() : std::string("?"));
  return s + "]";
}

const VState kUnknown{};

// Element i of a tensor: embedded raw_data is not aligned, so no typed spans (as<T>()).
template <class T>
T element(const TensorStore& ts, TensorId t, uint64_t i) {
  T x;
  std::memcpy(&x, ts.bytes(t).data() + i * sizeof(T), sizeof(T));
  return x;
}

template <class T>
bool holds(const TensorStore& ts, TensorId t, uint64_t count) {
  return ts.byte_size(t) == count * sizeof(T);
}

}  // namespace

// ---------------------------------------------------------------- OpCtx

const VState& OpCtx::in(size_t i) const { return has_input(i) ? eng.state(g, g.input(n, i)) : kUnknown; }

VState& OpCtx::out(size_t i) {
  if (!has_output(i)) return dummy_ = VState{};
  return eng.state(g, g.output(n, i));
}

int64_t OpCtx::opset() const { return eng.model().opset(""); }

const std::vector<SymDim>* OpCtx::value(size_t i) const {
  const VState& s = in(i);
  return s.val ? &*s.val : nullptr;
}

std::optional<std::vector<int64_t>> OpCtx::const_ints(size_t i) const {
  const std::vector<SymDim>* v = value(i);
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const SymDim& d : *v) {
    if (!d.is_constant()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

std::optional<std::vector<double>> OpCtx::const_floats(size_t i) const {
  if (!has_input(i)) return std::nullopt;
  return eng.constant_floats(g, g.input(n, i));
}

std::optional<std::vector<int64_t>> OpCtx::ints_attr_or_input(std::string_view attr, size_t input) const {
  if (const Attr* a = g.attr(n, attr); a && a->type == AttrType::Int) return std::vector<int64_t>{a->i};
  if (g.attr(n, attr)) {
    auto s = g.attr_ints(n, attr);  // throws naming the node when the attribute is not INTS
    return std::vector<int64_t>(s.begin(), s.end());
  }
  if (has_input(input)) return const_ints(input);
  return std::vector<int64_t>{};
}

void OpCtx::set(size_t i, DType t, std::vector<SymDim> dims) {
  VState& o = out(i);
  o.dtype = t;
  o.ranked = true;
  o.dims = std::move(dims);
  o.val.reset();
}

void OpCtx::set_dtype(size_t i, DType t) {
  VState& o = out(i);
  o = VState{};
  o.dtype = t;
}

void OpCtx::set_value(size_t i, std::vector<SymDim> v) {
  VState& o = out(i);
  if (!(is_int_type(o.dtype) || o.dtype == DType::Bool) || v.size() > eng.options().max_value_elements) return;
  if (o.ranked && o.rank() > 1) return;
  o.val = std::move(v);
}

SymDim OpCtx::fresh() { return eng.fresh(); }

void OpCtx::conflict(std::string message) { eng.conflict(g, n, ValueId{}, std::move(message)); }

void OpCtx::relate(const SymDim& a, const SymDim& b, bool broadcast) { eng.relate(g, n, a, b, broadcast); }
bool OpCtx::relating() const { return eng.collecting_relations(); }

std::optional<size_t> OpCtx::axis(int64_t a, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) {
    conflict("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    return std::nullopt;
  }
  return static_cast<size_t>(a < 0 ? a + r : a);
}

std::vector<SymDim> broadcast(OpCtx& c, std::span<const std::vector<SymDim>> shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<SymDim> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    std::optional<SymDim> r;
    bool unsure = false;
    for (const auto& s : shapes) {
      if (s.size() + k < rank) continue;
      const SymDim& d = s[s.size() - rank + k];
      if (d.is_constant(1)) continue;
      if (!r || *r == d) {
        r = d;
      } else if (r->is_constant() && d.is_constant()) {
        c.conflict("cannot broadcast dims " + r->str() + " and " + d.str());
      } else if (d.is_constant()) {
        c.relate(*r, d);
        r = d;  // a symbol broadcast against a constant c != 1 must be 1 or c
        unsure = false;
      } else if (!r->is_constant()) {
        c.relate(*r, d);
        // A dim inference could not name (unk__N) against a named one: the result is the named
        // one (or the unnamed one was 1). A decoder's sliced causal table [.., unk, unk] against
        // its scores [.., sequence, past_sequence+sequence] keeps the scores' dims, so the mask
        // that follows meets them by name.
        const bool rf = c.eng.is_fresh(*r), df = c.eng.is_fresh(d);
        if (rf && !df)
          r = d;
        else if (rf == df)
          unsure = true;  // two different symbols: one of them may be 1
      } else {
        c.relate(*r, d);  // a constant c != 1 against a symbol: the symbol is 1 or c
      }
    }
    if (unsure) {  // the result is one of them: relate it to every side, so chains stay solvable
      SymDim f = c.fresh();
      for (const auto& s : shapes)
        if (s.size() + k >= rank && !s[s.size() - rank + k].is_constant()) c.relate(f, s[s.size() - rank + k]);
      out[k] = f;
    } else {
      out[k] = !r ? SymDim::constant(1) : *r;
    }
  }
  return out;
}

std::optional<std::vector<SymDim>> shape_operand(OpCtx& c, size_t input) {
  if (const auto* v = c.value(input)) return *v;
  const VState& s = c.in(input);
  // A shape operand declared with more elements than any real tensor has axes (a fuzzed
  // [2^62] made this loop mint symbols until libFuzzer's 10 s timeout) gives an unknown rank.
  constexpr int64_t kMaxRank = 1024;
  if (s.ranked && s.rank() == 1 && s.dims[0].is_constant() && s.dims[0].value() <= kMaxRank) {
    std::vector<SymDim> out;
    for (int64_t i = 0; i < s.dims[0].value(); ++i) out.push_back(c.fresh());
    return out;
  }
  return std::nullopt;
}

void same_as(OpCtx& c, size_t from, size_t to, DType t) {
  const VState& s = c.in(from);
  DType dt = t == DType::Undefined ? s.dtype : t;
  if (s.ranked)
    c.set(to, dt, s.dims);
  else
    c.set_dtype(to, dt);
}

DType dtype_of(int64_t t) { return dtype_known(static_cast<int32_t>(t)) ? static_cast<DType>(t) : DType::Undefined; }

// ---------------------------------------------------------------- Engine

Engine::Engine(Model& m, const ShapeOptions& o, ShapeReport& r) : m_(m), opt_(o), rep_(r) {
  for (const auto& [name, value] : o.dims) fixed_[intern(name)] = value;
  states_.resize(m.graph_count());
  declared_.resize(m.graph_count());
  done_.assign(m.graph_count(), 0);
  for (size_t i = 0; i < m.graph_count(); ++i) collect_names(m.graph(GraphId(static_cast<uint32_t>(i))));
  for (const Function& f : m.functions) functions_[std::string(str(f.domain)) + "::" + std::string(str(f.name))] = &f;
}

void Engine::collect_names(const Graph& g) {
  for (uint32_t i = 0; i < g.value_count(); ++i)
    if (g.has_shape(ValueId(i)))
      for (const Dim& d : g.shape(ValueId(i)))
        if (!d.param.empty()) taken_names_.insert(std::string(str(d.param)));
}

SymDim Engine::fresh() {
  std::string name;
  do name = "unk__" + std::to_string(next_fresh_++);
  while (taken_names_.count(name));
  SymDim d = SymDim::symbol(name);
  fresh_set_.insert(d.expr());
  ++rep_.fresh_symbols;
  return d;
}

// Fresh symbols of this run, and unk__N symbols an earlier run wrote into the model.
bool Engine::is_fresh(const SymDim& d) const {
  if (d.is_constant()) return false;
  if (fresh_set_.count(d.expr())) return true;
  auto unnamed = [](Sym s) { return str(s).starts_with("unk__"); };
  if (d.is_symbol()) return unnamed(d.expr());
  for (Sym s : d.symbols())
    if (fresh_set_.count(s) || unnamed(s)) return true;
  return false;
}

void Engine::conflict(const Graph& g, NodeId n, ValueId v, std::string message) {
  std::string where = n.valid() ? describe(g, n) : std::string("graph '") + std::string(str(g.name())) + "'";
  if (v.valid()) where += ", value '" + std::string(str(g.value_name(v))) + "'";
  if (opt_.strict) fail("shape inference: ", where, ": ", message);
  rep_.conflicts.push_back(ShapeIssue{g.id(), n, v, where + ": " + message});
}

void Engine::relate(const Graph& g, NodeId n, const SymDim& a, const SymDim& b, bool broadcast) {
  // Bounded: a model with thousands of broadcasts of the same pair records each pair once per
  // node, and the solver needs only distinct equations.
  constexpr size_t kMaxRelations = 4096;
  if (!relations_ || a == b || relations_->size() >= kMaxRelations) return;
  relations_->push_back(DimRelation{a, b, g.id(), n, broadcast});
}

std::optional<SymDim> Engine::convert(const Dim& d) {
  auto s = SymDim::from_dim(d);
  if (s && !fixed_.empty()) return s->substitute(fixed_);
  return s;
}

Engine::Declared Engine::declared(const Graph& g, ValueId v) {
  Declared d;
  if (!g.has_type(v) || !g.type_raw(v).empty()) return d;
  d.dtype = g.dtype(v);
  d.ranked = g.has_shape(v);
  for (const Dim& dim : g.shape(v)) d.dims.push_back(convert(dim));
  return d;
}

VState Engine::from_tensor(TensorId t, bool track_value) {
  VState s;
  s.dtype = m_.tensors.dtype(t);
  s.ranked = true;
  for (int64_t d : m_.tensors.dims(t)) s.dims.push_back(SymDim::constant(d));
  uint64_t count = m_.tensors.element_count(t);
  if (!track_value || s.rank() > 1 || count > opt_.max_value_elements) return s;
  std::vector<SymDim> val;
  const TensorStore& ts = m_.tensors;
  if (s.dtype == DType::Int64 && holds<int64_t>(ts, t, count)) {
    for (uint64_t i = 0; i < count; ++i) val.push_back(SymDim::constant(element<int64_t>(ts, t, i)));
  } else if (s.dtype == DType::Int32 && holds<int32_t>(ts, t, count)) {
    for (uint64_t i = 0; i < count; ++i) val.push_back(SymDim::constant(element<int32_t>(ts, t, i)));
  } else if (s.dtype == DType::Bool && holds<uint8_t>(ts, t, count)) {
    // A folded Where condition of a shape (torch's expand(-1) after constant folding).
    for (uint64_t i = 0; i < count; ++i) val.push_back(SymDim::constant(element<uint8_t>(ts, t, i) ? 1 : 0));
  } else {
    return s;
  }
  s.val = std::move(val);
  return s;
}

std::optional<std::vector<double>> Engine::constant_floats(const Graph& g0, ValueId v0) {
  const Graph* g = &g0;
  ValueId v = v0;
  while (g->outer(v).valid()) {
    v = g->outer(v);
    g = &m_.graph(g->parent());
  }
  TensorId t;
  if (g->is_constant(v)) {
    t = g->initializer(v);
  } else if (NodeId p = g->producer(v); p.valid() && g->is_op(p, "Constant")) {
    if (const Attr* a = g->attr(p, "value"); a && a->type == AttrType::Tensor)
      t = a->tensor;
    else if (const Attr* f = g->attr(p, "value_float"); f && f->type == AttrType::Float)
      return std::vector<double>{f->f};
    else if (const Attr* fs = g->attr(p, "value_floats"); fs && fs->type == AttrType::Floats) {
      auto s = g->floats(*fs);
      return std::vector<double>(s.begin(), s.end());
    }
  }
  if (!t.valid() || m_.tensors.element_count(t) > 4096) {
    const VState& s = state(g0, v0);
    if (!s.val) return std::nullopt;
    std::vector<double> out;
    for (const SymDim& d : *s.val) {
      if (!d.is_constant()) return std::nullopt;
      out.push_back(static_cast<double>(d.value()));
    }
    return out;
  }
  uint64_t count = m_.tensors.element_count(t);
  std::vector<double> out;
  auto read = [&](auto tag) {
    using T = decltype(tag);
    if (!holds<T>(m_.tensors, t, count)) return false;
    for (uint64_t i = 0; i < count; ++i) out.push_back(static_cast<double>(element<T>(m_.tensors, t, i)));
    return true;
  };
  bool ok = false;
  switch (m_.tensors.dtype(t)) {
    case DType::Float: ok = read(float{}); break;
    case DType::Double: ok = read(double{}); break;
    case DType::Int64: ok = read(int64_t{}); break;
    case DType::Int32: ok = read(int32_t{}); break;
    default: break;
  }
  if (!ok) return std::nullopt;
  return out;
}

void Engine::init_graph(Graph& g, const std::vector<VState>* bound) {
  uint32_t gi = g.id().index();
  if (!done_[gi]) {
    declared_[gi].resize(g.value_count());
    for (uint32_t i = 0; i < g.value_count(); ++i) declared_[gi][i] = declared(g, ValueId(i));
    done_[gi] = 1;
  }
  auto& st = states_[gi];
  st.assign(g.value_count(), VState{});
  for (ValueId c : g.captures())
    if (g.outer(c).valid()) st[c.index()] = state(m_.graph(g.parent()), g.outer(c));
  for (ValueId v : g.initializers()) st[v.index()] = from_tensor(g.initializer(v), g.is_constant(v));
  const auto& ins = g.graph_inputs();
  for (size_t i = 0; i < ins.size(); ++i) {
    ValueId v = ins[i];
    if (bound && i < bound->size() && ((*bound)[i].ranked || (*bound)[i].dtype != DType::Undefined)) {
      st[v.index()] = (*bound)[i];
      const Declared& d = declared_[gi][v.index()];
      if (st[v.index()].dtype == DType::Undefined) st[v.index()].dtype = d.dtype;
      if (!st[v.index()].ranked && d.ranked) {
        st[v.index()].ranked = true;
        for (const auto& dim : d.dims) st[v.index()].dims.push_back(dim ? *dim : fresh());
      }
      continue;
    }
    const Declared& d = declared_[gi][v.index()];
    if (d.dtype == DType::Undefined && !d.ranked) continue;
    VState& s = st[v.index()] = VState{};  // an input shadowing an initializer (IR < 4) is declared
    s.dtype = d.dtype;
    s.ranked = d.ranked;
    for (const auto& dim : d.dims) s.dims.push_back(dim ? *dim : fresh());
  }
}

void Engine::run_graph(Graph& g, const std::vector<VState>* bound) {
  init_graph(g, bound);
  for (NodeId n : topological_order(g)) infer_node(g, n);
  write_back(g);
}

std::vector<VState> Engine::run_subgraph(Graph& body, const std::vector<VState>& inputs) {
  run_graph(body, &inputs);
  std::vector<VState> out;
  for (ValueId v : body.graph_outputs()) out.push_back(state(body, v));
  return out;
}

void Engine::infer_function_call(Graph& g, NodeId n, const Function& f) {
  Graph& body = m_.graph(f.body);
  for (NodeId bn : body.nodes())
    for (const Attr& a : body.attrs(bn))
      if (!a.ref_attr_name.empty()) return;  // attribute references: not specialised here
  // The reader refuses recursive functions; a model built in memory is checked here too, and a
  // chain of calls is bounded like nested subgraphs, so that the C++ stack cannot overflow.
  if (std::find(calls_.begin(), calls_.end(), &f) != calls_.end())
    fail("function ", str(f.domain), "::", str(f.name), " calls itself; recursive functions cannot be inferred");
  if (calls_.size() >= kMaxFunctionDepth)
    fail("function calls nested deeper than ", kMaxFunctionDepth, " at ", str(f.domain), "::", str(f.name));
  std::vector<VState> ins;
  for (ValueId v : g.inputs(n)) ins.push_back(v.valid() ? state(g, v) : VState{});
  calls_.push_back(&f);
  std::vector<VState> outs;
  try {
    outs = run_subgraph(body, ins);
  } catch (...) {
    calls_.pop_back();
    throw;
  }
  calls_.pop_back();
  for (size_t i = 0; i < outs.size() && i < g.outputs(n).size(); ++i)
    if (g.output(n, i).valid()) state(g, g.output(n, i)) = outs[i];
}

void Engine::infer_node(Graph& g, NodeId n) {
  InferFn fn = Registry::get().find(g.domain(n), g.op_type(n));
  auto local = functions_.end();
  if (!functions_.empty())
    local = functions_.find(std::string(str(g.domain(n))) + "::" + std::string(str(g.op_type(n))));
  try {
    if (local != functions_.end()) {
      infer_function_call(g, n, *local->second);
    } else if (fn) {
      OpCtx c(*this, g, n);
      fn(c);
    } else {
      ++rep_.unknown_ops[op_name(g, n)];
    }
  } catch (const Error& e) {
    if (opt_.strict) throw;
    conflict(g, n, ValueId{}, e.what());
  } catch (const std::exception& e) {  // a malformed node (bad attribute sizes...): keep going
    if (opt_.strict) throw;
    conflict(g, n, ValueId{}, std::string("cannot infer: ") + e.what());
  }
  for (ValueId v : g.outputs(n))
    if (v.valid()) merge_declared(g, n, v);
}

// The declared type of a node output refines the inferred one: a declared constant beats an
// inferred symbol; a declared symbol replaces a fresh one. A contradiction keeps the declared
// type and is reported.
void Engine::merge_declared(Graph& g, NodeId n, ValueId v) {
  const Declared& d = declared_[g.id().index()][v.index()];
  VState& s = state(g, v);
  if (d.dtype != DType::Undefined) {
    if (s.dtype != DType::Undefined && s.dtype != d.dtype)
      conflict(g, n, v,
               "declared element type " + std::string(dtype_name(d.dtype)) + " but the op computes " +
                   std::string(dtype_name(s.dtype)));
    s.dtype = d.dtype;
  }
  if (!d.ranked) return;
  if (!s.ranked || s.rank() != d.dims.size()) {
    if (s.ranked) conflict(g, n, v, "declared shape " + describe(d.dims) + " but the op computes " + to_string(s.dims));
    s.ranked = true;
    s.dims.clear();
    s.val.reset();
    for (const auto& dim : d.dims) s.dims.push_back(dim ? *dim : fresh());
    return;
  }
  bool clash = false;
  for (size_t i = 0; i < s.rank(); ++i) {
    if (!d.dims[i]) continue;
    const SymDim& want = *d.dims[i];
    if (want.is_constant() && s.dims[i].is_constant() && want != s.dims[i]) clash = true;
  }
  if (clash) conflict(g, n, v, "declared shape " + describe(d.dims) + " but the op computes " + to_string(s.dims));
  // The model's interface keeps its own dim names (a user binds `--dim sequence=...` by them).
  bool interface = g.id().index() == 0 && g.is_graph_output(v);
  for (size_t i = 0; i < s.rank(); ++i) {
    if (!d.dims[i]) continue;
    const SymDim& want = *d.dims[i];
    // A declared name for what the op computes (present.N.key declared [.., total_sequence, ..]
    // where the Concat computes past_sequence+sequence): the sizes must make them equal.
    if (!clash && want != s.dims[i] && !is_fresh(s.dims[i]) && !(want.is_constant() && s.dims[i].is_constant()))
      relate(g, n, s.dims[i], want, /*broadcast=*/false);
    if (clash || want.is_constant() || is_fresh(s.dims[i]) || (interface && !s.dims[i].is_constant())) s.dims[i] = want;
  }
}

void Engine::write_back(Graph& g) {
  if (read_only_) return;
  bool main_graph = g.id().index() == 0 || g.is_function_body();
  std::vector<uint8_t> is_input(g.value_count(), 0);
  for (ValueId v : g.graph_inputs()) is_input[v.index()] = 1;
  std::vector<Dim> dims;
  for (uint32_t i = 0; i < g.value_count(); ++i) {
    ValueId v(i);
    if (g.is_initializer(v) || g.outer(v).valid() || !g.type_raw(v).empty()) continue;
    if (is_input[i] && main_graph) {
      if (fixed_.empty() || !g.has_shape(v)) continue;
      dims.clear();  // specialised: the declared dims with the fixed symbols replaced
      for (const Dim& d : g.shape(v)) {
        auto s = convert(d);
        dims.push_back(s ? s->to_dim() : d);
      }
      g.set_type(v, g.dtype(v), dims);
      continue;
    }
    const VState& s = state(g, v);
    if (!s.ranked) {
      if (s.dtype != DType::Undefined && !g.has_shape(v)) g.set_dtype(v, s.dtype);
      continue;
    }
    dims.clear();
    for (const SymDim& d : s.dims) dims.push_back(d.to_dim());
    g.set_type(v, s.dtype, dims);
    if (opt_.add_value_info && !is_input[i] && !g.is_graph_output(v) && g.producer(v).valid()) g.add_value_info(v);
  }
}

void Engine::count(Graph& g) {
  for (uint32_t i = 0; i < g.value_count(); ++i) {
    ValueId v(i);
    if (g.is_initializer(v) || g.outer(v).valid() || !g.type_raw(v).empty()) continue;
    if (!g.producer(v).valid() && !g.is_graph_input(v)) continue;
    const VState& s = state(g, v);
    ++rep_.values;
    if (s.dtype != DType::Undefined) ++rep_.typed;
    if (!s.ranked) continue;
    ++rep_.ranked;
    bool fresh = false, all_const = true;
    for (const SymDim& d : s.dims) {
      fresh |= is_fresh(d);
      all_const &= d.is_constant();
    }
    if (!fresh) ++rep_.resolved;
    if (all_const) ++rep_.static_shape;
  }
}

void Engine::run() {
  for (const auto& [name, value] : opt_.dims) {
    bool used = false;
    for (const std::string& t : taken_names_) {
      for (Sym s : SymDim::parse(t).symbols()) used |= str(s) == name;
      if (used) break;
    }
    if (!used) rep_.unmatched_dims.push_back(name);
  }
  run_graph(m_.main(), nullptr);
  rep_.values_by_graph.resize(m_.graph_count());
  for (size_t gi = 0; gi < m_.graph_count(); ++gi) {
    if (!done_[gi]) continue;
    Graph& g = m_.graph(GraphId(static_cast<uint32_t>(gi)));
    count(g);
    auto& st = states_[gi];
    for (uint32_t i = 0; i < st.size(); ++i)
      if (st[i].val) rep_.values_by_graph[gi].emplace(i, *st[i].val);
  }
}

}  // namespace shape

std::vector<DimRelation> dim_relations(const Model& m) {
  ShapeReport report;
  const ShapeOptions options;  // the engine keeps a reference: it must outlive the run
  std::vector<DimRelation> out;
  shape::Engine e(const_cast<Model&>(m), options, report);  // read-only: write_back is skipped
  e.set_read_only();
  e.collect_relations(&out);
  e.run();
  return out;
}

namespace shape {

ShapeReport infer_values(const Model& m, const ShapeOptions& options) {
  ShapeReport report;
  Engine e(const_cast<Model&>(m), options, report);  // read-only: write_back is skipped
  e.set_read_only();
  e.run();
  return report;
}

}  // namespace shape

// ---------------------------------------------------------------- public API

ShapeReport infer_shapes(Model& m, const ShapeOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  ShapeReport report;
  shape::Engine(m, options, report).run();
  report.millis = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

bool has_shape_function(std::string_view domain, std::string_view op_type) {
  return shape::Registry::get().find(intern(domain), intern(op_type)) != nullptr;
}

const std::vector<SymDim>* ShapeReport::value(GraphId g, ValueId v) const {
  if (g.index() >= values_by_graph.size()) return nullptr;
  auto it = values_by_graph[g.index()].find(v.index());
  return it == values_by_graph[g.index()].end() ? nullptr : &it->second;
}

std::optional<std::vector<SymDim>> ShapeReport::shape(const Graph& g, ValueId v) {
  if (!g.has_shape(v)) return std::nullopt;
  std::vector<SymDim> out;
  for (const Dim& d : g.shape(v)) {
    auto s = SymDim::from_dim(d);
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

std::string ShapeReport::summary() const {
  std::ostringstream os;
  os << values << " values: " << typed << " typed, " << ranked << " ranked, " << resolved << " resolved, "
     << static_shape << " static; " << fresh_symbols << " fresh symbols; " << conflicts.size() << " conflicts; "
     << unknown_ops.size() << " unknown ops; " << millis << " ms";
  return os.str();
}

}  // namespace onnxforge
