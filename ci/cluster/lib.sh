# lib.sh: the head of a throw-away Slurm 22.05 cluster on this machine, shared by the cluster of
# namespace nodes (ci/cluster/) and the cluster of soft-RoCE QEMU guests (ci/softroce/slurm-*.sh).
# Sourced, not run. The caller sets, before sourcing:
#   CLUSTER_DIR     work directory (absolute, no white space): keys, configs, logs, PID files, state, DB
#   CLUSTER_NAME    Slurm ClusterName (also the accounting cluster)
#   HEAD_ADDR       this machine's address on the cluster network (slurmctld, slurmdbd listen there)
#   SLURMCTLD_PORT SLURMD_PORT SLURMDBD_PORT MARIADB_PORT
# The head runs munged, MariaDB (127.0.0.1:$MARIADB_PORT), slurmdbd and slurmctld, all as root,
# each writing a PID file under $RUN, so stop_head stops exactly those and never kills by name.
#
# Root-run safety: CLUSTER_DIR is private (secure_cluster_dir): created here, or used only if it is a
# real directory owned by root that no one else can write, under ancestors no one else can replace,
# with nothing below it that is a symlink, another user's, or writable by others. So no path below it
# can be redirected by another user, and a PID file there was written by root. Credentials are made
# per start: a new munge key and a new accounting database password.

