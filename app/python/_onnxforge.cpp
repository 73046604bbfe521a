// onnxforge._onnxforge: the C++ side of the Python module. A thin layer over the engine's entry
// points (app/api/engine.h, the runtime, the command line): arguments in, JSON text or bytes or
// NumPy arrays out. The pure-Python package (onnxforge/__init__.py) turns models of every kind
// into a path or bytes, JSON into dicts and reports, and raises VerificationError.
//
// Every call releases the GIL while the engine works, so Python threads can optimize or run
// models in parallel. `threads` caps one call's workers with its own TBB arena (a process-wide
// tbb::global_control would throttle the other threads' calls too).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <thread>
#include <iostream>
#include <mutex>
#include <optional>

#include "analysis/inspect.h"
#include "api/engine.h"
#include "api/scratch.h"
#include "io/budget.h"
#include "io/input_dims.h"
#include "io/safe_file.h"
#include "cli/command.h"
#include "ir/error.h"
#include "passes/audit.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"
#include "runtime/verify.h"

namespace py = pybind11;
namespace api = onnxforge::api;
namespace rt = onnxforge::rt;
using onnxforge::DType;
using onnxforge::Error;

namespace {

// A model argument: a path (str or os.PathLike) or a serialized ModelProto (bytes). Bytes go to
// a scratch file (the reader maps files); its path is replaced by `name` in messages and reports.
struct ModelArg {
  std::filesystem::path path;
  std::string name;
  std::unique_ptr<api::ScratchDir> scratch;
};

ModelArg model_arg(const py::object& model, const std::string& name) {
  ModelArg m;
  if (py::isinstance<py::bytes>(model)) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(model.ptr(), &data, &size) != 0) throw py::error_already_set();
    m.name = name.empty() ? "<bytes>" : name;
    py::gil_scoped_release unlocked;  // `model` stays referenced by the caller, its bytes immutable
    m.scratch = std::make_unique<api::ScratchDir>();
    m.path = m.scratch->write("model.onnx", std::string_view(data, static_cast<size_t>(size)));
    return m;
  }
  m.path = py::cast<std::filesystem::path>(model);
  m.name = name.empty() ? m.path.string() : name;
  return m;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The engine's limits for one call (max_time, max_memory, max_loop_iterations; 0 keeps the
// process's setting). They are process-wide while the call runs (io/budget.h), then restored.
struct Limits {
  double max_time = 0;
  uint64_t max_memory = 0, max_loop_iterations = 0;
};

class ScopedLimits {
 public:
  explicit ScopedLimits(const Limits& l)
      : memory_(onnxforge::memory_budget()), loop_(onnxforge::loop_iteration_limit()), time_(onnxforge::time_budget()) {
    if (l.max_memory) onnxforge::set_memory_budget(l.max_memory);
    if (l.max_loop_iterations) onnxforge::set_loop_iteration_limit(l.max_loop_iterations);
    if (l.max_time > 0) onnxforge::set_time_budget(l.max_time);
  }
  ~ScopedLimits() {
    onnxforge::set_memory_budget(memory_);
    onnxforge::set_loop_iteration_limit(loop_);
    if (onnxforge::time_budget() != time_) onnxforge::set_time_budget(time_);
  }
  ScopedLimits(const ScopedLimits&) = delete;
  ScopedLimits& operator=(const ScopedLimits&) = delete;

 private:
  uint64_t memory_, loop_;
  double time_;
};

// Runs `f` on a worker thread while this thread, without the GIL, checks for signals every
// 50 ms (PyErr_CheckSignals needs the GIL and the main thread): Ctrl-C raises KeyboardInterrupt
// within a node step of the runtime (io/budget.h request_cancel) instead of after the call.
template <class F>
auto interruptible(F&& f) -> decltype(f()) {
  using R = decltype(f());
  std::optional<R> result;
  std::exception_ptr error;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread worker([&] {
    try {
      result.emplace(f());
    } catch (...) { error = std::current_exception(); }
    std::lock_guard<std::mutex> lock(m);
    done = true;
    cv.notify_all();
  });
  std::optional<py::error_already_set> signalled;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m);
      if (cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) break;
    }
    if (signalled) continue;
    py::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) {
      signalled.emplace();  // the handler's exception (KeyboardInterrupt), raised once the engine stopped
      onnxforge::request_cancel();
    }
  }
  worker.join();
  if (signalled) {
    onnxforge::clear_cancel();
    throw *signalled;
  }
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

