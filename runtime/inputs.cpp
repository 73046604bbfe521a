#include "runtime/inputs.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "analysis/dim_relations.h"
#include "ir/error.h"
#include "ir/match.h"
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
  std::set<std::string> named;  // relations speak of dim_params, not "input:axis" keys
  for (const auto& [key, value] : chosen)
    if (key.find(':') == std::string::npos) named.insert(key);
  if (named.empty()) return;
  std::vector<DimRelation> rel = dim_relations(g.model());
  std::erase_if(rel, [&](const DimRelation& r) { return r.graph != g.id(); });
  if (rel.empty()) return;
  std::map<std::string, int64_t> start;
  for (const std::string& k : named) start[k] = chosen[k];
  DimSolution sol = solve_dims(rel, start, given, [&](const DimRelation& r) {
    return r.node.valid()
               ? "node '" + std::string(str(g.node_name(r.node))) + "' (" + std::string(str(g.op_type(r.node))) + ")"
               : std::string("the graph");
  });
  for (const auto& [key, value] : sol.values) {
    if (chosen[key] == value) continue;
    chosen[key] = value;
    const std::string note = "dim '" + key + "' = ";  // clang: a structured binding cannot be captured
    std::erase_if(plan.notes, [&](const std::string& n) { return n.starts_with(note); });
  }
  for (std::string& n : sol.notes) plan.notes.push_back(std::move(n));
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    for (size_t a = 0; a < keys[i].size(); ++a)
      if (!keys[i][a].empty()) plan.inputs[i].shape[a] = chosen[keys[i][a]];
}

// A decoder with past numbers its new tokens after the cached ones (optimum's exports: position_ids
// = past_sequence + 0..sequence-1; from 0 they would be rotated as the first tokens again). The
// past's length is the attention mask's minus the positions' (an all-ones mask over past + new
// tokens, as Hugging Face's cumsum(mask) - 1 derives them), else the sequence axis of a
// past/cache input of rank >= 3 ([batch, heads, past_sequence, head_dim]).
void first_positions(InputPlan& plan) {
  int64_t mask = -1, past = -1;
  for (const InputSpec& s : plan.inputs) {
    const std::string n = lower(s.name);
    if (s.kind == InputSpec::Kind::Ones && !s.shape.empty() && has(n, {"mask"}) && !has(n, {"past", "cache"}))
      mask = std::max(mask, s.shape.back());
    else if (s.shape.size() >= 3 && is_float_dtype(s.dtype) && has(n, {"past", "cache"}))
      past = std::max(past, s.shape[s.shape.size() - 2]);
  }
  for (InputSpec& s : plan.inputs) {
    if (s.kind != InputSpec::Kind::Positions || s.shape.empty()) continue;
    const int64_t first = mask > s.shape.back() ? mask - s.shape.back() : std::max<int64_t>(past, 0);
    if (first <= 0) continue;
    s.first = first;
    plan.notes.push_back("input '" + s.name + "': positions " + std::to_string(first) + ".." +
                         std::to_string(first + s.shape.back() - 1) + ", after the " + std::to_string(first) +
                         " past tokens");
  }
}

// How an integer input is used, found by following it through casts and reshapes, and into the
// If/Loop/Scan bodies that read it.
struct IntUse {
  std::vector<double> compared;  // constants it is compared with (Equal/Less/Greater...)
  bool size = false;  // a length or count: a Range limit, an Expand/Tile/ConstantOfShape/Reshape shape operand,
                      // or compared with a computed tensor (the sequence mask `arange(n) < lengths`)
};

