"""Our own benchmarks (benchmarks/, ``ibrepro-bench``) driven by ReFrame.

MPI programs (002 Sec. 3.2-3.8) run like any MPI benchmark in a layout: ``2x1`` (two nodes, the papers'
inter-node runs) or ``1x2`` (one node: 002's intra-node comparison). The verbs program ``ibrepro_rdma``
(000/003 two-port striping and binding) is a client/server pair run by ``ibrepro pair``, addressed through RDMA
CM: the partition names the IP address of each rail of each node in extras ``rdma_addresses``
(``[[node0 rail0, node0 rail1], [node1 rail0, node1 rail1]]``; IPoIB addresses on InfiniBand).
"""

import json
import os
import sys

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable

from . import DEFAULT_TIME_LIMIT, PaperExperiment
from .layout import NodeLayout, parse_layout
from .perftest import SPEC_FILE, PerftestFlows


def expected_sizes(sizes):
    """The rows an ibrepro-bench ``-m MIN:MAX`` sweep prints: 0 first if MIN is 0, then powers of two."""
    lo, _, hi = sizes.partition(':')
    lo, hi = _bytes(lo), _bytes(hi)
    rows = [0] if lo == 0 else []
    size = 1
    while size <= hi:
        if size >= lo:
            rows.append(size)
        size *= 2
    return rows


def _bytes(text):
    units = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)


class BenchMPI(rfm.RunOnlyRegressionTest, PaperExperiment, NodeLayout):
    """One ibrepro-bench MPI program in one layout."""

    tool = 'bench'
    level = 'mpi'
    valid_systems = ['+mpi']
    valid_prog_environs = ['+ibrepro-bench']
    time_limit = DEFAULT_TIME_LIMIT

    #: The program (ibrepro_overhead, ibrepro_bilat, ibrepro_bibw, ibrepro_overlap, ibrepro_reuse, ibrepro_memory).
    program = variable(str)

    #: Message sizes ``MIN:MAX`` (``-m``); empty: the program's default sweep.
    sizes = variable(str, value='')

    #: More options, e.g. ``-i 100`` for a quick run.
    extra_options = variable(typ.List[str], value=[])

    #: Whether the program sweeps message sizes (``-m``); the memory program does not.
    sweeps_sizes = True

    def program_options(self):
        """Options the family adds (window, reuse percentage, ...)."""
        return []

    @run_after('init')
    def set_layout(self):
        self.num_nodes, self.ranks_per_node = parse_layout(self.layout)

    @run_before('run')
    def set_command(self):
        self.executable = self.program
        sweep = self.sizes and self.sweeps_sizes
        self.executable_opts = self.program_options() + (['-m', self.sizes] if sweep else [])
        self.executable_opts += self.extra_options
        if sweep:
            self.expected_sizes = expected_sizes(self.sizes)


class BenchRDMA(PerftestFlows):
    """``ibrepro_rdma`` client/server flows: one server and one client process, each on its own node (or,
    on one node, on its own rail), driving every rail of the node."""

    tool = 'bench'
    level = 'multirail'
    valid_prog_environs = ['+ibrepro-rdma']

    #: ``ibrepro_rdma`` options for the client (the server takes them from the client).
    client_options = variable(typ.List[str], value=[])

    #: Concurrent pairs of processes (``-P``); each pair is a client and a server process.
    pairs = variable(int, value=1)

    #: RDMA CM port of pair 0.
    cm_port = variable(int, value=18620)

    #: Message sizes ``MIN:MAX`` (``-m``); empty: the program's 2 B .. 8 MiB.
    sizes = variable(str, value='')

    @run_after('setup')
    def skip_without_rdma(self):
        super().skip_without_rdma()
        if not self.current_partition.extras.get('rdma_addresses'):
            self.skip_for([f'{self.current_partition.fullname} does not name the IP address of each rail '
                           '(extras rdma_addresses), which RDMA CM needs'])

    @run_before('run')
    def write_spec(self):
        extras = self.current_partition.extras
        addresses = extras['rdma_addresses']
        two_nodes = int(extras.get('nodes', 1)) >= 2 and len(addresses) >= 2
        server_rails = addresses[1] if two_nodes else addresses[0]
        common = ['-P', str(self.pairs), '-p', str(self.cm_port), '-T', str(self.pair_timeout)]
        client = ['ibrepro_rdma', *common, *self.client_options]
        if self.sizes:
            client += ['-m', self.sizes]
            self.expected_sizes = expected_sizes(self.sizes)
        if self.iterations is not None:     # timed iterations per size; default: the papers' counts
            client += ['-i', str(self.iterations), '-I', str(self.iterations)]
        if not two_nodes and len(addresses) > 1:
            client += ['--source', ','.join(addresses[1])]
        spec = {'flows': [{'id': 0, 'port': self.cm_port,
                           'server': {'node': 1 if two_nodes else 0, 'argv': ['ibrepro_rdma', *common]},
                           'client': {'node': 0, 'argv': [*client, ','.join(server_rails)]}}],
                'node_exec': extras.get('node_exec'), 'wait_listen': False, 'timeout': self.pair_timeout}
        with open(os.path.join(self.stagedir, SPEC_FILE), 'w') as fp:
            json.dump(spec, fp, indent=2)

        self.placement = 'two nodes' if two_nodes else 'one node'
        self.flow_ids = [0]
        self.executable = sys.executable
        self.executable_opts = ['-m', 'ibrepro.cli', 'pair', SPEC_FILE]
        if two_nodes:
            self.num_tasks, self.num_tasks_per_node = 2, 1
        else:
            self.num_tasks = 1
            self.job.launcher = getlauncher('local')()
