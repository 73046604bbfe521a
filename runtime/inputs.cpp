#include "runtime/inputs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "analysis/dim_relations.h"
#include "ir/error.h"
#include "ir/uses.h"

namespace onnxforge::rt {
namespace {

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

bool has(const std::string& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (s.find(p) != std::string::npos) return true;
  return false;
}

// The key of axis `i` of input `name` in a dims map: the dim's symbol, or "name:i" when unnamed.
std::string dim_key(const std::string& name, size_t i, const Dim& d) {
  return d.param.empty() ? name + ":" + std::to_string(i) : std::string(str(d.param));
}

// Rows of the embedding table a token-id input indexes, following Cast/Reshape/Unsqueeze...
int64_t vocab_of(const Graph& g, const Uses& uses, ValueId v, int depth = 0) {
  if (depth > 4) return 0;
  int64_t best = 0;
  for (const Use& u : uses.of(v)) {
    if (u.slot == Use::kImplicit) continue;
    NodeId n = u.node;
    if ((g.is_op(n, "Gather") && u.slot == 1 && g.attr_int(n, "axis", 0) == 0) ||
        (g.is_op(n, "GatherElements") && u.slot == 1)) {
      ValueId data = g.input(n, 0);
      if (g.is_initializer(data)) {
        auto dims = g.model().tensors.dims(g.initializer(data));
        if (!dims.empty()) best = best ? std::min(best, dims[0]) : dims[0];
      }
    } else if (g.is_op(n, "Cast") || g.is_op(n, "Reshape") || g.is_op(n, "Unsqueeze") || g.is_op(n, "Squeeze") ||
               g.is_op(n, "Flatten") || g.is_op(n, "Identity")) {
      if (u.slot == 0)
        if (int64_t r = vocab_of(g, uses, g.output(n, 0), depth + 1)) best = best ? std::min(best, r) : r;
    }
  }
  return best;
}

// Defaults chosen one dim at a time may not fit together (a decoder with past: total_sequence
// must be past_sequence + sequence): analysis/dim_relations.h re-derives the dims whose relation
// the defaults break, so the model runs with no flag; the user's sizes are never changed.
void fit_dim_relations(const Graph& g, InputPlan& plan, std::map<std::string, int64_t>& chosen,
                       const std::set<std::string>& given, const std::vector<std::vector<std::string>>& keys) {
  std::set<std::string> named;                // relations speak of dim_params, not "input:axis" keys
  for (const auto& [key, value] : chosen)
    if (key.find(':') == std::string::npos) named.insert(key);
  if (named.empty()) return;
  std::vector<DimRelation> rel = dim_relations(g.model());
  std::erase_if(rel, [&](const DimRelation& r) { return r.graph != g.id(); });
  if (rel.empty()) return;
  std::map<std::string, int64_t> start;
  for (const std::string& k : named) start[k] = chosen[k];
  DimSolution sol = solve_dims(rel, start, given, [&](const DimRelation& r) {
    return r.node.valid() ? "node '" + std::string(str(g.node_name(r.node))) + "' (" + std::string(str(g.op_type(r.node))) + ")"
                          : std::string("the graph");
  });
  for (const auto& [key, value] : sol.values) {
    if (chosen[key] == value) continue;
    chosen[key] = value;
    std::erase_if(plan.notes, [&](const std::string& n) { return n.starts_with("dim '" + key + "' = "); });
  }
  for (std::string& n : sol.notes) plan.notes.push_back(std::move(n));
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    for (size_t a = 0; a < keys[i].size(); ++a)
      if (!keys[i][a].empty()) plan.inputs[i].shape[a] = chosen[keys[i][a]];
}

}  // namespace

InputPlan plan_inputs(const Graph& g, const std::vector<ValueId>& values, const std::map<std::string, int64_t>& dims) {
  InputPlan plan;
  Uses uses(g);
  std::map<std::string, int64_t> chosen;
  std::vector<std::string> symbols;  // every symbolic dim's key, to reject a --dim naming none
  std::set<std::string> given;       // keys the caller sized
  std::vector<std::vector<std::string>> keys;  // per input, per axis: its key ("" when static)
  for (ValueId v : values) {
    keys.emplace_back();
    InputSpec s;
    s.name = std::string(str(g.value_name(v)));
    s.value = v;
    s.dtype = g.dtype(v) == DType::Undefined ? DType::Float : g.dtype(v);
    if (!g.has_shape(v)) fail("input '", s.name, "' has no shape in the model; give it with --input ", s.name, "=FILE");
    auto shape = g.shape(v);
    for (size_t i = 0; i < shape.size(); ++i) {
      const Dim& d = shape[i];
      if (d.known()) {
        s.shape.push_back(d.value);
        keys.back().emplace_back();
        continue;
      }
      std::string key = dim_key(s.name, i, d);
      keys.back().push_back(key);
      if (std::find(symbols.begin(), symbols.end(), key) == symbols.end()) symbols.push_back(key);
      int64_t val;
      if (auto it = dims.find(key); it != dims.end()) val = it->second, given.insert(key);
      else if (auto it2 = dims.find(s.name + ":" + std::to_string(i)); it2 != dims.end()) val = it2->second, given.insert(key);
      else if (auto it3 = chosen.find(key); it3 != chosen.end()) val = it3->second;
      else {
        std::string k = lower(key);
        if (has(k, {"batch"})) val = 1;
        else if (has(k, {"seq", "len", "token", "position", "time", "frame"})) val = 128;
        else val = (d.param.empty() && i == 0) ? 1 : (d.param.empty() ? 128 : 1);
        if (!chosen.count(key))
          plan.notes.push_back("dim '" + key + "' = " + std::to_string(val) + " (default; set with --dim " + key + "=N)");
      }
      chosen[key] = val;
      s.shape.push_back(val);
    }
    const std::string n = lower(s.name);
    if (s.dtype == DType::Bool) s.kind = InputSpec::Kind::True;
    else if (is_float_dtype(s.dtype)) s.kind = has(n, {"mask"}) ? InputSpec::Kind::Ones : InputSpec::Kind::Normal;
    else if (has(n, {"mask"})) s.kind = InputSpec::Kind::Ones;
    else if (has(n, {"position", "pos_id"})) s.kind = InputSpec::Kind::Positions;
    else if (has(n, {"token_type", "segment"})) s.kind = InputSpec::Kind::Zeros;
    else {
      s.kind = InputSpec::Kind::TokenIds;
      s.id_range = vocab_of(g, uses, v);
      if (!s.id_range) {
        s.id_range = 2;
        plan.notes.push_back("input '" + s.name + "': integer input not read by an embedding table; values in [0, 2)");
      }
    }
    plan.inputs.push_back(std::move(s));
  }
  fit_dim_relations(g, plan, chosen, given, keys);
  std::string known;
  for (const std::string& k : symbols) known += (known.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : dims) {
    bool used = std::find(symbols.begin(), symbols.end(), key) != symbols.end();
    for (const InputSpec& s : plan.inputs) used = used || key.rfind(s.name + ":", 0) == 0;
    if (used) continue;
    plan.unknown_dims.push_back("--dim " + key + "=" + std::to_string(value) + ": the model's inputs have no symbolic dim '" +
                                key + "' (" + (known.empty() ? std::string("they have none") : "theirs: " + known) + ")");
    plan.notes.push_back(plan.unknown_dims.back());
  }
  return plan;
}

std::vector<Tensor> make_inputs(const InputPlan& plan, uint64_t seed) {
  std::vector<Tensor> out;
  for (const InputSpec& s : plan.inputs) {
    uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
    for (char c : s.name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    std::mt19937_64 rng(h);
    // Declared dims may be anything (2^31 elements made std::vector throw inside a worker and the
    // process abort): the input and its double staging copy must fit the memory budget.
    const uint64_t bytes = checked_bytes(s.dtype, s.shape);
    check_memory(bytes + bytes / dtype_size(s.dtype) * sizeof(double),
                 "input '" + s.name + "' of shape " + shape_str(s.shape) + " (" + std::string(dtype_name(s.dtype)) + ")");
    const int64_t n = numel(s.shape);
    std::vector<double> v(static_cast<size_t>(n));
    switch (s.kind) {
      case InputSpec::Kind::Normal: {
        // Box-Muller on our own uniform draws: identical on every platform and library.
        for (int64_t i = 0; i < n; i += 2) {
          double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53, u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
          double r = std::sqrt(-2 * std::log(u1));
          v[static_cast<size_t>(i)] = r * std::cos(2 * M_PI * u2);
          if (i + 1 < n) v[static_cast<size_t>(i + 1)] = r * std::sin(2 * M_PI * u2);
        }
        break;
      }
      case InputSpec::Kind::TokenIds:
        for (auto& x : v) x = static_cast<double>(rng() % static_cast<uint64_t>(s.id_range));
        break;
      case InputSpec::Kind::Ones: case InputSpec::Kind::True: std::fill(v.begin(), v.end(), 1.0); break;
      case InputSpec::Kind::Zeros: break;
      case InputSpec::Kind::Positions: {
        const int64_t last = s.shape.empty() ? 1 : std::max<int64_t>(s.shape.back(), 1);
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i % last);
        break;
      }
    }
    Tensor t = Tensor::alloc(s.dtype, s.shape);
    cast_into(Tensor::view(DType::Double, s.shape, v.data()), t);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace onnxforge::rt

#include "runtime/tensor_io.h"

namespace onnxforge::rt {

std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> out;
  for (const std::string& s : specs) {
    auto eq = s.rfind('=');
    if (eq == std::string::npos || eq == 0) fail("--dim '", s, "': expected NAME=VALUE");
    try {
      size_t used = 0;
      int64_t v = std::stoll(s.substr(eq + 1), &used);
      if (used != s.size() - eq - 1 || v < 0) throw std::invalid_argument("");
      out[s.substr(0, eq)] = v;
    } catch (const std::exception&) {
      fail("--dim '", s, "': the value must be a non-negative integer");
    }
  }
  return out;
}

namespace {

std::string shape_text(std::span<const Dim> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i].known() ? std::to_string(shape[i].value) : std::string(str(shape[i].param)));
  return s + "]";
}

// Checks a given tensor (`what`: "--input NAME: file F") against input `v` and records the sizes
// it gives symbolic dims.
Tensor fit_input(const Graph& g, ValueId v, const std::string& name, const std::string& what, Tensor t,
                 std::map<std::string, int64_t>& dims, std::map<std::string, std::string>& given_by) {
  const DType want = g.dtype(v) == DType::Undefined ? DType::Float : g.dtype(v);
  if (t.dtype != want) {
    if (!(is_float_dtype(t.dtype) && is_float_dtype(want)) && !(t.dtype == DType::Int32 && want == DType::Int64) &&
        !(t.dtype == DType::Int64 && want == DType::Int32))
      fail(what, " holds ", dtype_name(t.dtype), " but the model expects ", dtype_name(want));
    t = cast(t, want);
  }
  if (!g.has_shape(v)) return t;
  auto shape = g.shape(v);
  const std::string expected = " but the model declares " + shape_text(shape);
  if (t.shape.size() != shape.size())
    fail(what, " holds shape ", shape_str(t.shape), expected);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].known()) {
      if (shape[i].value != t.shape[i])
        fail(what, " holds shape ", shape_str(t.shape), expected, " (axis ", i, ")");
      continue;
    }
    const std::string key = dim_key(name, i, shape[i]);
    auto [it, fresh] = dims.emplace(key, t.shape[i]);
    if (!fresh && it->second != t.shape[i])
      fail(what, " gives dim '", key, "' = ", t.shape[i], " but ",
           given_by.count(key) ? given_by[key] : "--dim " + key, " gives ", it->second);
    given_by.emplace(key, "--input " + name);
  }
  return t;
}

