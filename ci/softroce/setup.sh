# Boot-time set-up of a soft-RoCE guest, run once by busybox init: kernel modules, the NICs and the rxe
# ports on them, the files the host hands over (fw_cfg), the directory shared from the host.
# Parameters come from the kernel command line as ibr_NAME=VALUE (ibrepro.softroce.guests sets them):
#   ibr_node      the guest's host name
#   ibr_nicK      K = 0..9: MAC,NAME,ADDRESS/PREFIX[,RXE]: rename the NIC with that MAC to NAME, give it
#                 the address, and put the rxe device RXE on it (an RDMA port)
#   ibr_cable     ADDRESS0/PREFIX,ADDRESS1/PREFIX: rxe0 and rxe1 on the two ends of a veth pair in this
#                 guest, a dual-port HCA with a cable between its ports
#   ibr_share     the host directory mounted (9p) at the same path
# Secrets never go on the command line (any host user can read a QEMU's): the agent's key, the munge key
# and /etc/hosts come as QEMU fw_cfg files, opt/org.ibrepro/<name>.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
IP=/bin/ip   # iproute2: busybox's ip applet cannot make veth pairs, oif rules or permanent neighbours
for kv in $(cat /proc/cmdline); do
  case $kv in ibr_*=*) eval "${kv%%=*}='${kv#*=}'" ;; esac
done
say() { echo "softroce $ibr_node [uptime $(cut -d" " -f1 /proc/uptime) s]: $*"; }
nic() { for d in /sys/class/net/*; do [ "$(cat "$d/address")" = "$1" ] && echo "${d##*/}"; done; }

for m in virtio_pci virtio_net veth rdma_rxe rdma_ucm ib_umad 9pnet_virtio 9p qemu_fw_cfg; do
  modprobe $m || say "modprobe $m failed"
done
hostname "$ibr_node"
$IP link set lo up

# files from the host (fw_cfg); private ones readable by root only
umask 077
mkdir -p /run/softroce /etc/munge
FW=/sys/firmware/qemu_fw_cfg/by_name/opt/org.ibrepro
[ -r $FW/agent.key/raw ] && cat $FW/agent.key/raw > /run/softroce/agent.key
[ -r $FW/munge.key/raw ] && cat $FW/munge.key/raw > /etc/munge/munge.key
umask 022
{ echo "127.0.0.1 localhost"; [ -r $FW/hosts/raw ] && cat $FW/hosts/raw; } > /etc/hosts

# the NICs: control or management network, links, fabric planes; an rxe device where asked
for k in 0 1 2 3 4 5 6 7 8 9; do
  eval "spec=\${ibr_nic$k:-}"
  [ -n "$spec" ] || continue
  IFS=, read -r mac name addr rxe <<EOF
$spec
EOF
  dev=$(nic "$mac")
  [ -n "$dev" ] || { say "no NIC with MAC $mac (for $name)"; continue; }
  $IP link set "$dev" name "$name"
  $IP addr add "$addr" dev "$name"
  $IP link set "$name" up
  [ -n "$rxe" ] && rdma link add "$rxe" type rxe netdev "$name"
done

# rxe0 and rxe1 on the two ends of a veth pair: a dual-port HCA with a cable between its ports.
# Both addresses are local, so the kernel would carry packets between them over lo, where rxe
# drops them: rules on the output interface (which rxe and the RDMA CM set) force the veth wire.
if [ -n "${ibr_cable:-}" ]; then
  IFS=, read -r cab0 cab1 <<EOF
$ibr_cable
EOF
  a=${cab0%/*} b=${cab1%/*}
  $IP link add veth0 type veth peer name veth1
  $IP addr add "$cab0" dev veth0
  $IP addr add "$cab1" dev veth1
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
fi

# the host's directory (the ReFrame prefix) at the same path, so stage directories are the same
if [ -n "${ibr_share:-}" ]; then
  mkdir -p "$ibr_share"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none share "$ibr_share" \
    || say "cannot mount the shared directory $ibr_share"
fi

# slurmd initialises a cgroup plugin even with proctrack/linuxproc and task/affinity: cgroup v2 wants
# systemd's dbus, v1 only a named "systemd" hierarchy (and one controller, like the host's layout)
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/systemd /sys/fs/cgroup/freezer
mount -t cgroup -o none,name=systemd systemd /sys/fs/cgroup/systemd || say "cannot mount the cgroup hierarchy"
mount -t cgroup -o freezer freezer /sys/fs/cgroup/freezer || say "cannot mount the cgroup freezer"

say "ready: $(rdma link show | awk '{printf "%s(%s) ", $2, $NF}')$($IP -br -4 addr | awk '{printf "%s=%s ", $1, $3}')"
