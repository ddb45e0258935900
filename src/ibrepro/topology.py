"""The RDMA hardware of this machine: devices, ports, links, host buses, and their limits.

Reads ``/sys/class/infiniband`` (or a copy of sysfs under another root, for tests) or the output
of ``ibv_devinfo -v``. The result is a plain JSON-able dict (``ibrepro topology --json``)::

    {'source': ..., 'devices': [device, ...], 'adapters': [adapter, ...], 'message': ...}

device:  name, kind (``hca`` | ``rxe`` | ``siw``), node_type, fw_ver, board_id, hca_type,
         vendor_id, vendor_part_id, node_guid, sys_image_guid, node_desc, parent_netdev
         (soft-RoCE), pci (the PCI function and its link at the time of reading, and ``path``: each
         PCIe link up to the root port, :func:`pcie_path`; or None), ports
port:    port, state, phys_state, rate, width (lanes), speed (SDR .. XDR), link_layer, gid0,
         netdevs, netdev_speed_Mbps, link (an ibrepro.limits component as a dict, or None),
         link_note, counters (error counters, :data:`ERROR_COUNTERS`, or None)
adapter: devices sharing one PCI device (a dual-function HCA shares its PCIe link), its bus,
         active ports and the bound (ibrepro.limits) of bus + active links

:func:`partition_features` and :func:`summary` turn it into what a ReFrame configuration can
declare for a partition.
"""

import json
import re
import sys
from pathlib import Path

from . import limits, pcie_distance

SYSFS = Path('/sys')
# PCIe transfer rate (GT/s) -> generation
_PCIE_GEN_BY_RATE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
# Signalling per lane as the kernel's sysfs `rate` counts it (drivers/infiniband/core/sysfs.c
# rate_show, deci-Gb/s 25/50/100/100/140/250/500/1000/2000) -> speed; for kernels that print no
# speed name (older ones print "10 Gb/sec (4X)" for SDR).
_SPEED_BY_LANE_GBPS = {2.5: 'SDR', 5.0: 'DDR', 10.0: 'QDR', 14.0: 'FDR', 25.0: 'EDR', 50.0: 'HDR',
                       100.0: 'NDR', 200.0: 'XDR'}
# ibv_devinfo prints "<text> (<enum>)"; the enums are IB PortInfo's (rdma-core devinfo.c)
_IBV_SPEEDS = {1: 'SDR', 2: 'DDR', 4: 'QDR', 8: 'FDR10', 16: 'FDR', 32: 'EDR', 64: 'HDR',
               128: 'NDR', 256: 'XDR'}
_IBV_WIDTHS = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
# IB PortInfo PortPhysicalState -> the name sysfs prints (drivers/infiniband/core/sysfs.c)
_PHYS_STATES = {1: 'Sleep', 2: 'Polling', 3: 'Disabled', 4: 'PortConfigurationTraining', 5: 'LinkUp',
                6: 'LinkErrorRecovery', 7: 'Phy Test'}
RXE_VENDOR_ID = '0xffffff'   # rdma_rxe reports this vendor id (rxe_param.h)


def _read(path):
    """A sysfs attribute, stripped; None if absent or unreadable (e.g. EINVAL of a down link)."""
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _after_colon(value):
    """'4: ACTIVE' -> 'ACTIVE'."""
    return value.split(':', 1)[1].strip() if value and ':' in value else value


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _hex_or_none(value):
    try:
        return int(value, 16)
    except (TypeError, ValueError):
        return None


def _parse_rate(rate):
    """'40 Gb/sec (4X QDR)' -> (4, 'QDR'); (None, None) if unreadable."""
    m = re.match(r'\s*([\d.]+)\s*Gb/sec\s*\((\d+)X\s*([A-Z0-9]*)\)', rate or '')
    if not m:
        return None, None
    width = int(m.group(2))
    speed = m.group(3) or _SPEED_BY_LANE_GBPS.get(float(m.group(1)) / width)
    return width, speed


