// zoo report: merges OUTDIR/results/*.json into summary.json, summary.md and report.html, and
// compares against a baseline run (the CI gate).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "ir/error.h"
#include "zoo/zoo.h"

namespace onnxforge::zoo {

int max_diff_class(double max_diff) {
  if (!(max_diff > 0)) return -99;
  return static_cast<int>(std::ceil(std::log10(max_diff) - 1e-12));
}

Fit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  Fit f;
  f.n = std::min(x.size(), y.size());
  if (f.n < 2) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < f.n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(f.n);
  my /= static_cast<double>(f.n);
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < f.n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx > 0) {
    f.slope = sxy / sxx;
    f.intercept = my - f.slope * mx;
  } else {
    f.intercept = my;
  }
  f.r = sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
  return f;
}

std::string pass_kind(const std::string& pass) {
  if (pass.starts_with("fuse_") || pass.starts_with("annotate_")) return "fusion";
  if (pass.starts_with("eliminate_") || pass.starts_with("fold_") || pass.starts_with("simplify_"))
    return "elimination";
  return "other";
}

namespace {

// A line is drawn (and its slope given) only through enough points: a "fusion passes" fit of 6
// models once had slope 7.7 and r 0.66 from a single model with a fused node.
constexpr size_t kFitMinPoints = 8;

nlohmann::json fit_json(const std::vector<double>& x, const std::vector<double>& y) {
  Fit f = least_squares(x, y);
  std::set<double> distinct(x.begin(), x.end());
  return {{"n", f.n},
          {"slope", f.slope},
          {"intercept", f.intercept},
          {"r", f.r},
          {"enough", f.n >= kFitMinPoints && distinct.size() >= 3}};
}

double num(const nlohmann::json& j, const char* key, double dflt = 0) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
}

std::string fmt(double v, int prec = 3) {
  std::ostringstream os;
  os << std::setprecision(prec) << v;
  return os.str();
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A results file that parses but is not a result (`[]`, `null`, a field of the wrong type).
Error not_a_result(const fs::path& f, const std::string& why) {
  return Error(
      "zoo report: '" + f.string() + "' is not a zoo result (" + why + "); delete it and rerun `zoo run --resume`",
      Error::Kind::Input, f.string());
}

void write_text(const fs::path& p, const std::string& text) {
  fs::path tmp = p.string() + ".tmp." + std::to_string(::getpid());  // two reports of one OUTDIR may overlap
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) fail("zoo report: cannot write '", tmp.string(), "'");
  }
  fs::rename(tmp, p);
}

}  // namespace

namespace {

using Points = std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>;

// Attribution: cumulative (in pipeline order) and isolated (alone on the original) Δnodes per pass
// of one model's `attribute` step `a`, and the share of eliminations and fusions in its reduction.
void add_attribution(nlohmann::json& m, const nlohmann::json& a, double nodes_before,
                     std::set<std::string>& pass_names) {
  nlohmann::json pa = nlohmann::json::object();
  double elim = 0, fus = 0;
  for (const auto& [p, v] : a["cumulative"].items()) {
    pass_names.insert(p);
    pa[p] = {{"cumulative_d_nodes", v.value("d_nodes", 0)},
             {"cumulative_d_bytes", v.value("d_bytes", 0)},
             {"seconds", v.value("seconds", 0.0)}};
    if (a.contains("isolated") && a["isolated"].contains(p)) {
      pa[p]["isolated_d_nodes"] = a["isolated"][p].value("d_nodes", 0);
      pa[p]["isolated_d_bytes"] = a["isolated"][p].value("d_bytes", 0);
    }
    std::string kind = pass_kind(p);
    if (kind == "elimination") elim -= v.value("d_nodes", 0);
    if (kind == "fusion") fus -= v.value("d_nodes", 0);
  }
  m["passes"] = pa;
  if (nodes_before > 0) {
    m["elimination_reduction_pct"] = 100.0 * elim / nodes_before;
    m["fusion_reduction_pct"] = 100.0 * fus / nodes_before;
  }
}

// What the report gathers over the result files: a row per model, the counts, and the points of the
// reduction-vs-speed-up fits per family and per kind of pass.
struct Gathered {
  nlohmann::json models = nlohmann::json::array();
  std::set<std::string> pass_names, machines, option_keys;
  Points by_family, by_kind;
  int ok = 0, failed = 0;

