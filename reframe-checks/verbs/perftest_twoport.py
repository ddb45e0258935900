"""Two HCA ports at once: binding and dual-port mode with perftest (000/003 Sec. IV.B.3, Figs. 8-11).

Binding pins each direction (or each process) to its own port; perftest expresses it as concurrent
``ib_write_bw`` flows on rail 1 and rail 2 (two ports of one HCA, or two single-port devices), measured at the same
time (duration mode, one size per round) so that their bandwidths add up:

* bidir-1proc (Fig. 9, binding): the first node sends on port 1 and receives on port 2;
* unidir-2proc (Fig. 10): two processes per node, both sending, one on each port;
* bidir-2proc (Fig. 11, the headline 2729/2787 MB/s): two processes per node, each bi-directional on its port.

Striping (one message split across both ports) needs our own verbs benchmark (reframe-checks/multirail/).
``PerftestDualPort`` is perftest's own dual-port mode (``-O``), one process driving both ports of one device:
it needs a device with two ports (extras ``ib_ports: 2``, as the papers' InfiniHost III and mlx4 ConnectX had).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.perftest import PerftestFlows, flow

# case -> (per-flow options, catalog rows, figures, the flows as (server node, server rail, client node, client rail))
CASES = {
    'bidir-1proc': ([], [8], ['000-fig9', '003-fig9'], [(1, 0, 0, 0), (0, 1, 1, 1)]),
    'unidir-2proc': ([], [9], ['000-fig10', '003-fig10'], [(1, 0, 0, 0), (1, 1, 0, 1)]),
    'bidir-2proc': (['-b'], [10], ['000-fig11', '003-fig11'], [(1, 0, 0, 0), (1, 1, 0, 1)]),
}


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
    case = parameter(list(CASES), type=str)

    @run_after('init')
    def describe(self):
        options, self.experiments, self.figures, _ = CASES[self.case]
        self.extra_options = options + ['-t', str(self.window), '--perform_warm_up']
        self.descr = f'verbs two-port binding, {self.case}: concurrent ib_write_bw on ports 1 and 2'

    def flows(self):
        nodes = int(self.current_partition.extras.get('nodes', 1))
        if nodes >= 2:
            self.placement = 'two nodes, two rails each'
            return [flow(i, (sn, sr), (cn, cr)) for i, (sn, sr, cn, cr) in enumerate(CASES[self.case][3])]

        # One node: its two rails are cabled to each other; each flow crosses between them.
        self.placement = 'two rails of one node'
        return [flow(i, (0, sr), (1, 1 - sr)) for i, (_, sr, _, _) in enumerate(CASES[self.case][3])]


@rfm.simple_test
class PerftestDualPort(_TwoPorts):
    """perftest's dual-port mode: one process per node drives ports 1 and 2 of its HCA (``-O``)."""

    experiments = [9]
    figures = ['000-fig10', '003-fig10']

    @run_after('init')
    def select_two_port_devices(self):
        # perftest -O drives ports 1 and 2 of ONE device: two single-port devices (mlx5, rxe) cannot
        self.valid_systems = [f'{spec} %ib_ports=2' for spec in self.valid_systems]

    @run_after('init')
    def describe(self):
        self.extra_options = ['-O', '-t', str(self.window), '--perform_warm_up']
        self.descr = 'verbs dual-port mode (ib_write_bw -O), uni-directional'
