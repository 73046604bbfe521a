#!/usr/bin/env bash
# Proves the Slurm path on one machine: installs what is missing (Debian's slurmctld slurmd
# slurm-client munge), starts munge and a one-node cluster on localhost (slurmctld + slurmd,
# 2 CPUs, no systemd, everything under a temporary folder), submits a 3-task array of
# `zoo run --shard auto` over the small zoo plus the dependent `zoo report`, waits, checks that the
# merged summary equals a single-process run (same models, node counts, max_diff), and stops
# every daemon it started.
#   tools/cluster/slurm-selftest.sh [BUILD_DIR] [MODEL_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
models=${2:-${ONNXFORGE_MODEL_DIR:-$root/.cache/models}}
exe=$build/onnxforge
[ -x "$exe" ] || { echo "slurm-selftest: no $exe (build first)" >&2; exit 2; }
[ -f "$models/zoo.json" ] || { echo "slurm-selftest: no $models/zoo.json (tools/models/export_zoo.py --small)" >&2; exit 2; }

need=()
for p in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "slurm-selftest: installing ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

d=$(mktemp -d /tmp/onnxforge-slurm.XXXXXX)
chmod 755 "$d"
pids=()
cleanup() {
  # Only the daemons this script started, by their process id.
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  [ -n "${KEEP:-}" ] || rm -rf "$d"
}
trap cleanup EXIT

# munge with its own key and socket (the system's munged, if any, is left alone).
mkdir -p "$d/munge"
dd if=/dev/urandom of="$d/munge/key" bs=1024 count=1 status=none
chmod 755 "$d/munge"  # clients must reach the socket
chmod 400 "$d/munge/key"
# As whoever runs the test (--force: munged otherwise refuses to run as root), logging to a file.
/usr/sbin/munged --foreground --force --key-file="$d/munge/key" --socket="$d/munge/sock" \
  --pid-file="$d/munge/pid" --log-file="$d/munge/log" --seed-file="$d/munge/seed" >"$d/munge/out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$d/munge/sock" ] && break; sleep 0.1; done
[ -S "$d/munge/sock" ] || { echo "slurm-selftest: munged did not start" >&2; cat "$d/munge/log" >&2; exit 1; }

host=$(hostname -s)
user=$(id -un)
port=$((20000 + RANDOM % 20000))
mkdir -p "$d/ctld" "$d/spool" "$d/log"
export SLURM_CONF=$d/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=onnxforgetest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/sock
CredType=cred/munge
StateSaveLocation=$d/ctld
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=zoo Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
/usr/sbin/slurmctld -D -i >"$d/log/slurmctld.out" 2>&1 &
pids+=($!)
/usr/sbin/slurmd -D -N "$host" >"$d/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && break
  sleep 0.2
done
if ! sinfo -h -o %T 2>/dev/null | grep -q idle; then
  echo "slurm-selftest: the one-node cluster did not come up" >&2
  sinfo >&2 || true
  tail -20 "$d/log/"* >&2
  exit 1
fi
echo "slurm-selftest: cluster up on $host:$port"

# The array job and the dependent report, then a single-process run of the same models. Both
# read a snapshot of the manifest (paths made absolute): a zoo.json re-exported in between would
# otherwise give the two runs different models.
/usr/bin/python3 - "$models/zoo.json" "$d/zoo.json" <<'PY'
import json, os, sys
src, dst = sys.argv[1:3]
z = json.load(open(src))
models = z["models"] if isinstance(z, dict) and "models" in z else z
def absolute(item):
    if isinstance(item, str):
        return os.path.join(os.path.dirname(os.path.abspath(src)), item)
    item = dict(item)
    key = "path" if "path" in item else "file"
    item[key] = os.path.join(os.path.dirname(os.path.abspath(src)), item[key])
    return item
models = {k: absolute(v) for k, v in models.items()} if isinstance(models, dict) else [absolute(m) for m in models]
json.dump({"models": models}, open(dst, "w"))
PY
args=(--set small --bench-iters 3)
t0=$(date +%s)
read -r array report < <(ONNXFORGE=$exe "$root/tools/cluster/slurm-submit.sh" 3 "$d/sharded" "$d/zoo.json" -- "${args[@]}")
echo "slurm-selftest: array job $array (3 tasks), report job $report"
for _ in $(seq 1800); do
  [ -z "$(squeue -h -j "$array,$report" 2>/dev/null)" ] && break
  sleep 1
done
[ -z "$(squeue -h -j "$array,$report" 2>/dev/null)" ] || { echo "slurm-selftest: jobs still queued after 30 min" >&2; squeue >&2; exit 1; }
echo "slurm-selftest: jobs finished in $(($(date +%s) - t0)) s"
tasks_seen=$(ls "$d/sharded/slurm" | grep -c "^slurm-${array}_[0-2].out$" || true)
[ "$tasks_seen" = 3 ] || { echo "slurm-selftest: expected 3 array task logs, found $tasks_seen" >&2; ls -la "$d/sharded/slurm" >&2; exit 1; }
[ -f "$d/sharded/summary.json" ] || { echo "slurm-selftest: the report job wrote no summary.json" >&2; cat "$d/sharded/slurm/"*.out >&2; exit 1; }

"$exe" zoo run "$d/zoo.json" -o "$d/single" --jobs 2 "${args[@]}" >"$d/single.log" 2>&1 || true
"$exe" zoo report "$d/single" >/dev/null
/usr/bin/python3 - "$d/single/summary.json" "$d/sharded/summary.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda s: {m["id"]: (m["status"], m.get("nodes_before"), m.get("nodes_after"), m.get("max_diff")) for m in s["models"]}
ka, kb = key(a), key(b)
bad = [(i, ka.get(i), kb.get(i)) for i in sorted(set(ka) | set(kb)) if ka.get(i) != kb.get(i)]
for row in bad:
    print("slurm-selftest: differs:", *row, file=sys.stderr)
print(f"slurm-selftest: {len(ka)} models; sharded summary {'equals' if not bad else 'DIFFERS from'} the single-process run")
sys.exit(1 if bad or not ka else 0)
PY