  nlohmann::json row(const fs::path& f, const nlohmann::json& r) {
    if (!r.is_object() || !r.contains("status") || !r["status"].is_string() ||
        (r.contains("summary") && !r["summary"].is_object()))
      throw not_a_result(f, "expected an object with \"status\" and \"summary\", found " + std::string(r.type_name()));
    static const nlohmann::json kEmpty = nlohmann::json::object();
    const nlohmann::json& s = r.contains("summary") ? r["summary"] : kEmpty;
    nlohmann::json m = {{"id", r.value("id", f.stem().string())},
                        {"name", r.value("name", "")},
                        {"rel", r.value("rel", "")},
                        {"status", r.value("status", "failed")},
                        {"family", s.value("family", "unknown")}};
    option_keys.insert(r.value("options_key", ""));
    if (r.contains("machine")) {
      const auto& mc = r["machine"];
      machines.insert(mc.value("cpu", "?") + " | " + mc.value("isa", "?") + " | " +
                      std::to_string(mc.value("threads", 0)) + " threads");
      m["machine"] = mc;
    }
    for (const char* k :
         {"nodes_before",  "nodes_after",       "bytes_before",     "bytes_after",       "worst_accuracy_class",
          "max_diff",      "max_diff_class",    "verified",         "latency_before_ms", "latency_after_ms",
          "latency_ratio", "latency_min_ratio", "optimize_seconds", "peak_rss_kb",       "ort_before_ms",
          "ort_after_ms",  "ort_ratio",         "ours_vs_ort",      "ort_error",         "latency_log_ratios",
          "cpu_before_ms", "cpu_after_ms",      "cpu_ratio",        "remeasured",        "steps_ok"})
      if (s.contains(k)) m[k] = s[k];
    if (num(s, "ours_vs_ort") > 0) m["speedup_vs_ort"] = 1.0 / num(s, "ours_vs_ort");  // the speed-up convention
    if (m["status"] != "ok") {
      ++failed;
      m["error"] = r.value("error", "unknown error");
      m["failure"] = r.value("failure", "error");
      m["failed_step"] = r.value("failed_step", "");
    } else {
      ++ok;
    }
    double nb = num(s, "nodes_before"), na = num(s, "nodes_after", nb);
    if (nb > 0 && s.contains("nodes_after")) m["node_reduction_pct"] = 100.0 * (nb - na) / nb;
    if (s.contains("latency_ratio") && num(s, "latency_ratio") > 0) {
      m["speedup"] = 1.0 / num(s, "latency_ratio");
      m["latency_improvement_pct"] = 100.0 * (1.0 - num(s, "latency_ratio"));
    }
    if (r.contains("steps") && r["steps"].contains("attribute"))
      add_attribution(m, r["steps"]["attribute"]["models"][0], nb, pass_names);
    return m;
  }

  void add(const fs::path& f, const nlohmann::json& r) {
    nlohmann::json m = row(f, r);
    if (m["status"] == "ok" && m.contains("node_reduction_pct") && m.contains("latency_improvement_pct")) {
      for (const std::string& fam : {m["family"].get<std::string>(), std::string("all")}) {
        by_family[fam].first.push_back(m["node_reduction_pct"]);
        by_family[fam].second.push_back(m["latency_improvement_pct"]);
      }
      for (const char* kind : {"elimination", "fusion"}) {
        std::string key = std::string(kind) + "_reduction_pct";
        if (m.contains(key)) {
          by_kind[kind].first.push_back(m[key]);
          by_kind[kind].second.push_back(m["latency_improvement_pct"]);
        }
      }
    }
    models.push_back(std::move(m));
  }
};

}  // namespace

nlohmann::json summarize(const fs::path& outdir) {
  fs::path dir = outdir / "results";
  if (!fs::is_directory(dir))
    fail("zoo report: '", outdir.string(), "' has no results/ folder; is it the -o OUTDIR of a `zoo run`?");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  Gathered g;
  for (const fs::path& f : files) {
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(read_text(f));
    } catch (const std::exception& e) {
      throw Error("zoo report: '" + f.string() + "' is not valid JSON (" + e.what() +
                      "); delete it and rerun `zoo run --resume`",
                  Error::Kind::Input, f.string());
    }
    try {
      g.add(f, r);
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type, deeper down
      throw not_a_result(f, e.what());
    }
  }
  std::sort(g.models.begin(), g.models.end(), [](const auto& a, const auto& b) { return a["id"] < b["id"]; });
  nlohmann::json fits = {{"family", nlohmann::json::object()}, {"pass_kind", nlohmann::json::object()}};
  for (const auto& [fam, xy] : g.by_family) fits["family"][fam] = fit_json(xy.first, xy.second);
  for (const auto& [kind, xy] : g.by_kind) fits["pass_kind"][kind] = fit_json(xy.first, xy.second);
  nlohmann::json out = {{"format", 1},
                        {"outdir", fs::absolute(outdir).string()},
                        {"models", g.models},
                        {"counts", {{"models", g.ok + g.failed}, {"ok", g.ok}, {"failed", g.failed}}},
                        {"passes", g.pass_names},
                        {"machines", g.machines},
                        {"fits", fits}};
  const double sigma = run_spread(out["models"]);
  if (sigma > 0) {
    size_t n = 0;
    for (const auto& m : out["models"]) n += m.contains("latency_log_ratios") && m["latency_log_ratios"].size() >= 2;
    out["latency_spread"] = {{"sigma", sigma}, {"models", n}};
  }
  if (g.option_keys.size() > 1)
    out["warnings"] = {"the results were made with " + std::to_string(g.option_keys.size()) +
                       " different option sets (mixed runs in one OUTDIR)"};
  return out;
}

