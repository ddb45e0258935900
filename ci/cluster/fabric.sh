#!/bin/bash
# fabric.sh: the data fabric of an 8-node namespace cluster (IBREPRO_CLUSTER_FABRIC=fattree), the proving ground
# of the fleet's pair rounds (docs/fleet.md): a two-level fat tree of router namespaces joined by veths.
#
#   node1..node4 ──cable── <prefix>leaf1 ──uplinks── <prefix>spine0, <prefix>spine1 ──downlinks── <prefix>leaf2
#   node5..node8 ──cable── <prefix>leaf2                                                        (every link a veth)
#
# Each node has a second NIC, fab0, with address $FABRIC_NET.<i> (host name node<i>-ib, like an IPoIB name);
# Slurm's own traffic stays on the management bridge of up.sh (an Ethernet beside the fabric). Routing is static
# and destination-mod-k, as ibrepro.fleet.plan models it: a flow to node d on another leaf goes up to spine
# (position of d in its leaf) mod 2 and down from there. Every link direction is shaped by `tc tbf` at
# $FABRIC_RATE (far below what two busy cores move through veths, so the shaper, not the CPU, sets each flow's
# rate), and a degraded link is the same tbf at a lower rate:
#
#   fabric.sh up | down | links | topology | degrade LINK PERCENT | restore [LINK] | show
#
# LINK as the localiser names components: 'cable node3 up' (node3's fab0 out), 'cable node3 down' (leaf to
# node3), 'uplink leaf1>spine0', 'downlink spine0>leaf2'. Sourced by up.sh/down.sh for the fattree variant;
# run alone it builds or removes only the fabric (the node namespaces are made when missing), so the network can
# be tried without Slurm. Everything carries the cluster's prefix; `down` deletes only namespaces of that prefix.
set -euo pipefail
set -f              # LINK names are split into words below: no globbing of what a caller passed
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

[ "$FABRIC" = fattree ] || { echo "fabric.sh: IBREPRO_CLUSTER_FABRIC is '$FABRIC', not fattree" >&2; exit 2; }

LEAVES=2 SPINES=2 PER_LEAF=$((NUM_NODES / 2))
ns_leaf() { echo "${PREFIX}leaf$1"; }       # leaves 1..2 (the switch names of topology.conf)
ns_spine() { echo "${PREFIX}spine$1"; }     # spines 0..1 (destination-mod-k's q)
leaf_of() { echo $(( ($1 - 1) / PER_LEAF + 1 )); }
position() { echo $(( ($1 - 1) % PER_LEAF )); }
fab_addr() { echo "$FABRIC_NET.$1"; }
leaf_addr() { echo "$FABRIC_NET.$((200 + $1))"; }
spine_addr() { echo "$FABRIC_NET.$((250 + $1))"; }
router_namespaces() { for l in $(seq $LEAVES); do ns_leaf "$l"; done; for q in $(seq 0 $((SPINES - 1))); do ns_spine "$q"; done; }

# shape NS DEV RATE: one direction of a link (DEV's egress) through a token bucket of RATE
shape() {
  # burst: a few packets' worth above rate/HZ. A short queue (5 ms): with 100 ms, a slowed link delayed the ACKs
  # of the flows in the other direction that cross it, and those flows slowed by 30 % too (TCP is ACK-clocked)
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst 32kb latency 5ms
}

router_ns() {
  ip netns add "$1"
  ip netns exec "$1" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  ip -n "$1" link set lo up
}

# link NS_A IF_A ADDR_A NS_B IF_B ADDR_B RATE: a veth between two namespaces, each end with its router's /32
# address (unnumbered links: routes name the peer onlink), both directions shaped at RATE
link() {
  ip -n "$1" link add "$2" type veth peer name "$5" netns "$4"
  ip netns exec "$4" sysctl -qw "net.ipv4.conf.$5.rp_filter=0"
  ip netns exec "$1" sysctl -qw "net.ipv4.conf.$2.rp_filter=0"
  ip -n "$1" addr add "$3/32" dev "$2"
  ip -n "$4" addr add "$6/32" dev "$5"
  ip -n "$1" link set "$2" up
  ip -n "$4" link set "$5" up
  shape "$1" "$2" "$7"
  shape "$4" "$5" "$7"
}

