// onnxforge zoo run INPUT... -o OUTDIR [--jobs N] [--threads T] [--timeout S] [--max-rss MB]
//                  [--resume] [--shard I/N|auto] [--keep-models] [optimize options]
// onnxforge zoo report OUTDIR [--baseline OLD] [--json] [--max-slowdown 0.10]
//
// Batch runs over model zoos (issue 15). Every model runs in child processes of this binary, so a
// crash, an OOM or a timeout costs that model only; the work is in app/zoo.
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "ir/error.h"
#include "zoo/zoo.h"

namespace onnxforge::cli {
namespace {

bool executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return p.is_absolute() && std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// The onnxforge program the zoo's children run. The CLI itself is /proc/self/exe; inside Python
// (`python3 -m onnxforge zoo run`, onnxforge.main) /proc/self/exe is the interpreter, so the
// module names the real program in ONNXFORGE_EXE (the one shipped beside it, else PATH's), and
// without it PATH is searched. Only absolute paths count: the current folder never supplies the
// program (a file named `inspect` or `onnxforge` there must never run).
std::filesystem::path children_exe() {
  namespace fs = std::filesystem;
  if (const char* e = std::getenv("ONNXFORGE_EXE"); e && *e) {
    if (!executable_file(e))
      fail_usage("zoo: ONNXFORGE_EXE='", e, "' is not an executable file given by its absolute path");
    return e;
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && self.filename().string().starts_with("onnxforge") && executable_file(self)) return self;
  if (fs::path on_path = zoo::find_program("onnxforge"); !on_path.empty()) return on_path;
  fail_usage("zoo: cannot find the onnxforge program for the zoo's child processes (this process is '",
             ec ? std::string("?") : self.string(),
             "'); put onnxforge on PATH or set ONNXFORGE_EXE to its absolute path");
}

// `--passes none`: every pass skipped (the baseline gate's "a run that does less"); the pass
// names come from the binary the children run, so they always match it.
std::vector<std::string> all_pass_names(const std::filesystem::path& exe) {
  std::string cmd = "'" + exe.string() + "' optimize --list-passes --json";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) fail("zoo: cannot run '", cmd, "'");
  std::string text;
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;) text.append(buf.data(), n);
  if (::pclose(f) != 0) fail("zoo: '", cmd, "' failed");
  std::vector<std::string> names;
  for (const auto& p : nlohmann::json::parse(text)) names.push_back(p["name"].get<std::string>());
  return names;
}