double run_spread(const nlohmann::json& models) {
  // Every pair of runs of one model differs by sigma * sqrt(2) * |Z|, Z standard normal, whose
  // median is 0.6745: the median of all such differences over all models, so scaled, is sigma.
  // A median, because on a busy machine a whole bench run is sometimes disturbed (two busy loops
  // on 2 cores: one run in five or so read 10x off), and a variance would make every threshold wide.
  std::vector<double> diffs;
  size_t models_with_runs = 0;
  for (const auto& m : models) {
    if (!m.is_object() || !m.contains("latency_log_ratios") || !m["latency_log_ratios"].is_array()) continue;
    std::vector<double> l;
    for (const auto& x : m["latency_log_ratios"])
      if (x.is_number()) l.push_back(x.get<double>());
    if (l.size() < 2) continue;
    ++models_with_runs;
    for (size_t i = 0; i < l.size(); ++i)
      for (size_t j = i + 1; j < l.size(); ++j) diffs.push_back(std::abs(l[i] - l[j]));
  }
  if (models_with_runs < 3) return 0;
  return median(std::move(diffs)) / (0.6745 * std::sqrt(2.0));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

LatencyVerdict latency_gate(const std::vector<double>& now_logs, const std::vector<double>& base_logs, double sigma,
                            std::optional<double> max_slowdown) {
  LatencyVerdict v;
  if (now_logs.empty() || base_logs.empty()) return v;
  // The median of the runs' log ratios: one run disturbed end to end (a log ratio of -1.48 beside
  // +0.12 for the same model under two busy loops) does not move it.
  const double mn = median(now_logs), mb = median(base_logs), d = mn - mb;
  // The model's own run-to-run spread when its runs disagree more than the zoo's typical model
  // (mobilenet_v3_small under two busy loops: runs 2.76x apart): the median absolute deviation
  // from each side's median, scaled to a standard deviation (1.4826), so one wild run does not
  // make every threshold wide.
  std::vector<double> dev;
  for (double x : now_logs) dev.push_back(std::abs(x - mn));
  for (double x : base_logs) dev.push_back(std::abs(x - mb));
  if (now_logs.size() + base_logs.size() >= 4) sigma = std::max(sigma, 1.4826 * median(dev));
  v.sigma = sigma;
  const double se =
      sigma * std::sqrt(1.0 / static_cast<double>(now_logs.size()) + 1.0 / static_cast<double>(base_logs.size()));
  v.ratio = std::exp(d);
  v.ci_low = std::exp(d - 1.96 * se);
  v.ci_high = std::exp(d + 1.96 * se);
  if (max_slowdown) {
    v.threshold = *max_slowdown;
    v.regressed = v.ratio > 1.0 + v.threshold && v.ci_low > 1.0;
  } else {
    v.threshold = std::max(kMinSlowdown, std::exp(3.0 * se) - 1.0);
    v.regressed = v.ratio > 1.0 + v.threshold;
  }
  return v;
}

nlohmann::json regressions(const nlohmann::json& now, const nlohmann::json& base, std::optional<double> max_slowdown,
                           const std::string& latency_stat) {
  const char* ratio = latency_stat == "min" ? "latency_min_ratio" : "latency_ratio";
  // The run-to-run noise: the baseline's recorded spread, or today's when the machine is noisier.
  double sigma = 0;
  for (const nlohmann::json* s : {&base, &now})
    if (s->contains("latency_spread") && (*s)["latency_spread"].is_object())
      sigma = std::max(sigma, (*s)["latency_spread"].value("sigma", 0.0));
  std::map<std::string, const nlohmann::json*> cur;
  for (const auto& m : now["models"]) cur[m["id"].get<std::string>()] = &m;
  nlohmann::json out = nlohmann::json::array();
  auto add = [&](const nlohmann::json& m, const std::string& what, const std::string& before,
                 const std::string& after) {
    out.push_back(
        {{"id", m["id"]}, {"name", m.value("name", "")}, {"check", what}, {"baseline", before}, {"now", after}});
  };
  for (const auto& b : base["models"]) {
    auto it = cur.find(b["id"].get<std::string>());
    if (it == cur.end()) {
      add(b, "missing", b.value("status", "?"), "not in this run");
      continue;
    }
    const nlohmann::json& m = *it->second;
    bool base_ok = b.value("status", "") == "ok";
    if (m.value("status", "") != "ok") {
      // A model that failed before and fails the same way is not new; anything else is.
      if (base_ok || m.value("failure", "") != b.value("failure", ""))
        add(m, m.value("failure", "") == "verification" ? "verification fails" : "fails",
            base_ok ? "ok" : b.value("failure", "failed"), m.value("error", "failed"));
      continue;
    }
    if (!base_ok) continue;  // fixed: not a regression
    if (b.value("verified", false) && !m.value("verified", false)) add(m, "verification", "verified", "not verified");
    if (m.contains("nodes_after") && b.contains("nodes_after") &&
        m["nodes_after"].get<int64_t>() > b["nodes_after"].get<int64_t>())
      add(m, "more nodes", std::to_string(b["nodes_after"].get<int64_t>()),
          std::to_string(m["nodes_after"].get<int64_t>()));
    if (m.contains("max_diff_class") && b.contains("max_diff_class") &&
        m["max_diff_class"].get<int>() > b["max_diff_class"].get<int>())
      add(m, "larger max_diff class", fmt(num(b, "max_diff")), fmt(num(m, "max_diff")));
    if (latency_stat == "median" && sigma > 0 && m.contains("latency_log_ratios") && b.contains("latency_log_ratios")) {
      // Paired after/before ratios of both runs, the noise band from the recorded spread.
      LatencyVerdict v = latency_gate(m["latency_log_ratios"].get<std::vector<double>>(),
                                      b["latency_log_ratios"].get<std::vector<double>>(), sigma, max_slowdown);
      if (v.regressed)
        add(m, "slower (paired after/before latency)", fmt(num(b, "latency_ratio")),
            fmt(num(m, "latency_ratio")) + " (+" + fmt(100.0 * (v.ratio - 1.0), 2) + "%, 95% CI +" +
                fmt(100.0 * (v.ci_low - 1.0), 2) + "% to +" + fmt(100.0 * (v.ci_high - 1.0), 2) + "% > " +
                fmt(100.0 * v.threshold, 2) + "%" + (m.contains("remeasured") ? ", re-measured" : "") + ")");
    } else if (m.contains(ratio) && b.contains(ratio)) {
      // A baseline without a recorded spread (an older summary): a fixed threshold.
      const double t = max_slowdown.value_or(0.10);
      double rb = b[ratio], rn = m[ratio];
      if (rn > rb * (1.0 + t))
        add(m, latency_stat == "min" ? "slower (after/before fastest run)" : "slower (after/before latency)", fmt(rb),
            fmt(rn) + " (+" + fmt(100.0 * (rn / rb - 1.0), 2) + "% > " + fmt(100.0 * t, 2) + "%)");
    }
  }
  return out;
}

namespace {

// A speed-up as a person reads it: 2 decimals and the sign.
std::string ratio_text(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << v << "×";
  return os.str();
}

std::string markdown(const nlohmann::json& s, const nlohmann::json* regs) {
  std::ostringstream md;
  const auto& c = s["counts"];
  md << "# onnxforge zoo report\n\n" << c["models"] << " models: " << c["ok"] << " ok, " << c["failed"] << " failed.\n";
  for (const auto& mc : s["machines"]) md << "Machine: " << mc.get<std::string>() << "\n";
  md << "\nSpeed-up is before/after latency (above 1: faster), the paired ratio of alternating runs.\n"
        "\n| model | family | nodes | Δnodes | max_diff | class | before ms | after ms | speed-up | CPU speed-up |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& m : s["models"]) {
    if (m["status"] != "ok") continue;
    md << "| " << m["name"].get<std::string>() << " | " << m["family"].get<std::string>() << " | "
       << m.value("nodes_before", 0) << " → " << m.value("nodes_after", 0) << " | ";
    if (m.contains("node_reduction_pct")) {
      double pct = m["node_reduction_pct"].get<double>();
      md << (pct > 0 ? "−" : pct < 0 ? "+" : "") << fmt(std::abs(pct), 3) << "%";
    }
    md << " | ";
    md << (!m.contains("max_diff")   ? ""
           : num(m, "max_diff") == 0 ? "0 (exact)"
                                     : fmt(num(m, "max_diff"), 2))
       << " | " << m.value("worst_accuracy_class", 0) << " | ";
    if (m.contains("latency_before_ms"))
      md << fmt(num(m, "latency_before_ms"), 3) << " | " << fmt(num(m, "latency_after_ms"), 3) << " | "
         << ratio_text(num(m, "speedup")) << " | "
         << (num(m, "cpu_ratio") > 0 ? ratio_text(1.0 / num(m, "cpu_ratio")) : "") << " |\n";
    else
      md << " | | | |\n";
  }
  bool any_ort = false;
  for (const auto& m : s["models"])
    if (m["status"] == "ok" && (m.contains("ort_after_ms") || m.contains("ort_error"))) {
      if (!any_ort)
        md << "\n## ONNX Runtime (--ort: same inputs, original and optimized alternating)\n\n"
              "| model | ORT before ms | ORT after ms | ORT speed-up | speed-up vs ORT (optimized: ORT ms / ours) "
              "|\n|---|---:|---:|---:|---:|\n";
      any_ort = true;
      md << "| " << m["name"].get<std::string>() << " | ";
      if (m.contains("ort_after_ms")) {
        md << fmt(num(m, "ort_before_ms"), 3) << " | " << fmt(num(m, "ort_after_ms"), 3) << " | "
           << ratio_text(1.0 / num(m, "ort_ratio", 1)) << " | "
           << (m.contains("speedup_vs_ort") ? ratio_text(num(m, "speedup_vs_ort")) : "") << " |\n";
      } else {
        std::string e = m["ort_error"].get<std::string>();
        std::replace(e.begin(), e.end(), '\n', ' ');
        std::replace(e.begin(), e.end(), '|', '/');
        md << "not run: " << e.substr(0, 200) << " | | | |\n";
      }
    }
  bool any_fail = false;
  for (const auto& m : s["models"])
    if (m["status"] != "ok") {
      if (!any_fail)
        md << "\n## Failures (with the steps that succeeded)\n\n| model | family | nodes | succeeded | failed step | "
              "kind | error |\n"
              "|---|---|---:|---|---|---|---|\n";
      any_fail = true;
      std::string e = m.value("error", "");
      std::replace(e.begin(), e.end(), '\n', ' ');
      std::replace(e.begin(), e.end(), '|', '/');
      if (e.size() > 300) e = e.substr(0, 300) + "...";
      std::string ok_steps;
      for (const auto& x : m.value("steps_ok", nlohmann::json::array()))
        ok_steps += (ok_steps.empty() ? "" : ", ") + x.get<std::string>();
      md << "| " << m["name"].get<std::string>() << " | " << m.value("family", "") << " | "
         << (m.contains("nodes_before") ? std::to_string(m["nodes_before"].get<int64_t>()) : "") << " | " << ok_steps
         << " | " << m.value("failed_step", "") << " | " << m.value("failure", "") << " | " << e << " |\n";
    }
  md << "\n## Node reduction vs latency improvement (least squares, Pearson r; a slope needs " << kFitMinPoints
     << " models and 3 distinct x)\n\n| group | n | slope | r |\n|---|---:|---:|---:|\n";
  for (const char* g : {"family", "pass_kind"})
    for (const auto& [k, f] : s["fits"][g].items())
      md << "| " << k << (std::string(g) == "pass_kind" ? " passes" : "") << " | " << f["n"] << " | "
         << (f.value("enough", false) ? fmt(f["slope"].get<double>()) : "— (too few points)") << " | "
         << fmt(f["r"].get<double>(), 2) << " |\n";
  if (regs) {
    if (s.contains("gate") && s["gate"].contains("rule"))
      md << "\nLatency gate: " << s["gate"]["rule"].get<std::string>() << ".\n";
    if (regs->empty())
      md << "\n## Baseline gate\n\nNo regressions.\n";
    else {
      md << "\n## Regressions against the baseline\n\n| model | check | baseline | now |\n|---|---|---|---|\n";
      for (const auto& r : *regs)
        md << "| " << r["name"].get<std::string>() << " | " << r["check"].get<std::string>() << " | "
           << r["baseline"].get<std::string>() << " | " << r["now"].get<std::string>() << " |\n";
    }
  }
  return md.str();
}

// The page's own script: every chart from the inlined data; it records what it drew in
// <body data-charts=... data-points=... data-errors=...> and each chart's axis labels in
// <pre id="drawn"> so a headless browser can read them back.
constexpr const char* kPageScript = R"js(
(function () {
  const errors = [];
  window.addEventListener('error', e => { errors.push(String(e.message)); document.body.dataset.errors = errors.join(' | '); });
  const S = JSON.parse(document.getElementById('zoo-data').textContent);
  const ok = S.models.filter(m => m.status === 'ok');
  const palette = ['#4e79a7','#f28e2b','#e15759','#76b7b2','#59a14f','#edc948','#b07aa1','#ff9da7','#9c755f','#bab0ac'];
  const families = [...new Set(ok.map(m => m.family))].sort();
  const famColor = f => palette[families.indexOf(f) % palette.length];
  const charts = [];
  const el = id => document.getElementById(id);
  function chart(id, cfg) { charts.push(new Chart(el(id), cfg)); }
  Chart.defaults.animation = false;
  // Numbers as a person reads them: 3 significant digits (no exponent for 0.001-99999), ratios
  // with 2 decimals, max_diff in scientific notation with 2 digits.
  const sig = v => v === undefined || v === null ? '' : Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(3)));
  const times = v => v === undefined ? '' : v.toFixed(2) + '×';
  const diff = v => v === 0 ? '0 (exact)' : v.toExponential(1);
  const row = (table, cells) => { const r = table.insertRow(); cells.forEach(t => { r.insertCell().textContent = t; }); };

  // Passes x models heatmap: cumulative Δnodes (removed nodes positive), one rectangle per cell,
  // on category axes so that every pass and every model has its label.
  function heatmap() {
    const passes = S.passes;
    const withPasses = ok.filter(m => m.passes);
    const names = withPasses.map(m => m.name);
    let maxRemoved = 1;
    const cells = [];
    withPasses.forEach(m => passes.forEach(p => {
      const v = m.passes[p] ? -m.passes[p].cumulative_d_nodes : 0;
      maxRemoved = Math.max(maxRemoved, Math.abs(v));
      cells.push({x: p, y: m.name, v: v, iso: m.passes[p] ? -(m.passes[p].isolated_d_nodes || 0) : 0});
    }));
    el('heatmap').parentNode.style.height = Math.max(220, 22 * withPasses.length + 200) + 'px';
    chart('heatmap', {type: 'scatter', data: {datasets: [{label: 'nodes removed (cumulative)', data: cells,
        pointStyle: 'rect', radius: 9, hoverRadius: 10,
        backgroundColor: cells.map(c => c.v === 0 ? '#f4f4f4' : c.v > 0 ? `rgba(33,102,172,${0.15 + 0.85 * c.v / maxRemoved})` : `rgba(178,24,43,${0.15 + 0.85 * -c.v / maxRemoved})`)}]},
      options: {maintainAspectRatio: false, plugins: {legend: {display: false}, tooltip: {callbacks: {label: c =>
          `${c.raw.y} / ${c.raw.x}: ${c.raw.v} nodes removed (alone: ${c.raw.iso})`}}},
        scales: {x: {type: 'category', labels: passes, offset: true, title: {display: true, text: 'pass (pipeline order)'},
                     ticks: {autoSkip: false, maxRotation: 60, minRotation: 60}},
                 y: {type: 'category', labels: names, offset: true, title: {display: true, text: 'model'}, ticks: {autoSkip: false}}}}});
  }

  // Latency before/after (onnxforge runtime, same process, alternating runs).
  function latency() {
    const lat = ok.filter(m => m.latency_before_ms !== undefined);
    el('latency').parentNode.style.height = Math.max(200, 24 * lat.length + 80) + 'px';
    chart('latency', {type: 'bar', data: {labels: lat.map(m => m.name), datasets: [
        {label: 'before (ms)', data: lat.map(m => m.latency_before_ms), backgroundColor: '#bab0ac'},
        {label: 'after (ms)', data: lat.map(m => m.latency_after_ms), backgroundColor: '#4e79a7'}]},
      options: {indexAxis: 'y', maintainAspectRatio: false, scales: {x: {type: 'logarithmic', title: {display: true, text: 'median ms (log)'},
        ticks: {callback: v => { const d = Math.log10(v); return Math.abs(d - Math.round(d)) < 1e-9 ? sig(v) : ''; }}}}}});
    const tb = el('latency-table');
    lat.forEach(m => row(tb, [m.name, m.family, sig(m.latency_before_ms), sig(m.latency_after_ms), times(m.speedup),
        m.cpu_ratio === undefined ? '' : times(1 / m.cpu_ratio), sig(m.ort_before_ms), sig(m.ort_after_ms),
        m.speedup_vs_ort === undefined ? (m.ort_error ? 'ORT: ' + m.ort_error : '') : times(m.speedup_vs_ort)]));
  }

  // Node reduction % vs latency improvement %, by family; a least-squares line only where the
  // fit has enough points (S.fits.*.enough), n and r always in the legend and the table.
  function nodesVsLatency() {
    const sets = [];
    families.forEach(f => {
      const pts = ok.filter(m => m.family === f && m.node_reduction_pct !== undefined && m.latency_improvement_pct !== undefined)
                    .map(m => ({x: m.node_reduction_pct, y: m.latency_improvement_pct, name: m.name}));
      const fit = S.fits.family[f];
      const label = fit ? `${f} (n = ${fit.n}, r = ${fit.r.toFixed(2)}${fit.enough ? '' : ', too few points for a line'})` : `${f} (n = ${pts.length})`;
      sets.push({label: label, data: pts, backgroundColor: famColor(f), borderColor: famColor(f)});
      if (fit && fit.enough && pts.length) {
        const xs = pts.map(p => p.x), lo = Math.min(...xs), hi = Math.max(...xs);
        sets.push({label: `${f} fit`, type: 'line', data: [{x: lo, y: fit.intercept + fit.slope * lo}, {x: hi, y: fit.intercept + fit.slope * hi}],
                   borderColor: famColor(f), borderDash: [6, 4], pointRadius: 0, fill: false});
      }
    });
    chart('nodes-vs-latency', {type: 'scatter', data: {datasets: sets}, options: {
      plugins: {tooltip: {callbacks: {label: c => c.raw.name ? `${c.raw.name}: ${c.raw.x.toFixed(1)}% nodes, ${c.raw.y.toFixed(1)}% latency` : ''}},
                legend: {labels: {filter: i => !i.text.endsWith(' fit')}}},
      scales: {x: {title: {display: true, text: 'node reduction %'}}, y: {title: {display: true, text: 'latency improvement %'}}}}});
    const ft = el('fit-table');
    for (const g of ['family', 'pass_kind']) for (const [k, f] of Object.entries(S.fits[g]))
      row(ft, [g === 'family' ? k : k + ' passes', f.n, f.enough ? sig(f.slope) : '—', f.enough ? sig(f.intercept) : '—', f.r.toFixed(2),
               f.enough ? '' : `too few points (a line needs ${S.fit_min_points} models and 3 distinct x)`]);
  }

  // max_diff per model, coloured by the worst accuracy class; exact models are named, not drawn.
  function maxDiff() {
    const md = ok.filter(m => m.max_diff !== undefined);
    const exact = md.filter(m => m.max_diff === 0), inexact = md.filter(m => m.max_diff > 0);
    const classColor = c => ['#59a14f', '#4e79a7', '#f28e2b', '#e15759'][Math.min(3, c || 0)];
    el('maxdiff-summary').textContent = !md.length ? 'no verified model' : !inexact.length ? `all exact: max_diff 0 on all ${md.length} models`
        : exact.length ? `${exact.length} of ${md.length} exact (max_diff 0): ${exact.map(m => m.name).join(', ')}; the others below`
        : `no model exact; max_diff below`;
    el('maxdiff').parentNode.hidden = !inexact.length;
    if (inexact.length) {
      el('maxdiff').parentNode.style.height = Math.max(200, 22 * inexact.length + 80) + 'px';
      chart('maxdiff', {type: 'bar', data: {labels: inexact.map(m => m.name), datasets: [{label: 'max_diff',
          data: inexact.map(m => m.max_diff), backgroundColor: inexact.map(m => classColor(m.worst_accuracy_class))}]},
        options: {indexAxis: 'y', maintainAspectRatio: false, plugins: {legend: {display: false},
            tooltip: {callbacks: {label: c => `max_diff ${diff(inexact[c.dataIndex].max_diff)} (accuracy class ${inexact[c.dataIndex].worst_accuracy_class})`}}},
          scales: {x: {type: 'logarithmic', title: {display: true, text: 'max_diff (log)'},
            ticks: {callback: v => { const d = Math.log10(v); return Math.abs(d - Math.round(d)) < 1e-9 ? '1e' + Math.round(d) : ''; }}}}}});
    }
  }

  // Failed models with what did succeed (inspect and audit run first and usually do).
  function failures() {
    const fl = el('failures');
    S.models.filter(m => m.status !== 'ok').forEach(m => row(fl, [m.name, m.family || '', m.nodes_before === undefined ? '' : m.nodes_before,
        (m.steps_ok || []).join(', '), m.failed_step || '', m.failure || '', m.error || '']));
    if (S.regressions) {
      const rg = el('regressions');
      el('gate').hidden = false;
      S.regressions.forEach(x => row(rg, [x.name, x.check, x.baseline, x.now]));
      el('gate-verdict').textContent = (S.regressions.length ? `${S.regressions.length} regression(s) against the baseline` : 'no regressions against the baseline') +
          (S.gate ? ` (latency: ${S.gate.rule})` : '');
    }
  }

  // What was drawn, for a headless browser to read back: each chart's axis labels as Chart.js
  // laid them out, and the charts' data counts.
  function readBack() {
    const drawn = {};
    charts.forEach(c => {
      const axes = {};
      for (const [id, s] of Object.entries(c.scales)) axes[id] = s.ticks.map(t => String(t.label));
      drawn[c.canvas.id] = {axes: axes, datasets: c.data.datasets.map(d => d.label)};
    });
    el('drawn').textContent = JSON.stringify(drawn);
    document.body.dataset.charts = charts.length;
    document.body.dataset.chartsWithData = charts.filter(c => c.data.datasets.some(d => d.data.length > 0)).length;
    document.body.dataset.points = charts.reduce((n, c) => n + c.data.datasets.reduce((k, d) => k + d.data.length, 0), 0);
    document.body.dataset.ready = 'yes';
  }

  heatmap();
  latency();
  nodesVsLatency();
  maxDiff();
  failures();
  readBack();
})();
)js";

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else
      o += c;
  }
  return o;
}

