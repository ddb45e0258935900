"""Which rails carried a job's traffic: every RDMA port's packet counters on every node, before and after the run.

A multi-rail MPI says what it was asked to do (``MV2_SHOW_ENV_INFO`` even shows only the first device of
``MV2_IBA_HCA=rxe0:rxe1``, issue 27), not which ports it used; the ports' own counters do. The job script reads
them with one srun task per node before and after the benchmark (:func:`commands`) into the stage directory, and
:func:`traffic` sums the packets each rail (``device:port``) sent on all nodes.

Counters: the InfiniBand PMA's ``counters/port_xmit_packets`` where the device has them (mlx4, mlx5), else the
driver's ``hw_counters/sent_pkts`` (rdma_rxe has no PMA). Only RDMA traffic moves them; Slurm, the agent and TCP
go over other NICs (or, on RoCE, over the netdev below the RDMA device, which these counters do not see).
"""

import re
import shlex

BEFORE, AFTER = 'rails-before.txt', 'rails-after.txt'

# one line per port: "rail <host> <device> <port> <packets sent>"
_SCRIPT = ('for p in /sys/class/infiniband/*/ports/*; do d=${p%/ports/*}; '
           'f=$p/counters/port_xmit_packets; [ -r "$f" ] || f=$p/hw_counters/sent_pkts; '
           '[ -r "$f" ] && echo "rail $(hostname) ${d##*/} ${p##*/} $(cat "$f")"; done; true')

_LINE = re.compile(r'^rail (\S+) (\S+) (\d+) (\d+)$', re.M)


def commands(num_nodes, out):
    """The job-script line that writes every node's port counters to ``out`` (one srun task per node)."""
    return (f'srun --nodes={int(num_nodes)} --ntasks={int(num_nodes)} --ntasks-per-node=1 --cpu-bind=none '
            f'sh -c {shlex.quote(_SCRIPT)} > {out} 2>&1')


def read(text):
    """{(host, 'device:port'): packets sent} of one reading."""
    return {(host, f'{dev}:{port}'): int(count) for host, dev, port, count in _LINE.findall(text)}


def traffic(before, after):
    """{'device:port': packets sent during the run, over all nodes} of two readings (texts), or {} if either
    has no counters (not read: the partition's nodes have none, or the job did not get that far)."""
    first, last = read(before), read(after)
    if not first or not last:
        return {}
    sent = {}
    for key, count in last.items():
        sent[key[1]] = sent.get(key[1], 0) + max(0, count - first.get(key, count))
    return dict(sorted(sent.items()))


#: An unnamed rail's packets are the case's (MVAPICH2 sent on a rail it was not given) when they reach this share of
#: what the named rails sent; below it they are the node's own traffic on that port (IPoIB's ARP and NFS, Lustre
#: o2ib, GPFS verbs), which the counters see as well: named with the case (:func:`background`), never its failure. A
#: rail MVAPICH2 stripes onto carries about as much as each named one (1/2 of the case's packets on two rails).
STRAY_SHARE = 0.1


def _by_device(sent):
    devices = {}
    for rail, n in sent.items():
        devices[rail.split(':')[0]] = devices.get(rail.split(':')[0], 0) + n
    return devices


def _split(sent, expected):
    """``(idle named devices, unnamed devices carrying the case's packets, {unnamed device: its background})``."""
    devices = _by_device(sent)
    own = sum(n for d, n in devices.items() if d in expected)
    idle = [d for d in expected if not devices.get(d)]
    other = {d: n for d, n in sorted(devices.items()) if n and d not in expected}
    stray = [d for d, n in other.items() if n >= STRAY_SHARE * own]
    return idle, stray, {d: n for d, n in other.items() if d not in stray}


def unexpected(sent, expected):
    """What contradicts the rails a policy asked for (``expected``: devices), '' if nothing: a named rail that
    carried no packet, or another rail that carried a share of the case's packets (:data:`STRAY_SHARE`)."""
    idle, stray, _ = _split(sent, expected)
    said = []
    if idle:
        said.append(f'{", ".join(idle)} carried no packet')
    if stray:
        said.append(f'{", ".join(stray)} carried packets it was not asked to')
    return '; '.join(said)


def background(sent, expected):
    """The unnamed rails that moved too few packets to be the case's (:data:`STRAY_SHARE`), named with their count
    and share, or '': the node's own traffic on its other ports during the job."""
    _, _, other = _split(sent, expected)
    own = sum(n for d, n in _by_device(sent).items() if d in expected)
    return '; '.join(f'{d} sent {n} packet(s), {100.0 * n / own:.2g} % of the case\'s on its rails: the node\'s '
                     'own traffic (IPoIB, storage), not the case\'s' for d, n in other.items())
