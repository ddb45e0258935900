"""``ibrepro pair``: run client/server flows (perftest, ``ibrepro_rdma``) across the nodes of one job.

perftest is a client/server pair, and the papers' verbs experiments need several pairs at once (two ports bound
to two directions, N concurrent pairs). A ReFrame check describes the *flows* in a JSON spec; the partition's
launcher (``srun``, ``mpirun``, PBS ``mpiexec``) starts this runner once per node, and each runner takes its node
index from the launcher's rank variables. With one task (one node) the runner plays every node, e.g. a server on
rail 0 and its client on rail 1 of the same node.

This module is the compute-node side: it imports the Python standard library only and runs as a script. The
checks copy it into the stage directory and the job runs ``<python> ibrepro_pair.py flows.json`` with the
interpreter the partition names (extras ``python``), so compute nodes need no ibrepro installation; any Python
>= 3.6 runs it (EL8's platform Python).

Per node:

1. **Probe**: each rail (``[device, port]`` of the spec) gets the IPv4 address the fabric knows it by (RoCE: the
   IPv4-mapped RoCE v2 GID; InfiniBand: the address of its IPoIB interface) and the CPUs near its device (its
   PCI function's NUMA node, within the CPUs the launcher gave this task). Published as ``node-<i>.json`` in the
   work directory (the job's stage directory, shared by the nodes). No address is fixed in advance: whatever
   nodes the scheduler picked, clients connect to the rail their server really listens on.
2. **Placement**: once every node has published, a spec with ``distinct_hosts`` fails unless each node index
   runs on its own host (a 2x1 layout measured within one host would measure loopback under the same name).
3. **Rounds**: one round per message size of ``sizes`` (perftest's duration mode ``-D`` cannot sweep ``-a``), or
   one round when the command sweeps by itself. In a round, a node starts its servers (each pinned to CPUs of
   its own near its rail, see Binding) and waits until they listen, says it is ready, waits until every node is
   ready (a barrier), then starts all its clients at once: concurrent flows measure the same size at the same
   time, and each side's start and end are recorded, so the check can verify that the measurement windows
   overlapped.
4. **Failure**: a side that fails (a server that exits before its client came, a missing program, a timeout, a
   peer that never shows up, a client that still cannot connect ``connect_timeout`` seconds after the barrier: a
   firewalled or mis-routed rail, named with its address) writes ``failed-<i>.json`` with the reason; every node
   polls for it while waiting and stops what it started within a second or two. The launcher's own
   kill-on-bad-exit (``srun --kill-on-bad-exit``) ends the rest of the job step.

Files per flow: ``flow-<id>[.s<size>].<side>.out`` (what the tool printed, after one ``#`` line with the
command and one with the CPU binding) and ``flow-<id>[.s<size>].<side>.status.json`` (node, host, CPU, start and
end time, exit status). A summary goes to stdout; the exit status is non-zero when anything of this node failed.

Spec (JSON, version 2)::

    {"version": 2,
     "program": "ib_write_bw", "options": ["-F", "-D", "4"],   # perftest: -d/-i/-p/-s and the host are added
     "rails": [["mlx5_0", 1], ["mlx5_1", 1]],                  # a node's rails; flows name them by index
     "nodes": 2, "distinct_hosts": true,
     "flows": [{"id": 0, "port": 18515, "server": {"node": 1, "rail": 0}, "client": {"node": 0, "rail": 0}}],
     "sizes": [65536, 1048576],                                 # null: one round (e.g. perftest -a)
     "timeout": 900, "connect_timeout": 60, "pin": true, "cpu_sharing": false,
     "node_exec": null, "python": "python3", "sysfs": "/sys",
     "gpu_options": ["--use_cuda_bus_id={gpu}"], "gpu_vendor": "NVIDIA"}     # only with sides that have "gpu"

Binding: with ``pin``, each side runs on CPUs of its own near its rail's device (the device's ``local_cpulist``
within the CPUs the launcher gave this task), one per process (a side's ``"processes": N``, e.g. ``ibrepro_rdma
-P N``: each process it forks gets its own CPU of the side's). When the task may not use enough free CPUs near the
device, the case fails with the reason, unless ``cpu_sharing`` (emulated nodes) lets sides share; when the
device's locality is unknown (no PCI function, e.g. soft-RoCE) any CPU of the task is used and the side's status
says so (``binding``).

GPUDirect RDMA: a side with ``"gpu": "near"`` or ``"far"`` keeps its buffers in the memory of the GPU nearest to
its rail's HCA on the PCIe tree, or the farthest (``nvidia-smi topo -m``'s distances, :mod:`ibrepro.pcie_distance`,
copied beside this script as ``pcie_distance.py``): the spec's ``gpu_options`` (e.g.
``["--use_cuda_bus_id={gpu}"]``) are added to its command with ``{gpu}`` the GPU's PCI address (an ``argv`` side
names ``{gpu}`` where it wants it), and the side's status records the GPU and its distance. A node without such a
GPU (none, or none farther than the nearest) fails the case with the reason: a measurement promised in GPU memory
is never made in host memory.

A side may carry its own command line instead, ``"argv": [...]``, for client/server programs other than
perftest; ``{server_addr}`` (the server rail's address), ``{server_rails}`` / ``{client_rails}`` (all rails of
that node, comma-separated), ``{addr:<node>:<rail>}`` (one rail of one node), ``{size}`` and ``{gpu}`` (the side's
GPU, see above) are replaced. With ``"wait_listen": false`` the runner does not wait for a TCP listener (the client
retries by itself).
``node_exec`` (emulated nodes only) is a command prefix that runs a side, or this script's ``--probe``, on node
``{node}`` from one runner process.
"""

import argparse
import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

SPEC_VERSION = 2

#: Launcher variables that hold the rank of a task, and the number of tasks, in the order we trust them.
RANK_VARIABLES = [('SLURM_PROCID', 'SLURM_NTASKS'), ('PMIX_RANK', 'PMIX_SIZE'), ('PMI_RANK', 'PMI_SIZE'),
                  ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'), ('PALS_RANKID', 'PALS_SIZE'),
                  ('IBREPRO_NODE_RANK', 'IBREPRO_NODES')]

#: Bounds of a spec: a job spans at most this many nodes (a large fleet in one job), runs at most this many flows,
#: each side at most this many processes; a spec past them is refused before a file is written.
MAX_NODES = 16384
MAX_FLOWS = 100000
MAX_PROCESSES = 4096
MAX_RAILS = 64

#: Which GPU a side's buffers are in: the nearest to its rail's HCA on the PCIe tree, or the farthest.
GPU_CHOICES = ('near', 'far')
#: GPU vendors a spec may ask for (:data:`ibrepro.pcie_distance.GPU_VENDORS`).
GPU_VENDOR_NAMES = ('NVIDIA', 'AMD')

