// fold_constants — nodes whose inputs are all constant are evaluated with the runtime's kernels
// and replaced by initializers; independent nodes (one topological level) are evaluated in
// parallel. Shape/Size of a value with a fully static shape fold without evaluation. Constant
// nodes become initializers (zero-copy for `value`). Size guard: a fold is kept only if each
// output is no larger than max(its largest constant input, --fold-size) — folding never
// inflates the model (OnnxSlim #190, onnxsim #178) — and no larger than --fold-size when a
// constant it was computed from stays read elsewhere (drop_growing_folds). A whole constant chain
// folds in one round: only the values something outside the folded set reads are
// materialised.                                                                        class 1
#include <tbb/parallel_for.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "ir/error.h"
#include "ir/topo.h"
#include "passes/edits.h"
#include "passes/graph_util.h"
#include "passes/registry.h"
#include "simd/transpose.h"

namespace onnxforge::passes {

namespace {

struct Fold {
  NodeId node;
  std::vector<ConstTensor> outputs;
  bool keep = false;  // computed for its consumers but not removed (produces a graph output)
};

struct Plan {
  std::vector<Fold> folds;
  std::vector<NodeId> constants;  // Constant nodes to turn into initializers
};

bool never_fold(const Graph& g, NodeId n) {
  return is_nondeterministic(g, n) || !g.subgraphs(n).empty() || has_fact(g, n, kNoFold);
}

// Saturating: a hostile shape must read as "too big", never wrap to a small count.
uint64_t numel(const std::vector<int64_t>& d) {
  uint64_t n = 1;
  for (int64_t x : d)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(std::max<int64_t>(x, 0)), &n)) return UINT64_MAX;
  return n;
}

