#include "tests/common/structural.h"

#include <cstring>
#include <sstream>

#include "ir/topo.h"

namespace onnxforge::test {
namespace {

class Differ {
 public:
  Differ(const Model& a, const Model& b) : a_(a), b_(b) {}

  std::string run() {
    check(a_.ir_version == b_.ir_version, "ir_version");
    check(a_.producer_name == b_.producer_name && a_.producer_version == b_.producer_version, "producer");
    check(a_.domain == b_.domain && a_.model_version == b_.model_version, "model domain/version");
    check(a_.opsets.size() == b_.opsets.size(), "opset count");
    for (size_t i = 0; ok() && i < a_.opsets.size(); ++i)
      check(a_.opsets[i].domain == b_.opsets[i].domain && a_.opsets[i].version == b_.opsets[i].version, "opset ", i);
    check(a_.metadata_props == b_.metadata_props, "model metadata_props");
    check(a_.extra_fields.size() == b_.extra_fields.size(), "model extra field count");
    for (size_t i = 0; ok() && i < a_.extra_fields.size(); ++i)
      check(a_.extra_fields[i] == b_.extra_fields[i], "model extra field ", i);
    check(a_.functions.size() == b_.functions.size(), "function count");
    for (size_t i = 0; ok() && i < a_.functions.size(); ++i) {
      const Function &fa = a_.functions[i], &fb = b_.functions[i];
      check(fa.name == fb.name && fa.domain == fb.domain && fa.overload == fb.overload, "function ", i, " header");
      check(fa.attributes == fb.attributes, "function ", i, " attributes");
      check(fa.fields == fb.fields, "function ", i, " verbatim fields");
      if (ok()) graph(a_.graph(fa.body), b_.graph(fb.body), "function " + std::string(str(fa.name)));
    }
    if (ok()) graph(a_.main(), b_.main(), "main");
    return diff_;
  }

 private:
  bool ok() const { return diff_.empty(); }
  template <class... P>
  void check(bool cond, P&&... what) {
    if (cond || !ok()) return;
    std::ostringstream os;
    (os << ... << what);
    diff_ = os.str();
  }

  void value(const Graph& ga, ValueId va, const Graph& gb, ValueId vb, const std::string& where) {
    check(ga.value_name(va) == gb.value_name(vb), where, ": value name '", str(ga.value_name(va)), "' vs '",
          str(gb.value_name(vb)), "'");
    check(ga.has_type(va) == gb.has_type(vb) && ga.dtype(va) == gb.dtype(vb), where, ": dtype of ",
          str(ga.value_name(va)));
    check(ga.rank(va) == gb.rank(vb), where, ": rank of ", str(ga.value_name(va)));
    if (ok() && ga.rank(va) > 0) {
      auto sa = ga.shape(va), sb = gb.shape(vb);
      check(std::equal(sa.begin(), sa.end(), sb.begin(), sb.end()), where, ": shape of ", str(ga.value_name(va)));
    }
    check(ga.type_raw(va) == gb.type_raw(vb), where, ": non-tensor type of ", str(ga.value_name(va)));
    auto ea = ga.value_extra(va), eb = gb.value_extra(vb);
    check(std::equal(ea.begin(), ea.end(), eb.begin(), eb.end()), where, ": value_info fields of ",
          str(ga.value_name(va)));
  }

  void values(const Graph& ga, const std::vector<ValueId>& la, const Graph& gb, const std::vector<ValueId>& lb,
              const std::string& where) {
    check(la.size() == lb.size(), where, ": count ", la.size(), " vs ", lb.size());
    for (size_t i = 0; ok() && i < la.size(); ++i) value(ga, la[i], gb, lb[i], where);
  }

  void tensor(TensorId ta, TensorId tb, const std::string& where) {
    const TensorStore &sa = a_.tensors, &sb = b_.tensors;
    check(sa.dtype(ta) == sb.dtype(tb), where, ": tensor dtype");
    auto da = sa.dims(ta), db = sb.dims(tb);
    check(std::equal(da.begin(), da.end(), db.begin(), db.end()), where, ": tensor dims");
    if (!ok()) return;
    if (sa.dtype(ta) == DType::String) {
      check(sa.strings(ta) == sb.strings(tb), where, ": string tensor contents");
      return;
    }
    auto ba = sa.bytes(ta), bb = sb.bytes(tb);
    check(ba.size() == bb.size() && (ba.empty() || std::memcmp(ba.data(), bb.data(), ba.size()) == 0), where,
          ": tensor bytes differ");
    check(sa.entry(ta).extra_fields == sb.entry(tb).extra_fields, where, ": tensor extra fields");
  }