def _link(port, netdev_speed_Mbps):
    """The ibrepro.limits component of a port's link, and a note on where it comes from."""
    width, speed = port.get('width'), (port.get('speed') or '').lower()
    ib = (limits.infiniband(speed, width)
          if width in limits.IB_WIDTHS and speed in limits.IB_SPEEDS else None)
    if port.get('link_layer') != 'Ethernet':
        return (ib, 'InfiniBand rate and width') if ib else \
            (None, f'unknown link (width {width}, speed {speed or None})')

    if netdev_speed_Mbps and netdev_speed_Mbps > 0:
        return limits.ethernet(netdev_speed_Mbps / 1000, roce=True), 'netdev speed'
    if ib:
        # The kernel shows an Ethernet port's speed as an IB speed and width (ib_get_eth_speed);
        # its data rate is the Ethernet speed except for 1X SDR (<= 1 GbE, also what an unknown
        # speed defaults to) and 4X DDR (20 GbE).
        gbps = _ETH_GBPS_OF_IB.get((speed, width), limits.to_Gbps(ib.per_direction))
        return limits.ethernet(gbps, roce=True), \
            ("Ethernet speed inferred from the kernel's IB-style rate; the netdev speed is unknown")
    return None, 'unknown Ethernet speed'


_ETH_GBPS_OF_IB = {('sdr', 1): 1, ('ddr', 4): 20}


# -- sysfs -------------------------------------------------------------------------------------

def _gt_per_s(speed):
    m = re.match(r'\s*([\d.]+)\s*GT/s', speed or '')
    return float(m.group(1)) if m else None


def _pcie_spec(speed, width):
    rate = _gt_per_s(speed)
    gen = _PCIE_GEN_BY_RATE.get(rate) if rate is not None else None
    width = _int_or_none(width)
    if gen and width in limits.PCIE_WIDTHS:
        return f'pcie:gen{gen}:x{width}'
    return None


def _read_pci(function, via):
    if function is None:
        return None
    info = {
        'address': function.name,
        'slot': function.name.rsplit('.', 1)[0],
        'via': via,
        'current_link_speed': _read(function / 'current_link_speed'),
        'current_link_width': _int_or_none(_read(function / 'current_link_width')),
        'max_link_speed': _read(function / 'max_link_speed'),
        'max_link_width': _int_or_none(_read(function / 'max_link_width')),
        'numa_node': _int_or_none(_read(function / 'numa_node')),
        'vendor_id': _read(function / 'vendor'),
        'device_id': _hex_or_none(_read(function / 'device')),
    }
    info['bus_spec'] = _pcie_spec(info['current_link_speed'], info['current_link_width'])
    info['max_bus_spec'] = _pcie_spec(info['max_link_speed'], info['max_link_width'])
    info['downtrained'] = bool(info['bus_spec'] and info['max_bus_spec']
                               and info['bus_spec'] != info['max_bus_spec'])
    info['path'] = pcie_path(function)
    return info


def _link_end(function):
    return {'address': function.name,
            'current_speed': _gt_per_s(_read(function / 'current_link_speed')),
            'current_width': _int_or_none(_read(function / 'current_link_width')),
            'max_speed': _gt_per_s(_read(function / 'max_link_speed')),
            'max_width': _int_or_none(_read(function / 'max_link_width'))}


def pcie_path(function):
    """The PCIe links from a device's function up to its root port, each with what it trained to and what it
    could train to: the lesser of its two ends' maxima (a Gen5 card in a Gen4 slot is capped, not degraded).

    The chain of functions above the device is endpoint, (switch downstream port, switch upstream port)*, root
    port: a function's link registers describe its upstream link for an endpoint or a switch upstream port, its
    downstream link for a downstream or root port. So the links are the pairs (chain[0], chain[1]),
    (chain[2], chain[3]), ...; each is read at its lower end. A function without link attributes (a virtual
    function, an integrated device) ends the path."""
    chain = pcie_distance.bridges(function)
    links = []
    for lower, upper in zip(chain[0::2], chain[1::2]):
        low, up = _link_end(lower), _link_end(upper)
        if None in (low['current_speed'], low['current_width'], low['max_speed'], low['max_width']):
            break
        can_speed = min(s for s in (low['max_speed'], up['max_speed']) if s is not None)
        can_width = min(w for w in (low['max_width'], up['max_width']) if w is not None)
        links.append({'lower': low['address'], 'upper': up['address'],
                      'speed': low['current_speed'], 'width': low['current_width'],
                      'can_speed': can_speed, 'can_width': can_width,
                      'degraded': low['current_speed'] < can_speed or low['current_width'] < can_width})
    return links


