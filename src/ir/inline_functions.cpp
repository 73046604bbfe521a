#include "ir/inline_functions.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "ir/error.h"
#include "ir/topo.h"

namespace onnxforge {

namespace {

// ------------------------------------------------------------------ verbatim FunctionProto fields
// opset_import (9) and attribute_proto (11) are kept as field bytes by the reader and written back
// unchanged; the little protobuf reading they need is here.

struct Field {
  uint32_t number = 0, wire = 0;
  uint64_t value = 0;     // varint / fixed
  std::string_view data;  // length-delimited
};

bool read_varint(std::string_view s, size_t& pos, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && pos < s.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(s[pos++]);
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// The fields of one message, in order; nullopt when the bytes are not a well-formed message.
std::optional<std::vector<Field>> fields_of(std::string_view s) {
  std::vector<Field> out;
  for (size_t pos = 0; pos < s.size();) {
    uint64_t tag = 0;
    if (!read_varint(s, pos, tag)) return std::nullopt;
    Field f;
    f.number = static_cast<uint32_t>(tag >> 3);
    f.wire = static_cast<uint32_t>(tag & 7);
    switch (f.wire) {
      case 0:
        if (!read_varint(s, pos, f.value)) return std::nullopt;
        break;
      case 1:
      case 5: {
        const size_t n = f.wire == 1 ? 8 : 4;
        if (pos + n > s.size()) return std::nullopt;
        std::memcpy(&f.value, s.data() + pos, n);
        pos += n;
        break;
      }
      case 2: {
        uint64_t len = 0;
        if (!read_varint(s, pos, len) || len > s.size() - pos) return std::nullopt;
        f.data = s.substr(pos, len);
        pos += len;
        break;
      }
      default: return std::nullopt;
    }
    out.push_back(f);
  }
  return out;
}

// One verbatim field of a FunctionProto: (number, payload) when it is length-delimited.
std::optional<std::pair<uint32_t, std::string_view>> verbatim_field(std::string_view s) {
  auto f = fields_of(s);
  if (!f || f->size() != 1 || (*f)[0].wire != 2) return std::nullopt;
  return std::pair{(*f)[0].number, (*f)[0].data};
}

std::string key_of(std::string_view domain, std::string_view name) {
  if (domain == "ai.onnx") domain = "";
  return std::string(domain) + "::" + std::string(name);
}

std::string fn_name(const Function& f) { return key_of(str(f.domain), str(f.name)); }

std::string node_label(const Graph& g, NodeId n) {
  return "node '" + std::string(str(g.node_name(n))) + "' (" + key_of(str(g.domain(n)), str(g.op_type(n))) + ")";
}

// The function's default for attribute `name` (attribute_proto), decoded into a NewAttr of the
// body node's attribute name. Tensor, graph and sparse defaults need the reader's tensor and
// graph machinery and are refused.
std::optional<NewAttr> attribute_default(const Function& f, std::string_view name, std::string_view as) {
  for (std::string_view field : f.fields) {
    auto vf = verbatim_field(field);
    if (!vf || vf->first != 11) continue;
    auto parts = fields_of(vf->second);
    if (!parts) fail("function ", fn_name(f), ": an attribute_proto default is malformed");
    std::string_view attr_name;
    for (const Field& p : *parts)
      if (p.number == 1 && p.wire == 2) attr_name = p.data;
    if (attr_name != name) continue;
    NewAttr a;
    a.name = std::string(as);
    int64_t type = 0;
    for (const Field& p : *parts) {
      float fv = 0;
      switch (p.number) {
        case 20: type = static_cast<int64_t>(p.value); break;
        case 2:
          std::memcpy(&fv, &p.value, 4);
          a.f = fv;
          break;
        case 3: a.i = static_cast<int64_t>(p.value); break;
        case 4: a.s = std::string(p.data); break;
        case 7:  // floats: packed or one per field
          if (p.wire == 5) {
            std::memcpy(&fv, &p.value, 4);
            a.floats.push_back(fv);
          } else {
            for (size_t k = 0; k + 4 <= p.data.size(); k += 4) {
              std::memcpy(&fv, p.data.data() + k, 4);
              a.floats.push_back(fv);
            }
          }
          break;
        case 8:  // ints: packed or one per field
          if (p.wire == 0) {
            a.ints.push_back(static_cast<int64_t>(p.value));
          } else {
            for (size_t pos = 0; pos < p.data.size();) {
              uint64_t v = 0;
              if (!read_varint(p.data, pos, v)) fail("function ", fn_name(f), ": default of '", name, "' is malformed");
              a.ints.push_back(static_cast<int64_t>(v));
            }
          }
          break;
        case 9: a.strings.emplace_back(p.data); break;
        default: break;
      }
    }
    switch (static_cast<AttrType>(type)) {
      case AttrType::Float:
      case AttrType::Int:
      case AttrType::String:
      case AttrType::Floats:
      case AttrType::Ints:
      case AttrType::Strings: a.type = static_cast<AttrType>(type); return a;
      default:
        fail("function ", fn_name(f), ": the default of attribute '", name, "' is of type ", type,
             "; onnxforge expands INT, FLOAT, STRING and their lists (pass the attribute at the call instead)");
    }
  }
  return std::nullopt;
}

// The graph a graph belongs to at the top: a function body, or the main graph.
bool in_function(const Model& m, const Graph& g) {
  const Graph* at = &g;
  while (at->parent().valid()) at = &m.graph(at->parent());
  return at->is_function_body();
}

bool runs(const Model& m, const Graph& g) { return !g.detached() && !in_function(m, g); }

// ------------------------------------------------------------------ one expansion

class Inliner {
 public:
  Inliner(Model& m) : m_(m) {
    for (const Function& f : m.functions)
      by_key_.emplace(key_of(str(f.domain), str(f.name)) + "::" + std::string(str(f.overload)), &f);
  }

  const Function* callee(const Graph& g, NodeId n) const {
    if (by_key_.empty()) return nullptr;
    auto it = by_key_.find(key_of(str(g.domain(n)), str(g.op_type(n))) + "::" + std::string(str(g.overload(n))));
    return it == by_key_.end() ? nullptr : it->second;
  }

  // Expands call `call` of `g` (a graph that runs).
  void expand(GraphId gid, NodeId call, const Function& f) {
    Graph& g = m_.graph(gid);
    check_imports(f, g, call);
    const Graph& body = m_.graph(f.body);
    Call c{&g, call,
           str(g.node_name(call)).empty() ? std::string(str(g.op_type(call))) : std::string(str(g.node_name(call))),
           &f};
    // Copies of what the call node holds: adding nodes to `g` moves its tables.
    const std::vector<ValueId> actual_in(g.inputs(call).begin(), g.inputs(call).end());
    const std::vector<ValueId> actual_out(g.outputs(call).begin(), g.outputs(call).end());
    const uint32_t scope = g.scope(call);
    g.kill_node(call);

    Map map(body.value_count());
    const auto& formal_in = body.graph_inputs();
    for (size_t i = 0; i < formal_in.size(); ++i)
      map.set(formal_in[i], i < actual_in.size() ? actual_in[i] : ValueId{});
    // Formal outputs write the call's values; one the body does not compute (a formal input, or
    // an output listed twice) is copied by an Identity after the body.
    std::vector<std::pair<ValueId, ValueId>> copies;  // (body value, call output)
    const auto& formal_out = body.graph_outputs();
    for (size_t i = 0; i < formal_out.size(); ++i) {
      const ValueId want = i < actual_out.size() ? actual_out[i] : ValueId{};
      if (!want.valid()) continue;
      if (body.producer(formal_out[i]).valid() && !map.has(formal_out[i]))
        map.set(formal_out[i], want);
      else
        copies.emplace_back(formal_out[i], want);
    }
    copy_nodes(c, body, g, map, scope);
    for (auto [from, to] : copies) {
      const ValueId src = value(c, body, from, g, map);
      const NodeId n =
          g.add_node(intern("Identity"), Sym{}, intern(c.prefix + "/" + std::string(str(g.value_name(to)))),
                     std::vector<ValueId>{src}, std::vector<ValueId>{to});
      g.set_scope(n, scope);
    }
  }

 private:
  struct Call {
    const Graph* caller;  // the graph holding the call node (its attributes bind the references)
    NodeId node;
    std::string prefix;  // names of everything the expansion adds start with it
    const Function* f;
  };

  // Source value -> destination value, for one source graph copied into one destination graph.
  struct Map {
    explicit Map(uint32_t n) : to(n), set_(n, 0) {}
    std::vector<ValueId> to;
    std::vector<uint8_t> set_;
    bool has(ValueId v) const { return set_[v.index()]; }
    void set(ValueId v, ValueId d) {
      to[v.index()] = d;
      set_[v.index()] = 1;
    }
  };

  void check_imports(const Function& f, const Graph& g, NodeId call) {
    if (!checked_.insert(&f).second) return;
    for (const FunctionImport& imp : function_imports(f)) {
      const int64_t have = m_.opset(imp.domain);
      if (have == 0) {
        m_.opsets.push_back({intern(imp.domain), imp.version, true});
        continue;
      }
      if (have == imp.version) continue;
      const std::string d = imp.domain.empty() ? "the default domain" : "domain '" + imp.domain + "'";
      fail("function ", fn_name(f), " (called by ", node_label(g, call), ") imports opset ", imp.version, " of ", d,
           " and the model opset ", have,
           "; its nodes cannot run at another version than they were written for (`onnxforge optimize "
           "--inline-functions` upgrades a function below the model's opset, --target-opset one above)");
    }
  }

  // A fresh name in `g` (and the graphs around it) starting with `base`.
  Sym unique(const Graph& g, const std::string& base) {
    auto taken = [&](Sym s) {
      for (const Graph* at = &g;; at = &m_.graph(at->parent())) {
        if (at->find_value(str(s))) return true;
        if (!at->parent().valid()) return false;
      }
    };
    Sym s = intern(base);
    for (int k = 1; taken(s); ++k) s = intern(base + "_" + std::to_string(k));
    return s;
  }

  // The destination of source value `v` (a new value on first use; captures resolved by `map`'s
  // owner, see copy_graph).
  ValueId value(const Call& c, const Graph& src, ValueId v, Graph& dst, Map& map) {
    if (!v.valid()) return v;
    if (map.has(v)) return map.to[v.index()];
    const ValueId d = dst.add_value(unique(dst, c.prefix + "/" + std::string(str(src.value_name(v)))));
    map.set(v, d);
    return d;
  }

  TensorId tensor(TensorId t) {
    if (!t.valid()) return t;
    // Its own entry (the same bytes): a pass replacing one call's constant must not change another's.
    const std::vector<int64_t> dims(m_.tensors.dims(t).begin(), m_.tensors.dims(t).end());
    return m_.tensors.add(m_.tensors.entry(t), dims);
  }

  // Node `n`'s attributes for its copy in `dst`: references bound, tensors and graphs copied.
  std::vector<NewAttr> attrs(const Call& c, const Graph& src, NodeId n, Graph& dst, NodeId will_be, Map& map) {
    std::vector<NewAttr> out;
    for (const Attr& a : src.attrs(n)) {
      const Graph* from = &src;
      const Attr* value = &a;
      if (!a.ref_attr_name.empty()) {
        value = c.caller->attr(c.node, str(a.ref_attr_name));
        from = c.caller;
        if (!value || (value->type == AttrType::Undefined && value->ref_attr_name.empty())) {
          // Not given at the call: the function's default, else the attribute is left out.
          if (auto d = attribute_default(*c.f, str(a.ref_attr_name), str(a.name))) out.push_back(std::move(*d));
          continue;
        }
        if (!value->ref_attr_name.empty())
          fail(node_label(*c.caller, c.node), " passes attribute '", str(a.ref_attr_name),
               "' by reference outside a function body");
      }
      NewAttr na;
      na.name = std::string(str(a.name));
      na.type = value->type;
      switch (value->type) {
        case AttrType::Int: na.i = value->i; break;
        case AttrType::Float: na.f = value->f; break;
        case AttrType::String: na.s = std::string(str(value->s)); break;
        case AttrType::Ints: na.ints.assign(from->ints(*value).begin(), from->ints(*value).end()); break;
        case AttrType::Floats: na.floats.assign(from->floats(*value).begin(), from->floats(*value).end()); break;
        case AttrType::Strings:
          for (Sym s : from->strings(*value)) na.strings.emplace_back(str(s));
          break;
        case AttrType::Tensor: na.tensor = tensor(value->tensor); break;
        case AttrType::Graph:
          // A body's own subgraph reads body values (through `map`); a graph the caller passes
          // reads the caller's graph, which must then be `dst` itself.
          if (from != &src && &dst != c.caller)
            fail("function ", fn_name(*c.f), ": ", node_label(src, n), " takes GRAPH attribute '", str(a.name),
                 "' by reference inside a subgraph of the body, which onnxforge cannot expand");
          na.graph = from == &src ? copy_graph(c, m_.graph(value->graph), dst, will_be, &map)
                                  : copy_graph(c, m_.graph(value->graph), dst, will_be, nullptr);
          break;
        default:
          fail("function ", fn_name(*c.f), ": ", node_label(src, n), " has attribute '", str(a.name), "' of type ",
               static_cast<int>(value->type),
               " (a list of tensors or graphs, a sparse tensor or a type), which onnxforge cannot copy into its "
               "caller");
      }
      out.push_back(std::move(na));
    }
    return out;
  }

  // Copies the nodes of `src` into `dst` (values through `map`).
  void copy_nodes(const Call& c, const Graph& src, Graph& dst, Map& map, uint32_t scope) {
    for (NodeId n : topological_order(src)) {
      std::vector<ValueId> ins, outs;
      for (ValueId v : src.inputs(n)) ins.push_back(value(c, src, v, dst, map));
      for (ValueId v : src.outputs(n)) outs.push_back(value(c, src, v, dst, map));
      const NodeId will_be(dst.node_capacity());
      std::vector<NewAttr> na = attrs(c, src, n, dst, will_be, map);
      std::string name(str(src.node_name(n)));
      if (name.empty()) name = std::string(str(src.op_type(n))) + "_" + std::to_string(n.index());
      const NodeId made = dst.add_node(src.op_type(n), src.domain(n), intern(c.prefix + "/" + name), ins, outs, na);
      std::vector<MetadataEntry> meta(src.metadata(n).begin(), src.metadata(n).end());
      if (!meta.empty()) dst.set_metadata(made, meta);
      const uint32_t sets[] = {scope, src.scope(n)};
      dst.set_scope(made, m_.union_tags(sets));
    }
  }

  // A copy of subgraph `src` as a body of node `owner` (to be added) of `parent`. `outer` maps
  // src.parent()'s values into `parent` (nullptr: src.parent() is `parent` itself).
  GraphId copy_graph(const Call& c, const Graph& src, Graph& parent, NodeId owner, Map* outer) {
    const GraphId id = m_.add_graph(parent.id(), owner);
    Graph& dst = m_.graph(id);
    const GraphId src_id = src.id();  // `src` stays valid: graphs are held by pointer
    dst.set_name(src.name());
    Map map(m_.graph(src_id).value_count());
    for (ValueId cap : src.captures()) {
      const ValueId o = src.outer(cap);
      const ValueId to =
          outer ? (outer->has(o) ? outer->to[o.index()] : value(c, m_.graph(src.parent()), o, parent, *outer)) : o;
      map.set(cap, to.valid() ? dst.add_capture(parent.value_name(to), to) : ValueId{});
    }
    auto declared = [&](ValueId v, ValueId d) {
      if (src.has_shape(v)) {
        std::vector<Dim> dims(src.shape(v).begin(), src.shape(v).end());
        dst.set_type(d, src.dtype(v), dims);
      } else if (src.has_type(v)) {
        dst.set_dtype(d, src.dtype(v));
      }
    };
    std::vector<ValueId> ins, outs;
    for (ValueId v : src.graph_inputs()) {
      ins.push_back(value(c, src, v, dst, map));
      declared(v, ins.back());
    }
    for (ValueId v : src.initializers()) dst.set_initializer(value(c, src, v, dst, map), tensor(src.initializer(v)));
    copy_nodes(c, src, dst, map, 0);
    for (ValueId v : src.graph_outputs()) {
      outs.push_back(value(c, src, v, dst, map));
      declared(v, outs.back());
    }
    dst.set_graph_inputs(std::move(ins));
    dst.set_graph_outputs(std::move(outs));
    return id;
  }

  Model& m_;
  std::unordered_map<std::string, const Function*> by_key_;
  std::set<const Function*> checked_;
};

}  // namespace

std::vector<FunctionImport> function_imports(const Function& f) {
  std::vector<FunctionImport> out;
  for (size_t i = 0; i < f.fields.size(); ++i) {
    auto vf = verbatim_field(f.fields[i]);
    if (!vf || vf->first != 9) continue;
    auto parts = fields_of(vf->second);
    if (!parts) continue;
    FunctionImport imp;
    imp.field = i;
    for (const Field& p : *parts) {
      if (p.number == 1 && p.wire == 2) imp.domain = std::string(p.data);
      if (p.number == 2 && p.wire == 0) imp.version = static_cast<int64_t>(p.value);
    }
    if (imp.domain == "ai.onnx") imp.domain.clear();
    out.push_back(std::move(imp));
  }
  return out;
}

namespace {
void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
}  // namespace

void set_function_import(Function& f, std::string_view domain, int64_t version) {
  if (domain == "ai.onnx") domain = "";
  std::string body;  // OperatorSetIdProto: domain (1, omitted for the default), version (2)
  if (!domain.empty()) {
    body += static_cast<char>((1u << 3) | 2u);
    put_varint(body, domain.size());
    body += domain;
  }
  body += static_cast<char>(2u << 3);
  put_varint(body, static_cast<uint64_t>(version));
  std::string field;  // FunctionProto.opset_import (9)
  field += static_cast<char>((9u << 3) | 2u);
  put_varint(field, body.size());
  field += body;
  // Interned: the writer copies small verbatim fields from stable memory.
  const std::string_view bytes = str(intern(field));
  for (const FunctionImport& imp : function_imports(f))
    if (imp.domain == domain) {
      f.fields[imp.field] = bytes;
      return;
    }
  f.fields.push_back(bytes);
}

namespace {
bool calls(const Graph& g, NodeId n, const Function& f) {
  // Interned names compare as integers; the domains' "" / "ai.onnx" spelling only when they differ.
  return g.op_type(n) == f.name && g.overload(n) == f.overload &&
         (g.domain(n) == f.domain || key_of(str(g.domain(n)), "") == key_of(str(f.domain), ""));
}
}  // namespace

const Function* called_function(const Model& m, const Graph& g, NodeId n) {
  for (const Function& f : m.functions)
    if (calls(g, n, f)) return &f;
  return nullptr;
}

const Function* function_of(const Model& m, const Graph& g) {
  const Graph* at = &g;
  while (at->parent().valid()) at = &m.graph(at->parent());
  if (!at->is_function_body()) return nullptr;
  for (const Function& f : m.functions)
    if (f.body == at->id()) return &f;
  return nullptr;
}

std::vector<std::pair<GraphId, NodeId>> calls_of(const Model& m, const Function& f) {
  std::vector<std::pair<GraphId, NodeId>> out;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes())
      if (calls(g, n, f)) out.emplace_back(g.id(), n);
  }
  return out;
}

