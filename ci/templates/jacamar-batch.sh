#!/bin/bash
# jacamar-batch.sh FILE: run a child job's lines (ci/templates/jacamar.py wrote FILE) as Jacamar's Slurm executor
# does: one batch job made from the job's SCHEDULER_PARAMETERS (sbatch options, split at white space), waited for;
# its output goes to the job log, its exit status is the job's.
set -euo pipefail
file=${1:?usage: jacamar-batch.sh FILE}
: "${SCHEDULER_PARAMETERS:?jacamar-batch.sh: the job sets no SCHEDULER_PARAMETERS}"
out=$file.out
rm -f "$out"
status=0
set -f     # split, never glob
# shellcheck disable=SC2086  # SCHEDULER_PARAMETERS is a list of sbatch options
sbatch --wait --quiet --job-name="${CI_JOB_NAME:-ci-job}" --output="$out" $SCHEDULER_PARAMETERS "$file" || status=$?
cat "$out" 2>/dev/null || echo "jacamar-batch.sh: the batch job wrote no output ($out)" >&2
exit "$status"
