"""The fleet's per-node sweep: which node, HCA port or PCIe link is degraded, from each node's own state.

The first part of the fleet capability is the per-node state sweep: every node reads its own topology
(:func:`ibrepro.topology.read_sysfs`: ports, each PCIe link up to the root port, error counters, firmware and board
id, the HCA's NUMA node), and :func:`judge` names what is wrong with it, component by component:

* against what the partition expects (its extras ``rdma_devices`` x ``ib_ports``, ``expected_port``
  ``{'width': 4, 'speed': 'HDR'}``, ``hca_numa_node``, ``gpu_hca_distance``): a port that is not ACTIVE, a port
  trained to fewer lanes or a lower speed, an HCA on another NUMA node than the one jobs are bound near, a GPU
  whose nearest HCA is farther on PCIe than the partition's nodes are built (``'PIX'``: one switch;
  :data:`ibrepro.pcie_distance.DISTANCES`);
* against physics: a PCIe link trained below the lesser of its two ends' maxima (a card in a slot that can more;
  a Gen5 card in a Gen4 slot is capped, not degraded: :func:`ibrepro.topology.pcie_path`);
* against the fleet: per board id, the firmware, port rate and PCIe link most nodes have (a node that differs is
  named, with how many nodes have what);
* against itself: error counters that rose between two readings (before and after traffic).

A device whose driver exports no counters or no PCIe attributes (mlx4, soft-RoCE) is skipped for that part, and
the sweep says so: an unread component is never a healthy one. Components are named ``host:device/port`` (a port),
``host:device`` (an HCA), ``host:pcie:<lower>-<upper>`` (a PCIe link), ``host:gpu:<address>`` (a GPU).
"""

import collections
import json
import socket

from .. import pcie_distance
from .. import topology as ibtopology
from .component import HOST_NAME


def _fault(component, what, evidence):
    return {'component': component, 'fault': what, 'evidence': evidence}


def _gts(speed):
    return f'{speed:g} GT/s'


def _expected_rails(expected):
    devices = expected.get('rdma_devices') or []
    ports = int(expected.get('ib_ports', 1) or 1)
    return {(d, p) for d in devices for p in range(1, ports + 1)}


def judge(host, topo, expected=None):
    """``(faults, skipped)`` of one node: each fault a dict (component, fault, evidence); each skip a line saying
    which part of which device could not be read and why."""
    expected = expected or {}
    faults, skipped = [], []
    devices = {d['name']: d for d in topo.get('devices') or [] if d.get('kind') == 'hca'}
    rails = _expected_rails(expected)
    for device, port in sorted(rails):
        if device not in devices or not any(p.get('port') == port for p in devices[device].get('ports') or []):
            faults.append(_fault(f'{host}:{device}/{port}', 'missing',
                                 f'the partition has rail {device}:{port}; the node has '
                                 f'{", ".join(sorted(devices)) or "no HCA"}'))
    want = expected.get('expected_port') or {}
    for name, dev in sorted(devices.items()):
        for port in dev.get('ports') or []:
            component = f'{host}:{name}/{port.get("port")}'
            if rails and (name, port.get('port')) not in rails:
                continue                        # a port the partition does not use (e.g. a management NIC)
            if port.get('state') != 'ACTIVE':
                faults.append(_fault(component, 'port not active',
                                     f'state {port.get("state")}, physical state {port.get("phys_state")}'))
                continue
            width, speed = port.get('width'), port.get('speed')
            if want.get('width') and width is not None and width < int(want['width']):
                faults.append(_fault(component, 'port width', f'{port.get("rate")}: {width}X, the partition '
                                                              f'expects {want["width"]}X'))
            if want.get('speed') and speed and speed != want['speed']:
                faults.append(_fault(component, 'port speed', f'{port.get("rate")}: {speed}, the partition '
                                                              f'expects {want["speed"]}'))
            if port.get('counters') is None:
                skipped.append(f'{component}: no error counters (ports/{port.get("port")}/counters): not judged')
        pci = dev.get('pci')
        if not pci:
            skipped.append(f'{host}:{name}: no PCI function: PCIe path and NUMA node not judged')
            continue
        if not pci.get('path'):
            skipped.append(f'{host}:{name}: no PCIe link attributes above {pci.get("address")}: path not judged')
        faults += _degraded_links(host, pci, name)
        # {device: node} (each HCA against its own: a node with an HCA per socket), or one node for every device
        numa = expected.get('hca_numa_node')
        numa = numa.get(name) if isinstance(numa, dict) else numa
        if numa is not None and pci.get('numa_node') is not None and pci['numa_node'] != numa:
            faults.append(_fault(f'{host}:{name}', 'HCA NUMA node',
                                 f'on NUMA node {pci["numa_node"]}; the partition binds jobs near node {numa}'))
    farthest = expected.get('gpu_hca_distance')      # the partition's: each GPU has an HCA at least this near
    for gpu in topo.get('gpus') or []:     # a GPU's bus as an HCA's: a link below what both its ends can
        name, pci = gpu.get('name'), gpu.get('pci') or {}
        if not pci.get('path'):
            skipped.append(f'{host}:gpu:{name}: no PCIe link attributes above it: path not judged')
        faults += _degraded_links(host, pci, f'GPU {name}')
        distances = gpu.get('hca_distance') or {}
        if farthest in pcie_distance.DISTANCES and distances:
            hca, nearest = min(distances.items(), key=lambda kv: (pcie_distance.rank(kv[1]), kv[0]))
            if pcie_distance.rank(nearest) > pcie_distance.DISTANCES.index(farthest):
                faults.append(_fault(f'{host}:gpu:{name}', 'GPU far from its HCA',
                                     f'its nearest HCA is {hca} at {nearest}; the partition expects '
                                     f'{farthest} or nearer (GPUDirect RDMA crosses that path)'))
    return faults, skipped


