#pragma once
// onnxforge zoo: batch runs over model zoos and their report (issue 15).
//
// `zoo run` processes every model in a child process of the onnxforge binary itself (inspect,
// audit, optimize, attribute, bench --vs), so a crash, an out-of-memory kill or a timeout costs
// that model only; one JSON result per model is written atomically (tmp + rename) into OUTDIR, so
// shards of a Slurm array or a Kubernetes Indexed Job share one OUTDIR without locks.
// `zoo report` merges the results into summary.json, summary.md and a self-contained report.html
// (Chart.js inlined), and with a baseline run it is the regression gate CI uses.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace onnxforge::zoo {

namespace fs = std::filesystem;

// One model to process, as found in the inputs.
struct ModelEntry {
  fs::path path;                        // absolute
  std::string rel;                      // path relative to its input root (what shards hash)
  std::string id;                       // result file stem, unique within a run
  std::string name;                     // display name (manifest "name", else the file stem)
  std::map<std::string, int64_t> dims;  // --dim for optimize/attribute/bench (manifest "dims")
  std::vector<std::string> skip;        // extra passes to skip for this model (manifest "skip")
  // --inputs / --input-value for optimize and bench (manifest "inputs": specs with paths relative
  // to the manifest, "input_values": {name: number}; docs/cli.md "Given inputs").
  std::vector<std::string> input_args;
  double timeout = 0;  // seconds; 0: the run's --timeout
};

// Folders (searched recursively for .onnx), model files, manifests (text: one model a line;
// JSON: {"models": [{"path", "name", "dims", "skip", "timeout", "inputs", "input_values"}]} or {"models": {name:
// {"file"...}}}). Throws onnxforge::Error naming the input for anything unreadable. `set`: in a JSON manifest, only
// models whose "sets" list contains it (export_zoo.py's zoo.json marks the CI models "small"); models without "sets"
// are always taken.
std::vector<ModelEntry> discover(const std::vector<std::string>& inputs, const std::string& set = "");

// Shard selection: models sorted by a hash of their relative path, every count-th from index.
struct Shard {
  int index = 0, count = 1;
};
// "I/N" (0 <= I < N) or "auto" (SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, or
// JOB_COMPLETION_INDEX with ONNXFORGE_SHARD_COUNT or the `auto_count` given).
Shard parse_shard(const std::string& spec, int auto_count = 0);
std::vector<ModelEntry> select_shard(std::vector<ModelEntry> models, const Shard& shard);

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);
uint64_t hash_file(const fs::path& p);  // throws Error if unreadable
std::string hex64(uint64_t v);

struct RunOptions {
  std::vector<std::string> inputs;
  fs::path outdir;
  fs::path exe;  // the onnxforge binary the children run (/proc/self/exe)
  std::vector<std::string> passes, skip, dims;
  int64_t target_opset = 0;
  int seeds = 3;
  int jobs = 1, threads = 0;    // threads per child; 0: cores / jobs
  double timeout = 0;           // seconds per model, 0: none
  int64_t max_rss_mb = 0;       // per child, 0: none
  double bench_min_time = 1.0;  // seconds of timed runs per model, shared by the bench runs
  int bench_iters = 0;
  // Separate bench processes per model (--bench-runs): their spread is the run-to-run noise the
  // gate's threshold comes from.
  int bench_runs = 3;  // 3: the median of the runs survives one disturbed run
  // --baseline: a model whose latency the gate would flag is re-measured at once (bench_runs more
  // runs, pooled), while its optimized model is still there. Null: no re-measure.
  nlohmann::json baseline;
  std::optional<double> max_slowdown;  // the gate's, for the re-measure decision
  bool attribute = true, bench = true, keep_models = false, resume = false, retry_failed = false;
  std::string shard;    // "", "I/N" or "auto"
  int shard_count = 0;  // --shard-count: N for --shard auto under a Kubernetes Indexed Job
  std::string set;      // JSON manifests: only models of this set
  bool tty = false;     // progress line instead of a line per model
  // --ort: ONNX Runtime (the npm peer, tools/peers/ort.js run by node) times the original and the
  // optimized model on the inputs onnxforge generated, alternating; empty: not measured.
  fs::path ort_js, node;
};

