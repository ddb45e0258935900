# Boot-time set-up of a soft-RoCE guest, run once by busybox init: kernel modules, the rxe ports
# and their cables, the control NIC of the agent, the directory shared from the host.
# Parameters come from the kernel command line as ibr_NAME=VALUE (ibrepro.softroce.guests sets them).
PATH=/usr/sbin:/usr/bin:/sbin:/bin:/bb
IP=/bin/ip   # iproute2: busybox's ip applet cannot make veth pairs, oif rules or permanent neighbours
for kv in $(cat /proc/cmdline); do
  case $kv in ibr_*=*) eval "${kv%%=*}='${kv#*=}'" ;; esac
done
say() { echo "softroce n$ibr_node [uptime $(cut -d" " -f1 /proc/uptime) s]: $*"; }
nic() { for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$1" ] && echo "${d##*/}"; done; }

for m in virtio_pci virtio_net veth rdma_rxe rdma_ucm ib_umad 9pnet_virtio 9p; do
  modprobe $m || say "modprobe $m failed"
done
$IP link set lo up

# the agent's NIC: QEMU user networking with restrict=on (only the host's port forward reaches it)
$IP link set "$(nic "$ibr_ctl_mac")" name ctl0
$IP addr add "$ibr_ctl" dev ctl0
$IP link set ctl0 up

# rxe0 and rxe1 on the two ends of a veth pair: a dual-port HCA with a cable between its ports.
# Both addresses are local, so the kernel would carry packets between them over lo, where rxe
# drops them: rules on the output interface (which rxe and the RDMA CM set) force the veth wire.
a=${ibr_rxe0%/*} b=${ibr_rxe1%/*}
$IP link add veth0 type veth peer name veth1
$IP addr add "$ibr_rxe0" dev veth0
$IP addr add "$ibr_rxe1" dev veth1
$IP link set veth0 up
$IP link set veth1 up
for k in all default veth0 veth1; do
  sysctl -qw net.ipv4.conf.$k.accept_local=1 net.ipv4.conf.$k.rp_filter=0
done
$IP rule add pref 100 lookup local
$IP rule del pref 0
$IP rule add pref 10 oif veth0 lookup 10
$IP route add table 10 "$b" dev veth0 src "$a"
$IP rule add pref 11 oif veth1 lookup 11
$IP route add table 11 "$a" dev veth1 src "$b"
$IP neigh replace "$b" lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
$IP neigh replace "$a" lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1

# rxe2 on link0, the virtio NIC joined to the other guest (two-guest mode only)
if [ -n "${ibr_link_mac:-}" ]; then
  $IP link set "$(nic "$ibr_link_mac")" name link0
  $IP addr add "$ibr_rxe2" dev link0
  $IP link set link0 up
  rdma link add rxe2 type rxe netdev link0
fi

# the host's directory (the ReFrame prefix) at the same path, so stage directories are the same
if [ -n "${ibr_share:-}" ]; then
  mkdir -p "$ibr_share"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none share "$ibr_share" \
    || say "cannot mount the shared directory $ibr_share"
fi

say "ready: $(rdma link show | awk '{printf "%s(%s) ", $2, $NF}')$($IP -br -4 addr | awk '{printf "%s=%s ", $1, $3}')"