def _degraded_links(host, pci, whose):
    """The faults of the PCIe links of ``pci``'s path trained below what both their ends can (``whose`` path)."""
    return [_fault(f'{host}:pcie:{link["lower"]}-{link["upper"]}', 'PCIe link degraded',
                   f'trained to {_gts(link["speed"])} x{link["width"]}; both ends can '
                   f'{_gts(link["can_speed"])} x{link["can_width"]} ({whose})')
            for link in pci.get('path') or [] if link['degraded']]


def counter_faults(host, before, after):
    """Faults of the ports whose error counters rose between two readings of one node's topology."""
    def counters(topo):
        return {(d['name'], p.get('port')): p.get('counters') or {}
                for d in topo.get('devices') or [] for p in d.get('ports') or []}
    was = counters(before)
    faults = []
    for (name, port), now in sorted(counters(after).items()):
        rose = {k: v - was.get((name, port), {}).get(k, v) for k, v in now.items()
                if isinstance(v, int) and v > was.get((name, port), {}).get(k, v)}
        if rose:
            faults.append(_fault(f'{host}:{name}/{port}', 'error counters rose',
                                 ', '.join(f'{k} +{n}' for k, n in sorted(rose.items()))))
    return faults


def _traits(dev):
    """What nodes with the same board should share: firmware, each port's rate, the card's PCIe link."""
    pci = dev.get('pci') or {}
    return {'firmware': dev.get('fw_ver'),
            'port rate': ', '.join(f'{p.get("port")}: {p.get("rate")}' for p in dev.get('ports') or []),
            'PCIe link': pci.get('bus_spec')}


def fleet_deviations(states):
    """Faults of the nodes that differ from most nodes with the same board id (``states``: host -> topology).
    A trait is judged only where a strict majority of the board's nodes agree on it."""
    boards = collections.defaultdict(list)       # (board id, device name) -> [(host, device)]
    for host, topo in sorted(states.items()):
        for dev in topo.get('devices') or []:
            if dev.get('kind') == 'hca' and dev.get('board_id'):
                boards[(dev['board_id'], dev['name'])].append((host, dev))
    faults = []
    for (board, name), members in sorted(boards.items()):
        for trait in ('firmware', 'port rate', 'PCIe link'):
            values = collections.Counter(_traits(dev)[trait] for _, dev in members)
            common, count = values.most_common(1)[0]
            if common is None or count * 2 <= len(members):
                continue
            for host, dev in members:
                value = _traits(dev)[trait]
                if value != common:
                    faults.append(_fault(f'{host}:{name}', f'{trait} differs from the fleet',
                                         f'{value}; {count} of {len(members)} nodes with board {board} have '
                                         f'{common}'))
    return faults


def sweep(states, expected=None):
    """Judge every node of a sweep (``states``: host -> topology): ``{'faults': [...], 'skipped': [...],
    'nodes': N}``, the faults sorted by component."""
    faults, skipped = [], []
    for host, topo in sorted(states.items()):
        f, s = judge(host, topo, expected)
        faults += f
        skipped += s
    faults += fleet_deviations(states)
    return {'nodes': len(states), 'faults': sorted(faults, key=lambda f: (f['component'], f['fault'])),
            'skipped': skipped}


def read_node(sysfs=ibtopology.SYSFS):
    """This node's topology as the sweep reads it."""
    return ibtopology.read_sysfs(sysfs)


def node_line(sysfs=ibtopology.SYSFS):
    """One node's sweep record: its host name and topology, as one JSON line."""
    return json.dumps({'host': socket.gethostname(), 'topology': read_node(sysfs)})


def read_lines(texts):
    """``(states, problems)`` from sweep outputs: host -> topology, and what could not be read (named)."""
    states, problems = {}, []
    for where, text in texts:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.startswith('{'):
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                problems.append(f'{where}:{number}: not JSON ({err})')
                continue
            host, topo = record.get('host'), record.get('topology')
            if not (isinstance(host, str) and HOST_NAME.fullmatch(host) and isinstance(topo, dict)):
                problems.append(f'{where}:{number}: no host name and topology')
            elif host in states:
                problems.append(f'{where}:{number}: host {host} twice (one task per node expected)')
            else:
                states[host] = topo
    return states, problems