#: A rank or a count in a launcher's variable: ASCII digits only (``'²'.isdigit()`` is True, ``int('²')`` fails).
_COUNT = re.compile(r'[0-9]{1,9}')

#: Client output that means "the server is not listening yet": worth a retry.
_NOT_READY = ("Couldn't connect to", 'Unable to open file descriptor for socket connection',
              'Connection refused', 'Failed to establish connection')

#: How often waiting loops look at the shared directory (seconds): also the start skew of concurrent flows.
POLL = 0.02

#: ``{addr:<node>:<rail>}`` in a side's argv: the address rail <rail> of node <node> published.
_ADDR = re.compile(r'\{addr:(\d+):(\d+)\}')

_IPV4_MAPPED = re.compile(r'^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$')


#: subprocess.run's capture_output=True, text=True, as Python 3.6 spells it (EL8's platform Python: see the module
#: doc; tests/test_pair.py runs vermin on this file).
_CAPTURE = {'stdout': subprocess.PIPE, 'stderr': subprocess.PIPE, 'universal_newlines': True}


def _join(argv):
    """shlex.join (Python 3.8)."""
    return ' '.join(shlex.quote(arg) for arg in argv)


class SpecError(ValueError):
    """The spec file is not a usable spec; the message names the file and the field."""


class PairFailed(RuntimeError):
    """This node cannot go on; the message is the reason written for the peers."""


# -- the spec -----------------------------------------------------------------------------------------

def _field(spec, key, kind, path, default=...):
    if key not in spec:
        if default is ...:
            raise SpecError(f'{path}: missing field {key!r}')
        return default
    value = spec[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple)
                                                                               else (kind,)):
        names = ' or '.join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SpecError(f'{path}: field {key!r} must be {names}, not {type(value).__name__}')
    return value


def check_spec(spec, path='<spec>'):
    """Validate a parsed spec (SpecError naming the field) and fill in the defaults."""
    if not isinstance(spec, dict):
        raise SpecError(f'{path}: a spec is a JSON object, not {type(spec).__name__}')
    if spec.get('version') != SPEC_VERSION:
        raise SpecError(f'{path}: field \'version\' must be {SPEC_VERSION} (written by an ibrepro check of '
                        'the same version)')
    flows = _field(spec, 'flows', list, path)
    if not flows:
        raise SpecError(f'{path}: field \'flows\' is empty')
    if len(flows) > MAX_FLOWS:
        raise SpecError(f'{path}: field \'flows\' holds {len(flows)} flows, more than {MAX_FLOWS}')
    rails = _field(spec, 'rails', list, path, [[None, None]])
    if not 1 <= len(rails) <= MAX_RAILS:
        raise SpecError(f'{path}: field \'rails\' must hold 1 to {MAX_RAILS} rails, not {len(rails)}')
    for rail in rails:
        if not (isinstance(rail, list) and len(rail) == 2 and isinstance(rail[0], (str, type(None)))
                and isinstance(rail[1], (int, type(None)))):
            raise SpecError(f'{path}: each of \'rails\' must be [device, port], not {rail!r}')
    nodes = _field(spec, 'nodes', int, path, None)
    if nodes is not None and not 1 <= nodes <= MAX_NODES:
        raise SpecError(f'{path}: field \'nodes\' must be 1 to {MAX_NODES}, not {nodes}')
    ids = set()
    for flow in flows:
        where = f'{path}: flow {flow.get("id") if isinstance(flow, dict) else flow!r}'
        if not isinstance(flow, dict) or not isinstance(flow.get('id'), int) or flow['id'] in ids:
            raise SpecError(f'{where}: a flow needs a unique integer \'id\'')
        ids.add(flow['id'])
        if not 1 <= _field(flow, 'port', int, where) <= 65535:
            raise SpecError(f'{where}: \'port\' must be 1 to 65535, not {flow["port"]}')
        for side in ('server', 'client'):
            end = _field(flow, side, dict, where)
            if not isinstance(end.get('node'), int) or isinstance(end['node'], bool) \
                    or not 0 <= end['node'] < MAX_NODES:
                raise SpecError(f'{where}: {side} needs a node index \'node\' (0 to {MAX_NODES - 1})')
            if not isinstance(end.get('rail', 0), int) or not 0 <= end.get('rail', 0) < len(rails):
                raise SpecError(f'{where}: {side} rail {end.get("rail")!r} is not an index of \'rails\'')
            if 'argv' in end and not (isinstance(end['argv'], list) and end['argv']
                                      and all(isinstance(a, str) for a in end['argv'])):
                raise SpecError(f'{where}: {side} \'argv\' must be a non-empty list of strings')
            if end.get('gpu', 'near') not in GPU_CHOICES:
                raise SpecError(f'{where}: {side} \'gpu\' must be one of {", ".join(GPU_CHOICES)}, not {end["gpu"]!r}')
            count = end.get('processes', 1)
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_PROCESSES:
                raise SpecError(f'{where}: {side} \'processes\' must be 1 to {MAX_PROCESSES}, not {count!r}')
    used = {f[side]['node'] for f in flows for side in ('server', 'client')}
    spec['nodes'] = nodes if nodes is not None else max(used) + 1
    if max(used) >= spec['nodes']:
        raise SpecError(f'{path}: a flow names node {max(used)}, but \'nodes\' is {spec["nodes"]}')
    if not isinstance(spec.get('program'), str) and not all('argv' in f[s] for f in flows
                                                            for s in ('server', 'client')):
        raise SpecError(f'{path}: missing field \'program\' (or an "argv" for every side)')
    _field(spec, 'options', list, path, [])
    sizes = _field(spec, 'sizes', (list, type(None)), path, None)
    if sizes is not None and (not 1 <= len(sizes) <= 64 or not all(isinstance(s, int) and 0 < s <= 1 << 40
                                                                   for s in sizes)):
        raise SpecError(f'{path}: field \'sizes\' must be a list of 1 to 64 sizes from 1 to 2^40 bytes, or null')
    for key, default in (('timeout', 600), ('connect_timeout', 60)):
        value = _field(spec, key, (int, float), path, default)
        if value <= 0:
            raise SpecError(f'{path}: field {key!r} must be positive')
    _field(spec, 'sysfs', str, path, '/sys')
    if _field(spec, 'gpu_vendor', str, path, 'NVIDIA') not in GPU_VENDOR_NAMES:
        raise SpecError(f'{path}: field \'gpu_vendor\' must be one of {", ".join(GPU_VENDOR_NAMES)}')
    if any('gpu' in f[side] and 'argv' not in f[side] for f in flows for side in ('server', 'client')):
        options = _field(spec, 'gpu_options', list, path)
        if not options or not all(isinstance(o, str) for o in options) or not any('{gpu}' in o for o in options):
            raise SpecError(f'{path}: field \'gpu_options\' must be a list of strings, one with {{gpu}} (the GPU\'s '
                            'PCI address), when a side uses GPU memory')
    node_exec = _field(spec, 'node_exec', (list, type(None)), path, None)
    if node_exec is not None and not all(isinstance(a, str) for a in node_exec):
        raise SpecError(f'{path}: field \'node_exec\' must be a list of strings')
    spec.setdefault('options', [])
    spec.setdefault('rails', rails)
    spec.setdefault('sizes', None)
    spec.setdefault('timeout', 600)
    spec.setdefault('connect_timeout', 60)
    spec.setdefault('distinct_hosts', False)
    spec.setdefault('pin', True)
    spec.setdefault('cpu_sharing', False)
    spec.setdefault('sysfs', '/sys')
    spec.setdefault('python', 'python3')
    spec.setdefault('wait_listen', True)
    return spec