// Runs `f` without the GIL (in an arena of `threads` workers when > 0), interruptible and within
// `limits`; an onnxforge::Error that names a scratch file names the model as the caller gave it.
template <class F>
auto engine_call(int threads, std::initializer_list<const ModelArg*> models, F&& f, const Limits& limits = {}) {
  try {
    ScopedLimits scoped(limits);
    py::gil_scoped_release unlocked;
    return interruptible([&] {
      if (threads > 0) {
        tbb::task_arena arena(threads);
        return arena.execute(f);
      }
      return f();
    });
  } catch (const Error& e) {
    std::string msg = e.what(), file = e.file();
    for (const ModelArg* m : models)
      if (m->scratch) {
        replace_all(msg, m->path.string(), m->name);
        replace_all(msg, m->scratch->path().string(), m->name);
        replace_all(file, m->path.string(), m->name);
      }
    throw Error(msg, e.kind(), file, e.node());  // kind, file and node, as the command line's --json shows them
  }
}

// A Python progress callback called from the engine (any thread): takes the GIL; an exception it
// raises is kept and re-raised when the engine call returns.
struct ProgressBridge {
  py::object callback;
  std::mutex mutex;
  std::optional<py::error_already_set> raised;
  api::Progress fn() {
    if (callback.is_none()) return {};
    return [this](const std::string& line) {
      py::gil_scoped_acquire locked;
      std::lock_guard<std::mutex> guard(mutex);
      if (raised) return;
      try {
        callback(line);
      } catch (py::error_already_set& e) { raised.emplace(std::move(e)); }
    };
  }
  void rethrow() {
    if (raised) {
      py::error_already_set e = std::move(*raised);
      raised.reset();
      throw e;
    }
  }
};

std::map<std::string, int64_t> dims_arg(const std::optional<std::map<std::string, int64_t>>& dims) {
  std::map<std::string, int64_t> out;
  if (!dims) return out;
  for (const auto& [k, v] : *dims) {
    if (v < 0) throw Error("dims['" + k + "'] = " + std::to_string(v) + ": a dimension must not be negative");
    out[k] = v;
  }
  return out;
}

// ---- NumPy <-> runtime tensors -------------------------------------------------------------------

DType dtype_of(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f') {
    if (size == 4) return DType::Float;
    if (size == 8) return DType::Double;
    if (size == 2) return DType::Float16;
  } else if (kind == 'i') {
    if (size == 1) return DType::Int8;
    if (size == 2) return DType::Int16;
    if (size == 4) return DType::Int32;
    if (size == 8) return DType::Int64;
  } else if (kind == 'u') {
    if (size == 1) return DType::Uint8;
    if (size == 2) return DType::Uint16;
    if (size == 4) return DType::Uint32;
    if (size == 8) return DType::Uint64;
  } else if (kind == 'b') {
    return DType::Bool;
  }
  throw Error("arrays of dtype " + py::cast<std::string>(d.attr("name")) +
              " cannot be model inputs (numeric and bool only)");
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Float:
    case DType::BFloat16: return py::dtype("float32");  // NumPy has no bfloat16
    case DType::Double: return py::dtype("float64");
    case DType::Float16: return py::dtype("float16");
    case DType::Int8: return py::dtype("int8");
    case DType::Int16: return py::dtype("int16");
    case DType::Int32: return py::dtype("int32");
    case DType::Int64: return py::dtype("int64");
    case DType::Uint8: return py::dtype("uint8");
    case DType::Uint16: return py::dtype("uint16");
    case DType::Uint32: return py::dtype("uint32");
    case DType::Uint64: return py::dtype("uint64");
    case DType::Bool: return py::dtype("bool");
    default: throw Error("an output of dtype " + std::string(onnxforge::dtype_name(t)) + " has no NumPy equivalent");
  }
}

