"""The papers' testbeds as SimGrid SMPI models: every parameter with where it comes from.

A node is a SimGrid host (the paper's CPUs as cores) with two links on its way out: the host bus (PCI, PCI-X:
one shared half-duplex resource; PCI Express: one resource per direction) at its theoretical rate from
:mod:`ibrepro.limits`, then the HCA and its InfiniBand port (one resource per direction) at the calibrated
one-way peak MPI bandwidth, carrying half the calibrated wire latency. The switch (InfiniScale, a full
wire-speed crossbar) adds no link: its latency is in the calibrated latency. Two ranks on one node talk
through a loopback link (MVAPICH's shared memory and HCA loopback, one path).

Parameters have a ``source``:

* ``calibrated``: fitted on one of the paper's numbers for this testbed, only the small-message MPI latency and
  the one-way peak MPI bandwidth (and, for 002's testbed, the intra-node pair of them that 002 states);
* ``stated``: a property of the testbed's MPI that the paper states (an input, never compared as a prediction);
* ``physical``: a theoretical limit (``ibrepro limits``) or a property of the hardware;
* ``assumed``: not stated for this testbed; the reason says what it is taken from;
* ``chosen``: a modelling decision (the collective algorithms of the papers' MPI, SMPI switches).

Everything the papers state beyond those calibration numbers is a prediction (:mod:`.table`).

The small-message latency decomposes as ``host overhead (sender + receiver) + 2 x HCA latency + (1 B + 16 B
envelope) / bandwidth``: SMPI 3.32 adds a 16-byte envelope to every message (src/smpi/mpi/smpi_request.cpp,
``size_ + 16``), and the papers' "small" latency is read at 1 byte, as :mod:`ibrepro.compare` reads it.
"""

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from xml.sax.saxutils import quoteattr

from .. import limits, paths, references

CALIBRATED, STATED, PHYSICAL, ASSUMED, CHOSEN = 'calibrated', 'stated', 'physical', 'assumed', 'chosen'
SOURCES = (CALIBRATED, STATED, PHYSICAL, ASSUMED, CHOSEN)

#: SMPI 3.32 sends every message with a 16-byte envelope (tag, destination, communicator).
ENVELOPE_BYTES = 16

#: The size the papers' "small-message latency" is read at (ibrepro.compare: the smallest non-zero size).
SMALL_MESSAGE = 1

#: Rendezvous (messages at or above the eager threshold): MVAPICH's RDMA rendezvous sends a request, waits for
#: the reply, then writes the data: three one-way latencies instead of one.
RENDEZVOUS_LATENCIES = 3

#: The papers' MPI is MVAPICH 0.9.x on MPICH 1.2.2 (002 Sec. 3: "MVAPICH 0.9.1 [15] with MPICH 1.2.2"; 000 names
#: no version) whose collectives are MPICH 1.2.2's src/coll/intra_fns.c, built on point-to-point messages ("collective
#: communication in MPI over InfiniBand is based on point-to-point communication", 002 Sec. 3.7). SMPI algorithm
#: per collective, and the MPICH 1.2.2 routine it stands for.
COLLECTIVES = {
    'alltoall': ('basic_linear', 'intra_Alltoall: every MPI_Irecv and MPI_Isend posted at once, then MPI_Waitall '
                                 '(SMPI posts the sends from rank-1 downwards, MPICH 1.2.2 from rank 0 up)'),
    'alltoallv': ('ompi_basic_linear', 'intra_Alltoallv: the same, in rank order (NAS IS)'),
    'bcast': ('binomial_tree', 'intra_Bcast: a binomial tree for every message size'),
    'allgather': ('ring', 'intra_Allgather: the "circular" algorithm, p-1 MPI_Sendrecv steps (SMPI exchanges with '
                          'rank+i and rank-i at step i: the same volume per step)'),
    'reduce': ('binomial', 'intra_Reduce: a binomial tree'),
    'allreduce': ('redbcast', 'intra_Allreduce: MPI_Reduce to rank 0, then MPI_Bcast'),
    'barrier': ('ompi_recursivedoubling', 'intra_Barrier: recursive doubling, ranks beyond a power of two folded in'),
}

