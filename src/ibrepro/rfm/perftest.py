"""perftest (verbs-level latency and bandwidth) driven by ReFrame through the pair runner (:mod:`ibrepro.pair`).

Placement. A check describes *flows*: client/server pairs between two endpoints, each endpoint a node index (0 or
1) and a *rail* of that node. The rails of a node are the partition's ``rdma_devices`` x ``ib_ports``: one HCA with
two ports (``['mlx4_0']`` x 2, the papers' MT25208) and two single-port devices (``['mlx5_0', 'mlx5_1']`` x 1,
ConnectX-4 and later, soft-RoCE) both give two rails. The pair runner, copied into the stage directory, runs once
per node under the partition's own launcher, so the same check works on

* two nodes (extras ``nodes`` >= 2): two tasks, one per node, on whatever nodes the scheduler picked; each end
  publishes the address of its own rails at run time, and the runner fails the case if both ended on one host;
* one node with two rails (two devices, or two ports of one HCA): one task plays both ends, server on rail 0 and
  client on rail 1, so traffic crosses the cable between them;
* one node with one rail: loopback through the HCA.

Concurrent flows (two ports at once, N pairs) measure *simultaneous* traffic, which is what the papers' two-port
and multi-pair results are: the flows of a case run in rounds, one message size per round, all clients start
together after a barrier and measure for the same time (perftest ``-D``); the runner pins every side to its own
CPU near its device and records where and when each flow ran (``flow_windows``), and the check fails when the
measurement windows did not overlap (``min_overlap``).

Partition extras read here (all optional): ``nodes``; ``rdma_devices``; ``ib_ports`` (ports per device, default 1);
``python`` (the interpreter that runs the pair runner on the nodes; default: this one on a local partition,
``python3`` elsewhere); ``node_exec`` (a command prefix that runs a side on node ``{node}``, for emulated nodes);
``emulated`` (numbers are not performance data); ``perftest_options`` (options every perftest run on the
partition needs); ``perftest_unusable_options`` (options its devices cannot take: dropped).
"""

import json
import os
import shutil
import sys

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from .. import pair, parsers
from . import DEFAULT_TIME_LIMIT, Injection, Knobs, PaperExperiment, Placement, expand_sizes

SPEC_FILE = 'flows.json'
RUNNER_FILE = 'ibrepro_pair.py'
BASE_PORT = 18515

#: Message sizes of concurrent flows when the check names none: powers of four from 4 B to 4 MiB (one round of
#: ``duration`` seconds each), which covers the papers' two-port and multi-pair figures.
CONCURRENT_SIZES = [4 ** i for i in range(1, 12)]


def rails(partition):
    """The (device, ib_port) rails of one node of ``partition``: ``rdma_devices`` x ``ib_ports``."""
    extras = partition.extras
    devices = extras.get('rdma_devices') or [None]       # None: perftest's first device
    ports = int(extras.get('ib_ports', 1))
    return [(dev, port) for dev in devices for port in range(1, ports + 1)]


def endpoints(partition):
    """(node, rail) of the two ends of a basic flow on this partition: two nodes, two rails, or loopback."""
    if int(partition.extras.get('nodes', 1)) >= 2:
        return [(1, 0), (0, 0)], 'two nodes'
    if len(rails(partition)) >= 2:
        return [(0, 0), (1, 1)], 'two rails of one node'
    return [(0, 0), (1, 0)], 'loopback on one node'


def flow(flow_id, server, client, port=None):
    """A flow from ``client`` to ``server``, each a (node, rail index)."""
    (snode, srail), (cnode, crail) = server, client
    return {'id': flow_id, 'port': port or BASE_PORT + flow_id,
            'server': {'node': snode, 'rail': srail}, 'client': {'node': cnode, 'rail': crail}}


