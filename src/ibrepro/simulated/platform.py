"""The papers' testbeds as SimGrid SMPI models: every parameter with where it comes from.

A node is a SimGrid host (the paper's CPUs as cores) with two links on its way out: the host bus (PCI, PCI-X:
one shared half-duplex resource; PCI Express: one resource per direction) at its theoretical rate from
:mod:`ibrepro.limits`, then the HCA and its InfiniBand port (one resource per direction) at the calibrated
one-way peak MPI bandwidth, carrying half the calibrated wire latency. The switch (InfiniScale, a full
wire-speed crossbar) adds no link: its latency is in the calibrated latency. Two ranks on one node talk
through a loopback link (MVAPICH's shared memory and HCA loopback, one path).

The testbeds and where each of their quantities comes from (paper entries, unit, source, why) are data:
reference-data/simulated.yaml. Parameters have a ``source``:

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

import jsonschema

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
    unit: str = ''         # the entries' SI unit
    share_of_latency: bool = False   # the first entry's share of the second, applied to the testbed's latency


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


class ModelError(ValueError):
    pass


#: The testbeds' data, with its provenance: reference-data/simulated.yaml (schema and cross-file checks: ibrepro refs
#: validate).
DATA = paths.REFERENCE_DATA / 'simulated.yaml'
QUANTITY_FIELDS = ('latency', 'bandwidth', 'eager', 'overhead', 'intra_latency', 'intra_bandwidth')


def load(path=DATA):
    """(testbeds {name: Testbed}, the rest of the file: quantities and baselines) of the data file; ModelError naming
    the file and what is wrong when it is not valid."""
    path = Path(path)
    try:
        data = references.read_yaml(path, path.parent)
    except references.DataError as err:
        raise ModelError(str(err.problem)) from None
    schema = references.load_schema('simulated')
    problems = [f'{"/".join(map(str, e.absolute_path)) or "top level"}: {e.message}'
                for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    if problems:
        raise ModelError(f'{path}: ' + '; '.join(problems[:3]))

    def source(spec, where):
        if isinstance(spec, str):
            if spec not in data['shared']:
                raise ModelError(f'{path}: {where}: no shared source {spec!r} (known: {", ".join(data["shared"])})')
            spec = data['shared'][spec]
        return Source(tuple(spec['entries']), spec['source'], spec['why'], tuple(spec.get('cites', ())),
                      spec['unit'], spec.get('share_of_latency', False))

    testbeds = {}
    for bed in data['testbeds']:
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in bed.items() if k not in QUANTITY_FIELDS}
        testbeds[bed['name']] = Testbed(**fields, **{q: source(bed[q], f'{bed["name"]}.{q}') for q in QUANTITY_FIELDS})
    return testbeds, {'quantities': data['quantities'], 'baselines': data['baselines']}


TESTBEDS, COMPARISON = load()


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
    if testbed.overhead.share_of_latency:   # another testbed's share of its latency, applied to this latency
        overhead, other_latency = _values(testbed.overhead)
        return latency * overhead / other_latency
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
