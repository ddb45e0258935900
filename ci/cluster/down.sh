#!/bin/bash
# down.sh: stop the cluster started by up.sh and remove its network. Idempotent: safe to run
# when nothing (or only part of it) is up. Processes are stopped by the PID files up.sh's
# daemons wrote, or because they live inside the cluster's own node namespaces; never by name.
# The work directory stays (munge key, accounting DB, logs): rm -rf it for a clean slate.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

T0=$(date +%s%N)
say() { printf '[down %5.1f s] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))e-3" "$*"; }

# A work directory that is not private to root is not read at all (its PID files could name anyone).
if secure_cluster_dir --existing; then
  # 1. jobs: cancel them and wait until the queue is empty (job steps outlive a stopped slurmd)
  cancel_jobs
  # 2. daemons: the node slurmd's, then the controller, slurmdbd, then MariaDB and munged
  for f in "$RUN"/slurmd-*.pid; do
    [ -e "$f" ] && stop_pidfile "$(basename "$f" .pid)" "$f" &
  done
  wait
  stop_head
fi

# 3. anything still running inside a node namespace (a job step or rank that outlived its
#    slurmd) belongs to this cluster: stop it by PID before the namespace goes.
for i in $(seq "$NUM_NODES"); do
  ns=$(ns_node "$i")
  netns_exists "$ns" || continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do
    say "leftover in node$i: PID $pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
    stop_pid "node$i process" "$pid" &
  done
  wait
done

# 4. cgroups of a cgroup-confined cluster (IBREPRO_CLUSTER_CGROUP=1): each node's subtree, deepest first
#    (rmdir only: a cgroup with a process in it stays, and is named)
for c in $CGROUP_CONTROLLERS; do
  for i in $(seq "$NUM_NODES"); do
    d=/sys/fs/cgroup/$c/$(ns_node "$i")
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    if [ -d "$d" ]; then
      say "WARNING: cgroup $d remains (processes: $(find "$d" -name cgroup.procs -exec cat {} + | tr '\n' ' '))"
    else
      say "removed cgroup $d"
    fi
  done
done

# 5. network: deleting a namespace destroys the veth ends in it, and with them their peers
for ns in $(for i in $(seq "$NUM_NODES"); do ns_node "$i"; done) "$NS_SWITCH"; do
  if netns_exists "$ns"; then ip netns del "$ns"; say "deleted netns $ns"; fi
done
if [ "$FABRIC" = fattree ]; then "$HERE/fabric.sh" down | while read -r line; do say "$line"; done; fi
if ip link show "$HEAD_IF" >/dev/null 2>&1; then ip link del "$HEAD_IF"; fi
# `ip netns add` bind-mounts /run/netns on itself; undo that only when no namespace is left
# (other software on the machine may have its own there).
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ] && mountpoint -q /run/netns; then
  umount /run/netns
fi
# node-exec.sh's mounts live in private mount namespaces that ended with their processes;
# check that none leaked into this one.
if grep -q " $CLUSTER_DIR/" /proc/self/mountinfo; then
  say "WARNING: mounts under $CLUSTER_DIR remain:"; grep " $CLUSTER_DIR/" /proc/self/mountinfo >&2
fi
rm -f "$CLUSTER_DIR/env.sh"
say "cluster down"
