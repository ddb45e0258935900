#!/bin/bash
# up.sh: start a throw-away two-node Slurm 22.05 cluster on this (Debian 12) machine.
#
#   head (this machine): munged, MariaDB, slurmdbd, slurmctld     198.51.100.1 on ibr-head0
#   node1, node2: one slurmd each, in its own net+UTS+mount ns    198.51.100.11, .12 on ibr0
#   all joined by veth pairs to the bridge ibr-br0 (in netns ibr-switch); no route out.
#
# Needs root. Installs the Debian packages it needs with apt-get (skipped when present).
# Work directory: $IBREPRO_CLUSTER_DIR (default /tmp/ibrepro-cluster): keys, configs, logs,
# PID files, Slurm state and the accounting database. Then:
#   . $IBREPRO_CLUSTER_DIR/env.sh     # SLURM_CONF for sinfo/srun/sbatch/sacct and ReFrame
# Stop with down.sh. If anything here fails, what was started is torn down again.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

T0=$(date +%s%N)
lap() { printf '[up %6.1f s] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*"; }
die() { echo "up.sh: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, veth, daemons as root)"
# Refuse to start twice: a second cluster would fight the first over namespaces and ports.
for f in "$RUN"/*.pid; do
  [ -e "$f" ] && pid_alive "$f" && die "already up ($(basename "$f" .pid) is running, PID $(cat "$f")); run $HERE/down.sh first"
done
# Network objects of an earlier cluster: refuse while a process lives in a node namespace (a cluster
# started from another work directory); otherwise they are leftovers of a run that was killed (or of a
# machine image taken while a cluster was up), and down.sh clears them.
leftovers=""
for ns in $(for i in $(seq "$NUM_NODES"); do ns_node "$i"; done) "$NS_SWITCH"; do
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
missing=$(for p in $PACKAGES; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
done)
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # Debian's policy-rc.d keeps the packages from starting their daemons; we start our own below.
  apt-get install -y -q --no-install-recommends $missing >/dev/null
  lap "apt-get installed:" $missing
else
  lap "packages present"
fi

# Ports must be free on the head (slurmd's port is per node namespace).
for port in $SLURMCTLD_PORT $SLURMDBD_PORT $MARIADB_PORT; do
  ss -Hltn "sport = :$port" | grep -q . && die "TCP port $port is in use on this machine"
done

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

mkdir -p "$ETC" "$RUN" "$LOG" "$CLUSTER_DIR"/{state,spool,munge,db,nodetmp,mnt}
chmod 755 "$CLUSTER_DIR" "$RUN"     # munged wants o+x on every directory above its socket
chmod 700 "$CLUSTER_DIR/munge"

# ---- 2. munge: a private key and socket (a path, so the node namespaces reach it too) ------------
[ -s "$CLUSTER_DIR/munge/munge.key" ] || mungekey -c -k "$CLUSTER_DIR/munge/munge.key" >/dev/null
munged --socket="$RUN/munge.socket" --key-file="$CLUSTER_DIR/munge/munge.key" \
       --pid-file="$RUN/munged.pid" --log-file="$LOG/munged.log" --seed-file="$CLUSTER_DIR/munge/munged.seed"
munge -n -S "$RUN/munge.socket" | unmunge -S "$RUN/munge.socket" >/dev/null
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

# ---- 4. slurm.conf ------------------------------------------------------------------------------
# Each node declares this machine's real cores and an equal share of its memory.
eval "$(slurmd -C | head -1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=')"
cat > "$SLURM_CONF" <<CONF
# Generated by ci/cluster/up.sh: a throw-away cluster, everything under $CLUSTER_DIR
ClusterName=ci
SlurmctldHost=$HEAD_NAME($HEAD_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$RUN/munge.socket
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$CLUSTER_DIR/state
SlurmdSpoolDir=$CLUSTER_DIR/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# no mailer installed
MailProg=/bin/true
# no cgroup plugins: the nodes share one kernel and one cgroup tree
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HEAD_ADDR
AccountingStoragePort=$SLURMDBD_PORT
# with auth/munge towards slurmdbd this names the munge socket (AuthInfo is not used there)
AccountingStoragePass=$RUN/munge.socket
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start batch jobs at once (default waits 3 s)
SchedulerParameters=batch_sched_delay=0
# the MPI plugin comes from each job's environment (SLURM_MPI_TYPE), as on most sites
MpiDefault=none
# per-node directory (node-exec.sh bind-mounts node<N>/ on it): PMIx creates the same name on every node
TmpFS=$CLUSTER_DIR/nodetmp
# a node that was down comes back by itself when its slurmd registers again
ReturnToService=2
# a node whose slurmd is gone is DOWN after 20 s (its jobs end NODE_FAIL)
SlurmdTimeout=20
# a task that dies ends its whole job step (as MPI sites set it): the other ranks would wait forever
KillOnBadExit=1
# a job that failed is not run again: ReFrame expects each job to run once
JobRequeue=0
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
CONF
HW="CPUs=$CPUs Boards=$Boards SocketsPerBoard=$SocketsPerBoard CoresPerSocket=$CoresPerSocket ThreadsPerCore=$ThreadsPerCore"
for i in $(seq "$NUM_NODES"); do
  echo "NodeName=node$i NodeAddr=$(node_addr "$i") $HW RealMemory=$((RealMemory / NUM_NODES)) State=UNKNOWN"
done >> "$SLURM_CONF"
echo "PartitionName=ci Nodes=node[1-$NUM_NODES] Default=YES MaxTime=INFINITE State=UP" >> "$SLURM_CONF"

# ---- 5. accounting: MariaDB (own data dir, 127.0.0.1:3307) and slurmdbd ---------------------------
if [ ! -d "$CLUSTER_DIR/db/data/mysql" ]; then
  mariadb-install-db --user=root --datadir="$CLUSTER_DIR/db/data" --auth-root-authentication-method=normal \
                     --skip-test-db > "$LOG/mariadb-install.log" 2>&1
  new_db=1
fi
# mariadbd does not daemonize: run it in the background; it writes its own PID file.
mariadbd --user=root --datadir="$CLUSTER_DIR/db/data" --socket="$RUN/mysqld.sock" --pid-file="$RUN/mysqld.pid" \
         --port=$MARIADB_PORT --bind-address=127.0.0.1 --skip-name-resolve --innodb-buffer-pool-size=64M \
         --log-error="$LOG/mysqld.err" </dev/null >/dev/null 2>&1 &
for _ in $(seq 150); do [ -S "$RUN/mysqld.sock" ] && [ -s "$RUN/mysqld.pid" ] && break; sleep 0.1; done
[ -S "$RUN/mysqld.sock" ] || die "MariaDB did not start; see $LOG/mysqld.err"
if [ "${new_db:-0}" = 1 ]; then
  mariadb -S "$RUN/mysqld.sock" -u root -e \
    "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'ci'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
fi
cat > "$ETC/slurmdbd.conf" <<CONF
# Generated by ci/cluster/up.sh
AuthType=auth/munge
AuthInfo=socket=$RUN/munge.socket
DbdHost=localhost
DbdAddr=$HEAD_ADDR
DbdPort=$SLURMDBD_PORT
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MARIADB_PORT
StorageUser=slurm
StoragePass=ci
StorageLoc=slurm_acct_db
CONF
chmod 600 "$ETC/slurmdbd.conf"     # slurmdbd refuses a readable file holding a password
slurmdbd                           # reads slurmdbd.conf next to $SLURM_CONF; daemonizes
for _ in $(seq 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.1; done
sacctmgr -n list cluster format=cluster | grep -qw ci || sacctmgr -i add cluster ci >/dev/null
lap "MariaDB + slurmdbd up"

# ---- 6. slurmctld on the head, one slurmd per node namespace -------------------------------------
slurmctld -i                       # -i: tolerate state files of an earlier run; daemonizes
for i in $(seq "$NUM_NODES"); do
  mkdir -p "$CLUSTER_DIR/spool/node$i"
  "$HERE/node-exec.sh" "$i" slurmd   # finds its NodeName from the node's host name; daemonizes
done
lap "slurmctld + $NUM_NODES slurmd started"

# ---- 7. health: every node idle, a job across both nodes, accounting answers ---------------------
for _ in $(seq 150); do
  idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "$NUM_NODES" ] && break
  sleep 0.2
done
[ "$idle" -ge "$NUM_NODES" ] || { sinfo -N >&2 || true; die "only $idle/$NUM_NODES nodes idle after 30 s; see $LOG/"; }
lap "nodes idle"
# each task prints "<job id> <host name>"
out=$(srun -N "$NUM_NODES" -n "$NUM_NODES" -t 1 bash -c 'echo "$SLURM_JOB_ID $(hostname)"') \
  || die "srun across the nodes failed; see $LOG/slurmctld.log and $LOG/slurmd-node*.log"
hosts=$(awk '{print $2}' <<< "$out" | sort | tr '\n' ' ')
[ "$hosts" = "$(for i in $(seq "$NUM_NODES"); do printf 'node%s ' "$i"; done)" ] \
  || die "srun across the nodes printed '$out'"
lap "srun -N$NUM_NODES hostname: $hosts"
jobid=$(awk 'NR == 1 {print $1}' <<< "$out")
state=
for _ in $(seq 50); do     # slurmdbd records the job a moment after it ends
  state=$(sacct -n -X -P -o state -j "$jobid" 2>/dev/null || true)
  [ "$state" = COMPLETED ] && break
  sleep 0.2
done
[ "$state" = COMPLETED ] || die "sacct did not report job $jobid as COMPLETED (got '$state')"
lap "sacct answers"

cat > "$CLUSTER_DIR/env.sh" <<ENV
# . this file to talk to the cluster started by ci/cluster/up.sh
export IBREPRO_CLUSTER_DIR=$CLUSTER_DIR
export SLURM_CONF=$SLURM_CONF
ENV
up_done=1
sinfo -N
echo "cluster up: . $CLUSTER_DIR/env.sh"
