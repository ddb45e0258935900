#!/bin/bash
# slurm-up.sh: a Slurm cluster whose compute nodes are soft-RoCE QEMU guests (NODES, default 3).
#
#   head (this machine): munged, MariaDB, slurmdbd, slurmctld       198.18.0.1 on bridge ibrx-mgmt
#   rxnode1..N (QEMU TCG guests): munged, slurmd (configless)        198.18.0.(10+i) on mgmt0
#     rxe0 on fab0 (198.18.1.(10+i), bridge ibrx-fab0), rxe1 on fab1 (198.18.2.(10+i), bridge ibrx-fab1)
#
# Needs root; installs the Debian packages it needs (skipped when present). Work directory:
# $IBREPRO_SOFTROCE_CLUSTER_DIR (default /tmp/ibrepro-softroce), private to root (ci/cluster/lib.sh).
# Extra binaries for the guests (our verbs benchmark): $IBREPRO_SOFTROCE_EXTRA. Then:
#   . $IBREPRO_SOFTROCE_CLUSTER_DIR/env.sh     # SLURM_CONF for sinfo/srun/sbatch/sacct and ReFrame
# Stop with slurm-down.sh. If anything here fails, what was started is torn down again (unless
# KEEP_ON_FAILURE=1, to look at it).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/slurm-common.sh"

T0=$(date +%s%N)
lap() { printf '[up %6.1f s] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*"; }
say() { lap "$@"; }
die() { echo "slurm-up.sh: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (bridges, taps, daemons as root)"
secure_cluster_dir
if running=$(head_running); then
  die "already up ($running is running, PID $(cat "$RUN/$running.pid")); run $HERE/slurm-down.sh first"
fi

PACKAGES="slurmctld slurm-client munge slurmdbd mariadb-server mariadb-client qemu-system-x86 kmod cpio iproute2"
installed=$(install_packages $PACKAGES)
[ -z "$installed" ] || lap "apt-get installed:" $installed
ports_free $SLURMCTLD_PORT $SLURMDBD_PORT $MARIADB_PORT || die "a port of the head is taken"

up_done=0
teardown() {
  local rc=$?
  [ "$up_done" = 1 ] && return
  if [ "${KEEP_ON_FAILURE:-0}" = 1 ]; then
    echo "slurm-up.sh: failed (exit $rc); KEEP_ON_FAILURE=1: left up for a look, stop with $HERE/slurm-down.sh" >&2
    exit "$rc"
  fi
  echo "slurm-up.sh: failed (exit $rc), tearing down what was started; logs in $LOG and $GUESTS" >&2
  "$HERE/slurm-down.sh" >&2 || true
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# ---- 1. munge: the cluster's key; the guests get it at boot (fw_cfg) --------------------------------
start_munge
lap "munged up"

# ---- 2. the fabric and the guests (ibrepro.softroce: image, bridges, taps, QEMU) ----------------------
mkdir -p "$SHARE"
"$IBREPRO" softroce up --slurm "$CLUSTER_DIR/munge/munge.key" --nodes "$NUM_NODES" --smp "$SMP" \
    --memory "$MEMORY" --run-dir "$GUESTS" --share "$SHARE" 2>&1 | sed 's/^/    /' \
  || die "the guests did not come up"
lap "$NUM_NODES guests up"

# ---- 3. slurm.conf: the head's part (lib.sh), the nodes' (from ibrepro softroce up) -----------------
SLURMD_SPOOL=/var/spool/slurmd SLURMD_PIDFILE=/run/slurmd.pid SLURMD_LOG=/var/log/slurm/slurmd.log
TMPFS=/tmp
TASK_PLUGIN=task/affinity           # CPU binding (srun --cpu-bind) works inside the guests
RETURN_TO_SERVICE=1                 # as on sites: a node an administrator took out stays out until resumed
EXTRA_CONF="# the nodes fetch this file from slurmctld (configless, as many sites run their nodes)
SlurmctldParameters=enable_configless"
write_slurm_conf_head
cat "$GUESTS/slurm-nodes.conf" >> "$SLURM_CONF"

# ---- 4. accounting and the controller ----------------------------------------------------------------
start_accounting || die "accounting did not start"
lap "MariaDB + slurmdbd up"
start_slurmctld
lap "slurmctld up"

# ---- 5. the nodes: munged + slurmd in every guest, in parallel ----------------------------------------
pids=""
for node in $(node_names); do
  guest_exec "$node" sh /etc/softroce/slurm-node.sh "$HEAD_ADDR:$SLURMCTLD_PORT" "$SLURM_CONF" "$RUN/munge.socket" \
    2>&1 | sed "s/^/    $node: /" &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid" || die "a node's slurmd did not start"; done
lap "slurmd started on $NUM_NODES nodes"

# ---- 6. health: every node idle, a job step across all of them, accounting answers -------------------
wait_nodes_idle "$NUM_NODES" 90 || die "nodes not idle"
lap "nodes idle"
check_srun_sacct rxe $(node_names) || die "the health check failed"
lap "srun -N$NUM_NODES hostname, sacct answers"

cat > "$CLUSTER_DIR/env.sh" <<ENV
# . this file to talk to the cluster started by ci/softroce/slurm-up.sh
export IBREPRO_SOFTROCE_CLUSTER_DIR=$CLUSTER_DIR
export SLURM_CONF=$SLURM_CONF
ENV
up_done=1
sinfo -N
echo "soft-RoCE Slurm cluster up: . $CLUSTER_DIR/env.sh"
