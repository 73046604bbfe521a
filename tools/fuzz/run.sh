#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and fuzzes them.
#
#   tools/fuzz/run.sh [SECONDS_PER_TARGET=3600] [TARGETS="fuzz_reader fuzz_shapes fuzz_passes fuzz_runtime"]
#   tools/fuzz/run.sh replay            # run the regression corpus once through every target
#   tools/fuzz/run.sh ci                # replay, then a fixed-seed, fixed-length run of each target
#
# One job per target, niced (the machine is shared). Findings (crash-*, timeout-*, oom-*) land in
# $OUT/<target>/ (default build-fuzz/findings); the grown corpus in $OUT/<target>/corpus. Logs
# in $OUT/<target>.log; `grep -E "stat::number_of_executed_units|Done" $OUT/*.log` sums up.
# A new finding: minimise it (fuzz_X -minimize_crash=1 -runs=10000 crash-...), fix it, and add
# the minimised file to tools/fuzz/corpus/regressions so CI replays it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-fuzz}
OUT=${OUT:-$BUILD/findings}
ALL="fuzz_reader fuzz_shapes fuzz_passes fuzz_runtime"
MODE=${1:-3600}
TARGETS=${2:-$ALL}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT/..}

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DONNXFORGE_FUZZ=ON -DONNXFORGE_TESTS=OFF -DONNXFORGE_PERF=OFF -DONNXFORGE_PYTHON=OFF > /dev/null
# shellcheck disable=SC2086
nice -n 19 cmake --build "$BUILD" -j"${JOBS:-2}" --target $TARGETS

# Hangs and memory: a run over 10 s is a hang; 2 GiB RSS is a finding (the targets set a 256 MiB
# memory budget, so going over it is a clean refusal, not a finding).
FLAGS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -use_value_profile=1 -print_final_stats=1)
# KEEP_GOING=1 (long campaigns): a child process fuzzes and a finding is saved and skipped instead of
# ending the run, so one hour yields every finding, not the first.
if [[ ${KEEP_GOING:-0} == 1 ]]; then FLAGS+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1); fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [[ $MODE == replay ]]; then
  for t in $TARGETS; do
    echo "== $t: replaying the regression corpus"
    "$BUILD/fuzz/$t" "${FLAGS[@]}" -runs=0 "$ROOT/tools/fuzz/corpus/regressions" "$ROOT/tools/fuzz/corpus/seed"
  done
  exit 0
fi

# CI: (nearly) the same inputs on every run, so a red CI means the change, not the dice (README:
# what still varies). A fixed seed, a
# fixed number of runs (about a minute each on CI's 2 cores) from a fresh corpus, one thread per
# target (taskset: TBB and the runtime's pool size themselves from the affinity mask, and coverage
# from two threads would make the corpus, and so the path, differ between runs). Open-ended
# random fuzzing (`run.sh 3600`, KEEP_GOING=1) is a campaign on a developer machine; its findings
# come back here through corpus/regressions.
if [[ $MODE == ci ]]; then
  declare -A RUNS=([fuzz_reader]=30000 [fuzz_shapes]=25000 [fuzz_passes]=2500 [fuzz_runtime]=5000)
  cpus=$(nproc)
  mkdir -p "$OUT"
  pids=()
  i=0
  for t in $TARGETS; do
    "$BUILD/fuzz/$t" "${FLAGS[@]}" -runs=0 "$ROOT/tools/fuzz/corpus/regressions" "$ROOT/tools/fuzz/corpus/seed" > "$OUT/$t.replay.log" 2>&1 ||
      { tail -60 "$OUT/$t.replay.log"; echo "== $t: the regression corpus fails"; exit 1; }
    rm -rf "$OUT/$t" && mkdir -p "$OUT/$t/corpus"
    taskset -c $((i % cpus)) "$BUILD/fuzz/$t" "${FLAGS[@]}" -seed=20261126 -runs="${RUNS[$t]:-2000}" -artifact_prefix="$OUT/$t/" \
      "$OUT/$t/corpus" "$ROOT/tools/fuzz/corpus/seed" "$ROOT/tools/fuzz/corpus/regressions" > "$OUT/$t.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  for t in $TARGETS; do
    echo "== $t: $(grep -E 'stat::number_of_executed_units' "$OUT/$t.log" | tail -1) $(grep -E '^#[0-9]+ +DONE' "$OUT/$t.log" | tail -1)"
    if ls "$OUT/$t" | grep -qE '^(crash|timeout|oom|leak)-'; then
      ls "$OUT/$t" | grep -E '^(crash|timeout|oom|leak)-'
      grep -E -B2 -A30 'ERROR|runtime error' "$OUT/$t.log" | head -80
    fi
  done
  exit $status
fi

mkdir -p "$OUT"
pids=()
for t in $TARGETS; do
  mkdir -p "$OUT/$t/corpus"
  # The grown corpus first (new units are written there), then the seeds and regressions.
  nice -n 19 "$BUILD/fuzz/$t" "${FLAGS[@]}" -max_total_time="$MODE" -artifact_prefix="$OUT/$t/" \
    "$OUT/$t/corpus" "$ROOT/tools/fuzz/corpus/seed" "$ROOT/tools/fuzz/corpus/regressions" > "$OUT/$t.log" 2>&1 &
  pids+=($!)
  echo "$t: pid $!, log $OUT/$t.log"
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in $TARGETS; do
  echo "== $t: $(grep -E 'stat::number_of_executed_units' "$OUT/$t.log" | tail -1)"
  ls "$OUT/$t" | grep -E '^(crash|timeout|oom|leak)-' || echo "   no findings"
done
exit $status