void follow_int(const Graph& g, ValueId v, IntUse& u, int depth = 0) {
  if (depth > 8) return;
  Uses uses(g);
  for (const Use& use : uses.of(v)) {
    const NodeId n = use.node;
    if (use.slot == Use::kImplicit) {
      for (GraphId sub : g.subgraphs(n)) {
        const Graph& body = g.model().graph(sub);
        for (ValueId c : body.captures())
          if (body.outer(c) == v) follow_int(body, c, u, depth + 1);
      }
      continue;
    }
    if (is_one_of(g, n, {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})) {
      if (auto c = scalar(g, other_input(g, n, v))) {
        if (std::find(u.compared.begin(), u.compared.end(), *c) == u.compared.end()) u.compared.push_back(*c);
      } else if (!constant_tensor(g, other_input(g, n, v)).valid()) {
        u.size = true;
      }
    } else if ((is(g, n, "Range") && use.slot == 1) || (is(g, n, "Expand") && use.slot == 1) ||
               (is(g, n, "Tile") && use.slot == 1) || (is(g, n, "ConstantOfShape") && use.slot == 0) ||
               (is(g, n, "Reshape") && use.slot == 1)) {
      u.size = true;
    } else if (is_one_of(g, n, {"Cast", "Unsqueeze", "Squeeze", "Identity", "Flatten", "Concat"}) ||
               (is(g, n, "Reshape") && use.slot == 0)) {
      follow_int(g, g.output(n, 0), u, depth + 1);
    }
  }
}

}  // namespace

// The size a symbolic dim gets when the user gives none (the one place defaults are chosen, so
// that a solver of relations between dims can replace it): batch-like dims 1, every other
// dim the documented default sequence length except on axis 0, where it is 1.
int64_t default_dim(const std::string& key, size_t axis, int64_t sequence) {
  const std::string k = lower(key);
  if (has(k, {"batch"})) return 1;
  if (has(k, {"seq", "len", "token", "position", "time", "frame"})) return sequence;
  return axis == 0 ? 1 : kDefaultSequence;
}

int64_t verification_sequence(uint64_t weight_bytes) {
  constexpr uint64_t kFull = uint64_t{1} << 30;  // weights verified at kDefaultSequence tokens
  int64_t n = kDefaultSequence;
  while (n > 16 && weight_bytes / static_cast<uint64_t>(kDefaultSequence / n) > kFull) n /= 2;
  return n;
}