// The first executable `name` in an absolute PATH entry (relative ones such as "." are skipped:
// the current folder never supplies a program); empty when there is none.
fs::path find_program(const std::string& name);

// The peer for --ort: `spec` is a path to ort.js, or empty for the default search
// (ONNXFORGE_ORT_JS, then tools/peers/ort.js beside the binary's source tree or install). Fills
// o.ort_js and o.node (node from PATH); throws a usage Error naming what is missing.
void find_ort_peer(RunOptions& o, const std::string& spec);

// Returns the exit code: 0 every model ok, 1 any failed.
int run(const RunOptions& o);

// The machine a latency figure was measured on.
nlohmann::json machine_info(int threads);

// Loads a baseline for the gate: an OUTDIR (its results, or its summary.json) or a summary.json.
// Throws Error naming it when it is none of these.
nlohmann::json load_baseline(const fs::path& b);

// The latency gate for one model. Each bench run gives the log of its paired after/before ratio;
// `sigma` is the run-to-run standard deviation of such a log ratio (summary "latency_spread"),
// raised to the model's own spread (its runs now and in the baseline, median absolute deviation)
// when that is larger. The slowdown now/base is exp(median(now) - median(base)); its standard
// error is taken as sigma * sqrt(1/n_now + 1/n_base). The default threshold is the noise band of an unchanged model,
// exp(3 SE) - 1, at least kMinSlowdown; an explicit --max-slowdown replaces it, and then the 95%
// interval must also lie above 1.
struct LatencyVerdict {
  bool regressed = false;
  double ratio = 1, ci_low = 1, ci_high = 1;  // now/base of the after/before ratios, 95% interval
  double threshold = 0;                       // the slowdown allowed (0.12: 12%)
  double sigma = 0;                           // the spread used: the zoo's, or the model's own when larger
};
constexpr double kMinSlowdown = 0.05;
LatencyVerdict latency_gate(const std::vector<double>& now_logs, const std::vector<double>& base_logs, double sigma,
                            std::optional<double> max_slowdown);
// Robust pooled run-to-run sigma of the log ratios (the median of the differences between two
// runs of a model, over all models with >= 2 runs; 0 with fewer than 3 such models).
double run_spread(const nlohmann::json& models);
// The median of `v` (the mean of the middle two for an even count), 0 for none.
double median(std::vector<double> v);

struct ReportOptions {
  fs::path outdir;
  std::optional<fs::path> baseline;
  bool json = false;                    // print summary.json on stdout instead of the markdown table
  std::optional<double> max_slowdown;   // none: derived from the recorded spread (latency_gate)
  std::string latency_stat = "median";  // or "min": the gate compares ratios of the fastest runs
};
// Writes summary.json, summary.md and report.html into outdir; returns 0, or 1 when the baseline
// gate found a regression (or any model failed? no: failures are listed, the gate decides).
int report(const ReportOptions& o);

// Pieces of the report, public for the tests.
nlohmann::json summarize(const fs::path& outdir);  // merges OUTDIR's results
// Regressions of `now` against `base` (summaries): one row per regression.
nlohmann::json regressions(const nlohmann::json& now, const nlohmann::json& base, std::optional<double> max_slowdown,
                           const std::string& latency_stat = "median");
// Decade of a max_diff: -99 for an exact 0, else ceil(log10(max_diff)).
int max_diff_class(double max_diff);
struct Fit {
  size_t n = 0;
  double slope = 0, intercept = 0, r = 0;  // r: Pearson correlation (0 when undefined)
};
Fit least_squares(const std::vector<double>& x, const std::vector<double>& y);
// "elimination" or "fusion" (or "other") for a pass name.
std::string pass_kind(const std::string& pass);

// The inlined Chart.js (empty when the build found none).
const std::string& chartjs_source();

}  // namespace onnxforge::zoo