int64_t reached_calls(const Model& m, const Function& f) {
  // Memoised over the call graph, which the reader keeps acyclic; `depth` bounds a model built
  // in memory that is not.
  std::map<const Function*, int64_t> memo;
  auto count = [&](auto&& self, const Function& fn, int depth) -> int64_t {
    if (auto it = memo.find(&fn); it != memo.end()) return it->second;
    if (depth > 256)
      fail("function ", fn_name(fn), " is reached through more than 256 nested calls (is it recursive?)");
    int64_t n = 0;
    for (auto [gid, node] : calls_of(m, fn)) {
      const Function* caller = function_of(m, m.graph(gid));
      n += caller ? self(self, *caller, depth + 1) : 1;
    }
    return memo[&fn] = n;
  };
  return count(count, f, 0);
}

bool calls_functions(const Model& m) {
  if (m.functions.empty()) return false;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (!runs(m, g)) continue;
    for (NodeId n : g.nodes())
      if (called_function(m, g, n)) return true;
  }
  return false;
}

InlineReport inline_functions(Model& m, const InlineOptions& o) {
  InlineReport rep;
  if (m.functions.empty()) return rep;
  auto running_nodes = [&] {
    size_t n = 0;
    for (size_t gi = 0; gi < m.graph_count(); ++gi)
      if (const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi))); runs(m, g)) n += g.node_count();
    return n;
  };
  const size_t before = running_nodes();
  Inliner in(m);
  // A call's body may call further functions: a graph is swept until no call is left. The reader
  // refuses recursion; a model built in memory that recurses stops here, at a depth no real
  // model reaches (torch nests one function per module level).
  constexpr int kMaxDepth = 256;
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {  // grows: copied bodies are swept too
    const GraphId gid(static_cast<uint32_t>(gi));
    if (!runs(m, m.graph(gid))) continue;
    for (int depth = 0;; ++depth) {
      std::vector<std::pair<NodeId, const Function*>> calls;
      for (NodeId n : m.graph(gid).nodes())
        if (const Function* f = in.callee(m.graph(gid), n)) calls.emplace_back(n, f);
      if (calls.empty()) break;
      if (depth == kMaxDepth)
        fail("function ", key_of(str(calls[0].second->domain), str(calls[0].second->name)),
             " is called through more than ", kMaxDepth, " nested function calls (is it recursive?)");
      for (auto [n, f] : calls) {
        in.expand(gid, n, *f);
        ++rep.calls;
      }
    }
  }
  rep.nodes = static_cast<int64_t>(running_nodes()) - static_cast<int64_t>(before);
  if (!o.drop_functions) return rep;
  // Every call that runs is expanded: no function is reachable any more.
  std::set<std::string> domains;
  for (const Function& f : m.functions) domains.insert(key_of(str(f.domain), ""));
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (in_function(m, g)) g.detach();
  }
  rep.dropped = m.functions.size();
  m.functions.clear();
  // The functions' domains go from the imports when no node uses them any more.
  domains.erase(key_of("", ""));
  for (size_t gi = 0; gi < m.graph_count(); ++gi) {
    const Graph& g = m.graph(GraphId(static_cast<uint32_t>(gi)));
    if (g.detached()) continue;
    for (NodeId n : g.nodes()) domains.erase(key_of(str(g.domain(n)), ""));
  }
  std::erase_if(m.opsets, [&](const OpsetImport& imp) { return domains.count(key_of(str(imp.domain), "")) > 0; });
  return rep;
}

}  // namespace onnxforge
