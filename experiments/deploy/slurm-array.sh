#!/usr/bin/env bash
# A sweep as a Slurm job array: task i runs shard i/N of a suite or spec
# into a shared directory; a dependent job merges once every task is done.
#
#   experiments/deploy/slurm-array.sh ecmp-collision /shared/results/ecmp 8
#
# submits an 8-task array (one shard each) and the merge job, and prints
# their job ids. Every run's result is written atomically as
# OUT/runs/<hash>.json, so tasks never collide and a requeued task skips
# what was already finished. Needs mptx on PATH on the compute nodes (or
# set MPTX=/path/to/mptx).
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 SUITE|SPEC OUT_DIR [SHARDS=8]" >&2
  exit 2
fi
what=$1 out=$2 shards=${3:-8}
mptx=${MPTX:-mptx}
cpus=${CPUS_PER_TASK:-8}
mkdir -p "$out"

array=$(sbatch --parsable \
  --job-name="mptx-$(basename "$what" .yaml)" \
  --array="0-$((shards - 1))" \
  --cpus-per-task="$cpus" --mem=4G --time=02:00:00 \
  --output="$out/slurm-%A_%a.out" \
  --wrap="$mptx exp run '$what' --shard \${SLURM_ARRAY_TASK_ID}/$shards --workers \${SLURM_CPUS_PER_TASK} --quiet --out '$out'")

merge=$(sbatch --parsable \
  --job-name="mptx-merge" \
  --dependency="afterok:$array" \
  --cpus-per-task=2 --mem=2G --time=00:30:00 \
  --output="$out/slurm-merge-%j.out" \
  --wrap="$mptx exp merge --out '$out' '$out'")

echo "array job $array ($shards shards), merge job $merge; tables in $out/slurm-merge-$merge.out"
