"""How far apart two PCI devices are on a node's PCI Express tree, as ``nvidia-smi topo -m`` says it: the one home
of that rule, for :mod:`ibrepro.topology` (what a node has), for the pair runner on the compute nodes (which GPU a
GPUDirect RDMA side uses: the nearest to its HCA, or the farthest), and for an MPI rank that uses GPU memory.

The standard library only, and any Python >= 3.6: the checks copy this file into the stage directory as
``pcie_distance.py``, so compute nodes need no ibrepro installation. Run as a script it starts a program in the
memory of the GPU at a distance from an HCA (an MPI rank of ``osu_bw -d cuda``)::

    python3 pcie_distance.py --device mlx5_0 --gpu near -- osu_bw -d cuda D D

It makes that GPU the program's only CUDA device (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``CUDA_VISIBLE_DEVICES`` its
index among the node's NVIDIA GPUs in bus order), says on stderr which GPU at which distance, and fails (exit 3,
nothing run) where the node has no such GPU or the job does not hold all of the node's GPUs (an index in PCI order
then names another GPU).
"""

import argparse
import itertools
import os
import re
import socket
import sys
from pathlib import Path

#: A PCI function's sysfs name: domain:bus:device.function.
BDF = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')

#: PCIe distances between two devices, nearest first, as ``nvidia-smi topo -m`` names them: PIX (through one PCIe
#: switch), PXB (several switches, no host bridge), PHB (through the CPU's host bridge), NODE (across host bridges
#: of one NUMA node), SYS (across the socket interconnect).
DISTANCES = ('X', 'PIX', 'PXB', 'PHB', 'NODE', 'SYS')
#: Every distance :func:`pci_distance` gives: 'NODE or SYS' where a NUMA node is unknown.
ALL_DISTANCES = DISTANCES + ('NODE or SYS',)

#: PCI vendors whose display and 3D controllers are GPUs (NVIDIA, AMD).
GPU_VENDORS = {'0x10de': 'NVIDIA', '0x1002': 'AMD'}
#: PCI class codes of a GPU: VGA (0x0300xx) and 3D controllers (0x0302xx: data-centre GPUs).
GPU_CLASSES = ('0x0300', '0x0302')


def _read(path):
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def pci_function(path):
    """The PCI function directory at or above ``path`` (a device link, resolved here), or None."""
    try:
        path = Path(path).resolve(strict=True)
    except OSError:
        return None
    for p in [path] + list(path.parents):
        if BDF.match(p.name):
            return p
    return None


def bridges(function):
    """``function`` and the PCI functions above it up to its root port, nearest first."""
    return [function] + list(itertools.takewhile(lambda p: BDF.match(p.name), function.parents))


def numa_node(function):
    """The NUMA node sysfs gives a PCI function, or None (unknown, or -1: the platform does not say)."""
    value = _read(function / 'numa_node') if function is not None else None
    return int(value) if value is not None and value.lstrip('-').isdigit() and int(value) >= 0 else None


def _ancestry(function):
    """``([the function, the bridges above it up to its root port], the host bridge's name)``."""
    chain = bridges(function)
    return [p.name for p in chain], chain[-1].parent.name


def pci_distance(a, b, numa_a=None, numa_b=None):
    """The PCIe distance (:data:`DISTANCES`) between functions ``a`` and ``b`` (resolved sysfs directories), from
    the bridges their paths share: under one switch (the upstream port both paths cross) PIX, several PXB; under one
    host bridge PHB; else NODE or SYS by their NUMA nodes ('NODE or SYS' when one is unknown); None without both."""
    if a is None or b is None:
        return None
    (ca, ha), (cb, hb) = _ancestry(a), _ancestry(b)
    if ca[0] == cb[0]:
        return 'X'
    shared = [name for name in ca[1:] if name in cb[1:]]
    if ha == hb and shared:
        top = shared[0]                   # the lowest bridge both cross: a switch's upstream port
        # switches crossed: the upstream ports (every second function above a device, chain[2], chain[4], ...) below
        # the shared one on each side, and the shared switch itself
        below = sum(1 for chain in (ca, cb) for i, name in enumerate(chain[:chain.index(top)]) if i >= 2 and i % 2 == 0)
        return 'PIX' if below == 0 else 'PXB'
    if ha == hb:
        return 'PHB'
    if numa_a is None or numa_b is None or numa_a < 0 or numa_b < 0:
        return ALL_DISTANCES[-1]
    return 'NODE' if numa_a == numa_b else 'SYS'


def rank(distance):
    """Nearest first (:data:`DISTANCES`); an unknown or partly known distance after the known ones."""
    return DISTANCES.index(distance) if distance in DISTANCES else len(DISTANCES)


def gpu_functions(sysfs='/sys'):
    """The GPUs under ``sysfs`` (``bus/pci/devices``: functions of a GPU vendor and class), by address:
    ``[{'function': resolved directory, 'vendor': its name, 'class': the class code}]``."""
    devices = Path(sysfs) / 'bus' / 'pci' / 'devices'
    found = []
    for link in sorted(devices.iterdir()) if devices.is_dir() else []:
        vendor, klass = _read(link / 'vendor'), _read(link / 'class') or ''
        if vendor in GPU_VENDORS and klass.startswith(GPU_CLASSES):
            function = pci_function(link)
            if function is not None:
                found.append({'function': function, 'vendor': GPU_VENDORS[vendor], 'class': klass})
    return found