InputPlan plan_inputs(const Graph& g, const std::vector<ValueId>& values, const std::map<std::string, int64_t>& dims,
                      int64_t sequence) {
  InputPlan plan;
  Uses uses(g);
  std::map<std::string, int64_t> chosen;
  std::vector<std::string> symbols;            // every symbolic dim's key, to reject a --dim naming none
  std::set<std::string> given;                 // keys the caller sized
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
      if (auto it = dims.find(key); it != dims.end())
        val = it->second, given.insert(key);
      else if (auto it2 = dims.find(s.name + ":" + std::to_string(i)); it2 != dims.end())
        val = it2->second, given.insert(key);
      else if (auto it3 = chosen.find(key); it3 != chosen.end())
        val = it3->second;
      else {
        val = default_dim(key, i, sequence);
        if (!chosen.count(key))
          plan.notes.push_back("dim '" + key + "' = " + std::to_string(val) + " (default" +
                               (val == sequence && sequence != kDefaultSequence ? " for a model of this size" : "") +
                               "; set with --dim " + key + "=N)");
      }
      chosen[key] = val;
      s.shape.push_back(val);
    }
    const std::string n = lower(s.name);
    if (s.dtype == DType::Bool)
      s.kind = InputSpec::Kind::True;
    else if (is_float_dtype(s.dtype))
      s.kind = has(n, {"mask"}) ? InputSpec::Kind::Ones : InputSpec::Kind::Normal;
    else if (has(n, {"mask"}))
      s.kind = InputSpec::Kind::Ones;
    else if (has(n, {"position", "pos_id"}))
      s.kind = InputSpec::Kind::Positions;
    else if (has(n, {"token_type", "segment"}))
      s.kind = InputSpec::Kind::Zeros;
    else if (s.id_range = vocab_of(g, uses, v); s.id_range) {
      s.kind = InputSpec::Kind::TokenIds;
    } else {
      IntUse use;
      follow_int(g, v, use);
      if (!use.compared.empty()) {
        s.kind = InputSpec::Kind::Choice;
        s.choices = use.compared;
      } else if (use.size || has(n, {"len", "count", "num_"})) {
        s.kind = InputSpec::Kind::Length;
      } else {
        s.kind = InputSpec::Kind::TokenIds;
        s.id_range = 2;
        plan.notes.push_back("input '" + s.name + "': integer input not read by an embedding table; values in [0, 2)");
      }
    }
    if (is_float_dtype(s.dtype) && s.kind == InputSpec::Kind::Normal && has(n, {"scale"}))
      s.kind = InputSpec::Kind::Scale;
    plan.inputs.push_back(std::move(s));
  }
  fit_dim_relations(g, plan, chosen, given, keys);
  first_positions(plan);
  // Lengths and counts range up to the longest dim of the inputs past their first axis (the
  // sequence a `lengths` input describes), or the default sequence length.
  int64_t longest = 0;
  for (const InputSpec& s : plan.inputs)
    for (size_t i = 1; i < s.shape.size(); ++i) longest = std::max(longest, s.shape[i]);
  for (InputSpec& s : plan.inputs) {
    if (s.kind == InputSpec::Kind::Length) {
      s.id_range = longest ? longest : kDefaultSequence;
      plan.notes.push_back("input '" + s.name + "': a length or count; values in [1, " + std::to_string(s.id_range) +
                           "], the full length on the first seed");
    } else if (s.kind == InputSpec::Kind::Choice) {
      std::string list;
      for (double c : s.choices) list += (list.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(c));
      plan.notes.push_back("input '" + s.name + "': compared with constants; the seeds take each of " + list);
    }
  }
  std::string known;
  for (const std::string& k : symbols) known += (known.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : dims) {
    bool used = std::find(symbols.begin(), symbols.end(), key) != symbols.end();
    for (const InputSpec& s : plan.inputs) used = used || key.rfind(s.name + ":", 0) == 0;
    if (used) continue;
    plan.unknown_dims.push_back("--dim " + key + "=" + std::to_string(value) +
                                ": the model's inputs have no symbolic dim '" + key + "' (" +
                                (known.empty() ? std::string("they have none") : "theirs: " + known) + ")");
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
    check_memory(
        bytes + bytes / dtype_size(s.dtype) * sizeof(double),
        "input '" + s.name + "' of shape " + shape_str(s.shape) + " (" + std::string(dtype_name(s.dtype)) + ")");
    const int64_t n = numel(s.shape);
    std::vector<double> v(static_cast<size_t>(n));
    switch (s.kind) {
      case InputSpec::Kind::Normal: {
        // Box-Muller on our own uniform draws: identical on every platform and library.
        for (int64_t i = 0; i < n; i += 2) {
          double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53,
                 u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
          double r = std::sqrt(-2 * std::log(u1));
          v[static_cast<size_t>(i)] = r * std::cos(2 * M_PI * u2);
          if (i + 1 < n) v[static_cast<size_t>(i + 1)] = r * std::sin(2 * M_PI * u2);
        }
        break;
      }
      case InputSpec::Kind::TokenIds:
        for (auto& x : v) x = static_cast<double>(rng() % static_cast<uint64_t>(s.id_range));
        break;
      case InputSpec::Kind::Length:
        // The first seed runs at the full length, the others anywhere in [1, L].
        for (auto& x : v)
          x = seed == 0 ? static_cast<double>(s.id_range)
                        : static_cast<double>(1 + rng() % static_cast<uint64_t>(std::max<int64_t>(s.id_range, 1)));
        break;
      case InputSpec::Kind::Choice:
        std::fill(v.begin(), v.end(), s.choices[static_cast<size_t>(seed % s.choices.size())]);
        break;
      case InputSpec::Kind::Scale:
        for (auto& x : v) x = 0.5 + static_cast<double>(rng() >> 11) * 0x1.0p-53;
        break;
      case InputSpec::Kind::Ones:
      case InputSpec::Kind::True: std::fill(v.begin(), v.end(), 1.0); break;
      case InputSpec::Kind::Zeros: break;
      case InputSpec::Kind::Positions: {
        const int64_t last = s.shape.empty() ? 1 : std::max<int64_t>(s.shape.back(), 1);
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(s.first + i % last);
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

#include <charconv>
#include <cstring>
#include <filesystem>

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
    } catch (const std::exception&) { fail("--dim '", s, "': the value must be a non-negative integer"); }
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
  if (t.shape.size() != shape.size()) fail(what, " holds shape ", shape_str(t.shape), expected);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].known()) {
      if (shape[i].value != t.shape[i]) fail(what, " holds shape ", shape_str(t.shape), expected, " (axis ", i, ")");
      continue;
    }
    const std::string key = dim_key(name, i, shape[i]);
    auto [it, fresh] = dims.emplace(key, t.shape[i]);
    if (!fresh && it->second != t.shape[i])
      fail(what, " gives dim '", key, "' = ", t.shape[i], " but ", given_by.count(key) ? given_by[key] : "--dim " + key,
           " gives ", it->second);
    given_by.emplace(key, what);
  }
  return t;
}

