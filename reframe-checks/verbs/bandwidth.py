"""Verbs-level single-port RDMA write bandwidth, uni- and bi-directional, with perftest (000/003 Sec. IV.B.2).

The papers' sender posts a window of W = 64 back-to-back messages, the receiver answers with a small reply; 10
warm-up and 100 timed iterations. perftest keeps up to ``-t`` (tx depth) writes in flight, which is close to,
not the same as, a window with a reply: ``-t 64``, ``--perform_warm_up``, and 100 x 64 = 6400 messages
(``-n 6400``) per size.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.perftest import PerftestFlows

DIRECTIONS = {
    'uni': ([], [5], ['000-fig6', '003-fig6']),
    'bi': (['-b'], [6], ['000-fig7', '003-fig7']),
}


@rfm.simple_test
class PerftestBandwidth(PerftestFlows):
    #: uni- or bi-directional (``-b``).
    direction = parameter(list(DIRECTIONS), type=str)

    #: Messages in flight, the papers' window W (perftest ``-t``).
    window = variable(int, value=64)

    test = 'ib_write_bw'
    iterations = 6400
    report_metrics = ['bw', 'msgrate']

    @run_after('init')
    def describe(self):
        options, self.experiments, self.figures = DIRECTIONS[self.direction]
        self.extra_options = options + ['-t', str(self.window), '--perform_warm_up']
        self.descr = f'verbs RDMA write bandwidth, {self.direction}-directional, one port'