def aggregate(tables, source):
    """One table for concurrent flows: bandwidth and message rate summed, latency averaged, per size."""
    first = tables[0]
    rows = []
    for row in first.rows:
        size = row[first.size_key]
        merged = dict(row)
        for metric, key in first.metrics.items():
            values = []
            for table in tables:
                match = [r for r in table.rows if r[table.size_key] == size]
                if not match:
                    raise SanityError(f'{source}: flows disagree on message sizes ({size} B missing)')
                values.append(match[0][key])
            merged[key] = sum(values) / (len(values) if metric == 'lat' else 1)
        rows.append(merged)

    return parsers.Table(benchmark=first.benchmark, columns=first.columns, rows=rows,
                         params={**first.params, 'flows': len(tables)}, metrics=first.metrics,
                         size_key=first.size_key, notes=[f'aggregate of {len(tables)} concurrent flows'])


def zero_rates(tables, flow_ids):
    """``['flow <id> at <size> B (bw, msgrate 0)']``: the rows where a flow printed a rate of 0 (it moved nothing
    in that window)."""
    found = []
    for flow_id, table in zip(flow_ids, tables):
        for row in table.rows:
            size = row.get(table.size_key) if table.size_key else None
            zero = [m for m in ('bw', 'msgrate') if m in table.metrics and row.get(table.metrics[m]) == 0]
            if zero and size:
                found.append(f'flow {flow_id} at {size} B ({", ".join(zero)} 0)')
    return found


def starved(tables, flow_ids, emulated=False):
    """Concurrent flows: a flow that printed a rate of 0 at a size moved nothing while the others measured, and the
    sum is not simultaneous traffic: SanityError naming the flow and size on a real partition; on an emulated one
    (a starved window of emulated CPUs) the list of them, for the record."""
    found = zero_rates(tables, flow_ids)
    if found and not emulated:
        raise SanityError(f'concurrent flows: {"; ".join(found)}: a starved flow moved nothing while the others '
                          'measured, so their sum is not simultaneous traffic')
    return found


def unmeasured(table, flow_id, emulated=False):
    """One flow: a rate of 0 is a window that moved nothing, not a bandwidth: SanityError on a real partition, and
    on an emulated one when no size measured anything (the case would store a 0 as its figure); else the list of
    them, for the record."""
    found = zero_rates([table], [flow_id])
    if found and (not emulated or len(found) == len(table.rows)):
        raise SanityError(f'{"; ".join(found)}: a rate of 0 means the run moved nothing in its window, so it is '
                          'not a measurement')
    return found


def merge_rounds(tables):
    """One table of a flow from its rounds (one size each), in size order."""
    first = tables[0]
    rows = sorted((row for t in tables for row in t.rows), key=lambda r: r[first.size_key])
    return parsers.Table(benchmark=first.benchmark, columns=first.columns, rows=rows, params=first.params,
                         metrics=first.metrics, size_key=first.size_key, notes=list(first.notes))


def overlap(windows):
    """Fraction of the union of ``windows`` ([start, end] pairs) during which all of them ran."""
    start, end = max(w[0] for w in windows), min(w[1] for w in windows)
    span = max(w[1] for w in windows) - min(w[0] for w in windows)
    return max(0.0, end - start) / span if span > 0 else 1.0


def perftest_margin(options, duration):
    """Seconds perftest's duration mode leaves out at each end of ``duration`` (``-f``; default D/4)."""
    for i, opt in enumerate(options):
        if opt in ('-f', '--margin') and i + 1 < len(options):
            return float(options[i + 1])
    return duration / 4


