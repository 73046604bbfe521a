#!/usr/bin/python3
"""The models of perf/int8_conv_vs_fp32.py (fp32 Conv, ConvInteger, the dynamic-quant chain,
QLinearConv) timed as one thread's CPU time per run instead of wall-clock medians: on a machine
loaded by other work at nice 19 the wall clock mostly measures how long the scheduler left the
process off the core. Per variant, `onnxforge bench --threads 1` runs with 2 + n and with 2
iterations; the difference of their CPU times (getrusage of the children) over n is one run's
CPU (loading, planning and warm-up cancel). n is chosen per variant from a first estimate so the
difference is about 0.5 s of CPU (the kernel's CPU accounting is tick-grained: 10 runs of a
0.4 ms conv are a few ticks). Rounds alternate the variants and BASE's int8, dyn
and qlin; medians; ratios are fp32 time / variant time.

  /usr/bin/python3 perf/int8_conv_cpu_time.py NEW_ONNXFORGE BASE_ONNXFORGE [ROUNDS] [SHAPE SUBSTRING]
"""
import os, resource, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import int8_conv_vs_fp32 as m  # noqa: E402

N1 = 2


def cpu(binary, model, iters):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary, "bench", model, "--threads", "1", "--iters", str(iters), "--warmup", "1"], check=True,
                   capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    new, base = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    only = sys.argv[4] if len(sys.argv) > 4 else None
    print(f"# ms of CPU per run, 1 thread, medians of {rounds} rounds; ratios fp32 / variant")
    print(f"{'shape':28} {'fp32':>7} {'int8':>7} {'dyn':>7} {'qlin':>7} {'b int8':>7} {'b dyn':>7} {'b qlin':>7}  "
          f"{'/int8':>6} {'/dyn':>6} {'/qlin':>6} {'b/int8':>6} {'b/dyn':>6} {'b/qlin':>6}")
    for name, C, M, H, W, k, d, st in m.SHAPES:
        if only and only not in name:
            continue
        with tempfile.TemporaryDirectory() as out:
            paths = m.models(C, M, H, W, k, d, st, out)
            runs = [(key, new, p) for key, p in paths.items()]
            runs += [("b " + key, base, paths[key]) for key in ("int8", "dyn", "qlin")]
            t = {key: [] for key, _, _ in runs}
            n = {}
            for key, b, p in runs:
                est = max(1e-4, (cpu(b, p, N1 + 10) - cpu(b, p, N1)) / 10)
                n[key] = int(min(400, max(10, 0.5 / est)))
            for _ in range(rounds):
                for key, b, p in runs:
                    t[key].append((cpu(b, p, N1 + n[key]) - cpu(b, p, N1)) / n[key] * 1e3)
        md = {key: statistics.median(v) for key, v in t.items()}
        f = md["fp32"]
        print(f"{name:28} {f:7.2f} {md['int8']:7.2f} {md['dyn']:7.2f} {md['qlin']:7.2f} {md['b int8']:7.2f} "
              f"{md['b dyn']:7.2f} {md['b qlin']:7.2f}  {f / md['int8']:6.2f} {f / md['dyn']:6.2f} "
              f"{f / md['qlin']:6.2f} {f / md['b int8']:6.2f} {f / md['b dyn']:6.2f} {f / md['b qlin']:6.2f}", flush=True)


if __name__ == "__main__":
    main()