uint64_t mul_sat(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

ConstTensor int64_tensor(std::vector<int64_t> values, std::vector<int64_t> dims) {
  auto buf = std::make_shared<std::vector<std::byte>>(to_bytes(values));
  ConstTensor c;
  c.dtype = DType::Int64;
  c.dims = std::move(dims);
  c.data = buf->data();
  c.size = buf->size();
  c.hold = buf;
  return c;
}

// Shape / Size of a statically shaped value.
std::optional<ConstTensor> shape_fold(const Graph& g, NodeId n) {
  auto dims = static_shape(g, g.input(n, 0));
  if (!dims) return std::nullopt;
  if (g.is_op(n, "Size")) return int64_tensor({static_cast<int64_t>(numel(*dims))}, {});
  int64_t r = static_cast<int64_t>(dims->size());
  int64_t start = g.attr_int(n, "start", 0), end = g.attr_int(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  std::vector<int64_t> v(dims->begin() + start, dims->begin() + end);
  int64_t len = static_cast<int64_t>(v.size());
  return int64_tensor(std::move(v), {len});
}

// Outputs that would obviously exceed the budget are not even evaluated.
bool too_big_to_try(const Graph& g, NodeId n, const std::vector<const ConstTensor*>& ins, uint64_t budget) {
  auto ints = [](const ConstTensor* c) {
    std::vector<int64_t> v;
    if (!c || c->dtype != DType::Int64) return v;
    v.resize(c->size / 8);
    std::memcpy(v.data(), c->data, v.size() * 8);
    return v;
  };
  // A hostile model may give these ops fewer inputs than the spec (fuzz_passes: a ConstantOfShape
  // with none); the evaluator refuses those, so they are not "too big".
  if (ins.empty() || !ins[0]) return false;
  uint64_t elems = 0;
  if (g.is_op(n, "ConstantOfShape"))
    elems = numel(ints(ins[0]));
  else if (g.is_op(n, "Expand") && ins.size() > 1 && ins[1]) {
    auto s = ints(ins[1]);
    elems = std::max(numel(s), numel(ins[0]->dims));
    elems = std::max(elems, mul_sat(numel(s), std::max<uint64_t>(1, numel(ins[0]->dims))));  // pessimistic
  } else if (g.is_op(n, "Tile") && ins.size() > 1 && ins[1])
    elems = mul_sat(numel(ins[0]->dims), numel(ints(ins[1])));
  else
    return false;
  return mul_sat(elems, 8) > budget;
}

// Weight transposes (Linear layers exported as MatMul(x, Transpose(W))) are most of what a
// transformer folds (TinyLlama: 4 GB). Large ones are recorded, not computed: the result becomes
// a deferred tensor that the writer computes and streams one at a time (bounded memory), and
// that anything else reading it computes on first use.
constexpr uint64_t kDeferMin = uint64_t{1} << 20;

std::optional<ConstTensor> deferred_transpose(const Graph& g, NodeId n, const ConstTensor& x) {
  if (x.size < kDeferMin) return std::nullopt;
  return transpose_recipe(g, n, x);
}

// No growth: the max(inputs, --fold-size) allowance assumes the folded value replaces its
// constant inputs. When a constant it was computed from stays read by a node that is not folded
// (GPT-2's and Gemma's tied LM head: Transpose(wte) beside the embedding's Gather), the
// materialised value is a second copy, so it counts in full against --fold-size; such folds are
// dropped (the node stays: the runtime packs MatMul's B from the Transpose of an initializer, so
// such a Transpose is never copied, whatever its size).
// Dropping a fold may make its inputs materialised values in turn (a Cast before the Transpose),
// hence the fixpoint. Folds in `plan.folds` are in topological order.
// A Transpose read only as MatMul's B: the runtime packs B from the Transpose of an initializer
// as it packs a stored one, so a folded copy gains nothing at any size.
bool packed_operand(const Graph& g, const Uses& uses, NodeId n, ValueId y) {
  if (!g.is_op(n, "Transpose")) return false;
  for (const Use& u : uses.of(y))
    if (u.slot != 1 || !g.is_op(u.node, "MatMul")) return false;
  return true;
}

void drop_growing_folds(const Graph& g, const Uses& uses, Plan& plan, uint64_t fold_size) {
  if (plan.folds.empty()) return;
  std::vector<uint8_t> folded(g.node_capacity(), 0), removed(g.node_capacity(), 0);
  for (const Fold& f : plan.folds) {
    folded[f.node.index()] = 1;
    removed[f.node.index()] = !f.keep;
  }
  for (NodeId n : plan.constants) removed[n.index()] = 1;
  auto read_outside = [&](ValueId v) {
    if (g.is_graph_output(v)) return true;
    for (const Use& u : uses.of(v))
      if (u.slot == Use::kImplicit || !removed[u.node.index()]) return true;
    return false;
  };
  auto constant_source = [&](ValueId v) {
    NodeId p = g.producer(v);
    return p.valid() ? g.is_op(p, "Constant") : g.is_constant(v);
  };
  std::vector<uint8_t> copies_live(g.value_count(), 0);  // computed from a constant that stays read
  for (bool changed = true; changed;) {
    changed = false;
    for (const Fold& f : plan.folds) {
      bool live = false;
      for (ValueId x : g.inputs(f.node)) {
        if (!x.valid()) continue;
        NodeId p = g.producer(x);
        if (p.valid() && folded[p.index()])
          live = live || copies_live[x.index()];
        else if (constant_source(x))
          live = live || read_outside(x);
      }
      for (ValueId y : g.outputs(f.node))
        if (y.valid()) copies_live[y.index()] = live;
      if (!live || !removed[f.node.index()]) continue;
      for (size_t k = 0; k < g.outputs(f.node).size(); ++k) {
        ValueId y = g.output(f.node, k);
        if (y.valid() && read_outside(y) && (f.outputs[k].size > fold_size || packed_operand(g, uses, f.node, y))) {
          removed[f.node.index()] = 0;
          changed = true;
          break;
        }
      }
    }
  }
  std::erase_if(plan.folds, [&](const Fold& f) { return !f.keep && !removed[f.node.index()]; });
}

Plan analyze_plan(const Graph& g, const Uses& uses, const PassOptions& o) {
  Plan plan;
  const Model& m = g.model();
  std::vector<ConstTensor> known(g.value_count());
  std::vector<uint8_t> has(g.value_count(), 0);
  for (ValueId v : g.initializers())
    if (g.is_constant(v) && m.tensors.dtype(g.initializer(v)) != DType::String) {
      known[v.index()] = view_of(m, g.initializer(v));
      has[v.index()] = 1;
    }
  std::vector<NodeId> order = topological_order(g);
  // Candidates by level: level 0 reads only existing constants.
  std::vector<int> level(g.node_capacity(), -1);
  std::vector<std::vector<NodeId>> levels;
  std::vector<uint8_t> will_have(has);
  for (NodeId n : order) {
    if (g.is_op(n, "Constant")) {
      TensorId t = constant_tensor(g, g.output(n, 0));
      bool graph_out = feeds_graph_output(g, uses, n);
      if (!graph_out) plan.constants.push_back(n);
      if (t.valid() && m.tensors.dtype(t) != DType::String) {
        known[g.output(n, 0).index()] = view_of(m, t);
        has[g.output(n, 0).index()] = will_have[g.output(n, 0).index()] = 1;
      }
      continue;
    }
    if (never_fold(g, n)) continue;
    bool shape_only = (g.is_op(n, "Shape") || g.is_op(n, "Size")) && static_shape(g, g.input(n, 0));
    int lv = 0;
    bool ok = true;
    if (!shape_only) {
      for (ValueId v : g.inputs(n)) {
        if (!v.valid()) continue;
        if (!will_have[v.index()]) {
          ok = false;
          break;
        }
        NodeId p = g.producer(v);
        if (p.valid() && level[p.index()] >= 0) lv = std::max(lv, level[p.index()] + 1);
      }
      if (ok && (!o.evaluator || !o.evaluator->supports(g, n))) ok = false;
    }
    if (!ok) continue;
    level[n.index()] = lv;
    if (levels.size() <= static_cast<size_t>(lv)) levels.resize(lv + 1);
    levels[lv].push_back(n);
    for (ValueId v : g.outputs(n))
      if (v.valid()) will_have[v.index()] = 1;
  }
  std::vector<Fold> results(g.node_capacity());
  std::vector<uint8_t> done(g.node_capacity(), 0);
  for (const auto& nodes : levels) {
    tbb::parallel_for(size_t{0}, nodes.size(), [&](size_t i) {
      NodeId n = nodes[i];
      std::vector<ConstTensor> outs;
      if ((g.is_op(n, "Shape") || g.is_op(n, "Size")) && static_shape(g, g.input(n, 0))) {
        outs.push_back(*shape_fold(g, n));
      } else {
        std::vector<ConstTensor> ins;
        uint64_t largest = 0;
        for (ValueId v : g.inputs(n)) {
          if (!v.valid()) {
            ins.emplace_back();
            continue;
          }
          if (!has[v.index()]) return;  // a producer's fold failed
          ins.push_back(known[v.index()]);
          largest = std::max<uint64_t>(largest, known[v.index()].size);
        }
        uint64_t budget = std::max(largest, o.fold_size);
        try {
          auto t0 = std::chrono::steady_clock::now();
          if (auto t = ins.empty() ? std::nullopt : deferred_transpose(g, n, ins[0])) {
            outs.push_back(std::move(*t));
          } else {
            std::vector<const ConstTensor*> ptrs;
            for (ConstTensor& c : ins) {
              c.resolve(m.tensors);
              ptrs.push_back(c.dtype == DType::Undefined ? nullptr : &c);
            }
            if (too_big_to_try(g, n, ptrs, budget)) return;
            outs = o.evaluator->evaluate(g, n, ins);
          }
          static const bool trace = std::getenv("ONNXFORGE_TRACE_FOLD") != nullptr;
          if (trace)
            std::fprintf(stderr, "fold %s %s %.3f ms\n", std::string(str(g.op_type(n))).c_str(),
                         std::string(str(g.node_name(n))).c_str(),
                         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        } catch (const std::exception&) {
          return;  // unsupported case or bad input: leave the node alone
        }
        for (const ConstTensor& c : outs)
          if (c.size > budget) return;
      }
      if (outs.size() < g.outputs(n).size()) return;
      for (size_t k = 0; k < g.outputs(n).size(); ++k)
        if (g.output(n, k).valid() && outs[k].dtype == DType::Undefined) return;
      results[n.index()] = Fold{n, std::move(outs), feeds_graph_output(g, uses, n)};
      done[n.index()] = 1;
    });
    for (NodeId n : nodes) {
      if (!done[n.index()]) continue;
      for (size_t k = 0; k < g.outputs(n).size(); ++k)
        if (ValueId v = g.output(n, k); v.valid()) {
          known[v.index()] = results[n.index()].outputs[k];
          has[v.index()] = 1;
        }
    }
  }
  for (NodeId n : order)
    if (done[n.index()]) plan.folds.push_back(std::move(results[n.index()]));
  drop_growing_folds(g, uses, plan, o.fold_size);
  return plan;
}

std::vector<Plan> analyze(const Graph& g, const Uses& uses, const PassOptions& o) {
  Plan p = analyze_plan(g, uses, o);
  if (p.folds.empty() && p.constants.empty()) return {};
  std::vector<Plan> out;
  out.push_back(std::move(p));
  return out;
}

// A Constant node's tensor: `value` as stored, or the scalar/list attribute forms.
TensorId constant_node_tensor(Graph& g, NodeId n) {
  if (const Attr* a = g.attr(n, "value"); a && a->type == AttrType::Tensor) return a->tensor;
  TensorStore& ts = g.model().tensors;
  auto bytes = [](const auto* p, size_t n) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(p), n);
  };
  if (const Attr* a = g.attr(n, "value_float"); a && a->type == AttrType::Float)
    return ts.add_owned(Sym{}, DType::Float, {}, bytes(&a->f, 4));
  if (const Attr* a = g.attr(n, "value_int"); a && a->type == AttrType::Int)
    return ts.add_owned(Sym{}, DType::Int64, {}, bytes(&a->i, 8));
  if (const Attr* a = g.attr(n, "value_floats"); a && a->type == AttrType::Floats) {
    auto v = g.floats(*a);
    int64_t len = static_cast<int64_t>(v.size());
    return ts.add_owned(Sym{}, DType::Float, std::span<const int64_t>(&len, 1), bytes(v.data(), v.size() * 4));
  }
  if (const Attr* a = g.attr(n, "value_ints"); a && a->type == AttrType::Ints) {
    auto v = g.ints(*a);
    int64_t len = static_cast<int64_t>(v.size());
    return ts.add_owned(Sym{}, DType::Int64, std::span<const int64_t>(&len, 1), bytes(v.data(), v.size() * 8));
  }
  return {};
}

bool apply(Edits& e, const Plan& p) {
  Graph& g = e.g;
  std::unordered_set<uint32_t> removed;
  for (const Fold& f : p.folds)
    if (!f.keep && !e.touched(f.node)) removed.insert(f.node.index());
  for (NodeId n : p.constants)
    if (!e.touched(n)) removed.insert(n.index());
  auto read_outside = [&](ValueId v) {
    for (const Use& u : e.uses.of(v))
      if (u.slot == Use::kImplicit || !removed.count(u.node.index())) return true;
    return false;
  };
  bool any = false;
  for (NodeId n : p.constants) {
    if (!removed.count(n.index())) continue;
    ValueId y = g.output(n, 0);
    if (read_outside(y)) {
      TensorId t = constant_node_tensor(g, n);
      if (!t.valid()) {
        removed.erase(n.index());
        continue;
      }
      e.replace_uses(y, e.new_initializer(str(g.value_name(y)), t));
    }
    e.kill(n);
    any = true;
  }
  for (const Fold& f : p.folds) {
    if (!removed.count(f.node.index())) continue;
    for (size_t k = 0; k < g.outputs(f.node).size(); ++k) {
      ValueId y = g.output(f.node, k);
      if (!y.valid() || !read_outside(y)) continue;
      const ConstTensor& c = f.outputs[k];
      ValueId v = c.pending ? e.new_deferred_constant(str(g.value_name(y)), c.dtype, c.dims, c.size, *c.pending)
                            : e.new_constant(str(g.value_name(y)), c.dtype, c.dims, c.bytes());
      e.replace_uses(y, v);
    }
    e.kill(f.node);
    any = true;
  }
  return any;
}

}  // namespace