#: Port error counters (``ports/<n>/counters``) a fleet sweep reads before and after its traffic: a cable or a
#: port that loses symbols, retrains or drops packets.
ERROR_COUNTERS = ('symbol_error', 'link_downed', 'link_error_recovery', 'port_rcv_errors',
                  'local_link_integrity_errors', 'excessive_buffer_overrun_errors')


def _counters(port_dir):
    """The port's error counters, or None where the driver exports none (mlx4 without them, rxe)."""
    found = {name: _int_or_none(_read(port_dir / 'counters' / name)) for name in ERROR_COUNTERS}
    return {k: v for k, v in found.items() if v is not None} or None


def _netdev_speed(root, netdev):
    speed = _int_or_none(_read(root / 'class' / 'net' / netdev / 'speed')) if netdev else None
    return speed if speed and speed > 0 else None


def _read_port(root, dev_dir, port_dir, parent_netdev):
    rate = _read(port_dir / 'rate')
    width, speed = _parse_rate(rate)
    port = {
        'port': int(port_dir.name),
        'state': _after_colon(_read(port_dir / 'state')),
        'phys_state': _after_colon(_read(port_dir / 'phys_state')),
        'rate': rate,
        'width': width,
        'speed': speed,
        'link_layer': _read(port_dir / 'link_layer'),
        'gid0': _read(port_dir / 'gids' / '0'),
        'counters': _counters(port_dir),
    }
    netdevs = []
    for candidate in [_read(port_dir / 'gid_attrs' / 'ndevs' / '0'), parent_netdev]:
        if candidate and candidate not in netdevs:
            netdevs.append(candidate)
    net_dir = dev_dir / 'device' / 'net'
    if net_dir.is_dir():
        netdevs += sorted(n.name for n in net_dir.iterdir() if n.name not in netdevs)
    port['netdevs'] = netdevs
    port['netdev_speed_Mbps'] = (_netdev_speed(root, netdevs[0])
                                 if netdevs and port['link_layer'] == 'Ethernet' else None)
    link, port['link_note'] = _link(port, port['netdev_speed_Mbps'])
    port['link'] = link.to_dict() if link else None
    return port


def _read_device(root, dev_dir):
    parent_netdev = _read(dev_dir / 'parent')   # rdma_rxe's attribute: the netdev it runs on
    node_desc = _read(dev_dir / 'node_desc')
    name = dev_dir.name
    if parent_netdev or name.startswith('rxe') or (node_desc or '').startswith('rxe'):
        kind = 'rxe'
    elif name.startswith('siw'):
        kind = 'siw'
    else:
        kind = 'hca'

    function, via = pcie_distance.pci_function(dev_dir / 'device'), 'device'
    if function is None and parent_netdev:   # soft-RoCE: the NIC under the netdev, if any
        function = pcie_distance.pci_function(root / 'class' / 'net' / parent_netdev / 'device')
        via = f'netdev {parent_netdev}'

    pci = _read_pci(function, via)
    ports_dir = dev_dir / 'ports'
    port_dirs = sorted((p for p in ports_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)) \
        if ports_dir.is_dir() else []
    return {
        'name': name,
        'kind': kind,
        'node_type': _after_colon(_read(dev_dir / 'node_type')),
        'fw_ver': _read(dev_dir / 'fw_ver'),
        'board_id': _read(dev_dir / 'board_id'),
        'hca_type': _read(dev_dir / 'hca_type'),
        'vendor_id': pci['vendor_id'] if pci else None,
        'vendor_part_id': pci['device_id'] if pci else None,
        'node_guid': _read(dev_dir / 'node_guid'),
        'sys_image_guid': _read(dev_dir / 'sys_image_guid'),
        'node_desc': node_desc,
        'parent_netdev': parent_netdev,
        'pci': pci,
        'ports': [_read_port(root, dev_dir, p, parent_netdev) for p in port_dirs],
    }


def read_gpus(root=SYSFS):
    """The GPUs under ``root`` (``bus/pci/devices``: PCI functions of a GPU vendor and class), each with its PCIe
    link state and path as an HCA's (:func:`_read_pci`): the bus between GPU and host decides host-device copies as
    it decided the papers' adapters' bandwidth."""
    found = []
    for gpu in pcie_distance.gpu_functions(root):
        pci = _read_pci(gpu['function'], 'bus/pci')
        if pci:
            found.append({'name': pci['address'], 'vendor': gpu['vendor'], 'class': gpu['class'], 'pci': pci})
    return found


