#!/usr/bin/python3
"""Whether two ONNX models are the same computation written the same way, whatever the names of
their values and nodes: exit 0 and "equal", or exit 1 and the first difference.

  tools/structural_diff.py A.onnx B.onnx

onnxforge numbers the values it creates in the order it creates them (ir/rewrite.h: fresh_name,
one counter per model), so moving code that creates values renames them; this check proves a
refactor left the output unchanged in everything else. It reads the files with the onnx package (independent of
onnxforge's reader) and compares, modulo value and node names:
  - the model header (IR version, opset imports, producer, metadata), and each local function;
  - per graph, every node as a Merkle hash of its op, domain, attributes (tensors by dtype, dims
    and bytes; subgraphs by their own canonical form), metadata, doc string and, per input slot,
    the hash of what it reads: a graph input (by name and type), an initializer (by content), an
    outer-scope value, or output k of another node (by that node's hash);
  - the multiset of those node hashes, of initializer contents and of declared value types
    (value_info, keyed by the hash of the value they describe);
  - the graph outputs, in order: name, type and the hash of what computes them.
Subgraph inputs and outputs are matched by position (their names are the body's own).
"""
import collections
import hashlib
import sys

import onnx
from onnx import numpy_helper


def h(*parts):
    m = hashlib.sha256()
    for p in parts:
        m.update(repr(p).encode())
        m.update(b"\x00")
    return m.hexdigest()[:24]


def type_key(t):
    return t.SerializeToString() if t is not None else b""


def tensor_key(t):
    a = numpy_helper.to_array(t) if t.data_location != onnx.TensorProto.EXTERNAL else None
    data = a.tobytes() if a is not None else repr(sorted((e.key, e.value) for e in t.external_data))
    return h("tensor", t.data_type, tuple(t.dims), hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest())


class Graph:
    """The canonical form of one graph: node hashes and everything the comparison looks at."""

    def __init__(self, g, outer, subgraph):
        self.g = g
        env = dict(outer)  # name -> hash of the value
        inits = {}
        for t in g.initializer:
            inits[t.name] = tensor_key(t)
        self.inits = collections.Counter(inits.values())
        init_names = set(inits)
        self.inputs = []
        for i, vi in enumerate(g.input):
            key = h("sub_input", i, type_key(vi.type)) if subgraph else h("input", vi.name, type_key(vi.type))
            env[vi.name] = key
            if not subgraph or vi.name not in init_names:
                self.inputs.append((vi.name if not subgraph else i, type_key(vi.type), vi.name in init_names))
        for name, key in inits.items():
            if name not in [vi.name for vi in g.input]:
                env[name] = h("init", key)
        self.nodes = collections.Counter()
        self.where = {}  # node hash -> a readable description (for the report)
        order = topological(g)
        for n in order:
            ins = tuple(env.get(x, h("unknown_outer", x)) if x else "" for x in n.input)
            attrs = tuple(sorted((a.name, attr_key(a, env)) for a in n.attribute))
            meta = tuple(sorted((p.key, p.value) for p in n.metadata_props)) if hasattr(n, "metadata_props") else ()
            outs = tuple(bool(o) for o in n.output)
            key = h("node", n.op_type, n.domain, n.overload if hasattr(n, "overload") else "", attrs, meta,
                    n.doc_string, ins, outs)
            self.nodes[key] += 1
            self.where.setdefault(key, f"node '{n.name}' ({n.domain + '.' if n.domain else ''}{n.op_type}) "
                                       f"reading {list(n.input)}")
            for k, o in enumerate(n.output):
                if o:
                    env[o] = h("out", key, k)
        self.env = env
        self.outputs = [(vo.name if not subgraph else i, type_key(vo.type), env.get(vo.name, h("undefined", vo.name)))
                        for i, vo in enumerate(g.output)]
        self.value_info = collections.Counter((env.get(v.name, h("undeclared", v.name)), type_key(v.type))
                                              for v in g.value_info)
        self.key = h("graph", tuple(self.inputs), tuple(sorted(self.nodes.items())), tuple(sorted(self.inits.items())),
                     tuple(self.outputs), tuple(sorted(self.value_info.items())), g.doc_string)


def attr_key(a, env):
    if a.type == onnx.AttributeProto.GRAPH:
        return ("graph", Graph(a.g, env, True).key)
    if a.type == onnx.AttributeProto.GRAPHS:
        return ("graphs", tuple(Graph(x, env, True).key for x in a.graphs))
    if a.type == onnx.AttributeProto.TENSOR:
        return ("tensor", tensor_key(a.t))
    if a.type == onnx.AttributeProto.TENSORS:
        return ("tensors", tuple(tensor_key(t) for t in a.tensors))
    c = onnx.AttributeProto()
    c.CopyFrom(a)
    c.name = ""
    return ("value", c.SerializeToString())


