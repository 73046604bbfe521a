#!/usr/bin/env bash
# A zoo run spread over machines with GNU parallel over ssh: each host runs one shard into a
# shared folder (NFS), then one report. Hosts need onnxforge on PATH and the same paths.
#   tools/cluster/gnu-parallel.sh HOSTS_FILE OUTDIR INPUT...
# (one host a line in HOSTS_FILE, "4/host" for four shards on it; parallel's --sshloginfile).
set -euo pipefail
hosts=$1 out=$2
shift 2
n=$(grep -cv '^\s*$' "$hosts")
# {} is the shard index; parallel hands the indices out to the hosts and retries a failed shard
# elsewhere (--retries), which --resume makes cheap.
seq 0 $((n - 1)) | parallel --sshloginfile "$hosts" --retries 2 --line-buffer --tag \
  onnxforge zoo run "$@" -o "$out" --shard {}/"$n" --resume --jobs 1 || true
onnxforge zoo report "$out"