#: SMPI switches every model sets, and why.
SWITCHES = {
    'smpi/simulate-computation': ('no', 'computation takes no simulated time: results do not depend on the load of '
                                        'the machine running the simulation (applications report communication '
                                        'time only)'),
    'smpi/host-speed': ('1Gf', 'required by SMPI; unused, computation is not simulated'),
    'smpi/bw-factor': ('0:1', 'the calibrated link bandwidth is the bandwidth at every size (no per-size '
                              'efficiency: the shape of the curves is a prediction)'),
    'network/crosstraffic': ('0', 'InfiniBand acknowledges in the link layer: a flow takes nothing from the '
                                  'opposite direction'),
    'network/weight-S': ('0', 'InfiniBand credit-based flow control shares a link equally among flows (no '
                              'TCP-like round-trip unfairness)'),
    'smpi/privatization': ('1', "SMPI's default: each rank its own copy of the program's globals"),
}


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One model parameter, its value and where it comes from."""

    name: str
    value: object
    unit: str
    source: str            # calibrated | stated | physical | assumed | chosen
    why: str
    entries: tuple = ()    # paper entries (reference-data) it is calibrated on or taken from

    def to_dict(self):
        return {'value': self.value, 'unit': self.unit, 'source': self.source, 'why': self.why,
                'entries': list(self.entries)}


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a testbed gets a quantity: the paper entries whose values (SI) sum to it, and how they apply."""

    entries: tuple         # summed (a value plus a stated increase, for instance)
    source: str
    why: str
    cites: tuple = ()      # entries that justify it without entering the value


@dataclasses.dataclass(frozen=True)
class Testbed:
    """A testbed of the papers, as the model sees it."""

    name: str                  # partition name
    descr: str
    configurations: tuple      # reference-data testbed configurations it models (entries' ``testbed``)
    nodes: int
    nodes_why: str
    cores_per_node: int
    bus: str                   # ibrepro.limits spec of the host bus
    link: str                  # ibrepro.limits spec of the InfiniBand port
    latency: Source            # one-way small-message MPI latency, us
    bandwidth: Source          # one-way peak MPI bandwidth, MB/s
    eager: Source              # eager threshold, bytes
    overhead: Source           # host overhead per message, sender + receiver, us
    intra_latency: Source      # intra-node small-message latency, us
    intra_bandwidth: Source    # intra-node peak bandwidth, MB/s
    mpi: str
    features: tuple = ()


def _src(*entries, source=CALIBRATED, why='', cites=()):
    return Source(tuple(entries), source, why, tuple(cites))


#: 002 Fig. 3: MVAPICH 0.9.1's host overhead on PCI-X Xeons, the only measured split of the latency into host
#: and wire; 000 states none, on nodes of the same generation and MPI.
_OVERHEAD_002 = _src('002-fig3-overhead-ib', source=ASSUMED,
                     why="002 Fig. 3: MVAPICH's host overhead (sender + receiver) on 2003 Xeons with an InfiniHost on "
                         "PCI-X; 000 states none for its nodes of the same generation and MPI")
_INTRA_LAT_002 = _src('002-fig9-intra-lat-ib', source=ASSUMED,
                      why="002 Fig. 9: MVAPICH's intra-node latency on the same generation of dual-Xeon nodes; this "
                          "paper states none")
_INTRA_BW_002 = _src('002-fig10-intra-bw-ib', source=ASSUMED,
                     why="002 Fig. 10: MVAPICH's intra-node bandwidth (HCA loopback above 16 KB) on the same "
                         "generation of nodes; this paper states none")
_EAGER_000 = _src('000-fig13-mpi-dip', source=ASSUMED,
                  why='000 Sec. IV.C.1: the MPI bandwidth "drops around 8 KB ... because of both protocol switch in '
                      'MPI and our striping threshold": eager below 8 KB')
