# slurm-common.sh: names and paths of the soft-RoCE Slurm cluster (sourced by slurm-up.sh, slurm-down.sh).
#
# The head (this machine: munged, MariaDB, slurmdbd, slurmctld) is ci/cluster/lib.sh's, shared with the
# namespace cluster; the nodes are QEMU guests rxnode1..N started by `ibrepro softroce up --slurm`, on
# the tap fabric of ibrepro.softroce.fabric. Other ports and names than the namespace cluster's, so
# the two can be up at the same time.

CLUSTER_DIR=${IBREPRO_SOFTROCE_CLUSTER_DIR:-/tmp/ibrepro-softroce}
CLUSTER_NAME=rxe
NUM_NODES=${NODES:-3}
SMP=${SMP:-3}                       # vCPUs (Slurm CPUs) per node
MEMORY=${MEMORY:-1G}
HEAD_ADDR=198.18.0.1                # this machine on the management bridge (ibrepro.softroce.fabric)
SLURMCTLD_PORT=6917
SLURMD_PORT=6818                    # inside each guest
SLURMDBD_PORT=6919
MARIADB_PORT=3308
GUESTS=$CLUSTER_DIR/guests          # the guests' run directory (state, agent key, consoles)
SHARE=$CLUSTER_DIR/share            # mounted in every guest at the same path: the ReFrame prefix
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IBREPRO=${IBREPRO:-$REPO/.venv/bin/ibrepro}

. "$REPO/ci/cluster/lib.sh"

node_names() { for i in $(seq "$NUM_NODES"); do echo "rxnode$i"; done; }

# guest_exec NODE CMD...: run CMD in a guest through its agent (from the shared directory, which the
# guests have at the same path)
guest_exec() {
  local node=$1; shift
  (cd "$SHARE" && "$IBREPRO" softroce exec --run-dir "$GUESTS" --node "$node" -- "$@")
}