def topological(g):
    """The nodes in an order where every value is produced before it is read (file order when
    it already is: the comparison does not depend on which)."""
    produced = {}
    for i, n in enumerate(g.node):
        for o in n.output:
            if o:
                produced[o] = i
    done, order, state = set(), [], {}

    def visit(i):
        stack = [(i, False)]
        while stack:
            j, expanded = stack.pop()
            if j in done:
                continue
            if expanded:
                done.add(j)
                order.append(g.node[j])
                continue
            stack.append((j, True))
            for x in reversed(list(g.node[j].input) + outer_reads(g.node[j])):
                p = produced.get(x)
                if p is not None and p not in done and p != j:
                    stack.append((p, False))

    for i in range(len(g.node)):
        visit(i)
    return order


def outer_reads(n):
    names = []
    for a in n.attribute:
        for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            local = {vi.name for vi in sub.input} | {t.name for t in sub.initializer}
            for m in sub.node:
                local.update(m.output)
            for m in sub.node:
                names += [x for x in m.input if x and x not in local]
                names += [x for x in outer_reads(m) if x not in local]
    return names


def first_difference(a, b):
    ma, mb = onnx.load(a, load_external_data=False), onnx.load(b, load_external_data=False)
    header = lambda m: (m.ir_version, sorted((o.domain, o.version) for o in m.opset_import), m.producer_name,
                        m.producer_version, m.domain, m.model_version, m.doc_string,
                        sorted((p.key, p.value) for p in m.metadata_props))
    if header(ma) != header(mb):
        return f"model header: {header(ma)} vs {header(mb)}"
    fa = {(f.domain, f.name): f for f in ma.functions}
    fb = {(f.domain, f.name): f for f in mb.functions}
    if sorted(fa) != sorted(fb):
        return f"functions: {sorted(fa)} vs {sorted(fb)}"
    for k in sorted(fa):
        x, y = fa[k], fb[k]
        if (list(x.input), list(x.output), list(x.attribute), sorted((o.domain, o.version) for o in x.opset_import)) != \
           (list(y.input), list(y.output), list(y.attribute), sorted((o.domain, o.version) for o in y.opset_import)):
            return f"function {k}: interface or opset imports differ"
        body = lambda f: onnx.helper.make_graph(f.node, "body", [onnx.helper.make_value_info(i, onnx.TypeProto()) for i in f.input],
                                               [onnx.helper.make_value_info(o, onnx.TypeProto()) for o in f.output])
        d = graph_difference(Graph(body(x), {}, False), Graph(body(y), {}, False), f"function {k}")
        if d:
            return d
    return graph_difference(Graph(ma.graph, {}, False), Graph(mb.graph, {}, False), "main graph")


def graph_difference(ga, gb, where):
    if ga.key == gb.key:
        return ""
    if ga.inputs != gb.inputs:
        return f"{where}: inputs {[i[0] for i in ga.inputs]} vs {[i[0] for i in gb.inputs]} (or their types)"
    only_a = ga.nodes - gb.nodes
    only_b = gb.nodes - ga.nodes
    if only_a or only_b:
        # The first node (in A's order) that B lacks is the earliest difference upstream.
        for key in sorted(only_a, key=lambda k: list(ga.where).index(k)):
            other = next(iter(sorted(only_b, key=lambda k: list(gb.where).index(k))), None)
            return (f"{where}: {ga.where[key]} has no counterpart in B"
                    + (f" (B's first unmatched: {gb.where[other]})" if other else ""))
        key = sorted(only_b, key=lambda k: list(gb.where).index(k))[0]
        return f"{where}: B's {gb.where[key]} has no counterpart in A"
    if ga.inits != gb.inits:
        return f"{where}: initializers differ ({sum(ga.inits.values())} vs {sum(gb.inits.values())})"
    for i, (oa, ob) in enumerate(zip(ga.outputs, gb.outputs)):
        if oa != ob:
            return f"{where}: output {i} '{oa[0]}' vs '{ob[0]}' (name, type or what computes it)"
    if len(ga.outputs) != len(gb.outputs):
        return f"{where}: {len(ga.outputs)} vs {len(gb.outputs)} outputs"
    if ga.value_info != gb.value_info:
        return f"{where}: declared value types (value_info) differ"
    return f"{where}: doc string differs"


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    d = first_difference(sys.argv[1], sys.argv[2])
    print("equal" if not d else d)
    return 1 if d else 0


if __name__ == "__main__":
    sys.exit(main())