size_t input_index(const Graph& g, const std::vector<ValueId>& values, const std::string& name, const char* option) {
  size_t i = 0;
  while (i < values.size() && str(g.value_name(values[i])) != name) ++i;
  if (i == values.size()) {
    std::string names;
    for (ValueId v : values) names += (names.empty() ? "" : ", ") + std::string(str(g.value_name(v)));
    fail(option, "the model has no input '", name, "' (inputs: ", names, ")");
  }
  return i;
}

std::vector<Tensor> with_given(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t>& dims,
                               std::map<size_t, Tensor> given, uint64_t seed, InputPlan& plan) {
  plan = plan_inputs(g, values, dims);
  if (!plan.unknown_dims.empty()) fail(plan.unknown_dims[0]);
  std::vector<Tensor> inputs = make_inputs(plan, seed);
  for (auto& [i, t] : given) {
    inputs[i] = std::move(t);
    // A note on how an input is generated ("values in [0, 2)") is wrong for one the user gave.
    const std::string about = "input '" + plan.inputs[i].name + "':";
    std::erase_if(plan.notes, [&](const std::string& n) { return n.starts_with(about); });
  }
  return inputs;
}

}  // namespace

std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
                                   const std::vector<std::string>& files, uint64_t seed, InputPlan& plan) {
  std::map<size_t, Tensor> given;
  std::map<std::string, std::string> given_by;
  for (const std::string& s : files) {
    auto eq = s.find('=');
    if (eq == std::string::npos) fail("--input '", s, "': expected NAME=FILE");
    std::string name = s.substr(0, eq), file = s.substr(eq + 1);
    size_t i = input_index(g, values, name, "--input: ");
    given[i] = fit_input(g, values[i], name, "--input " + name + ": file " + file, read_tensor_file(file), dims, given_by);
  }
  return with_given(g, values, dims, std::move(given), seed, plan);
}

std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
                                   std::vector<GivenInput> inputs, uint64_t seed, InputPlan& plan) {
  std::map<size_t, Tensor> given;
  std::map<std::string, std::string> given_by;
  for (GivenInput& in : inputs) {
    size_t i = input_index(g, values, in.name, "");
    if (given.count(i)) fail("input '", in.name, "' is given twice");
    given[i] = fit_input(g, values[i], in.name, in.what, std::move(in.tensor), dims, given_by);
  }
  return with_given(g, values, dims, std::move(given), seed, plan);
}

}  // namespace onnxforge::rt