fabric_up() {
  local i l q d ns
  for l in $(seq $LEAVES); do router_ns "$(ns_leaf "$l")"; done
  for q in $(seq 0 $((SPINES - 1))); do router_ns "$(ns_spine "$q")"; done
  for i in $(seq "$NUM_NODES"); do
    ns=$(ns_node "$i"); l=$(leaf_of "$i")
    netns_exists "$ns" || { ip netns add "$ns"; ip -n "$ns" link set lo up; }
    link "$ns" fab0 "$(fab_addr "$i")" "$(ns_leaf "$l")" "n$i" "$(leaf_addr "$l")" "$FABRIC_RATE"
    ip -n "$ns" route add "$FABRIC_NET.0/24" via "$(leaf_addr "$l")" dev fab0 onlink
    ip -n "$(ns_leaf "$l")" route add "$(fab_addr "$i")/32" dev "n$i"
  done
  for l in $(seq $LEAVES); do
    for q in $(seq 0 $((SPINES - 1))); do
      link "$(ns_leaf "$l")" "s$q" "$(leaf_addr "$l")" "$(ns_spine "$q")" "l$l" "$(spine_addr "$q")" \
           "$(trunk_rate 0)kbit"
    done
  done
  # destination-mod-k: to a node d of another leaf through spine position(d) mod SPINES; spines route down by leaf
  for d in $(seq "$NUM_NODES"); do
    q=$(( $(position "$d") % SPINES ))
    for l in $(seq $LEAVES); do
      [ "$l" = "$(leaf_of "$d")" ] && continue
      ip -n "$(ns_leaf "$l")" route add "$(fab_addr "$d")/32" via "$(spine_addr "$q")" dev "s$q" onlink
    done
    for q2 in $(seq 0 $((SPINES - 1))); do
      ip -n "$(ns_spine "$q2")" route add "$(fab_addr "$d")/32" via "$(leaf_addr "$(leaf_of "$d")")" \
        dev "l$(leaf_of "$d")" onlink
    done
  done
}

fabric_down() {
  local ns
  for ns in $(router_namespaces); do
    if netns_exists "$ns"; then ip netns del "$ns"; echo "deleted netns $ns"; fi
  done
}

# hosts: the fabric names (node<i>-ib), appended to the nodes' /etc/hosts
fabric_hosts() { for i in $(seq "$NUM_NODES"); do echo "$(fab_addr "$i") node$i-ib"; done; }

# topology: Slurm's topology.conf (tree plugin) of this fabric. Each spine lists both leaves; ibrepro's parser
# counts the switches above the leaves as the spines (destination-mod-k's k).
fabric_topology() {
  echo "# Generated by ci/cluster/fabric.sh: $LEAVES leaves of $PER_LEAF nodes, $SPINES spines (destination-mod-k)"
  for l in $(seq $LEAVES); do
    echo "SwitchName=leaf$l Nodes=node[$(( (l - 1) * PER_LEAF + 1 ))-$(( l * PER_LEAF ))]"
  done
  for q in $(seq 0 $((SPINES - 1))); do echo "SwitchName=spine$q Switches=leaf[1-$LEAVES]"; done
}

# where LINK...: "NS DEV" of a link's shaped direction
where() {
  local kind=$1 rest=${2:-} dir=${3:-} n l q
  case "$kind $dir" in
    "cable up") [[ $rest =~ ^node([0-9]+)$ ]] && n=${BASH_REMATCH[1]} && echo "$(ns_node "$n") fab0" ;;
    "cable down") [[ $rest =~ ^node([0-9]+)$ ]] && n=${BASH_REMATCH[1]} && echo "$(ns_leaf "$(leaf_of "$n")") n$n" ;;
    "uplink ") [[ $rest =~ ^leaf([0-9]+)\>spine([0-9]+)$ ]] && echo "$(ns_leaf "${BASH_REMATCH[1]}") s${BASH_REMATCH[2]}" ;;
    "downlink ") [[ $rest =~ ^spine([0-9]+)\>leaf([0-9]+)$ ]] && echo "$(ns_spine "${BASH_REMATCH[1]}") l${BASH_REMATCH[2]}" ;;
  esac
}