// Copies the array (the engine runs without the GIL, when the array could change).
rt::GivenInput given_input(const std::string& name, const py::handle& value) {
  py::array a = py::array::ensure(value, py::array::c_style);
  if (!a) throw Error("input '" + name + "': expected a NumPy array (or something numpy.asarray accepts)");
  DType t = dtype_of(a.dtype());
  rt::Shape shape(a.shape(), a.shape() + a.ndim());
  rt::Tensor tensor = rt::Tensor::alloc(t, shape);
  if (tensor.bytes()) std::memcpy(tensor.data, a.data(), tensor.bytes());
  return {name, "input '" + name + "': the array given", std::move(tensor)};
}

std::vector<rt::GivenInput> given_inputs(const std::optional<py::dict>& inputs) {
  std::vector<rt::GivenInput> out;
  if (!inputs) return out;
  for (auto [k, v] : *inputs) out.push_back(given_input(py::cast<std::string>(k), v));
  return out;
}

py::array to_numpy(const rt::Tensor& t0) {
  rt::Tensor t = rt::to_nchw(t0);
  if (t.dtype == DType::BFloat16) t = rt::cast(t, DType::Float);
  py::array a(numpy_dtype(t.dtype), std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
  if (t.numel()) std::memcpy(a.mutable_data(), t.data, t.bytes());
  return a;
}

// ---- the functions -----------------------------------------------------------------------------

py::tuple optimize(const py::object& model, const std::string& name, const std::optional<std::filesystem::path>& output,
                   const std::vector<std::string>& passes, const std::vector<std::string>& skip,
                   const std::optional<std::map<std::string, int64_t>>& dims, std::optional<uint64_t> fold_size,
                   bool verify, int seeds, std::optional<int64_t> target_opset, bool strip_hierarchy, bool force,
                   bool overwrite, int threads, const py::object& progress, const std::string& target,
                   const Limits& limits, const std::vector<std::string>& input_specs,
                   const std::vector<std::string>& input_values,
                   const std::optional<std::map<std::string, int64_t>>& verify_dims, int verify_decode,
                   bool inline_functions) {
  ModelArg in = model_arg(model, name);
  api::OptimizeSettings s;
  s.inline_functions = inline_functions;
  s.inputs = input_specs;  // issue 29: the verification's inputs (files; the wrapper saves arrays as .npy)
  s.input_values = input_values;
  s.passes = passes;
  s.skip = skip;
  s.dims = dims_arg(dims);
  s.verify_dims = dims_arg(verify_dims);
  s.verify_decode = verify_decode;
  s.fold_size = fold_size;
  s.verify = verify;
  s.seeds = seeds;
  s.target_opset = target_opset;
  if (output) s.output = *output;  // an existing output without overwrite: an Error before any work
  s.overwrite = overwrite;
  s.target = target;
  ProgressBridge bridge{progress, {}, {}};
  s.progress = bridge.fn();
  struct Result {
    std::string report, failure, bytes;
    bool ok = true, written = false;
  };
  Result r = engine_call(
      threads, {&in},
      [&] {
        Result out;
        api::OptimizeOutcome o = api::optimize(in.path, s);
        o.report["input"] = in.name;
        out.ok = o.ok();
        if (!out.ok) out.failure = api::verification_failure_text(o);
        if (out.ok || force) {
          if (output) {
            onnxforge::SaveOptions so;  // the file rules of io/safe_file.h, as on the command line
            so.overwrite = overwrite || force;
            so.inputs = onnxforge::WriteRules{}.protect(in.path).inputs;
            api::write_optimized(o, *output, strip_hierarchy, so);
            out.written = true;
          } else {
            api::ScratchDir dir;
            onnxforge::SaveOptions so;
            so.placement = onnxforge::WeightPlacement::Embed;
            try {
              api::write_optimized(o, dir.path() / "model.onnx", strip_hierarchy, so);
            } catch (const Error& e) {
              throw Error(std::string("the optimized model cannot be returned in memory: ") + e.what() +
                          "; pass output=PATH to write it to a file");
            }
            o.report.erase("output");
            out.bytes = api::read_file_bytes(dir.path() / "model.onnx");
          }
        }
        out.report = o.report.dump();
        return out;
      },
      limits);
  bridge.rethrow();
  py::object model_out = py::none();
  if (!output && (r.ok || force)) model_out = py::bytes(r.bytes);
  return py::make_tuple(model_out, r.report, r.ok, r.failure);
}

std::string inspect(const py::object& model, const std::string& name) {
  ModelArg in = model_arg(model, name);
  std::string out = engine_call(0, {&in}, [&] {
    auto m = onnxforge::load_model(in.path);
    onnxforge::ModelSummary s = onnxforge::summarize(*m);
    onnxforge::add_declaration_warnings(*m, s);
    return s.to_json().dump();
  });
  replace_all(out, in.path.string(), in.name);
  return out;
}

py::dict run(const py::object& model, const std::string& name, const std::optional<py::dict>& inputs, uint64_t seed,
             const std::optional<std::map<std::string, int64_t>>& dims, int threads, const Limits& limits,
             const std::vector<std::string>& input_specs, const std::vector<std::string>& input_values) {
  ModelArg in = model_arg(model, name);
  rt::UserInputs given{.specs = input_specs, .values = input_values, .arrays = given_inputs(inputs)};
  auto dim_values = dims_arg(dims);
  struct Result {
    std::vector<std::string> names;
    std::vector<rt::Tensor> outputs;
  };
  Result r = engine_call(
      threads, {&in},
      [&] {
        auto m = onnxforge::load_model(in.path);
        const auto dims = onnxforge::resolve_input_dims(dim_values, {}, {m.get()});  // a dim no input has: an Error
        rt::Session session(*m);
        auto tensors = rt::SeedInputs(m->main(), session.input_values(), dims, given).make(seed, seed);
        Result out;
        out.outputs = session.run(tensors);
        // Session::run returns owning NCHW tensors: they outlive the model and the session.
        out.names = session.output_names();
        return out;
      },
      limits);
  py::dict d;
  for (size_t i = 0; i < r.outputs.size(); ++i) d[py::str(r.names[i])] = to_numpy(r.outputs[i]);
  return d;
}

py::tuple verify(const py::object& a, const std::string& a_name, const py::object& b, const std::string& b_name,
                 int seeds, uint64_t first_seed, double atol, double rtol,
                 const std::optional<std::map<std::string, int64_t>>& dims, int parallel, int threads,
                 const Limits& limits, const std::vector<std::string>& input_specs,
                 const std::vector<std::string>& input_values) {
  ModelArg ma = model_arg(a, a_name), mb = model_arg(b, b_name);
  rt::VerifyOptions vo;
  vo.inputs = rt::UserInputs{.specs = input_specs, .values = input_values, .arrays = {}};
  vo.seeds = seeds;
  vo.first_seed = first_seed;
  vo.atol = atol;
  vo.rtol = rtol;
  vo.dims = dims_arg(dims);
  vo.parallel = parallel;
  if (seeds < 1) throw Error("verify needs at least 1 seed (got " + std::to_string(seeds) + ")");
  auto [json, text] = engine_call(
      threads, {&ma, &mb},
      [&] {
        auto ra = onnxforge::load_model(ma.path);
        auto rb = onnxforge::load_model(mb.path);
        vo.dims = onnxforge::resolve_input_dims(vo.dims, {}, {ra.get(), rb.get()});
        rt::VerifyReport v = rt::verify(*ra, *rb, vo);
        return std::pair{v.to_json().dump(), v.to_text()};
      },
      limits);
  return py::make_tuple(json, text);
}

std::string bench(const py::object& model, const std::string& name, const py::object& vs, const std::string& vs_name,
                  int iters, double min_time, int warmup, const std::optional<std::map<std::string, int64_t>>& dims,
                  const std::optional<py::dict>& inputs, bool profile, bool nchw, bool vs_nchw, int threads,
                  const Limits& limits, const std::vector<std::string>& input_specs,
                  const std::vector<std::string>& input_values) {
  // An endless measurement is an argument error, not a hang (bench(min_time=inf) never returned).
  if (!(min_time >= 0 && min_time <= 86400))
    throw Error("min_time must be between 0 and 86400 seconds, got " + std::to_string(min_time));
  ModelArg in = model_arg(model, name);
  std::optional<ModelArg> other;
  if (!vs.is_none()) other = model_arg(vs, vs_name);
  api::BenchSettings s;
  if (other) s.vs = other->path;
  s.iters = iters;
  s.min_time = min_time;
  s.warmup = warmup;
  s.dims = dims_arg(dims);
  s.inputs = given_inputs(inputs);
  s.input_files = input_specs;
  s.input_values = input_values;
  s.profile = profile;
  s.nchw = nchw;
  s.vs_nchw = vs_nchw;
  s.threads = threads;
  ModelArg none;
  nlohmann::json j = engine_call(
      threads, {&in, other ? &*other : &none}, [&] { return api::bench(in.path, s); }, limits);
  j["model"] = in.name;
  if (other) j["vs"]["model"] = other->name;
  return j.dump();
}

std::string hierarchy(const py::object& model, const std::string& name,
                      const std::optional<std::filesystem::path>& sidecar, bool use_names, bool consumers) {
  ModelArg in = model_arg(model, name);
  nlohmann::json j =
      engine_call(0, {&in}, [&] { return api::hierarchy(in.path, sidecar.value_or(""), use_names, consumers); });
  j["model"] = in.name;
  return j.dump();
}

py::tuple extract(const py::object& model, const std::string& name, const std::string& module,
                  const std::optional<std::filesystem::path>& output,
                  const std::optional<std::filesystem::path>& sidecar,
                  const std::optional<std::filesystem::path>& expose_cuts, bool verify, int seeds,
                  const std::optional<std::map<std::string, int64_t>>& dims, bool external_data, bool overwrite) {
  ModelArg in = model_arg(model, name);
  api::ExtractSettings s;
  s.sidecar = sidecar.value_or("");
  s.expose_cuts = expose_cuts.value_or("");
  s.verify = verify;
  s.seeds = seeds;
  for (const auto& [k, v] : dims_arg(dims)) s.dims.push_back(k + "=" + std::to_string(v));
  s.external_data = external_data;
  s.overwrite = overwrite;
  if (!output && external_data) throw Error("external_data needs output=PATH (bytes hold the weights embedded)");
  auto [json, bytes] = engine_call(0, {&in}, [&] {
    std::optional<api::ScratchDir> dir;
    std::filesystem::path out = output ? *output : (dir.emplace(), dir->path() / "module.onnx");
    api::ExtractOutcome r = api::extract(in.path, module, out, s);
    r.report["model"] = in.name;
    std::string b;
    if (!output) {
      r.report.erase("output");
      b = api::read_file_bytes(out);
    }
    return std::pair{r.report.dump(), b};
  });
  return py::make_tuple(output ? py::object(py::none()) : py::object(py::bytes(bytes)), json);
}

// `audit --json`: one object per model, audited in parallel (each audit is serial inside).
std::string audit(const std::vector<py::object>& models, const std::vector<std::string>& names) {
  std::vector<ModelArg> in;
  for (size_t i = 0; i < models.size(); ++i) in.push_back(model_arg(models[i], i < names.size() ? names[i] : ""));
  std::vector<const ModelArg*> all;
  for (const ModelArg& m : in) all.push_back(&m);
  std::vector<nlohmann::json> out(in.size());
  try {
    py::gil_scoped_release unlocked;
    interruptible([&] {
      tbb::parallel_for(size_t{0}, in.size(), [&](size_t i) {
        out[i] = onnxforge::passes::audit_model(in[i].path.string()).to_json();
        out[i]["model"] = in[i].name;
      });
      return 0;
    });
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const ModelArg* m : all)
      if (m->scratch) replace_all(msg, m->path.string(), m->name);
    throw Error(msg);
  }
  return nlohmann::json(out).dump();
}

int cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv_storage{"onnxforge"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  ScopedLimits scoped(Limits{});  // --max-time, --max-memory of this command line end with it
  py::gil_scoped_release unlocked;
  int rc = onnxforge::cli::run_command_line(static_cast<int>(argv_storage.size()), argv.data());
  std::cout.flush();
  std::cerr.flush();
  return rc;
}

}  // namespace

PYBIND11_MODULE(_onnxforge, m) {
  m.doc() = "onnxforge's engine (use the onnxforge package, not this module)";
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) { error(e.what()); }
  });
  using namespace pybind11::literals;
  py::class_<Limits>(m, "Limits")
      .def(py::init([](double max_time, uint64_t max_memory, uint64_t max_loop_iterations) {
             return Limits{max_time, max_memory, max_loop_iterations};
           }),
           "max_time"_a = 0.0, "max_memory"_a = 0, "max_loop_iterations"_a = 0);
  m.def("optimize", &optimize, "model"_a, "name"_a, "output"_a, "passes"_a, "skip"_a, "dims"_a, "fold_size"_a,
        "verify"_a, "seeds"_a, "target_opset"_a, "strip_hierarchy"_a, "force"_a, "overwrite"_a, "threads"_a,
        "progress"_a, "target"_a = "generic", "limits"_a = Limits{}, "input_specs"_a = std::vector<std::string>{},
        "input_values"_a = std::vector<std::string>{}, "verify_dims"_a = std::nullopt, "verify_decode"_a = 0,
        "inline_functions"_a = false);
  m.def("inspect", &inspect, "model"_a, "name"_a);
  m.def("run", &run, "model"_a, "name"_a, "inputs"_a, "seed"_a, "dims"_a, "threads"_a, "limits"_a = Limits{},
        "input_specs"_a = std::vector<std::string>{}, "input_values"_a = std::vector<std::string>{});
  m.def("verify", &verify, "a"_a, "a_name"_a, "b"_a, "b_name"_a, "seeds"_a, "first_seed"_a, "atol"_a, "rtol"_a,
        "dims"_a, "parallel"_a, "threads"_a, "limits"_a = Limits{}, "input_specs"_a = std::vector<std::string>{},
        "input_values"_a = std::vector<std::string>{});
  m.def("bench", &bench, "model"_a, "name"_a, "vs"_a, "vs_name"_a, "iters"_a, "min_time"_a, "warmup"_a, "dims"_a,
        "inputs"_a, "profile"_a, "nchw"_a, "vs_nchw"_a, "threads"_a, "limits"_a = Limits{},
        "input_specs"_a = std::vector<std::string>{}, "input_values"_a = std::vector<std::string>{});
  m.def("hierarchy", &hierarchy, "model"_a, "name"_a, "sidecar"_a, "use_names"_a, "consumers"_a);
  m.def("extract", &extract, "model"_a, "name"_a, "module"_a, "output"_a, "sidecar"_a, "expose_cuts"_a, "verify"_a,
        "seeds"_a, "dims"_a, "external_data"_a, "overwrite"_a);
  m.def("audit", &audit, "models"_a, "names"_a);
  m.def("list_passes", [] { return api::list_passes().dump(); });
  m.def("cli", &cli, "args"_a);
  m.attr("__version__") = "0.1.0";
}