def gpu_link(gpu):
    """The link that limits a GPU's host-device copies: the narrowest one, as trained now, between the GPU and its
    root port (its own link, or a PCIe switch's uplink above it), as ``{'spec': 'pcie:gen5:x16', 'limit_MBps':
    per direction, 'lower': the link's lower end, 'degraded': trained below what both ends can}``; None when sysfs
    gives no link state (a VM or driver without the attributes)."""
    pci = gpu.get('pci') or {}
    links = [(_pcie_spec(f'{link["speed"]} GT/s', link['width']), link['lower'], link['degraded'])
             for link in pci.get('path') or []]
    if not links and pci.get('bus_spec'):        # no parent bridge: the GPU's own end is what sysfs tells
        links = [(pci['bus_spec'], pci.get('address'), bool(pci.get('downtrained')))]
    found = [(limits.limit_MBps(spec), spec, lower, degraded) for spec, lower, degraded in links if spec]
    if not found:
        return None
    limit, spec, lower, degraded = min(found, key=lambda f: f[0])
    return {'spec': spec, 'limit_MBps': limit, 'lower': lower, 'degraded': degraded}


def read_sysfs(root=SYSFS):
    """The topology from sysfs under ``root`` (``/sys``): RDMA devices, their adapters, and the node's GPUs."""
    root = Path(root)
    class_dir = root / 'class' / 'infiniband'
    topo = {'source': str(class_dir), 'devices': []}
    if not class_dir.is_dir():
        topo['message'] = f'no RDMA devices found ({class_dir} absent)'
    else:
        topo['devices'] = [_read_device(root, d) for d in sorted(class_dir.iterdir())]
        if not topo['devices']:
            topo['message'] = f'no RDMA devices found ({class_dir} is empty)'
    topo['adapters'] = adapters(topo['devices'])
    topo['gpus'] = read_gpus(root)
    hcas = {d['name']: (pcie_distance.pci_function(class_dir / d['name'] / 'device'), d['pci'].get('numa_node'))
            for d in topo['devices'] if d.get('kind') == 'hca' and d.get('pci')}
    for gpu in topo['gpus']:          # how far each GPU is from each HCA: what GPUDirect RDMA crosses
        function = pcie_distance.pci_function(root / 'bus' / 'pci' / 'devices' / gpu['name'])
        numa = (gpu.get('pci') or {}).get('numa_node')
        gpu['hca_distance'] = {name: pcie_distance.pci_distance(function, hca, numa, hca_numa)
                               for name, (hca, hca_numa) in hcas.items()}
    return topo


read = read_sysfs


# -- ibv_devinfo -v ----------------------------------------------------------------------------

def _enum(value):
    m = re.search(r'\((\d+)\)\s*$', value or '')
    return int(m.group(1)) if m else None


def parse_ibv_devinfo(text, source='<ibv_devinfo>'):
    """The topology from the output of ``ibv_devinfo`` (``-v`` gives widths and speeds).

    Raises ValueError naming ``source`` if the text holds no ``hca_id:`` block.
    """
    devices, dev, port = [], None, None
    for line in text.splitlines():
        m = re.match(r'^(\t*)([A-Za-z_][\w\[\] ]*?):\s*(.*)$', line)
        if not m:
            continue
        depth, key, value = len(m.group(1)), m.group(2).strip(), m.group(3).strip()
        if key == 'hca_id':
            dev = {'name': value, 'fields': {}, 'ports': []}
            devices.append(dev)
            port = None
        elif dev is None:
            continue
        elif key == 'port':
            port = {'port': int(value), 'fields': {}}
            dev['ports'].append(port)
        elif port is not None and depth >= 3:
            port['fields'].setdefault(key, value)
        elif port is None and depth == 1:
            dev['fields'][key] = value

    if not devices:
        raise ValueError(f'{source}: not ibv_devinfo output (no "hca_id:" line)')

    devices = [_devinfo_device(d) for d in devices]
    return {'source': f'ibv_devinfo {source}', 'devices': devices, 'adapters': adapters(devices)}


