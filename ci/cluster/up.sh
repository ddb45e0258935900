#!/bin/bash
# up.sh: start a throw-away two-node Slurm 22.05 cluster on this (Debian 12) machine.
#
#   head (this machine): munged, MariaDB, slurmdbd, slurmctld     198.51.100.1 on ibr-head0
#   node1, node2: one slurmd each, in its own net+UTS+mount ns    198.51.100.11, .12 on ibr0
#   all joined by veth pairs to the bridge ibr-br0 (in netns ibr-switch); no route out.
# (Defaults: a second cluster beside this one takes other names, addresses and ports from IBREPRO_CLUSTER_*,
# common.sh; with IBREPRO_CLUSTER_CGROUP=1 its nodes confine jobs with task/cgroup, README.md.)
#
# Needs root. Installs the Debian packages it needs with apt-get (skipped when present).
# Work directory: $IBREPRO_CLUSTER_DIR (default /tmp/ibrepro-cluster), private to root (lib.sh
# refuses one that another user made or can write): keys, configs, logs, PID files, Slurm state
# and the accounting database; a new munge key and database password at every start. Then:
#   . $IBREPRO_CLUSTER_DIR/env.sh     # SLURM_CONF for sinfo/srun/sbatch/sacct and ReFrame
# Stop with down.sh. If anything here fails, what was started is torn down again.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