_NODES_000 = ('the paper\'s cluster has 4 nodes; modelled with 8 identical nodes on the same switch (an '
              'InfiniScale has 8 ports, 002 Sec. 2.1) so that 002\'s 8x1 layout runs on these adapters too')
_OVERHEAD_001 = _src('002-fig3-overhead-ib', '002-fig1-lat-ib', source=ASSUMED,
                     why='001 states no host overhead: the share of the latency that 002 measured as host overhead '
                         '(Fig. 3 / Fig. 1: 1.7 of 6.8 us), applied to this latency')
_EAGER_001 = _src('000-fig13-mpi-dip', source=ASSUMED,
                  why="001 states no eager threshold: 000's 8 KB (MVAPICH on the same HCA family)")
_LAT_PCIE2_001 = _src('001-fig2a-lat-qdr', why='001 Fig. 2(a): QDR-2.0, 1.06 us at 1 byte')
_LAT_PCIE1_001 = _src('001-fig2a-lat-qdr', '001-fig2a-lat-reduction-qdr-2.0',
                      why='001 Fig. 2(a): 1.06 us (QDR-2.0) plus the 0.2 us by which PCIe 2.0 lowers the latency of '
                          'the PCIe 1.1 configurations')

TESTBEDS = {t.name: t for t in [
    Testbed('pcie-sdr', '000/003: MT25208 InfiniHost III Ex on PCIe x8, one 4X SDR port, InfiniScale switch; MVAPICH',
            ('000-pcie-x8-mt25208', '003-pcie-x8-mt25208'), 8, _NODES_000, 2, 'pcie:gen1:x8', 'ib:sdr:4x',
            latency=_src('000-fig12-mpi-lat-pcie', why='000 Fig. 12: MPI latency "around 4.1 us" for small messages'),
            bandwidth=_src('000-fig13-mpi-uni-bw-pcie', why='000 Fig. 13: peak MPI bandwidth 971 MB/s'),
            eager=_EAGER_000, overhead=_OVERHEAD_002, intra_latency=_INTRA_LAT_002,
            intra_bandwidth=_INTRA_BW_002, mpi='MVAPICH, one port (version not stated)', features=('pcie', 'ib-sdr')),
    Testbed('pcix-sdr', '000/003: MT23108 InfiniHost on PCI-X 64 bit/133 MHz, one 4X SDR port, InfiniScale switch; '
                        'MVAPICH',
            ('000-pcix-mt23108', '003-pcix-mt23108'), 8, _NODES_000, 2, 'pcix:64:133', 'ib:sdr:4x',
            latency=_src('000-fig12-mpi-lat-pcix', why='000 Fig. 12: MPI latency 5.1 us for small messages'),
            bandwidth=_src('000-fig13-mpi-uni-bw-pcix', why='000 Fig. 13: peak MPI bandwidth "around 800 MB/s"'),
            eager=_EAGER_000, overhead=_OVERHEAD_002, intra_latency=_INTRA_LAT_002,
            intra_bandwidth=_INTRA_BW_002, mpi='MVAPICH, one port (version not stated)', features=('pcix', 'ib-sdr')),
    Testbed('ib-pcix-8node', '002: MT23108 InfiniHost on PCI-X 64 bit/133 MHz, 4X SDR, InfiniScale; MVAPICH 0.9.1',
            ('002-ib-pcix',), 8, "the paper's 8 nodes", 2, 'pcix:64:133', 'ib:sdr:4x',
            latency=_src('002-fig1-lat-ib', why='002 Fig. 1: smallest MPI latency 6.8 us'),
            bandwidth=_src('002-fig2-bw-ib-w16', why='002 Fig. 2: "over 841MB/s" (MB = 2^20 B) with window 16'),
            eager=_src('002-fig2-eager-threshold-ib', source=STATED,
                       why='002 Sec. 3.1: "the protocol switches from Eager to Rendezvous" at 2 KB'),
            overhead=_src('002-fig3-overhead-ib', source=STATED,
                          why='002 Fig. 3: host overhead "around 1.7 us", sender + receiver (an input of the model: '
                              'not a prediction)'),
            intra_latency=_src('002-fig9-intra-lat-ib', why='002 Fig. 9: intra-node latency "about 1.6 us"'),
            intra_bandwidth=_src('002-fig10-intra-bw-ib', why='002 Fig. 10: intra-node bandwidth "over 450MB/s" '
                                                             '(MB = 2^20 B)'),
            mpi='MVAPICH 0.9.1 (MPICH 1.2.2)', features=('pcix', 'ib-sdr')),
    Testbed('ib-pci-8node', '002 Sec. 4.7: the same 8 nodes with the HCA forced onto a 64 bit/66 MHz PCI bus',
            ('002-ib-pci',), 8, "the paper's 8 nodes", 2, 'pci:64:66', 'ib:sdr:4x',
            latency=_src('002-fig1-lat-ib', '002-fig26-lat-increase-pci',
                         why='002 Figs. 1 and 26: 6.8 us on PCI-X, "only increases by about 0.6 us" on PCI'),
            bandwidth=_src('002-fig27-bw-pci', why='002 Fig. 27: the bandwidth "only reaches 378MB/s" (MB = 2^20 B)'),
            eager=_src('002-fig2-eager-threshold-ib', source=STATED,
                       why="002 Sec. 3.1: MVAPICH 0.9.1's eager limit, 2 KB"),
            overhead=_src('002-fig3-overhead-ib', source=ASSUMED,
                          why="002 Fig. 3's host overhead on PCI-X: the CPU's share does not change with the bus"),
            intra_latency=_src('002-fig9-intra-lat-ib', source=ASSUMED, why="002 Fig. 9 (PCI-X): shared memory does "
                                                                           "not cross the bus"),
            intra_bandwidth=_src('002-fig10-intra-bw-ib', source=ASSUMED,
                                 why='002 Fig. 10 (PCI-X): not stated for PCI'),
            mpi='MVAPICH 0.9.1 (MPICH 1.2.2)', features=('pci', 'ib-sdr')),
    *[Testbed(f'connectx-{conf.replace(".", "")}',
              f'001: ConnectX, {rate.upper()} on PCIe {gen} x8, two nodes back to back, 2 quad-core Xeons; MVAPICH',
              (f'001-{conf}',), 2, "the paper's 2 nodes", 8, f'pcie:gen{gen[0]}:x8', f'ib:{rate}:4x',
              latency=_LAT_PCIE2_001 if gen == '2.0' and rate == 'qdr' else
              _src('001-fig2a-lat-qdr', cites=['001-fig2a-ddr-vs-qdr-threshold'], source=ASSUMED,
                   why='001 Fig. 2(a): "DDR-2.0 performs comparably with QDR-2.0 for messages smaller than 64 bytes"'
                       ' (1.06 us)') if gen == '2.0' else _LAT_PCIE1_001,
              bandwidth=_src('000-fig13-mpi-uni-bw-pcie', source=ASSUMED,
                             why="001 states no SDR-1.1 bandwidth: 000's 971 MB/s, the same 4X SDR rate on PCIe 1.x "
                                 "x8") if rate == 'sdr' else
              _src(f'001-fig2b-bw-{conf}', why=f'001 Fig. 2(b): peak bandwidth of {conf.upper()}'),
              eager=_EAGER_001, overhead=_OVERHEAD_001,
              intra_latency=_src('002-fig9-intra-lat-ib', source=ASSUMED,
                                 why="001 states no intra-node number: 002's (2003 nodes; no comparable number of "
                                     "001 depends on it)"),
              intra_bandwidth=_src('002-fig10-intra-bw-ib', source=ASSUMED, why="as the intra-node latency"),
              mpi='MVAPICH (2008, version not stated)', features=('pcie', f'ib-{rate}'))
      for conf, rate, gen in [('sdr-1.1', 'sdr', '1.1'), ('ddr-1.1', 'ddr', '1.1'), ('ddr-2.0', 'ddr', '2.0'),
                              ('qdr-2.0', 'qdr', '2.0')]],
]}