def _devinfo_device(dev):
    f = dev['fields']
    rxe = f.get('vendor_id', '').lower() == RXE_VENDOR_ID or dev['name'].startswith('rxe')
    ports = []
    for p in dev['ports']:
        pf = p['fields']
        state = pf.get('state', '')
        port = {
            'port': p['port'],
            'state': re.sub(r'^PORT_|\s*\(\d+\)$', '', state) or None,
            'phys_state': _PHYS_STATES.get(_enum(pf.get('phys_state'))),
            'rate': None,
            'width': _IBV_WIDTHS.get(_enum(pf.get('active_width'))),
            'speed': _IBV_SPEEDS.get(_enum(pf.get('active_speed'))),
            'link_layer': pf.get('link_layer'),
            'gid0': (pf.get('GID[  0]') or '').split(',')[0] or None,
            'netdevs': [],
            'netdev_speed_Mbps': None,
        }
        link, port['link_note'] = _link(port, None)
        port['link'] = link.to_dict() if link else None
        ports.append(port)
    return {
        'name': dev['name'],
        'kind': 'rxe' if rxe else 'hca',
        'node_type': None,
        'fw_ver': f.get('fw_ver'),
        'board_id': f.get('board_id'),
        'hca_type': None,
        'vendor_id': f.get('vendor_id'),
        'vendor_part_id': _int_or_none(f.get('vendor_part_id')),
        'node_guid': f.get('node_guid'),
        'sys_image_guid': f.get('sys_image_guid'),
        'node_desc': None,
        'parent_netdev': None,
        'pci': None,
        'ports': ports,
    }


# -- limits per adapter ------------------------------------------------------------------------

def active_ports(device):
    return [p for p in device['ports'] if p.get('state') == 'ACTIVE']


def adapters(devices):
    """Group devices by PCI device (functions of one card share its PCIe link) and bound each."""
    groups = {}
    for dev in devices:
        key = dev['pci']['slot'] if dev.get('pci') else f'no-pci:{dev["name"]}'
        groups.setdefault(key, []).append(dev)

    result = []
    for key, devs in groups.items():
        pci = devs[0].get('pci')
        bus_spec = pci['bus_spec'] if pci else None
        ports = [(d, p) for d in devs for p in active_ports(d)]
        links = [limits.Component.from_dict(p['link']) for _, p in ports if p.get('link')]
        entry = {
            'name': '+'.join(d['name'] for d in devs),
            'devices': [d['name'] for d in devs],
            'pci_slot': None if key.startswith('no-pci:') else key,
            'bus': limits.parse_spec(bus_spec).to_dict() if bus_spec else None,
            'active_ports': [f'{d["name"]}/{p["port"]}' for d, p in ports],
            'bound': None,
            'bound_note': None,
        }
        if links:
            series = ([limits.parse_spec(bus_spec)] if bus_spec else []) + [limits.parallel(links)]
            entry['bound'] = limits.bound(series).to_dict()
            if not bus_spec:
                entry['bound_note'] = 'host bus unknown: the bound is the link(s) only'
        elif ports:
            entry['bound_note'] = 'active ports with an unknown link rate'
        result.append(entry)
    return result


# -- what a ReFrame configuration can declare -------------------------------------------------

def fabric_devices(topo):
    """The devices of the node's RDMA fabric, with an active port: those with an InfiniBand port when the node has
    one (a RoCE-capable management Ethernet NIC beside InfiniBand HCAs is not a rail), else the RoCE ones."""
    active = [d for d in topo.get('devices', []) if active_ports(d)]
    ib = [d for d in active if any(p.get('link_layer') == 'InfiniBand' for p in active_ports(d))]
    return ib or active


def partition_features(topo):
    """ReFrame partition features for what is really there (the fabric's devices); [] when there is nothing.

    ``ib`` an active InfiniBand port; ``ib-<speed>`` per active IB speed (``ib-qdr``); ``roce``
    an active Ethernet-link-layer port (of the fabric: not a management NIC beside InfiniBand);
    ``rxe`` an active soft-RoCE device; ``dual-port`` two active ports on one adapter, or active
    ports on two devices.
    """
    features = []
    fabric = {d['name'] for d in fabric_devices(topo)}
    active = [(d, p) for d in topo.get('devices', []) if d['name'] in fabric for p in active_ports(d)]
    ib = [p for _, p in active if p.get('link_layer') == 'InfiniBand']
    if ib:
        features.append('ib')
    features += sorted({f'ib-{p["speed"].lower()}' for p in ib if p.get('speed')})
    if any(p.get('link_layer') == 'Ethernet' for _, p in active):
        features.append('roce')
    if any(d['kind'] == 'rxe' for d, _ in active):
        features.append('rxe')
    if (any(len(a['active_ports']) >= 2 for a in topo.get('adapters', []) if set(a['devices']) & fabric)
            or len({d['name'] for d, _ in active}) >= 2):
        features.append('dual-port')
    return features


