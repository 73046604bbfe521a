#!/usr/bin/env bash
# Submits a zoo run as a Slurm array of TASKS tasks plus the dependent report job; prints the two
# job ids ("ARRAY_ID REPORT_ID").
#   tools/cluster/slurm-submit.sh TASKS OUTDIR INPUT... [-- extra zoo run options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tasks=$1 out=$2
shift 2
inputs=() extra=()
while (($#)); do
  if [ "$1" = -- ]; then shift; extra=("$@"); break; fi
  inputs+=("$1"); shift
done
((${#inputs[@]})) || { echo "usage: $0 TASKS OUTDIR INPUT... [-- zoo run options]" >&2; exit 2; }
mkdir -p "$out/slurm"
export ZOO_INPUT="${inputs[*]}" ZOO_OUT=$out ZOO_ARGS="${extra[*]}"
array=$(sbatch --parsable --array=0-$((tasks - 1)) --chdir="$out/slurm" "$here/zoo-array.sbatch")
report=$(sbatch --parsable --dependency="afterany:${array%%;*}" --chdir="$out/slurm" "$here/zoo-report.sbatch")
echo "${array%%;*} ${report%%;*}"
