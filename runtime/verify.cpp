#include "runtime/verify.h"

#include <tbb/parallel_for.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <sstream>

#include "ir/error.h"
#include "runtime/inputs.h"
#include "runtime/runtime.h"

namespace onnxforge::rt {
namespace {

struct SeedDiff {
  double max_abs = 0, max_rel = 0, max_ref = 0;
  bool all_zero = true, pass = true;
  std::string problem;
};

SeedDiff compare(const Tensor& a, const Tensor& b, double atol, double rtol) {
  SeedDiff d;
  if (a.shape != b.shape) {
    d.pass = false;
    d.problem = "shape " + shape_str(a.shape) + " became " + shape_str(b.shape);
    return d;
  }
  if (a.dtype != b.dtype) {
    d.pass = false;
    d.problem = std::string("type ") + std::string(dtype_name(a.dtype)) + " became " + std::string(dtype_name(b.dtype));
    return d;
  }
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    double x = a.get_f64(i), y = b.get_f64(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) {
        d.pass = false;
        d.problem = "NaN at different positions";
        d.max_abs = INFINITY;
      }
      continue;
    }
    if (x != 0) d.all_zero = false;
    d.max_ref = std::max(d.max_ref, std::fabs(x));
    double diff = x == y ? 0.0 : std::fabs(x - y);  // inf == inf
    d.max_abs = std::max(d.max_abs, diff);
    d.max_rel = std::max(d.max_rel, diff / std::max(std::fabs(x), atol));
    if (!(diff <= atol + rtol * std::fabs(x))) d.pass = false;
  }
  return d;
}

// Maps b's values to a's order: by name when every name matches, else by position.
std::vector<size_t> match(const std::vector<std::string>& a, const std::vector<std::string>& b, const char* what) {
  if (a.size() != b.size()) fail("the models have different numbers of ", what, " (", a.size(), " vs ", b.size(), ")");
  std::vector<size_t> m(a.size());
  bool by_name = true;
  for (size_t i = 0; i < a.size() && by_name; ++i) {
    auto it = std::find(b.begin(), b.end(), a[i]);
    if (it == b.end()) by_name = false;
    else m[i] = static_cast<size_t>(it - b.begin());
  }
  if (!by_name)
    for (size_t i = 0; i < a.size(); ++i) m[i] = i;
  return m;
}

}  // namespace

VerifyReport verify(const Model& ref, const Model& cand, const VerifyOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  Session sa(ref, comparison_options()), sb(cand, comparison_options());
  InputPlan plan = plan_inputs(ref.main(), sa.input_values(), o.dims);
  auto in_map = match(sa.input_names(), sb.input_names(), "inputs");
  auto out_names = sa.output_names();
  auto out_map = match(out_names, sb.output_names(), "outputs");
  const size_t no = out_names.size();
  std::vector<std::vector<SeedDiff>> diffs(no, std::vector<SeedDiff>(static_cast<size_t>(o.seeds)));
  std::vector<std::pair<DType, Shape>> meta(no);
  std::mutex mu;
  auto one = [&](int s) {
    auto ins = make_inputs(plan, o.first_seed + static_cast<uint64_t>(s));
    std::vector<Tensor> ins_b(ins.size());
    for (size_t i = 0; i < ins.size(); ++i) ins_b[in_map[i]] = ins[i];
    auto ra = sa.run(ins);
    auto rb = sb.run(ins_b);
    for (size_t k = 0; k < no; ++k) {
      diffs[k][static_cast<size_t>(s)] = compare(ra[k], rb[out_map[k]], o.atol, o.rtol);
      if (s == 0) {
        std::lock_guard l(mu);
        meta[k] = {ra[k].dtype, ra[k].shape};
      }
    }
  };
  // The first seed alone records the arena layout; the rest run in parallel.
  if (o.seeds > 0) one(0);
  if (o.parallel == 1) {
    for (int s = 1; s < o.seeds; ++s) one(s);
  } else {
    tbb::parallel_for(1, std::max(o.seeds, 1), [&](int s) { one(s); });
  }
  VerifyReport r;
  r.seeds = o.seeds;
  r.notes = plan.notes;
  for (size_t k = 0; k < no; ++k) {
    OutputDiff d;
    d.name = out_names[k];
    d.dtype = std::string(dtype_name(meta[k].first));
    d.shape = meta[k].second;
    std::vector<double> m;
    for (const SeedDiff& s : diffs[k]) {
      m.push_back(s.max_abs);
      d.max_rel = std::max(d.max_rel, s.max_rel);
      d.max_ref = std::max(d.max_ref, s.max_ref);
      d.all_zero &= s.all_zero;
      d.pass &= s.pass;
      if (d.problem.empty()) d.problem = s.problem;
    }
    if (!m.empty()) {
      std::sort(m.begin(), m.end());
      d.max_abs_min = m.front();
      d.max_abs_max = m.back();
      double sum = 0;
      for (double x : m) sum += x;
      d.max_abs_mean = sum / static_cast<double>(m.size());
      d.max_abs_p99 = m[std::min(m.size() - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(m.size()))) - 1)];
    }
    r.pass &= d.pass;
    r.outputs.push_back(std::move(d));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json VerifyReport::to_json() const {
  nlohmann::json j;
  j["pass"] = pass;
  j["seeds"] = seeds;
  j["seconds"] = seconds;
  j["notes"] = notes;
  auto& outs = j["outputs"] = nlohmann::json::array();
  for (const OutputDiff& d : outputs) {
    auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(std::to_string(x)); };
    outs.push_back({{"name", d.name}, {"dtype", d.dtype}, {"shape", d.shape},
                    {"max_abs", {{"min", num(d.max_abs_min)}, {"max", num(d.max_abs_max)}, {"mean", num(d.max_abs_mean)}, {"p99", num(d.max_abs_p99)}}},
                    {"max_rel", num(d.max_rel)}, {"max_ref", num(d.max_ref)}, {"all_zero", d.all_zero},
                    {"pass", d.pass}, {"problem", d.problem}});
  }
  return j;
}

std::string VerifyReport::to_text() const {
  std::ostringstream os;
  for (const auto& n : notes) os << "note: " << n << "\n";
  os << "output                           shape            max|d| min      mean       p99        max    max rel   result\n";
  for (const OutputDiff& d : outputs) {
    char line[512];
    std::snprintf(line, sizeof line, "%-32s %-16s %9.3g %9.3g %9.3g %9.3g %9.3g   %s%s%s\n", d.name.substr(0, 32).c_str(),
                  shape_str(d.shape).c_str(), d.max_abs_min, d.max_abs_mean, d.max_abs_p99, d.max_abs_max, d.max_rel,
                  d.pass ? "pass" : "FAIL", d.all_zero ? " (reference all zero)" : "",
                  d.problem.empty() ? "" : (" " + d.problem).c_str());
    os << line;
  }
  char tail[128];
  std::snprintf(tail, sizeof tail, "%s: %d seeds in %.2f s\n", pass ? "PASS" : "FAIL", seeds, seconds);
  os << tail;
  return os.str();
}

}  // namespace onnxforge::rt