def node_bound(topo):
    """(per direction, both directions) in bytes/s: the sum of the bounds of the fabric's adapters."""
    return rails_bound(topo, [d['name'] for d in fabric_devices(topo)])[:2]


def rails_bound(topo, devices):
    """(per direction, both directions, why not) in bytes/s of the rails ``devices`` of a node: per adapter holding
    one of them (functions of one card share its PCIe link), its host bus in series with the links of those devices'
    active ports. (0, 0, why) when a device is not in the topology or none has an active port of known rate."""
    known = {d['name']: d for d in topo.get('devices', [])}
    missing = sorted(set(devices) - set(known))
    if missing:
        return 0, 0, f'rail {", ".join(missing)} not in the recorded topology'
    slots = {}
    for name in dict.fromkeys(devices):
        dev = known[name]
        slots.setdefault(dev['pci']['slot'] if dev.get('pci') else f'no-pci:{name}', []).append(dev)
    per_direction = both = 0
    for devs in slots.values():
        links = [limits.Component.from_dict(p['link']) for d in devs for p in active_ports(d) if p.get('link')]
        if not links:
            continue
        bus_spec = devs[0]['pci']['bus_spec'] if devs[0].get('pci') else None
        bound = limits.bound(([limits.parse_spec(bus_spec)] if bus_spec else []) + [limits.parallel(links)])
        per_direction += bound.value('uni')
        both += bound.value('bi')
    return per_direction, both, None if per_direction else 'no active port with a known rate on ' + ', '.join(devices)


def summary(topo):
    """A small dict for a ReFrame partition's ``extras``.

    ``hcas`` devices of the fabric with an active port (:func:`fabric_devices`), ``hca`` the first
    of them (``''`` if none), ``ports`` the number of active ports, ``hca_ports`` {device: [active
    port numbers]}, ``link_gbps`` data rate per direction of the first active port (0 if none),
    ``bus`` the host bus spec of the first adapter with active ports (``''`` if unknown),
    ``limit_MBps`` / ``limit_bidir_MBps`` the bound of that adapter (0 if none).
    """
    fabric = fabric_devices(topo)
    active = {d['name']: [p['port'] for p in active_ports(d)] for d in fabric}
    first_port = next((p for d in fabric for p in active_ports(d)), None)
    adapter = next((a for a in topo.get('adapters', []) if a['active_ports'] and set(a['devices']) & set(active)),
                   None)
    bound = adapter['bound'] if adapter and adapter['bound'] else None
    return {
        'hcas': list(active),
        'hca': next(iter(active), ''),
        'ports': sum(len(p) for p in active.values()),
        'hca_ports': active,
        'link_gbps': first_port['link']['data_Gbps'] if first_port and first_port['link'] else 0,
        'bus': adapter['bus']['spec'] if adapter and adapter['bus'] else '',
        'limit_MBps': bound['per_direction_MBps'] if bound else 0,
        'limit_bidir_MBps': bound['both_directions_MBps'] if bound else 0,
    }


# -- command line ------------------------------------------------------------------------------

def add_cli(subparsers):
    p = subparsers.add_parser(
        'topology', help='the RDMA devices, ports, links and host buses of this machine, and their limits',
        description='Read /sys/class/infiniband (or ibv_devinfo output) and print the RDMA devices, '
                    'their ports (state, rate, link layer, netdevs), the PCI function of each HCA '
                    '(PCIe speed/width, NUMA node), and per adapter the theoretical bound of host '
                    'bus + active links (ibrepro.limits). Exits 0 when there is no RDMA device.')
    p.add_argument('--json', action='store_true', help='print JSON (add features and summary)')
    p.add_argument('--sysfs', default=str(SYSFS), metavar='ROOT',
                   help='sysfs root to read (default /sys)')
    p.add_argument('--ibv-devinfo', metavar='FILE',
                   help='parse saved `ibv_devinfo -v` output instead of sysfs')
    p.set_defaults(func=_cli_topology)