class PerftestFlows(rfm.RunOnlyRegressionTest, Injection, Placement, Knobs, PaperExperiment):
    """perftest flows run by the pair runner; subclasses say which flows (:meth:`flows`)."""

    tool = 'perftest'
    repeatable = False      # the flows of one job start together at one barrier
    level = 'verbs'
    valid_prog_environs = ['+perftest']
    time_limit = DEFAULT_TIME_LIMIT

    #: The perftest program (ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat, ib_write_bw, ...).
    test = variable(str)

    # The common knobs: ``message_sizes`` (empty: the whole sweep, perftest's ``-a`` (2 B .. 8 MiB) for one flow,
    # :data:`CONCURRENT_SIZES` for concurrent flows; else one round per size), ``iterations`` (``-n`` of one flow;
    # concurrent flows measure for ``duration`` seconds instead), ``window`` (``-t``, the bandwidth families).
    # perftest has no warm-up count (its bandwidth tests take ``--perform_warm_up``): ``warmup`` is refused.

    #: Deprecated (use ``message_sizes``): ``all_sizes=false`` measures only ``message_size``.
    all_sizes = variable(typ.Bool, value=True)

    #: Deprecated (use ``message_sizes``): the one size measured when ``all_sizes`` is off.
    message_size = variable(int, value=65536)

    #: Seconds each round of concurrent flows measures (perftest's duration mode ``-D``; perftest leaves a
    #: quarter of it out at each end, so the middle half is measured).
    duration = variable(int, value=4)

    #: The least fraction of their measurement windows concurrent flows must share; below it the flows did not
    #: run at the same time and their sum is not a bandwidth.
    min_overlap = variable(float, value=0.75)

    #: More perftest options, e.g. ``-R`` (rdma_cm) or ``-x 3`` (GID index).
    extra_options = variable(typ.List[str], value=[])

    #: Seconds the flows may take before the pair runner kills them.
    pair_timeout = variable(int, value=900)

    #: Seconds a node may take to start before its peers give up (a node that never came up).
    connect_timeout = variable(int, value=120)

    #: Partition features needed besides an RDMA port (feature ``ib`` or ``roce``), e.g. ``['dual-port']``.
    required_partition_features = variable(typ.List[str], value=[])

    #: The flows of the run (set before the run).
    flow_ids = variable(typ.List[int], value=[])

    #: How the flows were placed: two nodes, two rails of one node, or loopback (set before the run).
    placement = variable(str, value='')

    #: Where and when every side ran, per round: node, host, device, CPU, start and end (set after the run).
    flow_windows = variable(typ.List[typ.Dict[str, object]], value=[], loggable=True)

    #: Flows that printed a rate of 0 at a size (emulated partitions only: elsewhere the case fails, and there too
    #: when a single flow measured nothing at any size).
    starved_flows = variable(typ.List[str], value=[], loggable=True)

    #: Smallest overlap of the concurrent flows' measurement windows over the rounds (set after the run).
    flow_overlap = variable(float, type(None), value=None, loggable=True)

    @run_after('init')
    def select_rdma_partitions(self):
        # a hard requirement: partitions without an RDMA port (or the other features) are not candidates
        needs = ' '.join(f'+{f}' for f in self.required_partition_features)
        self.valid_systems = [f'+ib {needs}'.strip(), f'+roce {needs}'.strip()]
        self.job_nodes = 2      # the papers' verbs tests run between two nodes (one node only where there is one)

    # -- what runs --------------------------------------------------------------------------------------

    def program_name(self):
        return self.test

    def options(self):
        """The perftest options common to every flow."""
        opts = ['-F']                       # the CPU-frequency check fails spuriously on VMs and laptops
        if self.concurrent:
            opts += ['-D', str(self.duration)]
        elif not self.round_sizes:
            opts += ['-a']
        if self.iterations is not None and not self.concurrent:
            opts += ['-n', str(self.iterations)]
        # what the partition's devices need on every run (e.g. a longer QP timeout for emulated RoCE),
        # and what they cannot take (e.g. --perform_warm_up, which hangs perftest 4.5 over rxe)
        extras = self.current_partition.extras
        unusable = set(extras.get('perftest_unusable_options', []))
        opts += list(extras.get('perftest_options', [])) + list(self.extra_options)
        return [opt for opt in opts if opt not in unusable]

    def flows(self):
        """One flow between the partition's two endpoints (override for binding or multi-pair)."""
        ends, self.placement = endpoints(self.current_partition)
        return [flow(0, *ends)]

    @property
    def concurrent(self):
        return len(self.flow_ids) > 1

    @run_after('setup')
    def refuse_a_warmup_count(self):
        if self.warmup is not None:
            raise ValueError('perftest takes no warm-up count (its bandwidth tests warm up with --perform_warm_up): '
                             'warmup cannot be set for the perftest families')

    @property
    def round_sizes(self):
        """Message sizes of the rounds; [] for one round sweeping with ``-a``."""
        text = self.message_sizes or ('' if self.deprecated('all_sizes', 'message_sizes', self.all_sizes, True)
                                      is None else str(self.message_size))
        if text:
            return expand_sizes(text)
        return list(CONCURRENT_SIZES) if self.concurrent else []

    def runner_python(self):
        extras = self.current_partition.extras
        if extras.get('python'):
            return extras['python']
        return sys.executable if self.current_partition.scheduler.registered_name == 'local' else 'python3'

    def spec(self, flows):
        """The pair runner's spec for ``flows``."""
        extras = self.current_partition.extras
        nodes = sorted({f[side]['node'] for f in flows for side in ('server', 'client')})
        two_hosts = int(extras.get('nodes', 1)) >= 2 and len(nodes) > 1
        return {'version': pair.SPEC_VERSION, 'program': self.test, 'options': self.options(),
                'rails': [list(r) for r in rails(self.current_partition)], 'nodes': len(nodes),
                'distinct_hosts': two_hosts, 'flows': flows, 'sizes': self.round_sizes or None,
                'timeout': self.pair_timeout, 'connect_timeout': self.connect_timeout,
                'node_exec': extras.get('node_exec'), 'python': self.runner_python(),
                'cpu_sharing': bool(extras.get('emulated'))}

    @run_before('run')
    def write_spec(self):
        flows = self.flows()
        self.flow_ids = [f['id'] for f in flows]
        spec = self.spec(flows)
        self.place_runner(spec)

    def place_runner(self, spec):
        """Write ``spec``, copy the runner next to it, and start it once per node of the spec."""
        pair.check_spec(spec, SPEC_FILE)
        with open(os.path.join(self.stagedir, SPEC_FILE), 'w') as fp:
            json.dump(spec, fp, indent=2)
        shutil.copy(pair.__file__, os.path.join(self.stagedir, RUNNER_FILE))

        self.executable = spec['python']
        self.executable_opts = [RUNNER_FILE, SPEC_FILE]
        processes = max(sum(f[side].get('processes', 1) for f in spec['flows'] for side in ('server', 'client')
                            if f[side]['node'] == n)
                        for n in range(spec['nodes']))
        if spec['distinct_hosts']:
            self.num_tasks, self.num_tasks_per_node = spec['nodes'], 1
            # no -c N: it implies --exact, a cpuset of N CPUs (often far from the HCA) the runner could only choose
            # within; the step gets the node's CPUs (launch policy: srun --whole) and the runner pins each process
            self.num_cpus_per_task = None
            if self.job.launcher.registered_name == 'srunalloc':
                # a step inside the (exclusive) allocation: srun --exclusive there implies --exact too
                self.exclusive_access = False
            self.apply_launch_policy(tasks_per_node=1, kill_on_bad_exit=True, bind=False)
        else:
            # one node plays every end: one plain process, whatever MPI launcher the partition has
            self.num_tasks = 1
            self.num_cpus_per_task = 2 * processes
            self.job.launcher = getlauncher('local')()
            self.binding = 'one task plays every end'
        self.binding = (f'{self.binding}; ' if self.binding else '') + (
            'the pair runner pins each side to its own CPU near its device (see flow_windows)')

    # -- what came out ----------------------------------------------------------------------------------

    def _runner_errors(self):
        lines = self._read(self.stdout.evaluate()).splitlines()
        return '; '.join(line for line in lines if line.startswith('ibrepro pair:'))

    def _json(self, name):
        try:
            with open(os.path.join(self.stagedir, name)) as fp:
                data = json.load(fp)
            return data if isinstance(data, dict) else None
        except (OSError, ValueError):
            return None

    def _failure(self):
        """The first failure a node of the job reported, with the tool's own words where it gave them."""
        for node in range(2):
            data = self._json(f'failed-{node}.json')
            if data:
                return f'node {node} ({data.get("host", "?")}): {data.get("reason", "?")}'
        return None

    def _side_failure(self, flow_id, side, tag):
        """The perftest side's own failure report, if it printed one."""
        try:
            parsers.parse_file(os.path.join(self.stagedir, f'flow-{flow_id}{tag}.{side}.out'), tool=self.tool)
        except parsers.BenchmarkFailed as err:
            return f'{side}: {err.reason}'
        except parsers.ParseError:
            return None
        return None

    def flow_table(self, flow_id):
        """The table of one flow, from its rounds, and the windows of its client sides."""
        tables, windows = [], []
        for size in self.round_sizes or [None]:
            tag = f'.s{size}' if size else ''
            client = os.path.join(self.stagedir, f'flow-{flow_id}{tag}.client.out')
            status = self._json(f'flow-{flow_id}{tag}.client.status.json') or {}
            server = self._json(f'flow-{flow_id}{tag}.server.status.json') or {}
            if not os.path.exists(client):
                why = (self._side_failure(flow_id, 'server', tag) or self._failure() or self._runner_errors()
                       or 'see ' + self.stdout.evaluate())
                raise SanityError(f'flow {flow_id}{" at " + str(size) + " B" if size else ""}: the client never '
                                  f'ran: {why}')
            try:
                table = parsers.parse_file(client, tool=self.tool).table()
            except parsers.ParseError as err:
                raise SanityError(f'flow {flow_id}: {err}') from None
            rc = status.get('returncode')
            if rc not in (0, None):
                raise SanityError(f'flow {flow_id}: {self.tool} client exited with {rc}'
                                  + (f' ({self._failure()})' if self._failure() else ''))
            tables.append(table)
            for end in (server, status):
                if end:
                    windows.append({k: end.get(k) for k in ('flow', 'side', 'size', 'node', 'host', 'device',
                                                            'cpu', 'cpus', 'process_cpus', 'binding', 'memlock',
                                                            'link_layer', 'traffic_class',
                                                            'start', 'end', 'returncode')})
        return (tables[0] if len(tables) == 1 else merge_rounds(tables)), windows

    def check_overlap(self):
        """Concurrent flows: each round's measurement windows must overlap; record the smallest overlap."""
        if not self.concurrent:
            return
        margin = perftest_margin(self.options(), self.duration)
        worst = None
        for size in self.round_sizes:
            clients = [w for w in self.flow_windows if w['side'] == 'client' and w['size'] == size
                       and w['start'] and w['end']]
            if len(clients) < len(self.flow_ids):
                raise SanityError(f'concurrent flows at {size} B: only {len(clients)} of {len(self.flow_ids)} '
                                  'clients recorded their run')
            # perftest -D measures from `margin` after its traffic starts until `margin` before it stops
            measured = [[w['end'] - self.duration + margin, w['end'] - margin] for w in clients]
            share = overlap(measured)
            worst = share if worst is None else min(worst, share)
            if share < self.min_overlap:
                spans = '; '.join(f'flow {w["flow"]} on {w["host"]} {w["start"]:.2f}-{w["end"]:.2f}'
                                  for w in clients)
                raise SanityError(f'concurrent flows at {size} B overlapped {share:.0%} of their measurement '
                                  f'windows (at least {self.min_overlap:.0%} needed): {spans}; their sum is not '
                                  'simultaneous traffic')
        self.flow_overlap = round(worst, 3)

    def diagnose(self):
        tables, self.flow_windows = [], []
        for flow_id in self.flow_ids:
            table, windows = self.flow_table(flow_id)
            tables.append(table)
            self.flow_windows += windows

        failure = self._failure()
        if failure:
            raise SanityError(failure)
        emulated = bool(self.current_partition.extras.get('emulated'))
        if self.concurrent:
            self.starved_flows = starved(tables, self.flow_ids, emulated)
        else:
            self.starved_flows = unmeasured(tables[0], self.flow_ids[0], emulated)
        table = tables[0] if len(tables) == 1 else aggregate(tables, self.name)
        missing = sorted(set(self.expected_sizes) - set(table.sizes()))
        if missing:
            raise SanityError(f'{self.tool}: missing sizes {missing[:8]}')
        self.check_overlap()
        self.check_metrics(table)
        if self.job.exitcode:
            raise SanityError(f'the pair runner exited with {self.job.exitcode} ({self._runner_errors() or "see "}'
                              f'{self.stdout.evaluate()})')
        return None, table