Command reg{
    "zoo", "Run a whole model zoo (parallel, resumable, sharded) and report on it", [](CLI::App& app) {
      app.require_subcommand(0, 1);
      auto r = std::make_shared<zoo::RunOptions>();
      auto no_attr = std::make_shared<bool>(false), no_bench = std::make_shared<bool>(false);
      auto ort = std::make_shared<std::string>();
      auto outdir = std::make_shared<std::string>();
      CLI::App* run = app.add_subcommand("run", "Inspect, audit, optimize+verify, attribute and bench every model");
      run->add_option("inputs", r->inputs, "Folders (searched for .onnx), models, or manifests (text or JSON)");
      run->add_option("-o,--output", *outdir, "Folder for the results (one JSON per model under results/)");
      run->add_option("--jobs,-j", r->jobs, "Models side by side (cores are split between them)")
          ->capture_default_str();
      run->add_option("--threads", r->threads, "Threads per model (default: cores / jobs)");
      run->add_option("--timeout", r->timeout, "Seconds per model before its process group is killed (default: none)");
      run->add_option("--max-rss", r->max_rss_mb, "MB of resident memory per step before it is killed (default: none)");
      run->add_flag("--resume", r->resume, "Skip models whose result exists for the same file and options");
      run->add_flag("--retry-failed", r->retry_failed, "With --resume: redo models whose earlier result failed");
      run->add_option("--shard", r->shard,
                      "I/N: this task's share of the models; auto: from Slurm/Kubernetes array variables");
      run->add_option("--shard-count", r->shard_count,
                      "N for --shard auto with JOB_COMPLETION_INDEX (else ONNXFORGE_SHARD_COUNT)");
      run->add_option("--set", r->set, "JSON manifests: only models whose \"sets\" contain this (zoo.json: small)");
      run->add_flag("--keep-models", r->keep_models, "Keep the optimized models under OUTDIR/models/");
      run->add_option("--passes", r->passes, "Run only these passes (comma-separated; none: no pass)")->delimiter(',');
      run->add_option("--skip", r->skip, "Do not run these passes (comma-separated)")->delimiter(',');
      run->add_option("--target-opset", r->target_opset, "Upgrade the default-domain opset to N first");
      run->add_option("--verify-seeds", r->seeds, "Seeds for verification")->capture_default_str();
      run->add_option("--dim", r->dims, "Fix a symbolic dimension for every model: name=N (a manifest's dims win)");
      run->add_option("--bench-time", r->bench_min_time, "Seconds of timed runs per model in bench")
          ->capture_default_str();
      run->add_option("--bench-iters", r->bench_iters, "Timed runs per model in bench instead of --bench-time");
      run->add_option("--bench-runs", r->bench_runs,
                      "Separate bench processes per model (their spread is the gate's noise)")
          ->capture_default_str()
          ->check(CLI::Range(1, 100));
      auto run_base = std::make_shared<std::string>();
      run->add_option("--baseline", *run_base,
                      "An earlier run: re-measure at once a model whose latency the gate would flag");
      auto run_slow = std::make_shared<double>(-1);
      CLI::Option* run_slow_opt = run->add_option(
          "--max-slowdown", *run_slow, "With --baseline: the gate's threshold (default: from the recorded spread)");
      run->add_flag("--no-attribute", *no_attr, "Skip the per-pass attribution");
      run->add_flag("--no-bench", *no_bench, "Skip the latency measurement");
      CLI::Option* ort_opt =
          run->add_option("--ort", *ort,
                          "Also time both models in ONNX Runtime (the npm peer): --ort, or --ort=PATH/ort.js")
              ->expected(0, 1);

      auto rep = std::make_shared<zoo::ReportOptions>();
      auto rep_dir = std::make_shared<std::string>(), base = std::make_shared<std::string>();
      CLI::App* report =
          app.add_subcommand("report", "Merge a run into summary.json, summary.md and report.html; gate on a baseline");
      report->add_option("outdir", *rep_dir, "The -o folder of `zoo run`");
      report->add_option("--baseline", *base, "An earlier run (its OUTDIR or summary.json): exit 1 on a regression");
      report->add_flag("--json", rep->json, "Print summary.json instead of the table");
      auto rep_slow = std::make_shared<double>(-1);
      CLI::Option* rep_slow_opt =
          report->add_option("--max-slowdown", *rep_slow,
                             "Allowed worsening of the after/before latency ratio (default: 3 standard errors of the "
                             "baseline's run-to-run spread, at least 0.05; 0.10 for a baseline without one)");
      report
          ->add_option("--latency-stat", rep->latency_stat, "median, or min (fastest runs: steadier on a busy machine)")
          ->capture_default_str();

      return [=, &app]() -> int {
        if (run->parsed()) {
          if (r->inputs.empty() || outdir->empty()) fail("usage: onnxforge zoo run INPUT... -o OUTDIR (see --help)");
          r->outdir = *outdir;
          r->exe = children_exe();
          r->attribute = !*no_attr;
          r->bench = !*no_bench;
          if (ort_opt->count()) zoo::find_ort_peer(*r, *ort);
          r->tty = stderr_is_tty();
          if (!run_base->empty()) r->baseline = zoo::load_baseline(*run_base);
          if (run_slow_opt->count()) {
            if (!(*run_slow >= 0)) fail_usage("--max-slowdown must be >= 0");
            r->max_slowdown = *run_slow;
          }
          if (r->passes.size() == 1 && r->passes[0] == "none") {
            r->passes.clear();
            r->skip = all_pass_names(r->exe);
          }
          return zoo::run(*r);
        }
        if (report->parsed()) {
          if (rep_dir->empty()) fail("usage: onnxforge zoo report OUTDIR [--baseline OLD] [--json] [--max-slowdown F]");
          if (rep_slow_opt->count()) {
            if (!(*rep_slow >= 0)) fail_usage("--max-slowdown must be >= 0");
            rep->max_slowdown = *rep_slow;
          }
          rep->outdir = *rep_dir;
          if (!base->empty()) rep->baseline = *base;
          return zoo::report(*rep);
        }
        std::cerr << app.help();
        return 2;
      };
    }};

}  // namespace
}  // namespace onnxforge::cli