def _cli_topology(args):
    if args.ibv_devinfo:
        try:
            text = Path(args.ibv_devinfo).read_text(errors='replace')
            topo = parse_ibv_devinfo(text, args.ibv_devinfo)
        except OSError as err:
            print(f'ibrepro topology: {args.ibv_devinfo}: cannot read: {err.strerror}', file=sys.stderr)
            return 1
        except ValueError as err:
            print(f'ibrepro topology: {err}', file=sys.stderr)
            return 1
    else:
        topo = read_sysfs(args.sysfs)

    if args.json:
        json.dump(dict(topo, features=partition_features(topo), summary=summary(topo)),
                  sys.stdout, indent=2)
        print()
        if topo.get('message'):
            print(f'ibrepro topology: {topo["message"]}', file=sys.stderr)
        return 0

    print(format_topology(topo))
    return 0


def _bound(b, which):
    """'<MB/s> MB/s [bottleneck = ...]' of one direction (or both) of an adapter's bound."""
    return f'{b[which + "_MBps"]:,.0f} MB/s [{" = ".join(b["bottleneck_" + which])}]'


def format_topology(topo):
    """The human-readable tables of ``ibrepro topology``: the RDMA devices and their limits, then the GPUs."""
    gpus = _format_gpus(topo.get('gpus') or [])
    if not topo['devices']:
        return '\n'.join([topo.get('message', 'no RDMA devices found'), *(['', gpus] if gpus else [])])

    rows = []
    for d in topo['devices']:
        pci = d.get('pci')
        bus = '-'
        if pci:
            bus = (f'{pci["address"]} {pci["bus_spec"] or pci["current_link_speed"] or "?"}'
                   + (f' (max {pci["max_bus_spec"]}, DOWNTRAINED)' if pci['downtrained'] else '')
                   + (f' numa {pci["numa_node"]}' if pci['numa_node'] is not None else '')
                   + (f' via {pci["via"]}' if pci['via'] != 'device' else ''))
        for p in d['ports'] or [{}]:
            link = p.get('link')
            rows.append([d['name'], d['kind'], p.get('port', '-'), p.get('state') or '-',
                         p.get('phys_state') or '-', p.get('link_layer') or '-',
                         p.get('rate') or (f'{p.get("width")}X {p.get("speed")}' if p.get('speed') else '-'),
                         f'{link["per_direction_MBps"]:,.0f} MB/s' if link else '-',
                         ','.join(p.get('netdevs') or []) or '-', bus])
    lines = [f'RDMA devices ({topo["source"]}):',
             limits._table(['device', 'kind', 'port', 'state', 'phys', 'link layer', 'rate',
                            'link data/dir', 'netdevs', 'PCI function / bus'], rows), '']

    rows = []
    for a in topo['adapters']:
        b = a['bound']
        rows.append([a['name'], a['bus']['spec'] if a['bus'] else 'unknown',
                     ','.join(a['active_ports']) or '(none active)',
                     _bound(b, 'per_direction') if b else '-', _bound(b, 'both_directions') if b else '-',
                     a['bound_note'] or ''])
    lines += ['Limits per adapter (theoretical data rates; protocol overhead not included):',
              limits._table(['adapter', 'bus', 'active ports', 'per direction', 'both directions', 'note'],
                            rows)]
    return '\n'.join(lines + (['', gpus] if gpus else []))


def _format_gpus(gpus):
    """The GPUs' table: each one's link as trained and the link that limits its host-device copies
    (:func:`gpu_link`), '' without GPUs."""
    rows = []
    for g in gpus:
        pci, link = g.get('pci') or {}, gpu_link(g)
        hcas = ', '.join(f'{hca} {distance}' for hca, distance in sorted(
            (g.get('hca_distance') or {}).items(), key=lambda kv: (pcie_distance.rank(kv[1]), kv[0])))
        rows.append([g['name'], g.get('vendor') or '-', pci.get('bus_spec') or pci.get('current_link_speed') or '?',
                     pci.get('max_bus_spec') or '?',
                     (f'{link["spec"]} at {link["lower"]}' if link else 'not given by sysfs'),
                     f'{link["limit_MBps"]:,.0f} MB/s' if link else '-',
                     'DEGRADED: trained below what both ends can' if link and link['degraded'] else '',
                     '-' if pci.get('numa_node') is None else pci['numa_node'], hcas or '-'])
    if not rows:
        return ''
    return '\n'.join(['GPUs (host-device copies are limited by the narrowest PCIe link up to the root port):',
                      limits._table(['GPU', 'vendor', 'link', 'max', 'limiting link', 'per direction', 'note',
                                     'numa', 'HCAs by PCIe distance'], rows)])
