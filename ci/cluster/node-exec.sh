#!/bin/bash
# node-exec.sh N CMD [ARGS...]: run CMD as cluster node N.
#
# "Being node N" means: its network namespace (only lo and its NIC, ibr0), its host name
# (a private UTS namespace), and a private mount namespace in which
#   * /etc/hosts names the head and the nodes by their cluster addresses (MPI launchers
#     resolve node names; the machine's /etc/hosts maps its own name to 127.0.0.1),
#   * /sys is a fresh sysfs, so /sys/class/net lists this namespace's interfaces (UCX and
#     libfabric pick NICs from there), with the machine's cgroup mounts kept under it
#     (slurmd refuses to start without /sys/fs/cgroup),
#   * the Slurm TmpFS is the node's own directory (the PMIx plugin creates the same
#     directory name on every node of a job).
# With IBREPRO_CLUSTER_CGROUP=1 (common.sh) the node also has its own cgroups: CMD runs in
# <hierarchy>/<netns name> of the cpuset and freezer hierarchies, in a cgroup namespace rooted
# there, with that directory bind-mounted on /sys/fs/cgroup/<controller>: the node's slurmd sees
# its subtree as the whole hierarchy (as a container does) and never the other node's.
# The file system is otherwise shared, like a cluster file system.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 N CMD [ARGS...]   (run CMD as node N, 1..$NUM_NODES)" >&2
  exit 2
fi
N=$1; shift
NS=$(ns_node "$N")
netns_exists "$NS" || { echo "$0: node$N is not up (no network namespace $NS; run ci/cluster/up.sh)" >&2; exit 1; }

CGROUPS=""
if [ "$CGROUP" = 1 ]; then
  for c in $CGROUP_CONTROLLERS; do
    [ -d "/sys/fs/cgroup/$c/$NS" ] \
      || { echo "$0: node$N has no cgroup /sys/fs/cgroup/$c/$NS (run ci/cluster/up.sh)" >&2; exit 1; }
    echo $$ > "/sys/fs/cgroup/$c/$NS/cgroup.procs"       # this process, and so CMD, into the node's cgroups
    CGROUPS="$CGROUPS $c"
  done
fi

exec nsenter --net="/run/netns/$NS" unshare --uts --mount --propagation private $([ -n "$CGROUPS" ] && echo --cgroup) \
  bash -c '
    set -e
    N=$1 DIR=$2 NS=$3 CGROUPS=$4; shift 4
    hostname "node$N"
    mount --bind "$DIR/etc/hosts.nodes" /etc/hosts
    mount --rbind /sys/fs/cgroup "$DIR/mnt"     # keep the cgroup mounts aside ...
    mount -t sysfs sysfs /sys                    # ... mount a sysfs of this namespace ...
    mount --move "$DIR/mnt" /sys/fs/cgroup      # ... and put them back under it
    for c in $CGROUPS; do                        # the node'"'"'s subtree as its hierarchy
      mount --bind "/sys/fs/cgroup/$c/$NS" "/sys/fs/cgroup/$c"
    done
    mkdir -p "$DIR/nodetmp/node$N"
    mount --bind "$DIR/nodetmp/node$N" "$DIR/nodetmp"
    exec "$@"' node-exec "$N" "$CLUSTER_DIR" "$NS" "$CGROUPS" "$@"
