"""perftest (verbs-level latency and bandwidth) driven by ReFrame through ``ibrepro pair``.

Placement. A check describes *flows*: perftest server/client pairs between two endpoints, each endpoint a node
index (0 or 1) and a *rail* of that node (a device and IB port). ``ibrepro pair`` runs them, once per node,
under the partition's own launcher, so the same check works on

* two nodes (partition extras ``nodes`` >= 2): two tasks, one per node (``srun``/``mpirun``/PBS ``mpiexec``);
  the nodes find each other through the stage directory;
* one node with two rails (two devices, or two ports of one HCA): one task plays both ends, server on rail 0
  and client on rail 1, so traffic crosses the link between them (a dual-port HCA cabled to itself, or two
  soft-RoCE devices on a veth pair);
* one node with one rail: loopback through the HCA.

Partition extras read here (all optional): ``nodes``; ``rdma_devices`` (device names of a node, e.g.
``['mlx5_0']`` or ``['rxe_a', 'rxe_b']``); ``ib_ports`` (ports per device, default 1); ``perftest_addresses``
(per node, the address perftest's out-of-band TCP exchange uses; default the host name); ``node_exec`` (a
command prefix that runs a side on node ``{node}``, for emulated nodes); ``emulated`` (numbers are not
performance data); ``perftest_options`` (options every perftest run on the partition needs);
``perftest_unusable_options`` (options its devices cannot take: dropped).
"""

import json
import os
import sys

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from .. import parsers
from . import DEFAULT_TIME_LIMIT, PaperExperiment

SPEC_FILE = 'flows.json'
BASE_PORT = 18515


def rails(partition):
    """The (device, ib_port) endpoints of one node of ``partition``."""
    extras = partition.extras
    devices = extras.get('rdma_devices') or [None]       # None: perftest's first device
    ports = int(extras.get('ib_ports', 1))
    return [(dev, port) for dev in devices for port in range(1, ports + 1)]


def endpoints(partition):
    """(node, rail) of the two ends of a basic flow on this partition: two nodes, two rails, or loopback."""
    node_rails = rails(partition)
    if int(partition.extras.get('nodes', 1)) >= 2:
        return [(0, node_rails[0]), (1, node_rails[0])], 'two nodes'
    if len(node_rails) >= 2:
        return [(0, node_rails[0]), (1, node_rails[1])], 'two rails of one node'
    return [(0, node_rails[0]), (1, node_rails[0])], 'loopback on one node'


def flow(flow_id, server, client, port=None):
    (snode, (sdev, sport)), (cnode, (cdev, cport)) = server, client
    return {'id': flow_id, 'port': port or BASE_PORT + flow_id,
            'server': {'node': snode, 'device': sdev, 'ib_port': sport},
            'client': {'node': cnode, 'device': cdev, 'ib_port': cport}}


def aggregate(tables, source):
    """One table for concurrent flows: bandwidth and message rate summed, latency averaged, per size."""
    first = tables[0]
    rows = []
    for i, row in enumerate(first.rows):
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