size_t input_index(const Graph& g, const std::vector<ValueId>& values, const std::string& name,
                   const std::string& option) {
  size_t i = 0;
  while (i < values.size() && str(g.value_name(values[i])) != name) ++i;
  if (i == values.size()) {
    std::string names;
    for (ValueId v : values) names += (names.empty() ? "" : ", ") + std::string(str(g.value_name(v)));
    fail(option, "the model has no input '", name, "' (inputs: ", names, ")");
  }
  return i;
}

// One tensor as loaded, before it is checked against the model: `name` is an input name, or
// empty with `position` set (a .pb without a name, an .npz's arr_K).
struct Loaded {
  std::string name;
  size_t position = SIZE_MAX;
  std::string what;  // "--inputs x=a.npy", "b.npz: entry 'x.npy'"
  Tensor tensor;
};

size_t loaded_index(const Graph& g, const std::vector<ValueId>& values, const Loaded& l) {
  const bool named =
      std::any_of(values.begin(), values.end(), [&](ValueId v) { return str(g.value_name(v)) == l.name; });
  if (!l.name.empty() && (named || l.position == SIZE_MAX)) return input_index(g, values, l.name, l.what + ": ");
  if (l.position >= values.size())
    fail(l.what, ": input ", l.position, " does not exist (the model has ", values.size(), " inputs)");
  return l.position;
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

// The input_K.pb files of a backend test-data folder, in K order.
std::vector<Loaded> read_test_data_set(const std::filesystem::path& dir) {
  std::vector<std::pair<size_t, std::filesystem::path>> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (!f.starts_with("input_") || !f.ends_with(".pb")) continue;
    const std::string k = f.substr(6, f.size() - 9);
    size_t pos = 0;
    if (k.empty() || std::from_chars(k.data(), k.data() + k.size(), pos).ptr != k.data() + k.size()) continue;
    files.emplace_back(pos, e.path());
  }
  if (ec) throw Error("cannot list '" + dir.string() + "': " + ec.message(), Error::Kind::Input, dir.string());
  std::sort(files.begin(), files.end());
  std::vector<Loaded> out;
  for (auto& [k, f] : files) {
    Loaded l;
    l.what = f.string();
    l.tensor = read_tensor_pb(f, &l.name);
    l.position = k;
    out.push_back(std::move(l));
  }
  return out;
}

// The input sets a folder gives: itself when it holds input_K.pb files, else each of its
// test_data_set_N folders in N order.
std::vector<std::vector<Loaded>> read_input_folder(const std::string& dir) {
  if (auto one = read_test_data_set(dir); !one.empty()) return {std::move(one)};
  std::vector<std::pair<size_t, std::filesystem::path>> sets;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    size_t n = 0;
    if (f.starts_with("test_data_set_") &&
        std::from_chars(f.data() + 14, f.data() + f.size(), n).ptr == f.data() + f.size() && is_dir(e.path().string()))
      sets.emplace_back(n, e.path());
  }
  std::sort(sets.begin(), sets.end());
  std::vector<std::vector<Loaded>> out;
  for (auto& [n, p] : sets)
    if (auto one = read_test_data_set(p); !one.empty()) out.push_back(std::move(one));
  if (out.empty())
    throw Error("--inputs " + dir + ": the folder holds no input_K.pb files and no test_data_set_N folders with them",
                Error::Kind::Input, dir);
  return out;
}

std::vector<Loaded> read_npz_set(const std::string& file) {
  std::vector<Loaded> out;
  for (auto& [name, t] : read_npz(file)) {
    Loaded l;
    l.what = file + ": entry '" + name + ".npy'";
    size_t k = 0;
    // np.savez(a, b) names its positional arrays arr_0, arr_1...
    if (name.starts_with("arr_") &&
        std::from_chars(name.data() + 4, name.data() + name.size(), k).ptr == name.data() + name.size())
      l.position = k;
    l.name = name;
    l.tensor = std::move(t);
    out.push_back(std::move(l));
  }
  return out;
}