def gpus_by_distance(device, sysfs='/sys', vendor=None):
    """The GPUs of this node by their PCIe distance from RDMA device ``device``, nearest first (then by address):
    ``[{'address', 'vendor', 'distance', 'numa_node'}]``; [] when the node has none (of ``vendor``), or when the
    device has no PCI function (soft-RoCE: no distance to measure)."""
    hca = pci_function(Path(sysfs) / 'class' / 'infiniband' / device / 'device') if device else None
    if hca is None:
        return []
    found = []
    for gpu in gpu_functions(sysfs):
        function = gpu['function']
        if vendor and gpu['vendor'] != vendor:
            continue
        found.append({'address': function.name, 'vendor': gpu['vendor'], 'numa_node': numa_node(function),
                      'distance': pci_distance(function, hca, numa_node(function), numa_node(hca))})
    return sorted(found, key=lambda g: (rank(g['distance']), g['address']))


class NoSuchGpu(LookupError):
    """The node has no GPU at the distance asked for (the message says what it has)."""


def choose(gpus, choice, device):
    """The GPU of ``gpus`` (nearest first, as :func:`gpus_by_distance` orders them) a side or a rank uses: the
    nearest (``near``) or the farthest (``far``) from ``device``; NoSuchGpu where there is none, or none farther
    than the nearest."""
    if not gpus:
        raise NoSuchGpu(f'the node shows no GPU near or far from {device} ({device} without a PCI function, e.g. '
                        'soft-RoCE, has no PCIe distance)')
    nearest, gpu = gpus[0], (gpus[0] if choice == 'near' else gpus[-1])
    if choice == 'far' and gpu['distance'] == nearest['distance']:
        raise NoSuchGpu(f'every GPU of the node is at the same distance from {device} ({nearest["distance"]}): there '
                        'is no far GPU to measure')
    return {'address': gpu['address'], 'distance': gpu['distance'], 'choice': choice,
            'nearest': nearest['distance']}


RANK_VARIABLES = ('SLURM_PROCID', 'OMPI_COMM_WORLD_RANK', 'PMIX_RANK', 'PMI_RANK')

#: What a rank says on stderr once it has its GPU (:func:`main`), as the check reads it back: host, rank, the GPU's
#: address, its distance, the device, near or far.
RANK_GPU = re.compile(r'^ibrepro gpu: (\S+) rank (\S+): GPU (\S+) at (.+?) from (\S+) \((near|far); nearest ')


def main(argv=None, environ=None):
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog='pcie_distance.py', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', required=True, help='the RDMA device the rank uses (its rail)')
    parser.add_argument('--gpu', required=True, choices=('near', 'far'), help='which GPU: nearest or farthest')
    parser.add_argument('--sysfs', default='/sys', help=argparse.SUPPRESS)
    parser.add_argument('command', nargs=argparse.REMAINDER, help='-- the program and its arguments')
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        parser.error('no program to run (after --)')
    rank = next((environ[v] for v in RANK_VARIABLES if environ.get(v)), '?')
    where = f'ibrepro gpu: {socket.gethostname()} rank {rank}'
    nvidia = sorted(g['function'].name for g in gpu_functions(args.sysfs) if g['vendor'] == 'NVIDIA')
    try:
        gpu = choose(gpus_by_distance(args.device, args.sysfs, 'NVIDIA'), args.gpu, args.device)
    except NoSuchGpu as err:
        print(f'{where}: no {args.gpu} GPU: {err}', file=sys.stderr, flush=True)
        return 3
    held = environ.get('CUDA_VISIBLE_DEVICES')
    if held is not None and len([d for d in held.split(',') if d.strip()]) != len(nvidia):
        print(f'{where}: the job holds {held!r} of the node\'s {len(nvidia)} GPUs (CUDA_VISIBLE_DEVICES): the '
              'GPU chosen by its distance may not be among them and its index in PCI order would name another: '
              f'ask for all of them (e.g. --gpus-per-node={len(nvidia)})', file=sys.stderr, flush=True)
        return 3
    index = nvidia.index(gpu['address'])
    print(f'{where}: GPU {gpu["address"]} at {gpu["distance"]} from {args.device} ({args.gpu}; nearest '
          f'{gpu["nearest"]}), CUDA device {index} of {len(nvidia)} in PCI order', file=sys.stderr, flush=True)
    env = dict(environ, CUDA_DEVICE_ORDER='PCI_BUS_ID', CUDA_VISIBLE_DEVICES=str(index))
    try:
        os.execvpe(command[0], command, env)
    except OSError as err:
        print(f'{where}: cannot run {command[0]!r}: {err.strerror}', file=sys.stderr, flush=True)
        return 127


if __name__ == '__main__':
    sys.exit(main())
