"""Plugin: a case whose processes are client/server *flows* run by the pair runner (:mod:`ibrepro.pair`).

Placement. A family describes flows: client/server pairs between two endpoints, each endpoint a node index (0 or 1)
and a *rail* of that node. The rails of a node are the partition's ``rdma_devices`` x ``ib_ports``: one HCA with two
ports (``['mlx4_0']`` x 2, the papers' MT25208) and two single-port devices (``['mlx5_0', 'mlx5_1']`` x 1,
ConnectX-4 and later, soft-RoCE) both give two rails. The runner, copied into the stage directory, runs once per
node under the partition's own launcher, so the same case works on

* two nodes (extras ``nodes`` >= 2): two tasks, one per node, on whatever nodes the scheduler picked; each end
  publishes the address of its own rails at run time, and the runner fails the case if both ended on one host;
* one node with two rails (two devices, or two ports of one HCA): one task plays both ends, server on rail 0 and
  client on rail 1, so traffic crosses the cable between them;
* one node with one rail: loopback through the HCA.

Phase contract (what a family gives, what this plugin sets, and when):

* init: the case runs only on partitions with an RDMA port (feature ``ib`` or ``roce``) and the family's
  :attr:`required_partition_features`; a job of it needs two nodes;
* before the run, :meth:`write_spec` asks the family for :meth:`flows` (which may set :attr:`placement`) and
  :meth:`spec_options` (its program's keys of the spec), writes ``flows.json`` with :meth:`spec`, and starts the
  runner once per node (:meth:`place_runner`); the family's ``program_name()`` names the program;
* in sanity, :meth:`diagnose` reads each flow's table over :attr:`round_sizes` (the family's rounds, one size each;
  [] for one round in which the program sweeps), has the family make one table of them
  (:meth:`combine_flows`) and check its rounds (:meth:`check_rounds`), and records where every side ran
  (:attr:`flow_windows`).

Partition extras read here (all optional): ``nodes``; ``rdma_devices``; ``ib_ports`` (ports per device, default 1);
``python`` (the interpreter that runs the pair runner on the nodes; default: this one on a local partition,
``python3`` elsewhere); ``node_exec`` (a command prefix that runs a side on node ``{node}``, for emulated nodes);
``emulated`` (numbers are not performance data).
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

from .. import pair, parsers, pcie_distance

SPEC_FILE = 'flows.json'
RUNNER_FILE = 'ibrepro_pair.py'
DISTANCE_FILE = 'pcie_distance.py'
BASE_PORT = 18515


def rails(partition):
    """The (device, ib_port) rails of one node of ``partition``: ``rdma_devices`` x ``ib_ports``."""
    extras = partition.extras
    devices = extras.get('rdma_devices') or [None]       # None: the program's first device
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


#: What each side's status file says of where and when it ran, kept in :attr:`PairRunner.flow_windows`.
WINDOW_KEYS = ('flow', 'side', 'size', 'node', 'host', 'device', 'cpu', 'cpus', 'process_cpus', 'binding', 'memlock',
               'link_layer', 'traffic_class', 'gpu', 'start', 'end', 'returncode')


class PairRunner(rfm.RegressionTestPlugin):
    """Plugin: the case's flows run by the pair runner, one task per node (phase contract: the module docstring)."""

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

    @run_after('init')
    def select_rdma_partitions(self):
        # a hard requirement: partitions without an RDMA port (or the other features) are not candidates
        needs = ' '.join(f'+{f}' for f in self.required_partition_features)
        self.valid_systems = [f'+ib {needs}'.strip(), f'+roce {needs}'.strip()]
        self.job_nodes = 2      # the papers' verbs tests run between two nodes (one node only where there is one)

    # -- what the family gives ----------------------------------------------------------------------------

    def flows(self):
        """The flows of the case, each from :func:`flow` (the family's; it may set :attr:`placement`)."""
        ends, self.placement = endpoints(self.current_partition)
        return [flow(0, *ends)]

    def spec_options(self):
        """The family's program's keys of the runner's spec (``options``, ``sizes``, ``wait_listen``)."""
        return {}

    @property
    def round_sizes(self):
        """Message sizes of the rounds, one round each; [] for one round in which the program sweeps its sizes."""
        return []

    def combine_flows(self, tables, emulated):
        """One table of the case from its flows' tables (one flow here; concurrent families sum theirs)."""
        if len(tables) != 1:
            raise SanityError(f'{len(tables)} flows, and this family reports one')
        self.starved_flows = unmeasured(tables[0], self.flow_ids[0], emulated)
        return tables[0]

    def check_rounds(self):
        """What the family checks of its rounds once the table is complete (concurrent flows: their overlap)."""

    # -- what runs ------------------------------------------------------------------------------------------

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
        return {'version': pair.SPEC_VERSION, 'program': self.program_name(),
                'rails': [list(r) for r in rails(self.current_partition)], 'nodes': len(nodes),
                'distinct_hosts': two_hosts, 'flows': flows, 'timeout': self.pair_timeout,
                'connect_timeout': self.connect_timeout, 'node_exec': extras.get('node_exec'),
                'python': self.runner_python(), 'cpu_sharing': bool(extras.get('emulated')), **self.spec_options()}

    @run_before('run')
    def write_spec(self):
        flows = self.flows()
        self.flow_ids = [f['id'] for f in flows]
        self.place_runner(self.spec(flows))

    def place_runner(self, spec):
        """Write ``spec``, copy the runner next to it, and start it once per node of the spec."""
        pair.check_spec(spec, SPEC_FILE)
        with open(os.path.join(self.stagedir, SPEC_FILE), 'w') as fp:
            json.dump(spec, fp, indent=2)
        shutil.copy(pair.__file__, os.path.join(self.stagedir, RUNNER_FILE))
        shutil.copy(pcie_distance.__file__, os.path.join(self.stagedir, DISTANCE_FILE))    # GPU sides import it

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
        """The program's own failure report on that side, if it printed one."""
        try:
            parsers.parse_file(os.path.join(self.stagedir, f'flow-{flow_id}{tag}.{side}.out'), tool=self.tool)
        except parsers.BenchmarkFailed as err:
            return f'{side}: {err.reason}'
        except parsers.ParseError:
            return None
        return None

    def flow_table(self, flow_id):
        """The table of one flow, from its rounds, and the windows of its sides."""
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
            windows += [{k: end.get(k) for k in WINDOW_KEYS} for end in (server, status) if end]
        return (tables[0] if len(tables) == 1 else merge_rounds(tables)), windows

    def diagnose(self):
        tables, self.flow_windows = [], []
        for flow_id in self.flow_ids:
            table, windows = self.flow_table(flow_id)
            tables.append(table)
            self.flow_windows += windows

        failure = self._failure()
        if failure:
            raise SanityError(failure)
        table = self.combine_flows(tables, bool(self.current_partition.extras.get('emulated')))
        missing = sorted(set(self.expected_sizes) - set(table.sizes()))
        if missing:
            raise SanityError(f'{self.tool}: missing sizes {missing[:8]}')
        self.check_rounds()
        self.check_metrics(table)
        if self.job.exitcode:
            raise SanityError(f'the pair runner exited with {self.job.exitcode} ({self._runner_errors() or "see "}'
                              f'{self.stdout.evaluate()})')
        return None, table