  void graph(const Graph& ga, const Graph& gb, const std::string& where) {
    check(ga.name() == gb.name(), where, ": graph name");
    values(ga, ga.graph_inputs(), gb, gb.graph_inputs(), where + " inputs");
    values(ga, ga.graph_outputs(), gb, gb.graph_outputs(), where + " outputs");
    values(ga, ga.value_infos(), gb, gb.value_infos(), where + " value_info");
    check(ga.initializers().size() == gb.initializers().size(), where, ": initializer count");
    for (size_t i = 0; ok() && i < ga.initializers().size(); ++i) {
      ValueId va = ga.initializers()[i], vb = gb.initializers()[i];
      check(ga.value_name(va) == gb.value_name(vb), where, ": initializer ", i, " name");
      tensor(ga.initializer(va), gb.initializer(vb), where + " initializer " + std::string(str(ga.value_name(va))));
    }
    check(ga.sparse_initializers().size() == gb.sparse_initializers().size(), where, ": sparse initializer count");
    for (size_t i = 0; ok() && i < ga.sparse_initializers().size(); ++i)
      check(ga.sparse_initializers()[i].second == gb.sparse_initializers()[i].second, where, ": sparse initializer ",
            i);
    auto xa = ga.graph_extra(), xb = gb.graph_extra();
    check(std::equal(xa.begin(), xa.end(), xb.begin(), xb.end()), where, ": graph extra fields");
    check(ga.node_count() == gb.node_count(), where, ": node count ", ga.node_count(), " vs ", gb.node_count());
    if (!ok()) return;
    auto oa = topological_order(ga), ob = topological_order(gb);
    for (size_t i = 0; ok() && i < oa.size(); ++i) node(ga, oa[i], gb, ob[i], where);
  }

  void node(const Graph& ga, NodeId na, const Graph& gb, NodeId nb, const std::string& where) {
    std::string w =
        where + " node '" + std::string(str(ga.node_name(na))) + "' (" + std::string(str(ga.op_type(na))) + ")";
    check(ga.op_type(na) == gb.op_type(nb) && ga.domain(na) == gb.domain(nb), w, ": op");
    check(ga.node_name(na) == gb.node_name(nb) && ga.overload(na) == gb.overload(nb), w, ": name/overload");
    auto ia = ga.inputs(na), ib = gb.inputs(nb);
    check(ia.size() == ib.size(), w, ": input count");
    for (size_t i = 0; ok() && i < ia.size(); ++i)
      check(ia[i].valid() == ib[i].valid() && (!ia[i].valid() || ga.value_name(ia[i]) == gb.value_name(ib[i])), w,
            ": input ", i);
    auto oa = ga.outputs(na), ob = gb.outputs(nb);
    check(oa.size() == ob.size(), w, ": output count");
    for (size_t i = 0; ok() && i < oa.size(); ++i)
      check(oa[i].valid() == ob[i].valid() && (!oa[i].valid() || ga.value_name(oa[i]) == gb.value_name(ob[i])), w,
            ": output ", i);
    auto ma = ga.metadata(na), mb = gb.metadata(nb);
    check(ma.size() == mb.size(), w, ": metadata count");
    for (size_t i = 0; ok() && i < ma.size(); ++i)
      check(ma[i].key == mb[i].key && ma[i].value == mb[i].value, w, ": metadata ", i);
    auto ea = ga.node_extra(na), eb = gb.node_extra(nb);
    check(std::equal(ea.begin(), ea.end(), eb.begin(), eb.end()), w, ": extra fields");
    auto aa = ga.attrs(na), ab = gb.attrs(nb);
    check(aa.size() == ab.size(), w, ": attribute count");
    for (size_t i = 0; ok() && i < aa.size(); ++i) attr(ga, aa[i], gb, ab[i], w);
  }

  void attr(const Graph& ga, const Attr& x, const Graph& gb, const Attr& y, const std::string& where) {
    std::string w = where + " attribute " + std::string(str(x.name));
    check(x.name == y.name && x.type == y.type && x.ref_attr_name == y.ref_attr_name, w, ": name/type");
    if (!ok()) return;
    switch (x.type) {
      case AttrType::Int: check(x.i == y.i, w); break;
      case AttrType::Float: check(std::memcmp(&x.f, &y.f, 4) == 0, w); break;
      case AttrType::String: check(x.s == y.s, w); break;
      case AttrType::Ints: {
        auto p = ga.ints(x), q = gb.ints(y);
        check(std::equal(p.begin(), p.end(), q.begin(), q.end()), w);
        break;
      }
      case AttrType::Floats: {
        auto p = ga.floats(x), q = gb.floats(y);
        check(p.size() == q.size() && (p.empty() || std::memcmp(p.data(), q.data(), p.size() * 4) == 0), w);
        break;
      }
      case AttrType::Strings: {
        auto p = ga.strings(x), q = gb.strings(y);
        check(std::equal(p.begin(), p.end(), q.begin(), q.end()), w);
        break;
      }
      case AttrType::Tensor: tensor(x.tensor, y.tensor, w); break;
      case AttrType::Tensors: {
        auto p = ga.tensors(x), q = gb.tensors(y);
        check(p.size() == q.size(), w);
        for (size_t i = 0; ok() && i < p.size(); ++i) tensor(p[i], q[i], w);
        break;
      }
      case AttrType::Graph: graph(a_.graph(x.graph), b_.graph(y.graph), w); break;
      case AttrType::Graphs: {
        auto p = ga.graphs(x), q = gb.graphs(y);
        check(p.size() == q.size(), w);
        for (size_t i = 0; ok() && i < p.size(); ++i) graph(a_.graph(p[i]), b_.graph(q[i]), w);
        break;
      }
      default: break;
    }
    auto ea = ga.attr_extra(x), eb = gb.attr_extra(y);
    check(std::equal(ea.begin(), ea.end(), eb.begin(), eb.end()), w, ": extra fields");
  }

  const Model& a_;
  const Model& b_;
  std::string diff_;
};

}  // namespace

std::string structural_diff(const Model& a, const Model& b) { return Differ(a, b).run(); }

}  // namespace onnxforge::test
