# common.sh: names and paths shared by the ci/cluster scripts (sourced, not run).
#
# The cluster: slurmctld, slurmdbd, MariaDB and munged run on this machine (the "head", lib.sh,
# shared with the soft-RoCE cluster); node1..nodeN each run a slurmd in their own network + UTS +
# mount namespace, joined by veth pairs to a bridge. Everything lives under one private work
# directory and every daemon writes a PID file there, so down.sh stops exactly what up.sh started.

CLUSTER_DIR=${IBREPRO_CLUSTER_DIR:-/tmp/ibrepro-cluster}
CLUSTER_NAME=${IBREPRO_CLUSTER_NAME:-ci}
[[ $CLUSTER_NAME =~ ^[a-z][a-z0-9]{0,15}$ ]] \
  || { echo "IBREPRO_CLUSTER_NAME must be lower-case letters and digits, got '$CLUSTER_NAME'" >&2; exit 2; }

# A second cluster may run beside the default one on the same machine (e.g. the cgroup-confined one of
# `make cgroup-test`): every name and port below can be overridden, and the defaults are the default cluster's.
#   IBREPRO_CLUSTER_DIR IBREPRO_CLUSTER_NAME IBREPRO_CLUSTER_PREFIX (network objects, cgroups) IBREPRO_CLUSTER_NET
#   IBREPRO_CLUSTER_SLURMCTLD_PORT IBREPRO_CLUSTER_SLURMD_PORT IBREPRO_CLUSTER_SLURMDBD_PORT
#   IBREPRO_CLUSTER_MARIADB_PORT
#   IBREPRO_CLUSTER_CGROUP=1: the nodes run task/cgroup with ConstrainCores (README.md, "A cgroup-confined cluster")
# The munge socket, keys, configs, PID files and the database live in the work directory: one per cluster.

# Nodes: 2 (default), or 8 for the fat-tree proving ground of the fleet's pair rounds
# (IBREPRO_CLUSTER_FABRIC=fattree: fabric.sh adds a data fabric of 2 leaf and 2 spine router namespaces).
NUM_NODES=${IBREPRO_CLUSTER_NODES:-2}
[[ $NUM_NODES =~ ^[2-8]$ ]] \
  || { echo "IBREPRO_CLUSTER_NODES must be 2-8, got '$NUM_NODES'" >&2; exit 2; }
FABRIC=${IBREPRO_CLUSTER_FABRIC:-none}
case $FABRIC in
  none) ;;
  fattree) [ "$NUM_NODES" = 8 ] \
             || { echo "IBREPRO_CLUSTER_FABRIC=fattree needs IBREPRO_CLUSTER_NODES=8, got $NUM_NODES" >&2; exit 2; } ;;
  *) echo "IBREPRO_CLUSTER_FABRIC must be none or fattree, got '$FABRIC'" >&2; exit 2 ;;
esac
# the fabric's /24 (RFC 2544 benchmarking range, apart from soft-RoCE's 198.18.0) and each link direction's rate
FABRIC_NET=${IBREPRO_CLUSTER_FABRIC_NET:-198.19.28}
[[ $FABRIC_NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
  || { echo "IBREPRO_CLUSTER_FABRIC_NET must be the first three octets of a /24, got '$FABRIC_NET'" >&2; exit 2; }
FABRIC_RATE=${IBREPRO_CLUSTER_FABRIC_RATE:-40mbit}
[[ $FABRIC_RATE =~ ^[1-9][0-9]{0,3}mbit$ ]] \
  || { echo "IBREPRO_CLUSTER_FABRIC_RATE must be <N>mbit, got '$FABRIC_RATE'" >&2; exit 2; }
# RFC 5737 documentation range: never routed anywhere. (192.0.2.0/24 may be eth0's own net.)
NET=${IBREPRO_CLUSTER_NET:-198.51.100}
[[ $NET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
  || { echo "IBREPRO_CLUSTER_NET must be the first three octets of a /24, e.g. 203.0.113, got '$NET'" >&2; exit 2; }
HEAD_ADDR=$NET.1                    # this machine, on the cluster network
node_addr() { echo "$NET.$((10 + $1))"; }

# Network objects carry a prefix (default ibr-) so they never clash with anything else on the machine.
PREFIX=${IBREPRO_CLUSTER_PREFIX:-ibr-}
[[ $PREFIX =~ ^[a-z][a-z0-9]{1,4}-$ ]] \
  || { echo "IBREPRO_CLUSTER_PREFIX must be 2-5 lower-case letters or digits and a -, e.g. ibc-, got '$PREFIX'" >&2
       exit 2; }
NS_SWITCH=${PREFIX}switch           # network namespace holding the bridge
BRIDGE=${PREFIX}br0
HEAD_IF=${PREFIX}head0              # head's end of its veth pair (host namespace)
NODE_IF=${PREFIX%-}0                # the node's NIC, inside its namespace
ns_node() { echo "${PREFIX}node$1"; }    # network namespace of node N (and its cgroups, with IBREPRO_CLUSTER_CGROUP)

# Ports: slurmctld 6817, slurmd 6818 (inside each node namespace), slurmdbd 6819,
# MariaDB 3307 on 127.0.0.1 (not 3306, to stay out of the way of a system MariaDB).
SLURMCTLD_PORT=${IBREPRO_CLUSTER_SLURMCTLD_PORT:-6817}
SLURMD_PORT=${IBREPRO_CLUSTER_SLURMD_PORT:-6818}
SLURMDBD_PORT=${IBREPRO_CLUSTER_SLURMDBD_PORT:-6819}
MARIADB_PORT=${IBREPRO_CLUSTER_MARIADB_PORT:-3307}
for _var in SLURMCTLD SLURMD SLURMDBD MARIADB; do
  _port=${_var}_PORT
  [[ ${!_port} =~ ^[1-9][0-9]{3,4}$ ]] && [ "${!_port}" -le 65535 ] \
    || { echo "IBREPRO_CLUSTER_${_var}_PORT must be a port number 1000-65535, got '${!_port}'" >&2; exit 2; }
done

# Cgroup confinement of the nodes' jobs (task/cgroup + proctrack/cgroup, cgroup v1): each node's slurmd sees
# its own subtree <hierarchy>/<ns_node N> of the cpuset and freezer hierarchies as the root (node-exec.sh).
CGROUP=${IBREPRO_CLUSTER_CGROUP:-0}
CGROUP_CONTROLLERS="cpuset freezer"

# munged, MariaDB, slurmdbd, slurmctld; ETC, RUN, LOG, SLURM_CONF; pid_alive, stop_pidfile, ...
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# netns_exists NAME
netns_exists() { [ -e "/run/netns/$1" ]; }

# nic_bytes N: "<rx bytes> <tx bytes>" of node N's NIC, i.e. what crossed its veth
nic_bytes() {
  nsenter --net="/run/netns/$(ns_node "$1")" cat /proc/net/dev |
    awk -v nic="$NODE_IF:" '$1 == nic {print $2, $10}'
}