def load_spec(path):
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f'{path}: cannot read: {err}') from None
    except json.JSONDecodeError as err:
        raise SpecError(f'{path}: not JSON: {err}') from None
    return check_spec(spec, path)


def my_nodes(spec, env=os.environ):
    """Node indices this process plays: its rank, or all of them when it is the only task."""
    for rank_var, size_var in RANK_VARIABLES:
        value = env.get(rank_var, '').strip()
        if value:
            if not _COUNT.fullmatch(value):
                raise PairFailed(f'{rank_var}={value!r} is not a task rank (ASCII digits, 0 to {spec["nodes"] - 1}): '
                                 'the launcher\'s environment is broken')
            size = env.get(size_var, '').strip()
            if _COUNT.fullmatch(size) and int(size) == 1:
                break
            rank = int(value)
            if rank >= spec['nodes']:
                raise PairFailed(f'this task has rank {rank} ({rank_var}), but the flows span {spec["nodes"]} '
                                 'node(s): the launcher started more tasks than the check asked for')
            return [rank]

    return list(range(spec['nodes']))


# -- what a node has: rail addresses and CPUs near the device ----------------------------------------

def _read(path):
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cpulist(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus = []
    for part in (text or '').split(','):
        lo, _, hi = part.strip().partition('-')
        if lo.isdigit():
            cpus += range(int(lo), int(hi) + 1) if hi.isdigit() else [int(lo)]
    return cpus


def _ipv4_of_netdev(netdev):
    """The first IPv4 address of a network interface, or None (ioctl SIOCGIFADDR, then iproute2)."""
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack('256s', netdev.encode()[:15]))
            return socket.inet_ntoa(packed[20:24])
    except (ImportError, OSError):
        pass
    ip = shutil.which('ip')
    if ip:
        out = subprocess.run([ip, '-4', '-o', 'addr', 'show', 'dev', netdev], **_CAPTURE)
        m = re.search(r'\binet (\d+\.\d+\.\d+\.\d+)/', out.stdout)
        if m:
            return m.group(1)
    return None


#: A rail ``["netdev:<interface>", null]``: a TCP rail, the address of that network interface (no RDMA device).
NETDEV_RAIL = 'netdev:'


def rail_address(device, port, sysfs='/sys'):
    """The IPv4 address a peer reaches rail (device, port) at, and how it was found: (address, how).

    RoCE: the IPv4-mapped GID of type RoCE v2 (the address RDMA CM and the out-of-band exchange resolve to this
    port). InfiniBand: the address of the IPoIB interface of the same PCI function and port. ``netdev:<interface>``:
    that interface's address (TCP flows over a fabric without RDMA devices).
    """
    if not device:
        return None, 'no device named: the host name is used'
    if device.startswith(NETDEV_RAIL):     # a TCP rail named by its network interface (the fleet's TCP fabric)
        netdev = device[len(NETDEV_RAIL):]
        address = _ipv4_of_netdev(netdev) if re.fullmatch(r'[\w.-]{1,15}', netdev) else None
        return (address, f'network interface {netdev}') if address else \
            (None, f'network interface {netdev!r} has no IPv4 address')
    port_dir = Path(sysfs) / 'class' / 'infiniband' / device / 'ports' / str(port or 1)
    if not port_dir.is_dir():
        return None, f'{port_dir} does not exist'
    link_layer = _read(port_dir / 'link_layer')
    if link_layer == 'Ethernet':
        found = []
        gids = port_dir / 'gids'
        for entry in sorted((p for p in gids.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)) \
                if gids.is_dir() else []:
            m = _IPV4_MAPPED.match(_read(entry) or '')
            if m:
                kind = _read(port_dir / 'gid_attrs' / 'types' / entry.name) or ''
                address = socket.inet_ntoa(bytes.fromhex(m.group(1) + m.group(2)))
                found.append((0 if 'v2' in kind else 1, address, f'RoCE GID {entry.name} ({kind or "?"})'))
        if found:
            _, address, how = min(found)
            return address, how
        return None, f'{device} port {port} has no IPv4 GID (no IPv4 address on its network interface?)'
    net_dir = Path(sysfs) / 'class' / 'infiniband' / device / 'device' / 'net'
    for netdev in sorted(p.name for p in net_dir.iterdir()) if net_dir.is_dir() else []:
        dev_port = _read(net_dir / netdev / 'dev_port')
        if dev_port is not None and dev_port.isdigit() and int(dev_port) != int(port or 1) - 1:
            continue
        address = _ipv4_of_netdev(netdev)
        if address:
            return address, f'IPoIB interface {netdev}'
    return None, f'{device} port {port} has no IPoIB interface with an IPv4 address'


def near_cpus(device, allowed, sysfs='/sys'):
    """(CPUs of ``allowed`` local to ``device``'s PCI function, its NUMA node or None). The CPUs are None when the
    device's locality is unknown (no PCI function: soft-RoCE; no device named), [] when none of them is allowed."""
    dev = Path(sysfs) / 'class' / 'infiniband' / (device or '') / 'device'
    numa = _read(dev / 'numa_node') if device else None
    local = _cpulist(_read(dev / 'local_cpulist')) if device else []
    numa = int(numa) if numa is not None and numa.lstrip('-').isdigit() and int(numa) >= 0 else None
    return ([c for c in local if c in allowed] if local else None), numa


