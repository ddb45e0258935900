"""Verbs-level latency: send/recv, RDMA write, RDMA read and atomics, with perftest (000/003 Sec. IV.B.1).

The papers ping-pong between two processes on two nodes over RC, 1000 warm-up iterations then the average of
10,000 (perftest: ``-n 10000``; its latency tests have no warm-up option, and ``lat`` is perftest's t_avg).
Send/recv polls the CQ, RDMA write polls the last byte, RDMA read and atomics are initiated by one side and
polled on the CQ. 004 contrasts the RDMA write and send/recv latencies of ConnectX and InfiniHost III.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.perftest import PerftestFlows

# operation -> (perftest program and options, catalog rows, figures)
OPERATIONS = {
    'send': (['ib_send_lat'], [1, 38], ['000-fig2', '003-fig2', '004-slide-connectx-improvements']),
    'rdma_write': (['ib_write_lat'], [2, 38], ['000-fig3', '003-fig3', '004-slide-connectx-improvements']),
    'rdma_read': (['ib_read_lat'], [3], ['000-fig4', '003-fig4']),
    'fetch_and_add': (['ib_atomic_lat', '-A', 'FETCH_AND_ADD'], [4], ['000-fig5', '003-fig5']),
    'cmp_and_swap': (['ib_atomic_lat', '-A', 'CMP_AND_SWAP'], [4], ['000-fig5', '003-fig5']),
}


@rfm.simple_test
class PerftestLatency(PerftestFlows):
    #: The verbs operation.
    operation = parameter(list(OPERATIONS), type=str)

    iterations = 10000
    report_metrics = ['lat']

    @run_after('init')
    def describe(self):
        (self.test, *self.extra_options), self.experiments, self.figures = OPERATIONS[self.operation]
        if self.test == 'ib_atomic_lat':
            self.all_sizes = False          # atomics move 8 bytes; perftest has no size sweep for them
            self.message_size = 8
        self.descr = f'verbs {self.operation} latency (perftest {self.test})'
