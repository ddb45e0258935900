#!/bin/bash
# slurm-down.sh: stop the cluster of slurm-up.sh: jobs, guests (by their recorded QEMU PIDs), bridges and
# taps, then the head's daemons (by their PID files). Idempotent. The work directory stays (logs, DB).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/slurm-common.sh"

T0=$(date +%s%N)
say() { printf '[down %5.1f s] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*"; }

# A work directory that is not private to root is not read at all (its PID files could name anyone).
secure_cluster_dir --existing || { say "nothing to stop ($CLUSTER_DIR does not exist)"; exit 0; }
cancel_jobs
status=0
"$IBREPRO" softroce down --run-dir "$GUESTS" 2>&1 | sed 's/^/    /' || status=1
stop_head
rm -f "$CLUSTER_DIR/env.sh"
say "cluster down"
exit $status