case $CLUSTER_DIR in
  /*) ;;
  *) echo "cluster work directory must be an absolute path, got '$CLUSTER_DIR'" >&2; exit 2 ;;
esac
case $CLUSTER_DIR in
  *[[:space:]]*) echo "cluster work directory must not contain white space: '$CLUSTER_DIR'" >&2; exit 2 ;;
esac

ETC=$CLUSTER_DIR/etc
RUN=$CLUSTER_DIR/run
LOG=$CLUSTER_DIR/log
export SLURM_CONF=$ETC/slurm.conf

# install_packages PKG...: apt-get the Debian packages of the list that are not installed (none: nothing runs);
# prints the ones it installed. Two clusters may come up at once (CI starts the fleet's beside the Slurm one) on a
# machine where neither's packages are there yet: one install at a time (flock), the next one re-reads what is
# missing after it, and apt waits for a lock some other apt holds instead of failing on it.
install_packages() {
  (
    flock 9
    missing=$(for p in "$@"; do
      dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
    done)
    [ -z "$missing" ] && exit 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    # Debian's policy-rc.d keeps the packages from starting their daemons; the scripts start their own.
    apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing >/dev/null
    echo $missing
  ) 9>/var/lock/ibrepro-apt.lock
}

# _mode_ok PATH MASK: PATH is not a symlink, is owned by root and has none of the octal MASK bits set
_mode_ok() {
  local uid mode
  [ -L "$1" ] && return 1
  read -r uid mode < <(stat -c '%u %a' -- "$1" 2>/dev/null) || return 1
  [ "$uid" = 0 ] && (( (8#$mode & $2) == 0 ))
}

# secure_cluster_dir [--existing]: make sure CLUSTER_DIR is private to root (see the header), creating it
# if missing (with --existing: return 1 instead); exit naming the problem otherwise.
secure_cluster_dir() {
  local d=$CLUSTER_DIR p mode uid bad
  [ "${1:-}" = --existing ] && [ ! -e "$d" ] && [ ! -L "$d" ] && return 1
  # the existing ancestors, symlinks resolved: root's, and not writable by others unless sticky like /tmp
  # (then others cannot remove or replace our entry in it)
  p=$(dirname "$d")
  while [ ! -e "$p" ]; do p=$(dirname "$p"); done
  p=$(realpath -e -- "$p")
  while :; do
    read -r uid mode < <(stat -c '%u %a' -- "$p")
    if [ "$uid" != 0 ] || { (( (8#$mode & 8#022) != 0 )) && (( (8#$mode & 8#1000) == 0 )); }; then
      echo "refusing $d: its ancestor $p is not root's or is writable by others" >&2; exit 1
    fi
    [ "$p" = / ] && break
    p=$(dirname "$p")
  done
  (umask 022; mkdir -p -- "$(dirname "$d")")
  if (umask 022; mkdir -- "$d") 2>/dev/null; then
    return 0                        # ours, new and empty
  fi
  [ -d "$d" ] && _mode_ok "$d" 8#022 \
    || { echo "refusing $d: it exists but is a symlink, not a directory, not owned by root, or writable by group or others (another user may have made it: remove it, or choose another work directory)" >&2; exit 1; }
  # below it: no symlink, nothing of another user, nothing others can write (sockets are meant to be)
  bad=$(find "$d" -mindepth 1 \( -type l -o ! -user root -o \( ! -type s -perm -0002 \) \) -print -quit)
  [ -z "$bad" ] || { echo "refusing $d: $bad is a symlink, not owned by root, or writable by others" >&2; exit 1; }
}

# pid_alive FILE: true when FILE (a root-owned regular file under $RUN) names a running root process that
# is the daemon the file is named after (slurmd-node1.pid: slurmd; mysqld.pid: mariadbd). A PID file
# left by a killed run may name a PID the kernel has since given to something else: not ours to stop.
pid_alive() {
  [ -f "$1" ] && [ ! -L "$1" ] && [ -s "$1" ] || return 1
  [ "$(stat -c %u -- "$1")" = 0 ] || return 1
  local pid want comm
  pid=$(head -c 32 -- "$1" | tr -cd 0-9)
  [ -n "$pid" ] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [ "$(stat -c %u "/proc/$pid")" = 0 ] || return 1
  want=$(basename "$1" .pid); want=${want%%-*}
  [ "$want" = mysqld ] && want=mariadbd
  [ "$comm" = "$want" ]
}

# head_running: the name of a head daemon of this work directory that runs, if any
head_running() {
  local f
  for f in "$RUN"/*.pid; do
    [ -e "$f" ] && pid_alive "$f" && { basename "$f" .pid; return 0; }
  done
  return 1
}

# ports_free PORT...: die naming the first TCP port something listens on
ports_free() {
  local port
  for port in "$@"; do
    ss -Hltn "sport = :$port" | grep -q . && { echo "TCP port $port is in use on this machine" >&2; return 1; }
  done
  return 0
}

# ---- munge: a new key for every start; the socket is a path, reachable from node namespaces too ---------
start_munge() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$CLUSTER_DIR/munge"
  chmod 755 "$RUN"                  # munged wants o+x on every directory above its socket
  chmod 700 "$CLUSTER_DIR/munge"
  mungekey -c -f -k "$CLUSTER_DIR/munge/munge.key" >/dev/null
  munged --socket="$RUN/munge.socket" --key-file="$CLUSTER_DIR/munge/munge.key" \
         --pid-file="$RUN/munged.pid" --log-file="$LOG/munged.log" --seed-file="$CLUSTER_DIR/munge/munged.seed"
  munge -n -S "$RUN/munge.socket" | unmunge -S "$RUN/munge.socket" >/dev/null
}

# ---- slurm.conf: the head's part; the caller appends its NodeName/PartitionName lines --------------------
# Node-side settings come from the caller: SLURMD_SPOOL SLURMD_PIDFILE SLURMD_LOG TMPFS TASK_PLUGIN, and
# PROCTRACK (default proctrack/linuxproc), RETURN_TO_SERVICE (default 2), EXTRA_CONF (more lines).
write_slurm_conf_head() {
  cat > "$SLURM_CONF" <<CONF
# Generated by $0: a throw-away cluster, head files under $CLUSTER_DIR
ClusterName=$CLUSTER_NAME
SlurmctldHost=$(hostname -s)($HEAD_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$RUN/munge.socket
SlurmctldPort=$SLURMCTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$CLUSTER_DIR/state
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$SLURMD_PIDFILE
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info
# no mailer installed
MailProg=/bin/true
ProctrackType=${PROCTRACK:-proctrack/linuxproc}
TaskPlugin=$TASK_PLUGIN
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
TmpFS=$TMPFS
# ${RETURN_TO_SERVICE:-2}: a node that was down comes back by itself when its slurmd registers again (2: also
# after an administrator set it DOWN; 1: only when it was DOWN for not responding)
ReturnToService=${RETURN_TO_SERVICE:-2}
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
${EXTRA_CONF:-}
CONF
}

# ---- accounting: MariaDB (own data dir, 127.0.0.1 only) and slurmdbd; a new DB password per start -------
start_accounting() {
  mkdir -p "$CLUSTER_DIR/db"
  chmod 700 "$CLUSTER_DIR/db"
  if [ ! -d "$CLUSTER_DIR/db/data/mysql" ]; then
    # root logs in through the unix socket only (as the OS root): no password-less root over TCP
    mariadb-install-db --user=root --datadir="$CLUSTER_DIR/db/data" --auth-root-authentication-method=socket \
                       --skip-test-db > "$LOG/mariadb-install.log" 2>&1
  fi
  # A socket left by a killed MariaDB refuses connections and would pass for a started server.
  pid_alive "$RUN/mysqld.pid" || rm -f -- "$RUN/mysqld.sock" "$RUN/mysqld.pid"
  # mariadbd does not daemonize: run it in the background; it writes its own PID file.
  mariadbd --user=root --datadir="$CLUSTER_DIR/db/data" --socket="$RUN/mysqld.sock" --pid-file="$RUN/mysqld.pid" \
           --port="$MARIADB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --innodb-buffer-pool-size=64M \
           --log-error="$LOG/mysqld.err" </dev/null >/dev/null 2>&1 &
  local mariadbd_pid=$! _ started=
  # Ready means it answers, not that its socket file exists: the file appears before the server listens,
  # and on two cores busy with QEMU guests that gap was long enough for CI's first query to be refused.
  for _ in $(seq 120); do
    if mariadb-admin -S "$RUN/mysqld.sock" -u root --connect-timeout=2 ping >/dev/null 2>&1; then started=1; break; fi
    kill -0 "$mariadbd_pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ -z "$started" ]; then
    echo "MariaDB did not answer within 60 s; the end of $LOG/mysqld.err:" >&2
    tail -n 20 "$LOG/mysqld.err" >&2 2>/dev/null || true
    return 1
  fi
  local pass
  pass=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  mariadb -S "$RUN/mysqld.sock" -u root -e \
    "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1'; ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
     GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || return 1
  (umask 077; cat > "$ETC/slurmdbd.conf" <<CONF
# Generated by $0 (mode 600: slurmdbd refuses a readable file holding a password)
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
StoragePass=$pass
StorageLoc=slurm_acct_db
CONF
  )
  chmod 600 "$ETC/slurmdbd.conf"
  slurmdbd || return 1               # reads slurmdbd.conf next to $SLURM_CONF; daemonizes
  started=
  for _ in $(seq 120); do sacctmgr -n list cluster >/dev/null 2>&1 && { started=1; break; }; sleep 0.5; done
  [ -n "$started" ] || { echo "slurmdbd did not answer within 60 s; see $LOG/slurmdbd.log" >&2; return 1; }
  sacctmgr -n list cluster format=cluster | grep -qw "$CLUSTER_NAME" || sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null
}

start_slurmctld() {
  mkdir -p "$CLUSTER_DIR/state"
  # -c: a cluster that is brought up starts from no state (a node an interrupted fault test set DOWN stays DOWN
  # otherwise); -i: tolerate what is left of an earlier run; daemonizes
  slurmctld -c -i
}

# wait_nodes_idle N SECONDS: until N nodes are idle; die with sinfo otherwise
wait_nodes_idle() {
  local want=$1 idle=0 _
  for _ in $(seq $(( $2 * 5 ))); do
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    [ "$idle" -ge "$want" ] && return 0
    sleep 0.2
  done
  sinfo -N >&2 || true
  echo "only $idle/$want nodes idle after $2 s; see $LOG/" >&2
  return 1
}

# check_srun_sacct PARTITION NODE...: a job step across the nodes prints their names, and sacct records it
check_srun_sacct() {
  local partition=$1 out hosts want jobid state _
  shift
  out=$(srun -p "$partition" -N $# -n $# -t 2 --chdir=/tmp bash -c 'echo "$SLURM_JOB_ID $(hostname)"') \
    || { echo "srun across the nodes failed; see $LOG/slurmctld.log" >&2; return 1; }
  hosts=$(awk '{print $2}' <<< "$out" | sort | tr '\n' ' ')
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  [ "$hosts" = "$want" ] || { echo "srun across the nodes printed '$out', expected $want" >&2; return 1; }
  jobid=$(awk 'NR == 1 {print $1}' <<< "$out")
  for _ in $(seq 50); do     # slurmdbd records the job a moment after it ends
    state=$(sacct -n -X -P -o state -j "$jobid" 2>/dev/null || true)
    [ "$state" = COMPLETED ] && return 0
    sleep 0.2
  done
  echo "sacct did not report job $jobid as COMPLETED (got '$state')" >&2
  return 1
}

# stop_pid NAME PID: SIGTERM, wait up to 15 s, then SIGKILL (say is the caller's logger)
stop_pid() {
  local name=$1 pid=$2 _
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 75); do
    kill -0 "$pid" 2>/dev/null || { say "stopped $name (PID $pid)"; return 0; }
    sleep 0.2
  done
  say "WARNING: $name (PID $pid) ignored SIGTERM for 15 s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

# stop_pidfile NAME FILE
stop_pidfile() { if pid_alive "$2"; then stop_pid "$1" "$(cat "$2")"; fi; rm -f -- "$2"; }

# cancel_jobs: cancel every job and wait until the queue is empty (job steps outlive a stopped slurmd)
cancel_jobs() {
  pid_alive "$RUN/slurmctld.pid" || return 0
  local ids _
  ids=$(squeue -h -o %i 2>/dev/null || true)
  [ -n "$ids" ] || return 0
  scancel $ids 2>/dev/null || true
  for _ in $(seq 50); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  say "cancelled jobs: $(echo $ids)"
}

# stop_head: the controller, slurmdbd, then MariaDB and munged (the caller stops its slurmd's first)
stop_head() {
  stop_pidfile slurmctld "$RUN/slurmctld.pid"
  stop_pidfile slurmdbd "$RUN/slurmdbd.pid"
  stop_pidfile mariadbd "$RUN/mysqld.pid" &
  stop_pidfile munged "$RUN/munged.pid" &
  wait
}