T0=$(date +%s%N)
lap() { printf '[up %6.1f s] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*"; }
die() { echo "up.sh: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, veth, daemons as root)"
secure_cluster_dir
# Refuse to start twice: a second cluster would fight the first over namespaces and ports.
if running=$(head_running); then
  die "already up ($running is running, PID $(cat "$RUN/$running.pid")); run $HERE/down.sh first"
fi
# Network objects of an earlier cluster: refuse while a process lives in a node namespace (a cluster
# started from another work directory); otherwise they are leftovers of a run that was killed (or of a
# machine image taken while a cluster was up), and down.sh clears them.
leftovers=""
fabric_ns=""
[ "$FABRIC" = fattree ] && fabric_ns="${PREFIX}leaf1 ${PREFIX}leaf2 ${PREFIX}spine0 ${PREFIX}spine1"
for ns in $(for i in $(seq "$NUM_NODES"); do ns_node "$i"; done) "$NS_SWITCH" $fabric_ns; do
  netns_exists "$ns" || continue
  leftovers="$leftovers $ns"
  pids=$(echo $(ip netns pids "$ns" 2>/dev/null))
  [ -n "$pids" ] && die "network namespace $ns has running processes (PIDs $pids): a cluster is up; run $HERE/down.sh"
done
ip link show "$HEAD_IF" >/dev/null 2>&1 && leftovers="$leftovers $HEAD_IF"
if [ -n "$leftovers" ]; then
  lap "clearing leftovers of an earlier cluster (no process of it runs):$leftovers"
  "$HERE/down.sh" | sed 's/^/    /'
fi

# ---- 1. packages --------------------------------------------------------------------------------
# slurm daemons + client, munge, accounting (slurmdbd + MariaDB, so `sacct` works and ReFrame's
# `slurm` scheduler can read exit codes), Debian's Open MPI (mpicc.openmpi, libpmix2 for srun --mpi=pmix).
PACKAGES="slurmd slurmctld slurm-client munge slurmdbd mariadb-server mariadb-client
          openmpi-bin libopenmpi-dev iproute2"
[ "$FABRIC" = fattree ] && PACKAGES="$PACKAGES iperf3"     # the pair rounds' TCP flows
installed=$(install_packages $PACKAGES)
if [ -n "$installed" ]; then lap "apt-get installed:" $installed; else lap "packages present"; fi

# Cgroup confinement needs the v1 hierarchies it uses (README.md: cgroup v2 is another plugin and layout).
if [ "$CGROUP" = 1 ]; then
  for c in $CGROUP_CONTROLLERS; do
    [ "$(stat -f -c %T "/sys/fs/cgroup/$c" 2>/dev/null)" = cgroupfs ] \
      || die "IBREPRO_CLUSTER_CGROUP=1 needs the cgroup v1 $c hierarchy at /sys/fs/cgroup/$c (mount | grep cgroup)"
  done
fi

# Ports must be free on the head (slurmd's port is per node namespace).
ports_free $SLURMCTLD_PORT $SLURMDBD_PORT $MARIADB_PORT || die "a port of the head is taken"

# From here on, a failure tears down whatever was started.
up_done=0
teardown() {
  local rc=$?
  [ "$up_done" = 1 ] && return
  echo "up.sh: failed (exit $rc), tearing down what was started; logs in $LOG" >&2
  "$HERE/down.sh" >&2 || true
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

mkdir -p "$CLUSTER_DIR"/{spool,nodetmp,mnt}

# ---- 2. munge: a new key, and a socket that the node namespaces reach too (a path) ----------------
start_munge
lap "munged up"

# ---- 3. network: bridge in its own namespace; head and nodes hang on it by veth -------------------
ip netns add "$NS_SWITCH"
ip -n "$NS_SWITCH" link add "$BRIDGE" type bridge
ip -n "$NS_SWITCH" link set lo up
ip -n "$NS_SWITCH" link set "$BRIDGE" up
ip link add "$HEAD_IF" type veth peer name p-head netns "$NS_SWITCH"
ip addr add "$HEAD_ADDR/24" dev "$HEAD_IF"
ip link set "$HEAD_IF" up
ip -n "$NS_SWITCH" link set p-head master "$BRIDGE" up
HEAD_NAME=$(hostname -s)
{ echo "127.0.0.1 localhost"; echo "$HEAD_ADDR $HEAD_NAME"; } > "$ETC/hosts.nodes"
for i in $(seq "$NUM_NODES"); do
  ns=$(ns_node "$i")
  ip netns add "$ns"
  ip -n "$NS_SWITCH" link add "p-node$i" type veth peer name "$NODE_IF" netns "$ns"
  ip -n "$NS_SWITCH" link set "p-node$i" master "$BRIDGE" up
  ip -n "$ns" addr add "$(node_addr "$i")/24" dev "$NODE_IF"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$NODE_IF" up
  echo "$(node_addr "$i") node$i" >> "$ETC/hosts.nodes"
done
lap "network up ($NET.0/24: head $HEAD_ADDR, nodes $(node_addr 1)..$(node_addr "$NUM_NODES"))"
if [ "$FABRIC" = fattree ]; then
  # the data fabric beside the management bridge: leaves, spines, D-mod-K routes, tbf on every link (fabric.sh)
  "$HERE/fabric.sh" up
  "$HERE/fabric.sh" hosts >> "$ETC/hosts.nodes"
  "$HERE/fabric.sh" topology > "$ETC/topology.conf"
  EXTRA_CONF="# the fat tree of fabric.sh (the fleet's pair rounds read topology.conf too)
TopologyPlugin=topology/tree"
  lap "fat-tree fabric up ($FABRIC_NET.0/24, node<i>-ib, every link at $FABRIC_RATE; $ETC/topology.conf)"
fi

# ---- 4. slurm.conf ------------------------------------------------------------------------------
# Each node declares this machine's real cores and an equal share of its memory. The slurmd's share
# the file system with the head: their spool, PID and log files live in the work directory too.
eval "$(slurmd -C | head -1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=')"
SLURMD_SPOOL=$CLUSTER_DIR/spool/%n SLURMD_PIDFILE=$RUN/slurmd-%n.pid SLURMD_LOG=$LOG/slurmd-%n.log
# per-node directory (node-exec.sh bind-mounts node<N>/ on it): PMIx creates the same name on every node
TMPFS=$CLUSTER_DIR/nodetmp
if [ "$CGROUP" = 1 ]; then
  # task/cgroup + ConstrainCores: a step's tasks get a cpuset of the CPUs Slurm granted it (what a site runs);
  # task/affinity binds within it; proctrack/cgroup tracks a job's processes by its freezer cgroup. Each node
  # has its own subtree of the shared v1 hierarchies (node-exec.sh), so the two slurmd's never meet there.
  TASK_PLUGIN=task/cgroup,task/affinity
  PROCTRACK=proctrack/cgroup
  cat > "$ETC/cgroup.conf" <<CONF
# Generated by $0: cgroup v1 (this machine mounts the v1 hierarchies); cores only
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=no
ConstrainCores=yes
ConstrainRAMSpace=no
ConstrainSwapSpace=no
ConstrainDevices=no
CONF
else
  # no cgroup plugins: the nodes share one kernel and one cgroup tree
  TASK_PLUGIN=task/none
  rm -f "$ETC/cgroup.conf"
fi
write_slurm_conf_head
HW="CPUs=$CPUs Boards=$Boards SocketsPerBoard=$SocketsPerBoard CoresPerSocket=$CoresPerSocket ThreadsPerCore=$ThreadsPerCore"
for i in $(seq "$NUM_NODES"); do
  echo "NodeName=node$i NodeAddr=$(node_addr "$i") $HW RealMemory=$((RealMemory / NUM_NODES)) State=UNKNOWN"
done >> "$SLURM_CONF"
echo "PartitionName=ci Nodes=node[1-$NUM_NODES] Default=YES MaxTime=INFINITE State=UP" >> "$SLURM_CONF"
# a second partition of the same nodes, hidden from sinfo: where a job that ignores its case's partition lands
# (tests/test_cluster.py: a case checks the Slurm partition it ran in)
echo "PartitionName=elsewhere Nodes=node[1-$NUM_NODES] Hidden=YES MaxTime=INFINITE State=UP" >> "$SLURM_CONF"

# ---- 5. accounting: MariaDB (own data dir, 127.0.0.1:$MARIADB_PORT) and slurmdbd ---------------------------
start_accounting || die "accounting did not start"
lap "MariaDB + slurmdbd up"

# ---- 6. slurmctld on the head, one slurmd per node namespace -------------------------------------
if [ "$CGROUP" = 1 ]; then
  # each node's own subtree of the cpuset and freezer hierarchies (node-exec.sh makes it the node's root)
  for c in $CGROUP_CONTROLLERS; do
    for i in $(seq "$NUM_NODES"); do
      d=/sys/fs/cgroup/$c/$(ns_node "$i")
      mkdir -p "$d"
      if [ "$c" = cpuset ]; then      # a new cpuset has no CPUs and no memory nodes: the machine's
        cat "/sys/fs/cgroup/cpuset/cpuset.cpus" > "$d/cpuset.cpus"
        cat "/sys/fs/cgroup/cpuset/cpuset.mems" > "$d/cpuset.mems"
      fi
    done
  done
  lap "cgroup subtrees: $(for c in $CGROUP_CONTROLLERS; do echo -n "/sys/fs/cgroup/$c/$(ns_node 1)..$NUM_NODES "; done)"
fi
start_slurmctld
for i in $(seq "$NUM_NODES"); do
  mkdir -p "$CLUSTER_DIR/spool/node$i"
  "$HERE/node-exec.sh" "$i" slurmd   # finds its NodeName from the node's host name; daemonizes
done
lap "slurmctld + $NUM_NODES slurmd started"

# ---- 7. health: every node idle, a job across both nodes, accounting answers ---------------------
wait_nodes_idle "$NUM_NODES" 30 || die "nodes not idle"
lap "nodes idle"
nodes=$(for i in $(seq "$NUM_NODES"); do echo "node$i"; done)
check_srun_sacct ci $nodes || die "the health check failed"
lap "srun -N$NUM_NODES hostname, sacct answers"

cat > "$CLUSTER_DIR/env.sh" <<ENV
# . this file to talk to the cluster started by ci/cluster/up.sh (and to run its status.sh, node-exec.sh, down.sh)
export IBREPRO_CLUSTER_DIR=$CLUSTER_DIR
export SLURM_CONF=$SLURM_CONF
ENV
if [ "$CLUSTER_NAME" != ci ] || [ "$PREFIX" != ibr- ] || [ "$CGROUP" = 1 ] || [ "$NUM_NODES" != 2 ]; then
  # a cluster beside the default one: its names, addresses and ports (common.sh)
  cat >> "$CLUSTER_DIR/env.sh" <<ENV
export IBREPRO_CLUSTER_NAME=$CLUSTER_NAME IBREPRO_CLUSTER_PREFIX=$PREFIX IBREPRO_CLUSTER_NET=$NET
export IBREPRO_CLUSTER_CGROUP=$CGROUP IBREPRO_CLUSTER_NODES=$NUM_NODES IBREPRO_CLUSTER_FABRIC=$FABRIC
export IBREPRO_CLUSTER_FABRIC_NET=$FABRIC_NET IBREPRO_CLUSTER_FABRIC_RATE=$FABRIC_RATE
export IBREPRO_CLUSTER_SLURMCTLD_PORT=$SLURMCTLD_PORT IBREPRO_CLUSTER_SLURMD_PORT=$SLURMD_PORT
export IBREPRO_CLUSTER_SLURMDBD_PORT=$SLURMDBD_PORT IBREPRO_CLUSTER_MARIADB_PORT=$MARIADB_PORT
ENV
fi
up_done=1
sinfo -N
echo "cluster up: . $CLUSTER_DIR/env.sh"
