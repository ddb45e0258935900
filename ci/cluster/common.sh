# common.sh: names and paths shared by the ci/cluster scripts (sourced, not run).
#
# The cluster: slurmctld, slurmdbd, MariaDB and munged run on this machine (the "head", lib.sh,
# shared with the soft-RoCE cluster); node1..nodeN each run a slurmd in their own network + UTS +
# mount namespace, joined by veth pairs to a bridge. Everything lives under one private work
# directory and every daemon writes a PID file there, so down.sh stops exactly what up.sh started.

CLUSTER_DIR=${IBREPRO_CLUSTER_DIR:-/tmp/ibrepro-cluster}
CLUSTER_NAME=ci

NUM_NODES=2
# RFC 5737 documentation range: never routed anywhere. (192.0.2.0/24 may be eth0's own net.)
NET=198.51.100
HEAD_ADDR=$NET.1                    # this machine, on the cluster network
node_addr() { echo "$NET.$((10 + $1))"; }

# Network objects carry an ibr- prefix so they never clash with anything else on the machine.
NS_SWITCH=ibr-switch                # network namespace holding the bridge
BRIDGE=ibr-br0
HEAD_IF=ibr-head0                   # head's end of its veth pair (host namespace)
NODE_IF=ibr0                        # the node's NIC, inside its namespace
ns_node() { echo "ibr-node$1"; }    # network namespace of node N

# Ports: slurmctld 6817, slurmd 6818 (inside each node namespace), slurmdbd 6819,
# MariaDB 3307 on 127.0.0.1 (not 3306, to stay out of the way of a system MariaDB).
SLURMCTLD_PORT=6817
SLURMD_PORT=6818
SLURMDBD_PORT=6819
MARIADB_PORT=3307

# munged, MariaDB, slurmdbd, slurmctld; ETC, RUN, LOG, SLURM_CONF; pid_alive, stop_pidfile, ...
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# netns_exists NAME
netns_exists() { [ -e "/run/netns/$1" ]; }

# nic_bytes N: "<rx bytes> <tx bytes>" of node N's NIC, i.e. what crossed its veth
nic_bytes() {
  nsenter --net="/run/netns/$(ns_node "$1")" cat /proc/net/dev |
    awk -v nic="$NODE_IF:" '$1 == nic {print $2, $10}'
}
