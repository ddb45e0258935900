"""Two HCA ports at once: striping and binding at the verbs level (000/003 Sec. IV.B.3, Figs. 8-11).

Striping splits every message above the threshold (8192 B) evenly across the ports and signals completion with a
send/recv control message on each port; binding pins each direction (or each process pair) to its own port. Window
64, 10 warm-up + 100 timed iterations, as the papers' bandwidth tests. The cases:

* stripe-uni-1proc (Fig. 8): one process per node striping one stream over both ports;
* bidir-1proc (Fig. 9): striping, or binding (the first node sends on port 1 and receives on port 2);
* unidir-2proc (Fig. 10): two processes per node, both sending, one on each port (or both striping);
* bidir-2proc (Fig. 11, the headline 2729/2787 MB/s): two processes per node, each bi-directional.

Two tools reproduce them. No public verbs tool stripes one message across ports, hence our ``ibrepro_rdma``
(benchmarks/verbs, ``VerbsTwoPort``: striping and binding). perftest expresses binding as concurrent
``ib_write_bw`` flows on rail 1 and rail 2 (two ports of one HCA, or two single-port devices), measured at the same
time (duration mode, one size per round) so that their bandwidths add up (``PerftestBinding``);
``PerftestDualPort`` is perftest's own dual-port mode (``-O``), one process driving both ports of one device: it
needs a device with two ports (extras ``ib_ports: 2``, as the papers' InfiniHost III and mlx4 ConnectX had).
MVAPICH2's multi-rail runs are the MPI-level counterparts (reframe-checks/mpi/mvapich2.py).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.bench import BenchRDMA
from ibrepro.rfm.pair_runner import flow
from ibrepro.rfm.perftest import PerftestFlows

# The papers' cases, shared by every tool: ``mode-direction-processes per node`` -> (catalog rows, figures)
FIGURES = {
    'stripe-uni-1proc': ([7], ['000-fig8', '003-fig8']),
    'stripe-bi-1proc': ([8], ['000-fig9', '003-fig9']),
    'bind-bi-1proc': ([8], ['000-fig9', '003-fig9']),
    'stripe-uni-2proc': ([9], ['000-fig10', '003-fig10']),
    'bind-uni-2proc': ([9], ['000-fig10', '003-fig10']),
    'stripe-bi-2proc': ([10], ['000-fig11', '003-fig11']),
    'bind-bi-2proc': ([10], ['000-fig11', '003-fig11']),
}

# perftest's binding cases: case -> (the papers' case, per-flow options, the flows as (server node, server rail,
# client node, client rail))
PERFTEST_BINDING = {
    'bidir-1proc': ('bind-bi-1proc', [], [(1, 0, 0, 0), (0, 1, 1, 1)]),
    'unidir-2proc': ('bind-uni-2proc', [], [(1, 0, 0, 0), (1, 1, 0, 1)]),
    'bidir-2proc': ('bind-bi-2proc', ['-b'], [(1, 0, 0, 0), (1, 1, 0, 1)]),
}


@rfm.simple_test
class VerbsTwoPort(BenchRDMA):
    #: ``mode-direction-processes per node``, the papers' cases (binding has no 1-process uni case).
    case = parameter(list(FIGURES), type=str)

    #: Messages above this many bytes are striped.
    threshold = variable(int, value=8192)

    #: Messages per iteration, the papers' W.
    window = variable(int, value=64)

    required_partition_features = ['dual-port']

    @run_after('init')
    def describe(self):
        mode, direction, procs = self.case.split('-')
        self.pairs = int(procs[0])
        self.experiments, self.figures = FIGURES[self.case]
        self.client_options = ['-t', 'bw', '-M', mode, '-s', str(self.threshold), '-W', str(self.window)]
        if direction == 'bi':
            self.client_options.append('-b')
        self.report_metrics = ['bw', 'msgrate']
        self.descr = f'verbs two-port {mode}, {direction}-directional, {self.pairs} process(es) per node'


class _TwoPorts(PerftestFlows):
    required_partition_features = ['dual-port']
    test = 'ib_write_bw'
    iterations = 6400
    report_metrics = ['bw', 'msgrate']

    #: Messages in flight, the papers' window W (perftest ``-t``).
    window = variable(int, value=64)


@rfm.simple_test
class PerftestBinding(_TwoPorts):
    #: Which binding experiment.
    case = parameter(list(PERFTEST_BINDING), type=str)

    @run_after('init')
    def describe(self):
        papers_case, options, _ = PERFTEST_BINDING[self.case]
        self.experiments, self.figures = FIGURES[papers_case]
        self.extra_options = options + ['-t', str(self.window), '--perform_warm_up']
        self.descr = f'verbs two-port binding, {self.case}: concurrent ib_write_bw on ports 1 and 2'

    def flows(self):
        ends = PERFTEST_BINDING[self.case][2]
        nodes = int(self.current_partition.extras.get('nodes', 1))
        if nodes >= 2:
            self.placement = 'two nodes, two rails each'
            return [flow(i, (sn, sr), (cn, cr)) for i, (sn, sr, cn, cr) in enumerate(ends)]

        # One node: its two rails are cabled to each other; each flow crosses between them.
        self.placement = 'two rails of one node'
        return [flow(i, (0, sr), (1, 1 - sr)) for i, (_, sr, _, _) in enumerate(ends)]


@rfm.simple_test
class PerftestDualPort(_TwoPorts):
    """perftest's dual-port mode: one process per node drives ports 1 and 2 of its HCA (``-O``), uni-directional:
    the papers' two-port, two-stream case (Fig. 10)."""

    @run_after('init')
    def select_two_port_devices(self):
        # perftest -O drives ports 1 and 2 of ONE device: two single-port devices (mlx5, rxe) cannot
        self.valid_systems = [f'{spec} %ib_ports=2' for spec in self.valid_systems]

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = FIGURES['stripe-uni-2proc']
        self.extra_options = ['-O', '-t', str(self.window), '--perform_warm_up']
        self.descr = 'verbs dual-port mode (ib_write_bw -O), uni-directional'