def memlock():
    """This process's locked-memory limit (``ulimit -l``) in bytes, 'unlimited', or None where it cannot be read:
    RDMA registers its buffers in locked memory, and Slurm passes the submitting shell's limit on to the job
    (PropagateResourceLimits)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    except (ImportError, OSError, ValueError):
        return None
    return 'unlimited' if soft == resource.RLIM_INFINITY else soft


def traffic_class(device, port, sysfs='/sys'):
    """What a RoCE port's default traffic class is set to (mlx5: ``tc/<port>/traffic_class``, e.g.
    ``Global tclass=106``; '' when unset), or None where the driver has no such file: a RoCE run's priority on
    a lossless (PFC) class decides whether it sees drops under load."""
    return _read(Path(sysfs) / 'class' / 'infiniband' / device / 'tc' / str(port or 1) / 'traffic_class') \
        if device else None


def _pcie_distance():
    """:mod:`ibrepro.pcie_distance`: the package's, or the copy beside this script in a stage directory (imported
    only for GPU sides, so a runner copied alone still runs every other case)."""
    try:
        from . import pcie_distance
    except ImportError:          # run as a script: no package
        import pcie_distance
    return pcie_distance


def probe(rails, sysfs='/sys', gpu_vendor=None):
    """What this node says about itself: host, allowed CPUs and per rail its address and near CPUs; with
    ``gpu_vendor``, per rail also that vendor's GPUs by their PCIe distance from the rail's device, nearest first."""
    try:
        allowed = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = set(range(os.cpu_count() or 1))
    devices = Path(sysfs) / 'class' / 'infiniband'
    # slurm_node: the node's name in Slurm (the topology's, the nodelist's), which need not be its hostname (FQDN)
    info = {'host': socket.gethostname(), 'slurm_node': os.environ.get('SLURMD_NODENAME') or None,
            'pid': os.getpid(), 'cpus': sorted(allowed), 'rails': [], 'memlock': memlock(),
            'devices': sorted(p.name for p in devices.iterdir()) if devices.is_dir() else []}
    for device, port in rails:
        address, how = rail_address(device, port, sysfs)
        cpus, numa = near_cpus(device, allowed, sysfs)
        port_dir = Path(sysfs) / 'class' / 'infiniband' / (device or '') / 'ports' / str(port or 1)
        info['rails'].append({'device': device, 'port': port, 'address': address, 'address_from': how,
                              'numa_node': numa, 'near_cpus': cpus,
                              'link_layer': _read(port_dir / 'link_layer') if device else None,
                              'traffic_class': traffic_class(device, port, sysfs),
                              'local_cpus': _read(Path(sysfs) / 'class' / 'infiniband' / (device or '') / 'device'
                                                  / 'local_cpulist') if device else None})
        if gpu_vendor:
            info['rails'][-1]['gpus'] = [{k: g[k] for k in ('address', 'distance')} for g in
                                         _pcie_distance().gpus_by_distance(device, sysfs, gpu_vendor)]
    return info


# -- the shared directory: what nodes say to each other ----------------------------------------------

def _write_json(path, data):
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(json.dumps(data))
    tmp.rename(path)     # atomic: a reader sees all of it or nothing


#: What a node may publish as its host name and as a rail's address (a name or an IPv4/IPv6 address).
_HOST = re.compile(r'[A-Za-z0-9][A-Za-z0-9.:_-]{0,254}')


def _read_json(path, what):
    """The JSON object in ``path``, or None when there is none; PairFailed naming the file for anything else (a
    symbolic link, which is not followed, binary data, not JSON, not an object)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PairFailed(f'{path} ({what}) is a symbolic link, not a file: not followed') from None
        if err.errno == errno.EISDIR:
            raise PairFailed(f'{path} ({what}) is a directory, not a file') from None
        return None
    with os.fdopen(fd, 'rb') as fp:
        if not stat.S_ISREG(os.fstat(fp.fileno()).st_mode):
            raise PairFailed(f'{path} ({what}) is not a regular file')
        blob = fp.read(1 << 20)
    try:
        data = json.loads(blob.decode('utf-8'))
    except UnicodeDecodeError:
        raise PairFailed(f'{path} ({what}) is binary data, not JSON text: written by something else?') from None
    except json.JSONDecodeError as err:
        raise PairFailed(f'{path} ({what}) is not JSON ({err}): written by something else?') from None
    if not isinstance(data, dict):
        raise PairFailed(f'{path} ({what}) is not a JSON object')
    return data


def run_id(spec_path):
    """What tells this job's rendezvous files from an earlier job's in the same directory: the spec file every node
    of the job reads (written anew for each job: its inode, size and modification time)."""
    info = os.stat(spec_path)
    return f'{info.st_ino}-{info.st_size}-{info.st_mtime_ns}'


class Rendezvous:
    """Files in the work directory through which the nodes of one job find and wait for each other. Each carries
    the job's ``run`` id: a file an earlier job left behind is not this job's (not yet there, never a failure)."""

    def __init__(self, workdir, nodes, deadline, run=''):
        self.dir = Path(workdir)
        self.nodes = nodes
        self.deadline = deadline
        self.run = run

    def _mine(self, name, what=None):
        node = re.search(r'(\d+)\.json$', name)
        what = what or (f'what node {node.group(1)} published' if name.startswith('node-') and node
                        else 'a failure report' if name.startswith('failed-') else 'a ready mark of a node')
        data = _read_json(self.dir / name, what)
        return data if data is not None and data.get('run') == self.run else None

    def publish(self, node, info):
        _write_json(self.dir / f'node-{node}.json', {**info, 'run': self.run})

    def ready(self, name):
        _write_json(self.dir / name, {'run': self.run})

    def fail(self, node, reason):
        path = self.dir / f'failed-{node}.json'
        try:
            first = self._mine(path.name)
        except PairFailed:
            first = None       # garbage where the marker goes: replaced by this one
        if not first:
            _write_json(path, {'node': node, 'host': socket.gethostname(), 'reason': reason,
                               'time': time.time(), 'run': self.run})

    def failure(self):
        """The reason of the first node that failed, or None."""
        for node in range(self.nodes):
            data = self._mine(f'failed-{node}.json')
            if data:
                return f'node {node} ({data.get("host", "?")}) failed: {data.get("reason", "?")}'
        return None

    def wait(self, names, what, limit=None):
        """Wait until this job's files ``names`` exist; PairFailed when a node fails or at the deadline."""
        deadline = min(self.deadline, time.monotonic() + limit) if limit else self.deadline
        missing = list(names)
        while True:
            missing = [n for n in missing if not self._mine(n)]
            if not missing:
                return
            failure = self.failure()
            if failure:
                raise PairFailed(failure)
            if time.monotonic() > deadline:
                raise PairFailed(f'{what}: no {", ".join(missing)} after '
                                 f'{limit or "the whole time limit of"} s')
            time.sleep(POLL)

    def node_info(self, node):
        path = self.dir / f'node-{node}.json'
        info = self._mine(path.name)
        problem = _info_problem(info)
        if problem:
            raise PairFailed(f'{path}: {problem} in what node {node} published')
        return info


