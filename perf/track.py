#!/usr/bin/python3
"""Performance tracking: runs the Google Benchmark suites, turns them into ratios against a peer
measured in the same run (robust on shared, noisy machines), compares with perf/baseline.json.

  perf/track.py                 # run, compare, exit 1 on a regression beyond tolerance
  perf/track.py --update        # run and write the new baseline
  perf/track.py --only load     # one metric group

A metric is `lower is better` (a time ratio) or `higher is better` (a throughput fraction).
"""
import argparse, json, os, subprocess, sys, statistics

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ONNXFORGE_BUILD", os.path.join(ROOT, "build"))
BASELINE = os.path.join(ROOT, "perf", "baseline.json")


def run_bench(exe, filt=None, reps=5, env=None):
    path = os.path.join(BUILD, "perf", exe)
    if not os.path.exists(path):
        return None
    cmd = [path, "--benchmark_format=json", f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true"]
    if filt:
        cmd.append(f"--benchmark_filter={filt}")
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        print(f"track: {exe} failed: {out.stderr.strip()[:300]}", file=sys.stderr)
        return None
    medians = {}
    for b in json.loads(out.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            medians[b["run_name"]] = b
    return medians


def group_load():
    model = os.path.join(ROOT, ".cache", "models", "bert_base.onnx")
    if not os.path.exists(model):
        print("track: load group needs .cache/models/bert_base.onnx (tools/models/export_zoo.py --only bert_base)", file=sys.stderr)
        return {}
    m = run_bench("bench_load", env={"ONNXFORGE_BENCH_MODEL": model})
    if not m:
        return {}
    t = lambda name: m[f"BM_{name}/real_time"]["real_time"]
    return {
        "load_bert_base_vs_cat": {"value": t("OnnxforgeLoad") / t("CatToDevNull"), "better": "lower"},
        "load_bert_base_vs_protobuf": {"value": t("OnnxforgeLoad") / t("ProtobufGeneratedParse"), "better": "lower"},
    }


def group_gemm():
    """GEMM 1024^3 as a fraction of the FMA peak, both timed in alternation inside one benchmark
    (bench_gemm_vs_peak: every iteration runs the FMA loop and the GEMM back to back, so a busy
    minute slows both). Separate runs of bench_fma_peak and bench_simd_gemm compared different
    machines on this shared VM: that recorded 0.63-0.67 while 0.86-0.93 was measured quiet.
    The tracked figure is the upper decile of the per-iteration ratios (of_peak_p90): a
    cache-hungry neighbour slows the GEMM far more than the register-only FMA loop, so the median
    follows the neighbours; the least-disturbed iterations follow the kernel."""
    m = run_bench("bench_gemm_vs_peak", filt="M:1024/N:1024/K:1024/", reps=3)
    out = {}
    for name, b in (m or {}).items():
        threads = int(name.split("threads:")[1].split("/")[0])
        out[f"gemm_1024_fraction_of_peak_{threads}t"] = {
            "value": b["of_peak_p90"], "better": "higher", "tolerance": 0.15,
            "note": "bench_gemm_vs_peak of_peak_p90 (alternating with the FMA loop); regression beyond 15%"}
    return out


GROUPS = {"load": group_load, "gemm": group_gemm}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="write the measured values as the new baseline")
    ap.add_argument("--only", help="comma-separated metric groups: " + ",".join(GROUPS))
    ap.add_argument("--tolerance", type=float, default=0.5, help="allowed relative regression (default 0.5 = 50%%)")
    args = ap.parse_args()
    groups = args.only.split(",") if args.only else list(GROUPS)
    measured = {}
    for g in groups:
        measured.update(GROUPS[g]())
    baseline = json.load(open(BASELINE)) if os.path.exists(BASELINE) else {}
    regressions = 0
    print(f"{'metric':40} {'now':>10} {'baseline':>10}  verdict")
    for name, m in sorted(measured.items()):
        base = baseline.get(name, {}).get("value")
        verdict = "new"
        if base is not None:
            tol = baseline[name].get("tolerance", args.tolerance)  # a metric may hold a tighter one
            worse = m["value"] > base * (1 + tol) if m["better"] == "lower" else m["value"] < base / (1 + tol)
            verdict = "REGRESSION" if worse else "ok"
            regressions += worse
        print(f"{name:40} {m['value']:10.4f} {base if base is not None else float('nan'):10.4f}  {verdict}")
    if args.update:
        baseline.update(measured)
        with open(BASELINE + ".tmp", "w") as f:
            json.dump(baseline, f, indent=2, sort_keys=True)
        os.replace(BASELINE + ".tmp", BASELINE)
        print(f"track: baseline written to {BASELINE}")
    return 1 if regressions and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
