#include "io/input_dims.h"

#include <algorithm>
#include <charconv>
#include <span>

#include "ir/error.h"

namespace onnxforge {
namespace {

std::optional<int64_t> non_negative(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

std::string shape_text(std::span<const Dim> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i].known()         ? std::to_string(shape[i].value)
                           : shape[i].param.empty() ? std::string("?")
                                                    : std::string(str(shape[i].param)));
  return s + "]";
}

}  // namespace

std::optional<DimSpec> parse_dim_spec(const std::string& s) {
  auto eq = s.rfind('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  auto v = non_negative(std::string_view(s).substr(eq + 1));
  if (!v) return std::nullopt;
  return DimSpec{s.substr(0, eq), *v};
}

// NAME:d0,d1,... (the last ':' separates: input names may contain ':'); "NAME:" is a scalar.
std::optional<InputShapeSpec> parse_input_shape_spec(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  InputShapeSpec spec{s.substr(0, colon), {}};
  std::string_view rest = std::string_view(s).substr(colon + 1);
  while (!rest.empty()) {
    auto comma = rest.find(',');
    auto v = non_negative(rest.substr(0, comma));
    if (!v) return std::nullopt;
    spec.dims.push_back(*v);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (rest.empty()) return std::nullopt;  // trailing comma
  }
  return spec;
}

std::map<std::string, int64_t> parse_dim_specs(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> dims;
  for (const std::string& s : specs) {
    auto d = parse_dim_spec(s);
    if (!d) fail_usage("--dim: expects NAME=N with a non-negative integer N, got '", s, "'");
    auto [it, fresh] = dims.emplace(d->name, d->value);
    if (!fresh && it->second != d->value)
      fail_usage("--dim ", d->name, " is given twice with different sizes (", it->second, " and ", d->value, ")");
  }
  return dims;
}

std::map<std::string, int64_t> resolve_input_dims(const std::map<std::string, int64_t>& given,
                                                  const std::vector<std::string>& input_shapes,
                                                  const std::vector<Model*>& models) {
  std::map<std::string, int64_t> dims;
  std::map<std::string, std::string> given_by;
  for (const auto& [name, value] : given) {
    if (value < 0) fail_usage("--dim ", name, "=", value, ": a dimension must not be negative");
    dims.emplace(name, value);
    given_by[name] = "--dim " + name + "=" + std::to_string(value);
  }
  // Every symbolic dim key of the models' inputs (a dim's name, or INPUT:AXIS when unnamed).
  std::vector<std::string> known;
  auto add_known = [&](const std::string& k) {
    if (std::find(known.begin(), known.end(), k) == known.end()) known.push_back(k);
  };
  for (Model* m : models)
    for (ValueId v : m->main().graph_inputs()) {
      if (m->main().is_initializer(v)) continue;
      auto shape = m->main().shape(v);
      for (size_t i = 0; i < shape.size(); ++i)
        if (!shape[i].known()) {  // by its name, or as INPUT:AXIS (as `run` accepts)
          if (!shape[i].param.empty()) add_known(std::string(str(shape[i].param)));
          add_known(std::string(str(m->main().value_name(v))) + ":" + std::to_string(i));
        }
    }
  for (const auto& [key, value] : dims)
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      fail_usage("--dim ", key, "=", value, ": the model's inputs have no symbolic dim '", key, "' (",
                 list.empty() ? std::string("they have none") : "theirs: " + list, ")");
    }
  for (const std::string& s : input_shapes) {
    auto spec = parse_input_shape_spec(s);
    if (!spec) fail_usage("--input-shape: expects NAME:D0,D1,..., got '", s, "'");
    for (Model* m : models) {
      Graph& g = m->main();
      auto v = g.find_value(spec->name);
      if (!v || !g.is_graph_input(*v) || g.is_initializer(*v)) {
        std::string names;
        for (ValueId in : g.graph_inputs())
          if (!g.is_initializer(in)) names += (names.empty() ? "" : ", ") + std::string(str(g.value_name(in)));
        fail_usage("--input-shape ", s, ": the model has no input '", spec->name,
                   "' (inputs: ", names.empty() ? std::string("none") : names, ")");
      }
      std::vector<Dim> declared(g.shape(*v).begin(), g.shape(*v).end());
      if (g.has_shape(*v) && declared.size() != spec->dims.size())
        fail_usage("--input-shape ", s, ": input '", spec->name, "' has rank ", declared.size(), " ",
                   shape_text(declared), ", the option gives ", spec->dims.size(), " dims");
      std::vector<Dim> shape;
      for (size_t i = 0; i < spec->dims.size(); ++i) {
        const int64_t want = spec->dims[i];
        if (i < declared.size() && declared[i].known() && declared[i].value != want)
          fail_usage("--input-shape ", s, ": axis ", i, " of input '", spec->name, "' is ", declared[i].value,
                     " in the model ", shape_text(declared));
        if (i < declared.size() && !declared[i].known() && !declared[i].param.empty()) {
          // A named dim: other inputs sharing it get the same size.
          std::string key(str(declared[i].param));
          auto [it, fresh] = dims.emplace(key, want);
          if (!fresh && it->second != want)
            fail_usage("--input-shape ", s, " gives dim '", key, "' = ", want, " but ",
                       given_by.count(key) ? given_by[key] : "another option", " gives ", it->second);
          given_by.emplace(key, "--input-shape " + s);
        }
        shape.push_back(Dim::of(want));
      }
      g.set_type(*v, g.dtype(*v), shape);
    }
  }
  // Dims the shapes just fixed are no longer symbolic in the inputs they were read from: keep
  // only those some input still has (the runtime refuses a dim that no input has).
  std::vector<std::string> still;
  for (Model* m : models)
    for (ValueId v : m->main().graph_inputs())
      for (size_t i = 0; i < m->main().shape(v).size(); ++i) {
        const Dim& d = m->main().shape(v)[i];
        if (d.known()) continue;
        still.push_back(std::string(str(m->main().value_name(v))) + ":" + std::to_string(i));
        if (!d.param.empty()) still.push_back(std::string(str(d.param)));
      }
  if (!input_shapes.empty())
    std::erase_if(dims, [&](const auto& kv) { return std::find(still.begin(), still.end(), kv.first) == still.end(); });
  return dims;
}

}  // namespace onnxforge