fabric_links() {
  local i l q
  for i in $(seq "$NUM_NODES"); do echo "cable node$i up"; echo "cable node$i down"; done
  for l in $(seq $LEAVES); do for q in $(seq 0 $((SPINES - 1))); do echo "uplink leaf$l>spine$q"; done; done
  for q in $(seq 0 $((SPINES - 1))); do for l in $(seq $LEAVES); do echo "downlink spine$q>leaf$l"; done; done
}

# cable_rate PERCENT / trunk_rate PERCENT: a node cable's / a leaf-spine link's rate lowered by PERCENT, in kbit.
# 4 nodes per leaf and 2 spines: each leaf-spine link is a trunk of PER_LEAF/SPINES cables' rate (non-blocking,
# as a fat tree with fewer, fatter uplinks is); in a leaf-shift round it carries two flows, each capped by its
# node cables, so a trunk slowed by 10 % slows both its flows by 10 %.
cable_rate() { echo $(( ${FABRIC_RATE%mbit} * 1000 * (100 - $1) / 100 )); }
trunk_rate() { echo $(( ${FABRIC_RATE%mbit} * 1000 * PER_LEAF / SPINES * (100 - $1) / 100 )); }
rate_of() { case $1 in cable) cable_rate "$2" ;; *) trunk_rate "$2" ;; esac; }

need_root() { [ "$(id -u)" = 0 ] || { echo "fabric.sh: must run as root" >&2; exit 1; }; }

fabric_degrade() {
  local at
  [[ ${2:-} =~ ^[0-9]{1,2}$ ]] || { echo "usage: fabric.sh degrade 'LINK' PERCENT (1-99)" >&2; return 2; }
  at=$(where $1) && [ -n "$at" ] || { echo "fabric.sh: no such link '$1' (fabric.sh links)" >&2; return 2; }
  need_root
  shape $at "$(rate_of ${1%% *} "$2")kbit"
  echo "degraded $1 by $2 %: $at at $(rate_of ${1%% *} "$2") kbit/s"
}

fabric_restore() {
  local link at
  if [ -n "${1:-}" ]; then set -- "$1"; else mapfile -t links < <(fabric_links); set -- "${links[@]}"; fi
  for link in "$@"; do
    at=$(where $link) && [ -n "$at" ] || { echo "fabric.sh: no such link '$link'" >&2; return 2; }
    need_root
    shape $at "$(rate_of ${link%% *} 0)kbit"
  done
}

fabric_show() {
  local link at
  while read -r link; do
    at=$(where $link)
    printf '%-26s %-22s %s\n' "$link" "$at" "$(ip netns exec ${at% *} tc qdisc show dev ${at#* } | grep -o 'rate [^ ]*')"
  done < <(fabric_links)
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cmd=${1:-}; shift || true
  # links, topology and hosts only print the fabric, and degrade/restore check their words before shaping (tests
  # run those as any user); what enters the namespaces needs root
  case $cmd in
    links|topology|hosts|degrade|restore) ;;
    *) need_root ;;
  esac
  case $cmd in
    up) fabric_up ;;
    down) fabric_down
          for i in $(seq "$NUM_NODES"); do    # node namespaces this script made alone (no process in them)
            ns=$(ns_node "$i"); netns_exists "$ns" && [ -z "$(ip netns pids "$ns")" ] \
              && ! pid_alive "$RUN/slurmd-node$i.pid" && ip netns del "$ns" && echo "deleted netns $ns"
          done; true ;;
    links) fabric_links ;;
    topology) fabric_topology ;;
    hosts) fabric_hosts ;;
    degrade) fabric_degrade "$@" ;;
    restore) fabric_restore "$@" ;;
    show) fabric_show ;;
    *) echo "usage: $0 up|down|links|topology|hosts|degrade LINK PERCENT|restore [LINK]|show" >&2; exit 2 ;;
  esac
fi