std::optional<ConstTensor> transpose_recipe(const Graph& g, NodeId n, const ConstTensor& x) {
  if (!g.is_op(n, "Transpose") || !x.tensor.valid()) return std::nullopt;
  auto es = dtype_storage_bytes(x.dtype, 1);
  if (!es || (*es != 1 && *es != 2 && *es != 4 && *es != 8) || x.size != numel(x.dims) * *es) return std::nullopt;
  const size_t rank = x.dims.size();
  auto attr = g.attr_ints(n, "perm");
  std::vector<int64_t> perm(attr.begin(), attr.end());
  if (perm.empty())
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  std::vector<uint8_t> seen(rank, 0);
  for (int64_t p : perm)
    if (perm.size() != rank || p < 0 || p >= static_cast<int64_t>(rank) || seen[p]++) return std::nullopt;
  ConstTensor c;
  c.dtype = x.dtype;
  for (int64_t p : perm) c.dims.push_back(x.dims[p]);
  c.size = x.size;
  TensorRecipe r;
  r.key = "Transpose";
  for (int64_t p : perm) r.key += " " + std::to_string(p);
  r.sources = {x.tensor};
  r.compute = [elem = *es, shape = x.dims, perm](std::span<const std::span<const std::byte>> src,
                                                 std::span<std::byte> out) {
    simd::transpose(elem, shape, src[0].data(), perm, out.data());
  };
  c.pending = std::make_shared<const TensorRecipe>(std::move(r));
  return c;
}

ONNXFORGE_PASS(fold_constants, Plan, AccuracyClass::FloatBounded, analyze, apply, {},
               "evaluate constant subgraphs (size-guarded), Shape of static shapes, Constant → initializer");

}  // namespace onnxforge::passes