double parse_value(const std::string& spec, const std::string& text) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size())
    fail_usage("--input-value '", spec, "': expected NAME=NUMBER (e.g. sr=16000)");
  return v;
}

}  // namespace

SeedInputs::SeedInputs(const Graph& g, const std::vector<ValueId>& values, std::map<std::string, int64_t> dims,
                       const UserInputs& user, int64_t sequence) {
  std::map<std::string, std::string> given_by;
  // Inputs for every seed first: their dims hold for every set.
  std::vector<std::vector<Loaded>> sets;
  std::map<std::string, std::vector<Loaded>> per_name;  // NAME=FILE, in order
  std::vector<std::string> name_order;
  for (const std::string& spec : user.specs) {
    std::error_code ec;
    if (is_dir(spec)) {
      for (auto& s : read_input_folder(spec)) sets.push_back(std::move(s));
      continue;
    }
    if (spec.ends_with(".npz") && std::filesystem::exists(spec, ec)) {
      sets.push_back(read_npz_set(spec));
      continue;
    }
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      fail_usage("--inputs '", spec, "': expected NAME=FILE (.npy or .pb), FILE.npz or a test-data folder",
                 spec.ends_with(".npz") ? " (no such file)" : "");
    Loaded l;
    l.name = spec.substr(0, eq);
    const std::string file = spec.substr(eq + 1);
    l.what = "--inputs " + l.name + ": file " + file;
    if (file.ends_with(".npz"))
      fail_usage("--inputs ", spec, ": an .npz archive is a whole input set; give it as --inputs ", file,
                 " (its arrays named by input)");
    input_index(g, values, l.name, "--inputs " + spec + ": ");  // an unknown name before the file is read
    l.tensor = read_tensor_file(file);
    if (!per_name.count(l.name)) name_order.push_back(l.name);
    per_name[l.name].push_back(std::move(l));
  }
  // A name given once feeds every seed; names given k > 1 times make k sets, all alike in count.
  size_t k_sets = 0;
  for (auto& [name, list] : per_name) {
    if (list.size() == 1) {
      const size_t i = input_index(g, values, name, "");
      fixed_[i] = fit_input(g, values[i], name, list[0].what, std::move(list[0].tensor), dims, given_by);
      continue;
    }
    if (k_sets && list.size() != k_sets)
      fail_usage("--inputs: input '", name, "' is given ", list.size(), " times but another input ", k_sets,
                 " times; give each input once (every seed) or as many times as there are input sets");
    k_sets = list.size();
  }
  for (size_t k = 0; k < k_sets; ++k) {
    std::vector<Loaded> set;
    for (const std::string& name : name_order)
      if (per_name[name].size() > 1) set.push_back(std::move(per_name[name][k]));
    sets.insert(sets.begin() + static_cast<std::ptrdiff_t>(k), std::move(set));
  }
  for (const GivenInput& in : user.arrays) {
    const size_t i = input_index(g, values, in.name, "");
    if (fixed_.count(i)) fail("input '", in.name, "' is given twice");
    fixed_[i] = fit_input(g, values[i], in.name, in.what, in.tensor, dims, given_by);
  }
  for (const std::string& spec : user.values) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      fail_usage("--input-value '", spec, "': expected NAME=NUMBER (e.g. sr=16000)");
    const size_t i = input_index(g, values, spec.substr(0, eq), "--input-value " + spec + ": ");
    parse_value(spec, spec.substr(eq + 1));
    if (fixed_.count(i) || values_.count(i))
      fail_usage("--input-value ", spec, ": input '", spec.substr(0, eq), "' is given twice");
    values_[i] = spec.substr(eq + 1);
  }
  // A dim no input has is the caller's to refuse (the command line does, io/input_dims.h; the
  // optimizer's verification passes the dims it specialised, which a model may lack).
  plan_ = plan_inputs(g, values, dims, sequence);
  for (auto& loaded : sets) {
    Set set;
    std::map<std::string, int64_t> set_dims = dims;
    std::map<std::string, std::string> set_given_by = given_by;
    for (Loaded& l : loaded) {
      const size_t i = loaded_index(g, values, l);
      if (fixed_.count(i) || values_.count(i) || set.tensors.count(i))
        fail_usage(l.what, ": input '", str(g.value_name(values[i])), "' is given twice");
      set.tensors[i] = fit_input(g, values[i], std::string(str(g.value_name(values[i]))), l.what, std::move(l.tensor),
                                 set_dims, set_given_by);
    }
    set.plan = plan_inputs(g, values, set_dims, sequence);
    sets_.push_back(std::move(set));
  }
  // Notes on how an input is generated ("values in [0, 2)") are wrong for one the user gave.
  auto drop_given = [&](InputPlan& p, auto&& given) {
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (given(i)) {
        const std::string about = "input '" + p.inputs[i].name + "':";
        std::erase_if(p.notes, [&](const std::string& n) { return n.starts_with(about); });
      }
  };
  auto every_seed = [&](size_t i) { return fixed_.count(i) || values_.count(i); };
  drop_given(plan_, every_seed);
  for (Set& s : sets_) drop_given(s.plan, [&](size_t i) { return every_seed(i) || s.tensors.count(i); });
}

