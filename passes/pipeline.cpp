#include "passes/pipeline.h"

#include <algorithm>

#include "io/model_io.h"
#include "io/units.h"
#include "ir/error.h"
#include "passes/registry.h"

namespace onnxforge::passes {

std::vector<const Pass*> select_passes(const std::vector<std::string>& only, const std::vector<std::string>& skip) {
  auto known = [](const std::string& n) {
    if (find_pass(n)) return;
    std::string list;
    for (const Pass* p : all_passes()) list += " " + p->name();
    fail("unknown pass '", n, "'; passes are:", list);
  };
  for (const auto& n : only) known(n);
  for (const auto& n : skip) known(n);
  std::vector<const Pass*> out;
  std::vector<const Pass*> candidates = all_passes();
  if (!only.empty())  // a decomposition runs only when named (or put in by a --target), before the pipeline
    candidates.insert(candidates.begin(), decomposition_passes().begin(), decomposition_passes().end());
  for (const Pass* p : candidates) {
    if (!only.empty() && std::find(only.begin(), only.end(), p->name()) == only.end()) continue;
    if (std::find(skip.begin(), skip.end(), p->name()) != skip.end()) continue;
    out.push_back(p);
  }
  return out;
}

namespace {
// Passes that changed the initializer bytes, largest addition first.
std::vector<const PassStats*> passes_by_bytes(const RunResult& r) {
  std::vector<const PassStats*> out;
  for (const PassStats& s : r.passes)
    if (s.removed.bytes != 0) out.push_back(&s);
  std::stable_sort(out.begin(), out.end(),
                   [](const PassStats* a, const PassStats* b) { return a->removed.bytes < b->removed.bytes; });
  return out;
}

std::string signed_bytes(int64_t added) {
  return (added < 0 ? "-" : "+") + human_bytes(static_cast<uint64_t>(added < 0 ? -added : added));
}
}  // namespace

nlohmann::json stats_json(const RunResult& r) {
  nlohmann::json j;
  auto size = [](const ModelSize& s) {
    return nlohmann::json{{"nodes", s.nodes},
                          {"initializers", s.initializers},
                          {"initializer_bytes", s.bytes},
                          {"constant_node_bytes", s.constant_bytes}};
  };
  j["before"] = size(r.before);
  j["after"] = size(r.after);
  j["rounds"] = r.rounds;
  j["seconds"] = r.seconds;
  j["worst_accuracy_class"] = static_cast<int>(r.worst);
  for (const PassStats& s : r.passes)
    j["passes"].push_back({{"name", s.name},
                           {"accuracy_class", static_cast<int>(s.accuracy)},
                           {"nodes_removed", s.removed.nodes},
                           {"initializers_removed", s.removed.initializers},
                           {"bytes_removed", s.removed.bytes},
                           {"matches_applied", s.applied},
                           {"rounds", s.rounds},
                           {"analyzed", s.analyzed},
                           {"skipped", s.skipped},
                           {"analyze_seconds", s.analyze_seconds},
                           {"apply_seconds", s.apply_seconds}});
  if (r.after.stored_bytes() > r.before.stored_bytes()) {
    nlohmann::json by_pass = nlohmann::json::array();
    for (const PassStats* p : passes_by_bytes(r))
      by_pass.push_back({{"name", p->name}, {"bytes_added", -p->removed.bytes}});
    j["growth"] = {{"bytes", r.after.stored_bytes() - r.before.stored_bytes()},
                   {"passes", by_pass},
                   {"constant_node_bytes_added", r.after.constant_bytes - r.before.constant_bytes}};
  }
  return j;
}

std::string growth_note(const RunResult& r) {
  const int64_t grew = r.after.stored_bytes() - r.before.stored_bytes();
  if (grew <= 0) return "";
  std::string s = "the output stores " + human_bytes(static_cast<uint64_t>(grew)) + " more than the input:";
  const char* sep = " ";
  for (const PassStats* p : passes_by_bytes(r)) {
    s += sep + p->name + " " + signed_bytes(-p->removed.bytes);
    sep = ", ";
  }
  if (int64_t c = r.after.constant_bytes - r.before.constant_bytes; c != 0)
    s += std::string(sep) + "Constant nodes " + signed_bytes(c);
  return s;
}

nlohmann::json verify_json(const VerifyResult& v) {
  nlohmann::json j{{"ok", v.ok}, {"max_diff", v.max_diff}};
  if (!v.error.empty()) j["error"] = v.error;
  j["degenerate"] = !v.degenerate.empty();
  if (!v.degenerate.empty()) j["degenerate_text"] = v.degenerate;
  for (const OutputDiff& d : v.outputs)
    j["outputs"].push_back(
        {{"name", d.name}, {"max_abs", d.max_abs}, {"max_rel", d.max_rel}, {"ok", d.ok}, {"problem", d.problem}});
  return j;
}

std::string first_breaking_pass(const std::filesystem::path& path, const std::vector<PreStep>& steps,
                                const std::vector<const Pass*>& passes, const RunOptions& options, const Reference& ref,
                                VerifyResult* failure) {
  auto model = load_model(path);
  specialise_dims(*model, options.pass.dims);
  AccuracyClass worst = AccuracyClass::Lossless;
  auto fails = [&] {
    VerifyResult v = ref.check(*model, tolerance_of(worst));
    if (!v.ok && failure) *failure = v;
    return !v.ok;
  };
  for (const PreStep& s : steps)
    if (s.run(*model) && fails()) return s.name;
  for (const Pass* p : passes) {
    const Pass* one[] = {p};
    RunResult r = run_passes(*model, one, options);
    if (r.passes[0].applied == 0) continue;
    if (static_cast<int>(p->accuracy()) > static_cast<int>(worst)) worst = p->accuracy();
    if (fails()) return p->name();
  }
  return "";
}

uint64_t parse_size(const std::string& s) {
  if (s.empty()) fail("empty size");
  size_t pos = 0;
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mul = 1;
  if (unit == "k" || unit == "K" || unit == "KiB")
    mul = 1024;
  else if (unit == "m" || unit == "M" || unit == "MiB")
    mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "G" || unit == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    fail("cannot read size '", s, "' (use a number with an optional K, M or G)");
  return static_cast<uint64_t>(v * mul);
}

}  // namespace onnxforge::passes
