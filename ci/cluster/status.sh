#!/bin/bash
# status.sh: what of the cluster is running. Exit 0 when it is fully up, 1 otherwise.
#   status.sh        daemons, network, nodes and queue
#   status.sh -q     no output, only the exit code (tests use it to decide whether to run)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"
quiet=0; [ "${1:-}" = -q ] && quiet=1
out() { [ "$quiet" = 1 ] || echo "$@"; }

up=1
for name in munged mysqld slurmdbd slurmctld $(for i in $(seq "$NUM_NODES"); do echo "slurmd-node$i"; done); do
  if pid_alive "$RUN/$name.pid"; then
    out "  running  $name (PID $(cat "$RUN/$name.pid"))"
  else
    out "  stopped  $name"; up=0
  fi
done
for i in $(seq "$NUM_NODES"); do
  ns=$(ns_node "$i")
  if netns_exists "$ns"; then
    read -r rx tx <<< "$(nic_bytes "$i")"
    out "  netns    $ns: $(ip -n "$ns" -br addr show "$NODE_IF" | awk '{print $1, $3}'), rx $rx B, tx $tx B"
  else
    out "  absent   netns $ns"; up=0
  fi
done
if [ "$up" = 1 ]; then
  if [ "$quiet" = 0 ]; then
    sinfo -N
    squeue
  fi
  # a node that is down or drained is not "up" for our purposes
  [ "$(sinfo -h -N -t idle,alloc,mix -o %N 2>/dev/null | sort -u | wc -l)" -ge "$NUM_NODES" ] || up=0
fi
out "cluster dir: $CLUSTER_DIR ($([ "$up" = 1 ] && echo up || echo not up))"
[ "$up" = 1 ]