const InputPlan& SeedInputs::plan(size_t index) const { return index < sets_.size() ? sets_[index].plan : plan_; }

std::vector<std::string> SeedInputs::notes() const {
  std::vector<std::string> out = plan_.notes;
  if (!sets_.empty())
    out.push_back(std::to_string(sets_.size()) + " input set" + (sets_.size() == 1 ? "" : "s") +
                  " given: the first seed" + (sets_.size() == 1 ? "" : "s") + " run on " +
                  (sets_.size() == 1 ? "it" : "them"));
  return out;
}

std::vector<Tensor> SeedInputs::make(size_t index, uint64_t seed) const {
  const bool from_set = index < sets_.size();
  const InputPlan& p = plan(index);
  std::vector<Tensor> inputs = make_inputs(p, seed);
  for (const auto& [i, t] : fixed_) inputs[i] = t;
  if (from_set)
    for (const auto& [i, t] : sets_[index].tensors) inputs[i] = t;
  for (const auto& [i, text] : values_) {
    // Integers parse exactly (an int64 past 2^53 must not round through double).
    Tensor t = Tensor::alloc(p.inputs[i].dtype, p.inputs[i].shape);
    int64_t iv = 0;
    const bool is_int = std::from_chars(text.data(), text.data() + text.size(), iv).ptr == text.data() + text.size();
    double dv = is_int ? static_cast<double>(iv) : 0;
    if (!is_int) std::from_chars(text.data(), text.data() + text.size(), dv);
    if (is_int && (p.inputs[i].dtype == DType::Int64 || p.inputs[i].dtype == DType::Uint64)) {
      for (int64_t e = 0, n = t.numel(); e < n; ++e) std::memcpy(t.data + e * 8, &iv, 8);
    } else {
      std::vector<double> fill(static_cast<size_t>(t.numel()), dv);
      cast_into(Tensor::view(DType::Double, t.shape, fill.data()), t);
    }
    inputs[i] = std::move(t);
  }
  return inputs;
}

std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values,
                                   std::map<std::string, int64_t> dims, const std::vector<std::string>& files,
                                   uint64_t seed, InputPlan& plan) {
  SeedInputs in(g, values, std::move(dims), UserInputs{.specs = files, .values = {}, .arrays = {}});
  plan = in.plan(0);
  if (!plan.unknown_dims.empty()) fail_usage(plan.unknown_dims[0]);
  return in.make(0, seed);
}

std::vector<Tensor> prepare_inputs(const Graph& g, const std::vector<ValueId>& values,
                                   std::map<std::string, int64_t> dims, std::vector<GivenInput> given, uint64_t seed,
                                   InputPlan& plan) {
  SeedInputs in(g, values, std::move(dims), UserInputs{.specs = {}, .values = {}, .arrays = std::move(given)});
  plan = in.plan(0);
  if (!plan.unknown_dims.empty()) fail_usage(plan.unknown_dims[0]);
  return in.make(0, seed);
}

}  // namespace onnxforge::rt
