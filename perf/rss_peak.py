#!/usr/bin/python3
"""Run a command and report its wall time and peak memory, anonymous and file-backed apart.

  perf/rss_peak.py [--interval 0.02] [--json] -- CMD ARGS...

Peak RSS is the kernel's own high-water mark (getrusage RUSAGE_CHILDREN ru_maxrss after the wait:
exact, no sampling). The split is sampled from /proc/PID/status (RssAnon, RssFile, RssShmem) every
`interval` seconds: the peaks of each and of their sum, so a peak shorter than one interval can be
missed by the split but never by `peak_rss`. Why the split matters: a weight mapped from the model
file and read once is counted in RSS as RssFile, which the kernel can drop at any time (the pages
are clean and backed by the file); RssAnon is memory the process really owns (packed weights,
activations, materialized copies). The exit code is the command's.
"""
import json
import os
import resource
import subprocess
import sys
import time


def status_kib(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    out[k] = int(v.split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return out


def main():
    args = sys.argv[1:]
    interval, as_json = 0.02, False
    while args and args[0] != "--":
        a = args.pop(0)
        if a == "--interval":
            interval = float(args.pop(0))
        elif a == "--json":
            as_json = True
        else:
            sys.exit(f"rss_peak.py: unknown option {a} (usage: rss_peak.py [--interval S] [--json] -- CMD...)")
    if not args or args[0] != "--" or len(args) < 2:
        sys.exit("rss_peak.py: usage: rss_peak.py [--interval S] [--json] -- CMD...")
    cmd = args[1:]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd)
    peak = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "sum": 0}
    while p.poll() is None:
        s = status_kib(p.pid)
        if s:
            for k in ("RssAnon", "RssFile", "RssShmem"):
                peak[k] = max(peak[k], s.get(k, 0))
            peak["sum"] = max(peak["sum"], s.get("RssAnon", 0) + s.get("RssFile", 0) + s.get("RssShmem", 0))
        time.sleep(interval)
    wall = time.monotonic() - t0
    maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    res = {"wall_s": round(wall, 3), "peak_rss_mib": round(maxrss / 1024, 1),
           "peak_anon_mib": round(peak["RssAnon"] / 1024, 1), "peak_file_mib": round(peak["RssFile"] / 1024, 1),
           "peak_sampled_sum_mib": round(peak["sum"] / 1024, 1), "exit": p.returncode}
    if as_json:
        print(json.dumps(res), file=sys.stderr)
    else:
        print(f"wall {res['wall_s']} s, peak RSS {res['peak_rss_mib']} MiB (sampled: anon {res['peak_anon_mib']}, "
              f"file {res['peak_file_mib']}, sum {res['peak_sampled_sum_mib']} MiB), exit {p.returncode}",
              file=sys.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