class PerftestFlows(rfm.RunOnlyRegressionTest, PaperExperiment):
    """perftest flows run by ``ibrepro pair``; subclasses say which flows (:meth:`flows`)."""

    tool = 'perftest'
    level = 'verbs'
    valid_systems = ['*']          # a partition without an RDMA port skips, saying so
    valid_prog_environs = ['+perftest']
    time_limit = DEFAULT_TIME_LIMIT

    #: The perftest program (ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat, ib_write_bw, ...).
    test = variable(str)

    #: Run every message size perftest knows (``-a``: 2 B .. 8 MiB); otherwise only :attr:`message_size`.
    all_sizes = variable(typ.Bool, value=True)

    #: Message size in bytes when :attr:`all_sizes` is off (``-s``).
    message_size = variable(int, value=65536)

    #: Measured iterations per size (``-n``). None: perftest's default.
    iterations = variable(int, type(None), value=None)

    #: More perftest options, e.g. ``-R`` (rdma_cm) or ``-x 3`` (GID index).
    extra_options = variable(typ.List[str], value=[])

    #: Seconds the flows may take before ``ibrepro pair`` kills them (a server whose client never comes).
    pair_timeout = variable(int, value=900)

    #: The flows of the run (set before the run).
    flow_ids = variable(typ.List[int], value=[])

    #: How the flows were placed: two nodes, two rails of one node, or loopback (set before the run).
    placement = variable(str, value='')

    #: Partition features needed besides an RDMA port (feature ``ib`` or ``roce``), e.g. ``['dual-port']``.
    required_partition_features = variable(typ.List[str], value=[])

    @run_after('setup')
    def skip_without_rdma(self):
        partition = self.current_partition
        reasons = []
        if not {'ib', 'roce'} & set(partition.features):
            reasons.append(f'{partition.fullname} has no RDMA port (feature ib or roce; soft-RoCE nodes: '
                           'make softroce-test)')
        reasons += [f'{partition.fullname} lacks feature {f!r}' for f in self.required_partition_features
                    if f not in partition.features]
        self.skip_for(reasons)

    def options(self):
        """The perftest options common to every flow."""
        opts = ['-F']                       # the CPU-frequency check fails spuriously on VMs and laptops
        opts += ['-a'] if self.all_sizes else ['-s', str(self.message_size)]
        if self.iterations is not None:
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

    @run_before('run')
    def write_spec(self):
        flows = self.flows()
        extras = self.current_partition.extras
        nodes = sorted({f[side]['node'] for f in flows for side in ('server', 'client')})
        addresses = list(extras.get('perftest_addresses') or [None] * len(nodes))
        spec = {'command': [self.test, *self.options()], 'flows': flows,
                'addresses': addresses, 'node_exec': extras.get('node_exec'),
                'timeout': self.pair_timeout}
        with open(os.path.join(self.stagedir, SPEC_FILE), 'w') as fp:
            json.dump(spec, fp, indent=2)

        self.executable = sys.executable
        self.executable_opts = ['-m', 'ibrepro.cli', 'pair', SPEC_FILE]
        if int(extras.get('nodes', 1)) >= 2 and len(nodes) > 1:
            self.num_tasks, self.num_tasks_per_node = len(nodes), 1
        else:
            # one node plays every end: one plain process, whatever MPI launcher the partition has
            self.num_tasks = 1
            self.job.launcher = getlauncher('local')()
        self.flow_ids = [f['id'] for f in flows]

    def _runner_errors(self):
        lines = self._read(self.stdout.evaluate()).splitlines()
        return '; '.join(line for line in lines if line.startswith('ibrepro pair:'))

    def _server_failure(self, flow_id):
        """The perftest server's own failure report, if it printed one."""
        try:
            parsers.parse_file(os.path.join(self.stagedir, f'flow-{flow_id}.server.out'), tool=self.tool)
        except parsers.BenchmarkFailed as err:
            return f'server: {err.reason}'
        except parsers.ParseError:
            return None
        return None

    def diagnose(self):
        tables = []
        for flow_id in self.flow_ids:
            client = os.path.join(self.stagedir, f'flow-{flow_id}.client.out')
            status = _status(self.stagedir, flow_id, 'client')
            if not os.path.exists(client):
                raise SanityError(f'flow {flow_id}: the client never ran: '
                                  f'{self._server_failure(flow_id) or self._runner_errors() or "see " + self.stdout.evaluate()}')
            if status == 'timeout':
                raise SanityError(f'flow {flow_id}: {self.tool} client killed after {self.pair_timeout} s '
                                  '(server never answered?)')
            try:
                parsed = parsers.parse_file(client, tool=self.tool)
                table = parsed.table()
            except parsers.ParseError as err:
                raise SanityError(f'flow {flow_id}: {err}') from None
            if status not in (0, None):
                raise SanityError(f'flow {flow_id}: {self.tool} client exited with {status}')
            tables.append(table)

        table = tables[0] if len(tables) == 1 else aggregate(tables, self.name)
        missing = sorted(set(self.expected_sizes) - set(table.sizes()))
        if missing:
            raise SanityError(f'{self.tool}: missing sizes {missing[:8]}')
        if self.job.exitcode:
            raise SanityError(f'ibrepro pair exited with {self.job.exitcode} (a server failed or timed out; '
                              f'see flow-*.server.out)')
        return None, table


def _status(stagedir, flow_id, side):
    try:
        with open(os.path.join(stagedir, f'flow-{flow_id}.{side}.status.json')) as fp:
            return json.load(fp)['returncode']
    except (OSError, ValueError, KeyError):
        return None
