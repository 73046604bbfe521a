// evaluate_node: one node on given inputs with the plan's kernels and no plan (constant folding
// in passes/ and in Plan::fold), and the kernel registry's public queries.
#include <new>
#include <stdexcept>

#include "ir/error.h"
#include "runtime/plan.h"

namespace onnxforge::rt {

namespace {

class EvalSink final : public OutputSink {
 public:
  EvalSink(const Graph& g, NodeId n, std::span<const Tensor* const> ins, std::vector<Tensor>& outs)
      : g_(g), n_(n), ins_(ins), outs_(outs) {}
  Tensor& alloc(size_t i, DType dtype, Shape shape) override {
    if (i >= outs_.size()) outs_.resize(i + 1);
    return outs_[i] = Tensor::alloc(dtype, std::move(shape));
  }
  void alias(size_t i, size_t input, Shape shape) override {
    Tensor t = ins_[input]->clone();
    t.shape = std::move(shape);
    set(i, std::move(t));
  }
  void set(size_t i, Tensor t) override {
    if (i >= outs_.size()) outs_.resize(i + 1);
    outs_[i] = t.hold ? std::move(t) : t.clone();
  }
  std::vector<Tensor> run_subgraph(GraphId sub, std::vector<Tensor> inputs) override {
    Plan p(g_.model().graph(sub), SessionOptions{true, false});
    Frame f(p, nullptr);
    return f.run(std::move(inputs));
  }

 private:
  const Graph& g_;
  [[maybe_unused]] NodeId n_;
  std::span<const Tensor* const> ins_;
  std::vector<Tensor>& outs_;
};

}  // namespace

std::vector<OwnedTensor> evaluate_node(const Graph& g, NodeId n, std::span<const TensorView> inputs) {
  std::string_view dom = norm_domain(g.domain(n));
  const KernelDef* k = Registry::get().find(dom, str(g.op_type(n)));
  int64_t version = g.model().opset(dom);
  if (!k)
    fail("the runtime has no kernel for operator ", str(g.op_type(n)), " (domain '", dom.empty() ? "ai.onnx" : dom,
         "', opset ", version, ") used by ", node_desc(g, n));
  std::vector<Tensor> converted(inputs.size());
  std::vector<const Tensor*> ins(inputs.size(), nullptr);
  DType stored = DType::Undefined;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == DType::Undefined) continue;
    ins[i] = &inputs[i];
    if (k->float_compute && is_stored_float(inputs[i].dtype)) {
      if (stored == DType::Undefined) stored = inputs[i].dtype;
      converted[i] = cast(inputs[i], DType::Float);
      ins[i] = &converted[i];
    } else if (reinterpret_cast<uintptr_t>(inputs[i].data) % std::max<size_t>(dtype_size(inputs[i].dtype), 1) != 0) {
      // Folding hands views of a constant's bytes where the model file has them (raw_data at
      // any offset); the kernels read whole elements, which must be aligned (fuzz_passes, UBSan).
      converted[i] = inputs[i].clone();
      ins[i] = &converted[i];
    }
  }
  std::vector<Tensor> outs(g.outputs(n).size());
  EvalSink sink(g, n, ins, outs);
  OpContext ctx(g, n, version, ins, outs.size(), &sink);
  try {
    k->run(ctx);
  } catch (const Error&) { throw; } catch (const std::bad_alloc&) {
    throw Error(node_desc(g, n) + ": out of memory (lower the inputs' sizes or --max-memory)", Error::Kind::Memory);
  } catch (const std::length_error&) {
    throw Error(node_desc(g, n) + ": a table sized from the data is larger than memory can address",
                Error::Kind::Memory);
  } catch (const std::exception& e) { fail(node_desc(g, n), ": ", e.what()); }
  outs.resize(g.outputs(n).size());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!g.output(n, i).valid())
      outs[i] = Tensor{};
    else if (stored != DType::Undefined && outs[i].dtype == DType::Float)
      outs[i] = cast(outs[i], stored);
  }
  return outs;
}

bool has_kernel(std::string_view domain, std::string_view op) {
  return Registry::get().find(domain == "ai.onnx" ? std::string_view{} : domain, op) != nullptr;
}

std::vector<std::string> supported_ops() { return Registry::get().ops(); }

}  // namespace onnxforge::rt
