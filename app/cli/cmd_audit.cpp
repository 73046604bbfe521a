// onnxforge audit MODEL... [--json]
//
// Per model: the M11 forensics (what the export wastes), the fusion census (per fusion into a
// standard op: blocks found, fusable at the model's opset, fusable after --target-opset, missed
// with the first check that failed) and the architecture fingerprint. One table over all models.
//
// The work is passes::audit_model (passes/audit.h); this file prints it.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "passes/audit.h"

namespace onnxforge::cli {
namespace {

struct Options {
  std::vector<std::string> models;
  bool json = false;
};

using Audit = passes::AuditResult;

std::string short_name(const std::string& path) {
  std::string s = path.substr(path.find_last_of('/') + 1);
  if (s.size() > 5 && s.ends_with(".onnx")) s.resize(s.size() - 5);
  return s;
}

void print_table(const std::vector<Audit>& audits) {
  const size_t w0 = 26;
  size_t w = 12;
  for (const auto& a : audits)
    w = std::max({w, short_name(a.path).size() + 2, std::string(family_name(a.fingerprint.family)).size() + 2});
  auto row = [&](const std::string& label, auto cell) {
    std::cout << std::left << std::setw(static_cast<int>(w0)) << label;
    for (const auto& a : audits) std::cout << std::right << std::setw(static_cast<int>(w)) << cell(a);
    std::cout << "\n";
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  row("model", [&](const Audit& a) { return short_name(a.path); });
  row("family", [](const Audit& a) { return std::string(family_name(a.fingerprint.family)); });
  row("opset", [&](const Audit& a) { return num(a.opset); });
  row("nodes (simplified)", [&](const Audit& a) { return num(a.nodes) + " (" + num(a.nodes_simplified) + ")"; });
  std::cout << "forensics\n";
  row("  shape chains", [&](const Audit& a) { return num(a.forensics.shape_chains); });
  row("  Reshape->Reshape", [&](const Audit& a) { return num(a.forensics.consecutive_reshapes); });
  row("  Transpose->Transpose", [&](const Audit& a) { return num(a.forensics.consecutive_transposes); });
  row("  Cast chains", [&](const Audit& a) { return num(a.forensics.cast_chains); });
  row("  no-op Transpose/Reshape",
      [&](const Audit& a) { return num(a.forensics.noop_transposes) + "/" + num(a.forensics.noop_reshapes); });
  row("  no-op Expand", [&](const Audit& a) { return num(a.forensics.noop_expands); });
  row("  3-D MatMul + bias", [&](const Audit& a) { return num(a.forensics.matmul3d_add); });
  row("  constant-only nodes", [&](const Audit& a) { return num(a.forensics.constant_subgraph_nodes); });
  row("  LayerNorm decomposed", [&](const Audit& a) { return num(a.forensics.layer_norm_decomposed); });
  row("  attention blocks", [&](const Audit& a) { return num(a.forensics.attention_blocks); });
  auto top = [](const std::map<std::string, int64_t>& m) {
    std::string best;
    int64_t n = 0;
    for (const auto& [k, v] : m)
      if (v > n) best = k, n = v;
    return best.empty() ? std::string("-") : best;
  };
  row("  Q/K/V projections", [&](const Audit& a) { return top(a.forensics.qkv_pattern); });
  row("  attention scale", [&](const Audit& a) { return top(a.forensics.attention_scale); });
  row("  Expand into broadcast", [&](const Audit& a) { return num(a.forensics.expand_into_broadcast); });
  if (!audits.empty() && !audits[0].census.empty()) {
    std::cout << "fusion census (found: here + after upgrade + missed)\n";
    for (size_t k = 0; k < audits[0].census.size(); ++k) {
      row("  " + audits[0].census[k].op + " (" + std::to_string(audits[0].census[k].min_opset) + ")",
          [&](const Audit& a) {
            const auto& r = a.census[k];
            if (r.found == 0) return std::string("-");
            return num(r.found) + ": " + num(r.fusable_here) + "+" + num(r.fusable_after_upgrade) + "+" +
                   num(r.missed_total());
          });
    }
  }
  // Reasons, once per model that has misses.
  for (const auto& a : audits) {
    for (const auto& r : a.census)
      for (const auto& [reason, n] : r.missed)
        std::cout << short_name(a.path) << ": " << r.op << " missed " << n << ": " << reason << "\n";
    const std::string hint = passes::upgrade_hint(a.census);
    if (!hint.empty()) std::cout << short_name(a.path) << ": " << hint << "\n";
  }
}

int run(const Options& o) {
  std::vector<Audit> audits;
  for (const auto& p : o.models) audits.push_back(passes::audit_model(p));
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& a : audits) out.push_back(a.to_json());
    std::cout << out.dump(2) << "\n";
  } else {
    print_table(audits);
  }
  return 0;
}

Command reg{
    "audit",
    "What an export wastes, which transformer blocks fuse (now, after an upgrade, or why not), the architecture family",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("models", o->models, "Models to audit")->required();
      app.add_flag("--json", o->json, "Print JSON (one object per model)");
      return [o] { return run(*o); };
    }};

}  // namespace
}  // namespace onnxforge::cli