std::string html(const nlohmann::json& data) {
  // Inside <script>, "</" would end the element early.
  std::string js = data.dump();
  for (size_t p = 0; (p = js.find("</", p)) != std::string::npos; p += 3) js.replace(p, 2, "<\\/");
  const auto& c = data["counts"];
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>onnxforge zoo report</title>\n"
       "<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1200px}h2{margin-top:2em}"
       "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
       ".box{position:relative;width:100%}</style>\n"
       "<script>"
    << chartjs_source() << "</script>\n</head><body>\n"
    << "<h1>onnxforge zoo report</h1>\n<p>" << c["models"] << " models: " << c["ok"] << " ok, " << c["failed"]
    << " failed. Machine: ";
  for (const auto& m : data["machines"]) h << html_escape(m.get<std::string>()) << "; ";
  h << "</p>\n"
       "<section id=\"gate\" hidden><h2>Baseline gate</h2><p id=\"gate-verdict\"></p><table id=\"regressions\">"
       "<tr><th>model</th><th>check</th><th>baseline</th><th>now</th></tr></table></section>\n"
       "<h2>Pass attribution (nodes removed per pass, cumulative in pipeline order)</h2>\n"
       "<div class=\"box\"><canvas id=\"heatmap\"></canvas></div>\n"
       "<h2>Latency before and after (onnxforge runtime)</h2>\n<div class=\"box\"><canvas "
       "id=\"latency\"></canvas></div>\n"
       "<p>Speed-up is before/after everywhere (above 1: faster); CPU speed-up uses CPU time of all threads; "
       "vs ORT is ONNX Runtime's time over ours on the optimized model.</p>\n"
       "<table id=\"latency-table\"><tr><th>model</th><th>family</th><th>before ms</th><th>after "
       "ms</th><th>speed-up</th>"
       "<th>CPU speed-up</th><th>ORT before ms</th><th>ORT after ms</th><th>speed-up vs ORT</th></tr></table>\n"
       "<h2>Does node reduction predict latency?</h2>\n<div class=\"box\"><canvas "
       "id=\"nodes-vs-latency\"></canvas></div>\n"
       "<table id=\"fit-table\"><tr><th>group</th><th>n</th><th>slope</th><th>intercept</th><th>Pearson "
       "r</th><th></th></tr></table>\n"
       "<h2>max_diff per model (colour: accuracy class)</h2>\n<p id=\"maxdiff-summary\"></p>\n"
       "<div class=\"box\"><canvas id=\"maxdiff\"></canvas></div>\n"
       "<h2>Failures</h2>\n<table id=\"failures\"><tr><th>model</th><th>family</th><th>nodes</th><th>succeeded</th>"
       "<th>failed step</th><th>kind</th><th>error</th></tr></table>\n<pre id=\"drawn\" hidden></pre>\n"
       "<script type=\"application/json\" id=\"zoo-data\">"
    << js << "</script>\n<script>" << kPageScript << "</script>\n</body></html>\n";
  return h.str();
}