class ModelError(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def _entries():
    return {e['id']: e for e in references.entries()}


def _values(src):
    try:
        return [_entries()[i]['value_si'] for i in src.entries]
    except KeyError as err:
        raise ModelError(f'reference entry {err} named by the model is not in reference-data/papers') from None


def _value(src):
    """The quantity: the sum of the entries' SI values (a value plus a stated increase, for instance)."""
    return sum(_values(src))


def _overhead(testbed, latency):
    if testbed.overhead is _OVERHEAD_001:   # 002's share of the latency, applied to this testbed's latency
        overhead, lat_002 = _values(_OVERHEAD_001)
        return latency * overhead / lat_002
    return _value(testbed.overhead)


def model(name):
    """The parameters of the testbed ``name`` ({parameter name: Parameter}, in the order they are explained)."""
    try:
        t = TESTBEDS[name]
    except KeyError:
        raise ModelError(f'no simulated testbed {name!r} (known: {", ".join(TESTBEDS)})') from None

    bus, link = limits.parse_spec(t.bus), limits.parse_spec(t.link)
    lat, bw = _value(t.latency), _value(t.bandwidth)
    physical = min(limits.to_MBps(bus.per_direction), limits.to_MBps(link.per_direction))
    if bw > physical:
        raise ModelError(f'{name}: calibrated bandwidth {bw} MB/s exceeds the physical limit {physical:.0f} MB/s')

    overhead = _overhead(t, lat)
    wire = lat - overhead - (SMALL_MESSAGE + ENVELOPE_BYTES) / bw     # us: bytes / (MB/s) = us
    if wire <= 0:
        raise ModelError(f'{name}: latency {lat} us leaves no wire latency after the host overhead {overhead:.2f} us')
    intra_lat, intra_bw = _value(t.intra_latency), _value(t.intra_bandwidth)
    loop_lat = intra_lat - overhead - (SMALL_MESSAGE + ENVELOPE_BYTES) / intra_bw
    eager = int(_value(t.eager))

    def p(key, value, unit, src, why, entries=()):
        return key, Parameter(key, value, unit, src, why, tuple(entries))

    lat_why = f'{t.latency.why}; minus the host overhead and the 17 bytes at the bandwidth, split between the ' \
              'two nodes\' HCAs'
    params = dict([
        p('nodes', t.nodes, 'nodes', PHYSICAL, t.nodes_why),
        p('cores_per_node', t.cores_per_node, 'cores', PHYSICAL, 'the paper\'s processors per node'),
        p('bus', t.bus, '', PHYSICAL, bus.label),
        p('bus_bandwidth', round(limits.to_MBps(bus.per_direction), 3), 'MB/s', PHYSICAL,
          f'{bus.label}: theoretical rate, ' + ('both directions share it (half duplex)' if bus.half_duplex
                                                else 'per direction (full duplex)') + f' ({bus.source})'),
        p('link', t.link, '', PHYSICAL, f'{link.label}: {limits.to_MBps(link.per_direction):.0f} MB/s per direction '
                                        f'({link.source}); its rate is the HCA bandwidth\'s upper bound'),
        p('hca_bandwidth', bw, 'MB/s', t.bandwidth.source, t.bandwidth.why, t.bandwidth.entries + t.bandwidth.cites),
        p('hca_latency', round(wire / 2, 6), 'us', t.latency.source, lat_why, t.latency.entries + t.latency.cites),
        p('host_overhead', round(overhead, 6), 'us', t.overhead.source, t.overhead.why
          + '; half at the sender (smpi/os, smpi/ois), half at the receiver (smpi/or), on eager messages',
          t.overhead.entries + t.overhead.cites),
        p('eager_threshold', eager, 'bytes', t.eager.source, t.eager.why, t.eager.entries + t.eager.cites),
        p('rendezvous_latency_factor', RENDEZVOUS_LATENCIES, 'x', ASSUMED,
          "MVAPICH's RDMA rendezvous: request, reply, then the data (three one-way latencies)"),
        p('intra_node_bandwidth', intra_bw, 'MB/s', t.intra_bandwidth.source, t.intra_bandwidth.why,
          t.intra_bandwidth.entries + t.intra_bandwidth.cites),
        p('intra_node_latency', round(max(loop_lat, 0.0), 6), 'us', t.intra_latency.source,
          t.intra_latency.why + ('; minus the host overhead' if loop_lat > 0 else
                                 f'; below the host overhead ({overhead:.2f} us), which SMPI charges on every path: '
                                 'loopback latency 0, the model\'s intra-node latency is the overhead'),
          t.intra_latency.entries + t.intra_latency.cites),
        p('cpu_speed', '1Gf', 'flop/s', CHOSEN, 'nominal: computation is not simulated'),
        p('mpi', t.mpi, '', STATED, 'the paper\'s MPI; collectives: MPICH 1.2.2 algorithms (see collectives)'),
    ])
    for coll, (algorithm, why) in COLLECTIVES.items():
        params.update([p(f'collective_{coll}', algorithm, '', CHOSEN, why)])
    return params


def options(params):
    """The ``smpirun --cfg`` options of a model (the platform file carries the rest)."""
    half = params['host_overhead'].value / 2 * 1e-6
    eager = params['eager_threshold'].value
    # SMPI's piecewise options: "<size>:<values>" applies to sizes above <size>; the factors see the size plus
    # the 16-byte envelope, the eager thresholds (send-is-detached, async-small) the size alone (size < threshold)
    cfg = {
        'smpi/send-is-detached-thresh': str(eager),
        'smpi/async-small-thresh': str(eager),
        'smpi/os': f'0:{half:.10g}:0',
        'smpi/or': f'0:{half:.10g}:0',
        'smpi/ois': f'0:{half:.10g}:0;{eager - 1}:0:0',
        'smpi/lat-factor': f'0:1;{eager + ENVELOPE_BYTES - 1}:{params["rendezvous_latency_factor"].value}',
        **{k: v for k, (v, _) in SWITCHES.items()},
        **{f'smpi/{coll}': COLLECTIVES[coll][0] for coll in COLLECTIVES},
    }
    return [f'--cfg={key}:{value}' for key, value in cfg.items()]


def hosts(params):
    return [f'node{i}' for i in range(params['nodes'].value)]


def render(params):
    """The SimGrid platform file (XML text) of a model: deterministic for the same parameters."""
    bus = limits.parse_spec(params['bus'].value)
    bus_policy = 'SHARED' if bus.half_duplex else 'SPLITDUPLEX'

    def bw(mbps):
        return f'{mbps:.6f}MBps'

    def lat(us):
        return f'{us:.6f}us'

    lines = ["<?xml version='1.0'?>", '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             '<platform version="4.1">', '<!-- generated by ibrepro.simulated.platform: see docs/simulation.md -->',
             '<zone id="testbed" routing="Full">']
    names = hosts(params)
    for host in names:
        lines += [
            f'  <host id={quoteattr(host)} speed="{params["cpu_speed"].value}" '
            f'core="{params["cores_per_node"].value}"/>',
            f'  <link id="{host}-bus" bandwidth="{bw(params["bus_bandwidth"].value)}" latency="0us" '
            f'sharing_policy="{bus_policy}"/>',
            f'  <link id="{host}-hca" bandwidth="{bw(params["hca_bandwidth"].value)}" '
            f'latency="{lat(params["hca_latency"].value)}" sharing_policy="SPLITDUPLEX"/>',
            f'  <link id="{host}-loopback" bandwidth="{bw(params["intra_node_bandwidth"].value)}" '
            f'latency="{lat(params["intra_node_latency"].value)}" sharing_policy="SHARED"/>',
        ]

    def way(host, direction):
        bus_ctn = (f'<link_ctn id="{host}-bus"/>' if bus.half_duplex
                   else f'<link_ctn id="{host}-bus" direction="{direction}"/>')
        hca_ctn = f'<link_ctn id="{host}-hca" direction="{direction}"/>'
        return [bus_ctn, hca_ctn] if direction == 'UP' else [hca_ctn, bus_ctn]

    for src in names:
        for dst in names:
            if src == dst:
                lines.append(f'  <route src="{src}" dst="{dst}"><link_ctn id="{src}-loopback"/></route>')
            else:
                lines.append(f'  <route src="{src}" dst="{dst}" symmetrical="NO">'
                             + ''.join(way(src, 'UP') + way(dst, 'DOWN')) + '</route>')
    lines += ['</zone>', '</platform>', '']
    return '\n'.join(lines)


def describe(name):
    """Everything a session stores about its model: testbed, platform hash, options, parameters."""
    params = model(name)
    text = render(params)
    t = TESTBEDS[name]
    return {
        'testbed': name,
        'configurations': list(t.configurations),
        'platform_sha256': hashlib.sha256(text.encode()).hexdigest(),
        'options': options(params),
        'parameters': {k: v.to_dict() for k, v in params.items()},
    }


def platforms_dir():
    return paths.data_home() / 'simulated' / 'platforms'


def materialize(name, directory=None):
    """Write the platform file of testbed ``name`` (named by its hash: a changed model never overwrites the file
    an older session ran on) and return its path."""
    text = render(model(name))
    digest = hashlib.sha256(text.encode()).hexdigest()
    directory = Path(directory or platforms_dir())
    path = directory / f'{name}-{digest[:16]}.xml'
    if not path.is_file() or path.read_text() != text:
        directory.mkdir(parents=True, exist_ok=True)
        # concurrent sessions may write the same file: each writes its own temporary file, then renames it
        with tempfile.NamedTemporaryFile('w', dir=directory, prefix=f'.{name}-', suffix='.xml', delete=False) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
    return path


def provenance_table(name):
    """Markdown rows: parameter, value, source, why."""
    rows = []
    for key, prm in model(name).items():
        value = f'{prm.value:g}' if isinstance(prm.value, float) else str(prm.value)
        entries = f' ({", ".join(prm.entries)})' if prm.entries else ''
        rows.append(f'| `{key}` | {value} {prm.unit} | {prm.source} | {prm.why}{entries} |'.replace('  |', ' |'))
    return rows


def fingerprint(name):
    """A short digest of the whole model (platform and options), for display."""
    desc = describe(name)
    return hashlib.sha256(json.dumps([desc['platform_sha256'], desc['options']]).encode()).hexdigest()[:12]


def add_cli(subparsers):
    p = subparsers.add_parser('platforms', help='each model\'s parameters, where they come from, its options',
                              description='Print the model of each simulated testbed: every parameter with its '
                                          'source (calibrated on a paper number, physical, stated, assumed, '
                                          'chosen), the platform\'s sha256 and the smpirun options.')
    p.add_argument('testbeds', nargs='*', help=f'default: all ({", ".join(TESTBEDS)})')
    p.add_argument('--xml', action='store_true', help='print the SimGrid platform file instead')
    p.set_defaults(func=_cli)


def _cli(args):
    try:
        for name in args.testbeds or TESTBEDS:
            if args.xml:
                print(render(model(name)), end='')
                continue
            desc = describe(name)
            print(f'## {name}: {TESTBEDS[name].descr}\n')
            print(f'platform sha256 {desc["platform_sha256"]}\n')
            print('| parameter | value | source | why |\n|---|---|---|---|')
            print('\n'.join(provenance_table(name)))
            print(f'\nsmpirun options: {" ".join(desc["options"])}\n')
    except ModelError as err:
        print(f'ibrepro simulated platforms: {err}')
        return 1
    return 0