def _info_problem(info):
    """What makes a node's published information unusable (a number where an address goes), or None."""
    if not info or not isinstance(info.get('host'), str) or not _HOST.fullmatch(info['host']) \
            or not isinstance(info.get('rails'), list):
        return 'no host and rails'
    if not isinstance(info.get('cpus'), list) or not all(type(c) is int for c in info['cpus']):
        return 'cpus is not a list of CPU numbers'
    for i, rail in enumerate(info['rails']):
        if not isinstance(rail, dict):
            return f'rail {i} is not an object'
        address = rail.get('address')
        if address is not None and not (isinstance(address, str) and _HOST.fullmatch(address)):
            return f'rail {i} address {address!r:.60} is not a host name or IP address'
        near = rail.get('near_cpus')
        if near is not None and (not isinstance(near, list) or not all(type(c) is int for c in near)):
            # None: the device's locality is unknown (no PCI function: soft-RoCE, no device named)
            return f'rail {i} near_cpus is not a list of CPU numbers'
        gpus = rail.get('gpus', [])
        if not isinstance(gpus, list):
            return f'rail {i} gpus is not a list of PCI addresses and PCIe distances'
        # the peer's words are checked before they go into a command line, by the distance rule's own vocabulary
        distance = _pcie_distance() if gpus else None
        if gpus and not all(isinstance(g, dict) and isinstance(g.get('address'), str)
                            and distance.BDF.fullmatch(g['address']) and g.get('distance') in distance.ALL_DISTANCES
                            for g in gpus):
            return f'rail {i} gpus is not a list of PCI addresses and PCIe distances'
    return None


# -- running the sides -------------------------------------------------------------------------------

def _listening_ports():
    ports = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == '0A':      # TCP_LISTEN
                ports.add(int(fields[1].rsplit(':', 1)[1], 16))
    return ports