// The report page needs only what it draws (the per-model result files hold everything).
nlohmann::json page_data(const nlohmann::json& s, const nlohmann::json* regs) {
  nlohmann::json d = {{"counts", s["counts"]},
                      {"passes", s["passes"]},
                      {"machines", s["machines"]},
                      {"fits", s["fits"]},
                      {"fit_min_points", kFitMinPoints}};
  if (s.contains("gate")) d["gate"] = s["gate"];
  d["models"] = nlohmann::json::array();
  for (const auto& m : s["models"]) {
    nlohmann::json x = m;
    x.erase("machine");
    x.erase("rel");
    if (x.contains("passes"))
      for (auto& [p, v] : x["passes"].items()) {
        v.erase("seconds");
        v.erase("cumulative_d_bytes");
        v.erase("isolated_d_bytes");
      }
    d["models"].push_back(std::move(x));
  }
  if (regs) d["regressions"] = *regs;
  return d;
}

}  // namespace

nlohmann::json load_baseline(const fs::path& b) {
  nlohmann::json base;
  if (fs::is_directory(b) && fs::exists(b / "results")) return summarize(b);
  const fs::path file = fs::is_directory(b) && fs::exists(b / "summary.json") ? b / "summary.json" : b;
  if (!fs::is_regular_file(file)) fail("zoo: baseline '", b.string(), "' is neither a zoo OUTDIR nor a summary.json");
  try {
    base = nlohmann::json::parse(read_text(file));
  } catch (const std::exception& e) {
    throw Error("zoo: baseline '" + file.string() + "' is not valid JSON: " + e.what(), Error::Kind::Input,
                file.string());
  }
  auto not_summary = [&](const std::string& why) {
    return Error("zoo: baseline '" + file.string() + "' is not a zoo summary (" + why + ")", Error::Kind::Input,
                 file.string());
  };
  if (!base.is_object() || !base.contains("models") || !base["models"].is_array())
    throw not_summary("no \"models\" list");
  for (const auto& m : base["models"])
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) throw not_summary("a model without an \"id\"");
  return base;
}

