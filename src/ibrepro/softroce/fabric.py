"""The network of the soft-RoCE Slurm nodes: host bridges, and one tap device per guest NIC (needs root).

A management network and two fabric planes, each a Linux bridge on this machine; every guest has one
NIC on each, a tap device enslaved to the bridge (taps, not QEMU user networking or socket links, so
slurmctld, slurmd and srun's steps reach each other as on a cluster, and ``tc`` on a tap shapes one
node's link). Addresses come from the RFC 2544 benchmarking range 198.18.0.0/15, which no real
network routes:

  management  ibrx-mgmt  198.18.0.0/24  this machine .1 (slurmctld, slurmdbd), node i .(10+i)
  plane 0     ibrx-fab0  198.18.1.0/24  node i .(10+i), rxe0 on it (rail 0)
  plane 1     ibrx-fab1  198.18.2.0/24  node i .(10+i), rxe1 on it (rail 1)

This machine has an address on the management bridge only: the planes carry guest-to-guest RDMA,
and ip_forward stays as it is (off), so nothing is routed between the bridges or out.
Two single-port rxe devices per node on two planes are "two rails per node", the way ConnectX-4 and
later dual-port cards appear (one device per port).
"""

import subprocess
from pathlib import Path

PREFIX = 'ibrx'
#: network -> (bridge, subnet /24, guest NIC name, rxe device on it)
NETWORKS = {
    'mgmt': (f'{PREFIX}-mgmt', '198.18.0', 'mgmt0', None),
    'fab0': (f'{PREFIX}-fab0', '198.18.1', 'fab0', 'rxe0'),
    'fab1': (f'{PREFIX}-fab1', '198.18.2', 'fab1', 'rxe1'),
}
HEAD_ADDRESS = '198.18.0.1'
MAX_NODES = 200        # node i is .(10+i) of each /24


class FabricError(RuntimeError):
    """The bridges or taps could not be made or removed; the message names the device and why."""


def node_name(index):
    """Slurm node name and host name of node ``index`` (1-based)."""
    return f'rxnode{index}'


def address(index, network):
    """IPv4 address of node ``index`` on ``network`` ('mgmt', 'fab0', 'fab1')."""
    return f'{NETWORKS[network][1]}.{10 + index}'


def tap(index, network):
    """The host's tap device of node ``index``'s NIC on ``network`` (at most 15 characters)."""
    return f'{PREFIX}{index}-{network}'


def mac(index, network):
    return f'52:54:00:{list(NETWORKS).index(network) + 0x10:02x}:{index >> 8:02x}:{index & 0xff:02x}'


def nics(index):
    """[(network, tap, MAC, guest NIC name, address/prefix, rxe device or None)] of node ``index``."""
    return [(net, tap(index, net), mac(index, net), name, f'{address(index, net)}/24', rxe)
            for net, (_, _, name, rxe) in NETWORKS.items()]


def rdma_devices():
    """The rxe devices of every node, in rail order."""
    return [rxe for _, _, _, rxe in NETWORKS.values() if rxe]


def _ip(*args):
    try:
        subprocess.run(['ip', *args], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as err:
        raise FabricError(f'ip {" ".join(args)}: {err.stderr.strip()}') from None


def _exists(link):
    return Path('/sys/class/net', link).exists()


def _attached(link):
    """Whether a process holds tap ``link`` open (its carrier is up), i.e. it is not a leftover."""
    try:
        return Path('/sys/class/net', link, 'carrier').read_text().strip() == '1'
    except OSError:
        return False     # down: reading carrier fails with EINVAL


def links(nodes):
    """Every bridge and tap of a fabric of ``nodes`` nodes, bridges first."""
    return [bridge for bridge, *_ in NETWORKS.values()] + [
        tap(i, net) for i in range(1, nodes + 1) for net in NETWORKS]


def up(nodes, created, log=print):
    """Make the bridges and taps of ``nodes`` nodes; append each to ``created`` before making it (the
    caller records the list, so a failure half-way still tears down what exists).

    Taps of an earlier run that no process holds (a killed run) are removed first; a tap some QEMU
    holds means a fabric is in use: FabricError.
    """
    if not 1 <= nodes <= MAX_NODES:
        raise FabricError(f'the fabric takes 1 to {MAX_NODES} nodes, not {nodes}')
    taps = [tap(i, net) for i in range(1, nodes + 1) for net in NETWORKS]
    busy = [t for t in taps if _exists(t) and _attached(t)]
    if busy:
        raise FabricError(f'tap devices {", ".join(busy)} are in use: soft-RoCE Slurm nodes are up '
                          '(`ibrepro softroce down` with their run directory stops them)')
    leftovers = [link for link in links(nodes) if _exists(link)]
    if leftovers:
        log(f'softroce: removing leftovers of an earlier fabric that no guest holds: {", ".join(leftovers)}')
        down(leftovers, log=lambda msg: None)

    for net, (bridge, subnet, _, _) in NETWORKS.items():
        created.append(bridge)
        _ip('link', 'add', bridge, 'type', 'bridge')
        if net == 'mgmt':
            _ip('addr', 'add', f'{HEAD_ADDRESS}/24', 'dev', bridge)
        _ip('link', 'set', bridge, 'up')
    for t in taps:
        created.append(t)
        _ip('tuntap', 'add', 'dev', t, 'mode', 'tap')
        _ip('link', 'set', t, 'master', NETWORKS[t.rsplit('-', 1)[1]][0], 'up')
    log(f'softroce: fabric up: bridges {", ".join(b for b, *_ in NETWORKS.values())}, {len(taps)} taps; '
        f'this machine is {HEAD_ADDRESS} on {NETWORKS["mgmt"][0]}')


def down(created, log=print):
    """Remove the links in ``created`` that exist (taps first); return the names removed."""
    removed = []
    for link in sorted(created, key=lambda name: name in {b for b, *_ in NETWORKS.values()}):
        if _exists(link):
            _ip('link', 'del', link)
            removed.append(link)
    if removed:
        log(f'softroce: removed {", ".join(removed)}')
    return removed


def slurm_nodes(nodes, smp):
    """slurm.conf lines of the nodes and their partition ``rxe`` (Slurm chooses among them)."""
    hw = f'CPUs={smp} Boards=1 SocketsPerBoard=1 CoresPerSocket={smp} ThreadsPerCore=1'
    lines = [f'NodeName={node_name(i)} NodeAddr={address(i, "mgmt")} {hw} Feature=rxe,rails2 State=UNKNOWN'
             for i in range(1, nodes + 1)]
    lines.append(f'PartitionName=rxe Nodes={node_name(1)[:-1]}[1-{nodes}] Default=YES MaxTime=INFINITE State=UP')
    return '\n'.join(lines) + '\n'


def hosts(nodes, head_name):
    """/etc/hosts lines of the guests: the head and every node by their management addresses."""
    return ''.join([f'{HEAD_ADDRESS} {head_name}\n'] +
                   [f'{address(i, "mgmt")} {node_name(i)}\n' for i in range(1, nodes + 1)])