class Runner:
    def __init__(self, spec, workdir='.', nodes=None, log=print, script=None, run=None):
        self.spec = spec
        self.workdir = Path(workdir).resolve()
        _check_workdir(self.workdir)
        self.log = log
        if nodes is not None and not all(isinstance(n, int) and 0 <= n < spec['nodes'] for n in nodes):
            raise PairFailed(f'--nodes {" ".join(map(str, nodes))}: node indices are 0 to {spec["nodes"] - 1}')
        self.nodes = my_nodes(spec) if nodes is None else nodes
        self.deadline = time.monotonic() + float(spec['timeout'])
        # one process playing every node needs no id shared with others; several get it from their spec file
        self.rdv = Rendezvous(self.workdir, spec['nodes'], self.deadline,
                              run or f'{socket.gethostname()}-{os.getpid()}-{time.time()}')
        self.script = script or os.path.abspath(__file__)
        self.info = {}         # node -> what it published
        self.procs = {}        # (flow id, side) -> (Popen, output file, status dict)
        self.failed = False
        self.retry_until = None    # clients that cannot connect retry until then (set when they start)

    # which node does what
    def _flows(self, side):
        return [f for f in self.spec['flows'] if f[side]['node'] in self.nodes]

    def _exec_prefix(self, node):
        return [a.replace('{node}', str(node)) for a in self.spec.get('node_exec') or []]

    def _python(self):
        return self.spec['python'] if self.spec.get('node_exec') else sys.executable

    def _gpu_vendor(self):
        """The vendor of the GPUs the sides use, or None when every side is in host memory."""
        uses = any('gpu' in f[side] for f in self.spec['flows'] for side in ('server', 'client'))
        return self.spec.get('gpu_vendor', 'NVIDIA') if uses else None

    def probe_nodes(self):
        for node in self.nodes:
            if self.spec.get('node_exec'):
                cmd = self._exec_prefix(node) + [self._python(), self.script, '--probe', json.dumps(self.spec['rails'])]
                cmd += ['--probe-gpus', self._gpu_vendor()] if self._gpu_vendor() else []
                out = subprocess.run(cmd, cwd=self.workdir, **_CAPTURE,
                                     timeout=max(5.0, self._left()))
                try:
                    info = json.loads(out.stdout)
                except json.JSONDecodeError:
                    raise PairFailed(f'probing node {node} ({_join(cmd)}) failed with {out.returncode}: '
                                     f'{(out.stderr or out.stdout).strip()[-300:]}') from None
            else:
                info = probe(self.spec['rails'], self.spec['sysfs'], self._gpu_vendor())
            info['node'] = node
            missing = sorted({r['device'] for r in info['rails'] if r['device']
                              and not r['device'].startswith(NETDEV_RAIL)} - set(info.get('devices', [])))
            missing += [f"{r['device']} ({r['address_from']})" for r in info['rails']
                        if (r['device'] or '').startswith(NETDEV_RAIL) and not r['address']]
            if missing:    # before anything starts: perftest would only say so once its peer waits for it
                raise PairFailed(f'node {node} on {info["host"]}: RDMA device {", ".join(missing)} not found (it has: '
                                 f'{", ".join(info.get("devices", [])) or "none, no /sys/class/infiniband"}); the '
                                 "partition's extras rdma_devices name the devices of its nodes")
            self.rdv.publish(node, info)
            self.info[node] = info
            self.log(f'node {node} on {info["host"]}: ' + ', '.join(
                f'{r["device"] or "default device"}:{r["port"] or 1} {r["address"] or "(host name)"}'
                for r in info['rails']))

    def check_placement(self):
        nodes = range(self.spec['nodes'])
        self.rdv.wait([f'node-{n}.json' for n in nodes], 'waiting for the other nodes to start',
                      self.spec['connect_timeout'])
        for node in nodes:
            self.info[node] = self.rdv.node_info(node)
        if self.spec['distinct_hosts'] and not self.spec.get('node_exec'):
            hosts = {}
            for node in nodes:
                hosts.setdefault(self.info[node]['host'], []).append(node)
            shared = {h: n for h, n in hosts.items() if len(n) > 1}
            if shared:
                host, which = next(iter(shared.items()))
                raise PairFailed(f'nodes {" and ".join(map(str, which))} both run on host {host}, but the layout '
                                 'puts each on its own host (launcher: one task per node, e.g. srun '
                                 '--ntasks-per-node=1)')

    def _address(self, node, rail):
        info = self.info[node]
        try:
            return info['rails'][rail]['address'] or info['host']
        except (IndexError, KeyError, TypeError):
            raise PairFailed(f'node {node} published no rail {rail}') from None

    def _rails(self, node):
        return ','.join(r.get('address') or self.info[node]['host'] for r in self.info[node]['rails'])

    def side_command(self, flow, side, size=None):
        end = flow[side]
        gpu = self.gpu_for(flow, side)
        if 'argv' in end:
            values = {'{server_addr}': self._address(flow['server']['node'], flow['server'].get('rail', 0)),
                      '{server_rails}': self._rails(flow['server']['node']),
                      '{client_rails}': self._rails(flow['client']['node']), '{size}': str(size or ''),
                      '{gpu}': gpu['address'] if gpu else ''}
            cmd = list(end['argv'])
            for key, value in values.items():
                cmd = [arg.replace(key, value) for arg in cmd]
            return [_ADDR.sub(lambda m: self._address(int(m.group(1)), int(m.group(2))), arg) for arg in cmd]

        device, port = self.spec['rails'][end.get('rail', 0)]
        cmd = [self.spec['program'], *self.spec['options']]
        if device:
            cmd += ['-d', device]
        if port:
            cmd += ['-i', str(port)]
        cmd += ['-p', str(flow['port'])]
        if size:
            cmd += ['-s', str(size)]
        if gpu:
            cmd += [opt.replace('{gpu}', gpu['address']) for opt in self.spec['gpu_options']]
        if side == 'client':
            cmd.append(self._address(flow['server']['node'], flow['server'].get('rail', 0)))
        return cmd

    def gpu_for(self, flow, side):
        """The GPU whose memory a side uses (``{'address', 'distance', 'choice', 'nearest'}``: its PCI address, its
        PCIe distance from the side's HCA, near or far, and the nearest distance on the node), or None for host
        memory. PairFailed when the node has no such GPU."""
        end = flow[side]
        choice = end.get('gpu')
        if not choice:
            return None
        node, rail = end['node'], end.get('rail', 0)
        info = self.info[node]
        device = self.spec['rails'][rail][0] or 'the default device'
        gpus = (info['rails'][rail] if rail < len(info['rails']) else {}).get('gpus') or []
        distance = _pcie_distance()
        try:
            return distance.choose(gpus, choice, device)
        except distance.NoSuchGpu as err:
            raise PairFailed(f'flow {flow["id"]}: the {side} on node {node} ({info["host"]}) is to use the memory of '
                             f'the GPU {"nearest to" if choice == "near" else "farthest from"} {device}, but {err}') \
                from None

    def _cpus_for(self, flow, side, taken):
        """(CPUs, how) for a side of ``flow``: one CPU of its own near its rail's device per process of the side
        (``processes``), or None when the spec does not pin. PairFailed when the task may not use enough CPUs
        near the device: a measurement promised near the HCA is not made far from it (cpu_sharing: emulated nodes
        may reuse CPUs)."""
        if not self.spec['pin']:
            return None, 'not pinned (the spec says pin: false)'
        end = flow[side]
        node, rail, count = end['node'], end.get('rail', 0), end.get('processes', 1)
        info = self.info[node]
        rails = info['rails']
        where = rails[rail] if rail < len(rails) else {}
        device, numa, near = where.get('device') or 'the default device', where.get('numa_node'), where.get('near_cpus')
        if near is None:
            pool, how = info['cpus'], f'{device}: HCA NUMA node unknown (no PCI locality in sysfs): any CPU of the task'
        else:
            pool, how = near, f'near {device} (NUMA node {numa if numa is not None else "?"})'
        free = [c for c in pool if c not in taken]
        if len(free) < count and self.spec['cpu_sharing']:
            free, how = free + [c for c in pool if c in taken], how + '; shares CPUs (cpu_sharing: emulated nodes)'
        if len(free) < count:
            local = f'CPUs {where.get("local_cpus")} are local to it' if near is not None else 'its locality is unknown'
            raise PairFailed(
                f'flow {flow["id"]}: the {side} on node {node} ({info["host"]}) needs {count} CPU(s) of its own near '
                f'{device} ({local}), but this task may use only CPUs {_cpuset(info["cpus"])} and '
                f'{len(free)} of them are free: the launcher confined the runner (srun -c N implies --exact, a cpuset '
                'of N CPUs), or its job holds only these CPUs of the node (a job or allocation without whole nodes): '
                'give the job step the node\'s CPUs (srun --whole, in a job with whole nodes)')
        cpus = free[:count]
        taken.update(cpus)
        return cpus, how

    def pin_children(self):
        """Each process a multi-process side forked on its own CPU of the side's (in fork order): a child would
        inherit the side's mask and share CPUs with its siblings. Remote sides (node_exec) are not reachable."""
        if self.spec.get('node_exec'):
            return
        for proc, _, status in self.procs.values():
            cpus, pinned = status.get('cpus') or [], status.setdefault('process_cpus', {})
            if len(cpus) < 2 or len(pinned) >= len(cpus) or proc.poll() is not None:
                continue
            for child in _children(proc.pid):
                if str(child) in pinned or len(pinned) >= len(cpus):
                    continue
                try:
                    os.sched_setaffinity(child, {cpus[len(pinned)]})
                except OSError:
                    continue        # it has ended already
                pinned[str(child)] = cpus[len(pinned)]

    def _file(self, flow, side, size, suffix):
        tag = f'.s{size}' if size else ''
        return self.workdir / f'flow-{flow["id"]}{tag}.{side}.{suffix}'

    def _left(self):
        return max(0.0, self.deadline - time.monotonic())

    def start(self, flow, side, size, cpus, how=None):
        node = flow[side]['node']
        tool = self.side_command(flow, side, size)
        cmd = self._exec_prefix(node)
        if cpus is not None:
            # each process of the side on its own CPU: the side, then each process it forks (ibrepro_rdma -P N)
            cmd += [self._python(), self.script, '--pin', ','.join(map(str, cpus)), '--']
        cmd += tool
        out = open(self._file(flow, side, size, 'out'), 'w')
        out.write(f'# {side}: {_join(tool)}\n')
        out.flush()
        rails = self.info[node].get('rails') or []
        index = flow[side].get('rail', 0)
        rail = {k: v for k, v in (rails[index] if index < len(rails) else {}).items()
                if k in ('link_layer', 'traffic_class') and isinstance(v, str)}     # a peer's words: text only
        status = {'flow': flow['id'], 'side': side, 'node': node, 'host': self.info[node]['host'],
                  'device': self.spec['rails'][flow[side].get('rail', 0)][0], 'size': size,
                  'link_layer': rail.get('link_layer'), 'traffic_class': rail.get('traffic_class'),
                  'cpu': cpus[0] if cpus else None, 'cpus': cpus, 'binding': how, 'gpu': self.gpu_for(flow, side),
                  'memlock': self.info[node].get('memlock'),
                  'command': tool, 'start': time.time(), 'end': None, 'returncode': None}
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                                    start_new_session=True)
        except OSError as err:
            out.close()
            raise PairFailed(f'flow {flow["id"]}: cannot start the {side} ({_join(cmd)}): {err}') from None
        self.procs[(flow['id'], side)] = (proc, out, status)
        self.log(f'flow {flow["id"]}: {side} started on {status["host"]}' + (f' cpu {_cpuset(cpus)}' if cpus
                                                                             else '') + f': {_join(tool)}')
        return proc

    def start_servers(self, round_, size, taken):
        flows = self._flows('server')
        for flow in flows:
            self.start(flow, 'server', size, *self._cpus_for(flow, 'server', taken))

        # Ready when listening on the TCP port of perftest's out-of-band exchange. rdma_cm servers listen
        # through the CM, remote ones (node_exec) in another kernel: those get a moment to fail early, and their
        # clients retry until the server answers.
        cm = '-R' in self.spec['options'] or '--rdma_cm' in self.spec['options']
        watch = self.spec['wait_listen'] and not cm and not self.spec.get('node_exec')
        waiting = {f['port'] for f in flows} if watch else set()
        ready_by = time.monotonic() + (30.0 if watch else 1.0)
        while True:
            waiting -= _listening_ports()
            for flow in flows:
                self._server_alive(flow, size)
            self.pin_children()
            failure = self.rdv.failure()
            if failure:
                raise PairFailed(failure)
            if (watch and not waiting) or time.monotonic() > min(ready_by, self.deadline):
                return      # listening, or not seen listening in time: the clients retry
            time.sleep(POLL)

    def _tail(self, flow, side, size):
        try:
            lines = self._file(flow, side, size, 'out').read_text(errors='replace').splitlines()[1:]
        except OSError:
            return '(no output)'
        text = ' | '.join(line.strip() for line in lines if line.strip() and not line.startswith('#'))
        return text[-400:] or '(no output)'

    def _finish(self, flow, side, returncode):
        proc, out, status = self.procs[(flow['id'], side)]
        status['end'] = status['end'] or time.time()
        status['returncode'] = returncode
        if not out.closed:
            out.close()
        _write_json(self._file(flow, side, status['size'], 'status.json'), status)

    def run_clients(self, size, taken):
        flows = self._flows('client')
        # every server listens (or was given its moment): a client that still cannot connect retries this long
        self.retry_until = time.monotonic() + float(self.spec['connect_timeout'])
        for flow in flows:
            self.start(flow, 'client', size, *self._cpus_for(flow, 'client', taken))
        for flow in flows:
            self._wait(flow, 'client', size, retry=True)

    def _wait(self, flow, side, size, retry=False):
        while True:
            proc, out, status = self.procs[(flow['id'], side)]
            while proc.poll() is None:
                self.pin_children()
                failure = self.rdv.failure()
                if failure:
                    raise PairFailed(failure)
                if not self._left():
                    out.write(f'\n# ibrepro pair: {side} killed after the {self.spec["timeout"]} s time limit\n')
                    self._kill(proc)
                    self._finish(flow, side, 'timeout')
                    raise PairFailed(f'flow {flow["id"]}: {side} on {status["host"]} still running after the '
                                     f'{self.spec["timeout"]} s time limit')
                time.sleep(POLL * 5)
            status['end'] = time.time()
            rc = proc.returncode
            text = self._file(flow, side, size, 'out').read_text(errors='replace')
            if retry and rc and any(s in text for s in _NOT_READY):
                self._server_alive(flow, size)
                if self._left() <= 1 or time.monotonic() > self.retry_until:
                    self._finish(flow, side, rc)
                    raise PairFailed(self._unreachable(flow, size))
                time.sleep(0.5)   # the server is not listening yet: start the client again
                out.close()
                self.start(flow, side, size, status['cpus'], status['binding'])
                continue
            self._finish(flow, side, rc)
            if rc:
                raise PairFailed(f'flow {flow["id"]}: {side} on {status["host"]} exited with {rc}: '
                                 f'{self._tail(flow, side, size)}')
            self._check_pinned(flow, side, status)
            return

    def _check_pinned(self, flow, side, status):
        """PairFailed when a side's forked processes did not each get their own CPU (its status says which did)."""
        count = flow[side].get('processes', 1)
        if count > 1 and status.get('cpus') and not self.spec.get('node_exec') \
                and len(status.get('process_cpus') or {}) < count:
            raise PairFailed(f'flow {flow["id"]}: the {side} on {status["host"]} was to fork {count} processes, each '
                             f'on its own CPU of {_cpuset(status["cpus"])}, but only '
                             f'{len(status.get("process_cpus") or {})} were seen and pinned')

    def _unreachable(self, flow, size):
        """Why a client gave up: the address and rail it could not reach (a firewall, a wrong route, a rail down)."""
        server = flow['server']
        rail = server.get('rail', 0)
        device, port = self.spec['rails'][rail]
        address = self._address(server['node'], rail)
        client = self.procs[(flow['id'], 'client')][2]['host']
        return (f'flow {flow["id"]}: client on {client} could not connect to its server at {address} port '
                f'{flow["port"]} (node {server["node"]}, rail {rail}: {device or "default device"} port {port or 1}) '
                f'for {self.spec["connect_timeout"]} s after every server was started: '
                f'{self._tail(flow, "client", size)}')

    def _server_alive(self, flow, size):
        """PairFailed if the flow's server, when this runner started it, has ended (before its clients start, or
        while they retry: they would retry for nothing until the time limit; a remote server's runner reports its
        own failure to the peers)."""
        server = self.procs.get((flow['id'], 'server'))
        if server and server[0].poll() is not None:
            proc, _, status = server
            self._finish(flow, 'server', proc.returncode)
            raise PairFailed(f'flow {flow["id"]}: server on {status["host"]} exited with {proc.returncode} '
                             f'before a client connected: {self._tail(flow, "server", size)}')

    def wait_servers(self, size):
        for flow in self._flows('server'):
            self._wait(flow, 'server', size)

    @staticmethod
    def _kill(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()

    def stop_all(self):
        """Kill what still runs (after an error); their status says so."""
        for (flow_id, side), (proc, out, status) in list(self.procs.items()):
            if proc.poll() is None:
                self._kill(proc)
                flow = next(f for f in self.spec['flows'] if f['id'] == flow_id)
                self._finish(flow, side, 'killed')
            elif status['returncode'] is None:
                flow = next(f for f in self.spec['flows'] if f['id'] == flow_id)
                self._finish(flow, side, proc.returncode)

    def run(self):
        program = self.spec.get('program') or self.spec['flows'][0]['server']['argv'][0]
        if not self.spec.get('node_exec') and not shutil.which(program):
            raise PairFailed(f'{program!r} not found on PATH of {socket.gethostname()} (install it, or load the '
                             'module / Spack view that provides it)')
        self.probe_nodes()
        self.check_placement()
        sizes = self.spec['sizes'] or [None]
        for round_, size in enumerate(sizes):
            taken = set()
            self.procs = {}
            self.start_servers(round_, size, taken)
            for node in self.nodes:
                self.rdv.ready(f'ready-r{round_}-n{node}')
            # every node's servers listen: start every client at once
            self.rdv.wait([f'ready-r{round_}-n{n}' for n in range(self.spec['nodes'])],
                          f'round {round_}: waiting for the other nodes\' servers')
            self.run_clients(size, taken)
            self.wait_servers(size)
            failure = self.rdv.failure()       # a peer may have failed while this node's sides ended cleanly
            if failure:
                raise PairFailed(failure)


def _check_workdir(workdir):
    """PairFailed unless ``workdir`` is a directory of ours that no other user may write: another user's files there
    (a planted rendezvous or failure marker) would steer this job."""
    try:
        info = os.stat(workdir)
    except OSError as err:
        raise PairFailed(f'work directory {workdir}: {err.strerror} (--workdir: the directory the nodes of the '
                         'job share, e.g. its stage directory)') from None
    if not stat.S_ISDIR(info.st_mode):
        raise PairFailed(f'work directory {workdir} is not a directory')
    if info.st_uid != os.geteuid() or info.st_mode & 0o002:
        raise PairFailed(f'work directory {workdir} is shared (owned by uid {info.st_uid}, mode '
                         f'{stat.S_IMODE(info.st_mode):o}): use a directory of yours that others cannot write')


def run(spec, workdir='.', nodes=None, log=print, run_id=None):
    """Run this node's share of the flows; return 0 if all its processes succeeded."""
    # the handler comes first: a peer that fails at once (both ends lack the device) has srun stop this end while
    # it may still be setting up, and this end's marker must still say why it stopped
    previous = signal.signal(signal.SIGTERM, _terminated)
    runner = None
    try:
        runner = Runner(spec, workdir, nodes, log, run=run_id)
        runner.run()
        return 0
    except (PairFailed, _Terminated) as err:
        # a stop that lands while the reason is written (this end failed as srun stopped it) would lose the reason
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        reason = str(err)
        if runner is None and isinstance(err, PairFailed):
            log(f'ibrepro pair: {reason}')      # no usable work directory: nowhere to leave a marker
            return 2
        rdv = runner.rdv if runner else _rendezvous_or_none(spec, workdir, run_id)
        if isinstance(err, _Terminated) and rdv:
            # killed because a peer failed (srun --kill-on-bad-exit): its marker is written before it exits
            peer, until = None, time.monotonic() + 2
            while not peer and time.monotonic() < until:
                peer = rdv.failure()
                time.sleep(POLL)
            reason += f'; {peer}' if peer else ''
        log(f'ibrepro pair: {reason}')
        for node in (runner.nodes if runner else _nodes_or_none(spec, nodes) if rdv else []):
            rdv.fail(node, reason)
        return 127 if 'not found on PATH' in str(err) else 1
    finally:
        if runner:
            runner.stop_all()
        signal.signal(signal.SIGTERM, previous)


def _rendezvous_or_none(spec, workdir, run_id):
    """The job's rendezvous for a marker written before this end's runner existed; None where the work directory
    is not one this job may write (the runner would have refused it)."""
    try:
        _check_workdir(Path(workdir).resolve())
    except PairFailed:
        return None
    return Rendezvous(workdir, spec['nodes'], time.monotonic(), run_id or '')


def _nodes_or_none(spec, nodes):
    """The nodes this process plays, for a marker written before its runner existed ([] when that is unknown)."""
    try:
        return my_nodes(spec) if nodes is None else nodes
    except (PairFailed, SpecError, KeyError, ValueError):
        return []


class _Terminated(Exception):
    pass


def _terminated(signum, frame):
    raise _Terminated(f'terminated by signal {signum} (the job was cancelled, or a peer failed and the '
                      'launcher stopped the job)')


def _cpuset(cpus):
    return ','.join(map(str, cpus)) if cpus else '(none)'


def _children(pid):
    """The process ids of ``pid``'s children (/proc; [] when it has ended)."""
    text = _read(f'/proc/{pid}/task/{pid}/children')
    if text is not None:
        return [int(c) for c in text.split()]
    found = []
    for entry in Path('/proc').iterdir() if Path('/proc').is_dir() else []:
        stat = _read(entry / 'stat') if entry.name.isdigit() else None
        if stat and stat.rpartition(')')[2].split()[1:2] == [str(pid)]:
            found.append(int(entry.name))
    return found


def pin_and_exec(cpus, argv):
    """``--pin CPU[,CPU...] -- cmd``: run ``cmd`` bound to these CPUs, saying so on the first line of its output
    (the runner gives each process it forks one of them: :meth:`Runner.pin_children`)."""
    try:
        os.sched_setaffinity(0, set(cpus))
        print(f'# ibrepro pair: pinned to cpu {_cpuset(cpus)} on {socket.gethostname()}', flush=True)
    except (AttributeError, OSError) as err:
        # the side's status says these CPUs: it does not run anywhere else
        print(f'ibrepro pair: could not pin to cpu {_cpuset(cpus)}: {err}', flush=True)
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        print(f'ibrepro pair: cannot run {argv[0]!r}: {err.strerror}', flush=True)
        return 127


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--pin']:         # --pin CPU -- command...: kept out of argparse, which would eat the command
        if len(argv) < 4 or argv[2] != '--' or not all(c.isdigit() for c in argv[1].split(',')):
            print('ibrepro pair: usage: --pin CPU[,CPU...] -- command [args...]', file=sys.stderr)
            return 2
        return pin_and_exec([int(c) for c in argv[1].split(',')], argv[3:])
    parser = argparse.ArgumentParser(prog='ibrepro pair', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return cli(parser.parse_args(argv))


def add_arguments(parser):
    parser.add_argument('spec', nargs='?', help='JSON spec of the flows')
    parser.add_argument('--workdir', default='.', help='rendezvous and output directory (shared by the nodes)')
    parser.add_argument('--nodes', type=int, nargs='+', help='node indices to play (default: from the rank)')
    parser.add_argument('--probe', metavar='RAILS', help='print what this node has for RAILS (JSON list of '
                        '[device, port]) and exit')
    parser.add_argument('--probe-gpus', metavar='VENDOR', choices=GPU_VENDOR_NAMES,
                        help='with --probe: also the GPUs of VENDOR by their PCIe distance from each rail\'s device')


def cli(args):
    if args.probe:
        try:
            rails = json.loads(args.probe)
        except json.JSONDecodeError as err:
            print(f'ibrepro pair: --probe: not JSON: {err}', file=sys.stderr)
            return 2
        print(json.dumps(probe(rails, gpu_vendor=args.probe_gpus)))
        return 0
    if not args.spec:
        print('ibrepro pair: a spec file is needed', file=sys.stderr)
        return 2
    try:
        spec = load_spec(args.spec)
    except SpecError as err:
        print(f'ibrepro pair: {err}', file=sys.stderr)
        return 2
    return run(spec, args.workdir, args.nodes, log=lambda msg: print(msg, flush=True), run_id=run_id(args.spec))


def add_cli(subparsers):
    p = subparsers.add_parser('pair', help='run perftest client/server flows of a job (used by the checks)',
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=cli)


if __name__ == '__main__':
    sys.exit(main())