int report(const ReportOptions& o) {
  if (o.latency_stat != "median" && o.latency_stat != "min")
    fail_usage("--latency-stat is median or min, got '", o.latency_stat, "'");
  nlohmann::json s = summarize(o.outdir);
  nlohmann::json regs;
  const nlohmann::json* rp = nullptr;
  if (o.baseline) {
    const fs::path b = *o.baseline;
    const nlohmann::json base = load_baseline(b);
    try {
      regs = regressions(s, base, o.max_slowdown, o.latency_stat);
    } catch (const nlohmann::json::exception& e) {
      throw Error("zoo report: baseline '" + b.string() + "' is not a zoo summary (" + e.what() + ")",
                  Error::Kind::Input, b.string());
    }
    double sigma = 0;
    for (const nlohmann::json* x : {&base, const_cast<const nlohmann::json*>(&s)})
      if (x->contains("latency_spread")) sigma = std::max(sigma, (*x)["latency_spread"].value("sigma", 0.0));
    s["latency_stat"] = o.latency_stat;
    s["baseline"] = fs::absolute(b).string();
    if (o.max_slowdown) s["max_slowdown"] = *o.max_slowdown;
    s["gate"] = {{"sigma", sigma}};
    if (o.latency_stat == "median" && sigma > 0)
      s["gate"]["rule"] =
          "paired after/before ratios; run-to-run sigma " + fmt(sigma, 2) + " (log); " +
          (o.max_slowdown ? "slower by more than " + fmt(100 * *o.max_slowdown, 2) + "% with the 95% interval above 1"
                          : "slower than the noise band exp(3 SE) - 1, at least " + fmt(100 * kMinSlowdown, 2) + "%");
    else
      s["gate"]["rule"] = "after/before " + o.latency_stat + " ratio slower by more than " +
                          fmt(100 * o.max_slowdown.value_or(0.10), 2) + "% (the baseline records no run-to-run spread)";
    s["regressions"] = regs;
    rp = &regs;
  }
  write_text(o.outdir / "summary.json", s.dump(1) + "\n");
  std::string md = markdown(s, rp);
  write_text(o.outdir / "summary.md", md);
  if (chartjs_source().empty())
    std::cerr << "zoo report: this build has no Chart.js (apt-get install libjs-chart.js, then reconfigure): "
                 "report.html not written\n";
  else
    write_text(o.outdir / "report.html", html(page_data(s, rp)));
  if (o.json)
    std::cout << s.dump(2) << "\n";
  else
    std::cout << md;
  return rp && !regs.empty() ? 1 : 0;
}

}  // namespace onnxforge::zoo
