"""Many pairs at once: multi-pair RDMA write/read latency and RDMA write bandwidth (004, ConnectX slides).

N concurrent perftest pairs between two nodes, each on its own TCP port, one process of each pair per node, all
measuring the same message size at the same time (duration mode, one size per round).
004 compares ConnectX and InfiniHost III up to 8 pairs (the PIO/inline limit is crossed at 256 B; ConnectX
issues up to 16 concurrent RDMA reads: perftest ``-o`` sets the outstanding reads). Latency is the mean over the
pairs, bandwidth their sum. Concurrent perftest pairs express this directly, so no program of our own is needed.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.pair_runner import endpoints, flow
from ibrepro.rfm.perftest import PerftestFlows

TESTS = {
    'ib_write_lat': ([39], ['004-slide-multipair-write-lat'], ['lat']),
    'ib_read_lat': ([40], ['004-slide-multipair-read-lat'], ['lat']),
    'ib_write_bw': ([41], ['004-slide-multipair-write-bw'], ['bw', 'msgrate']),
}


@rfm.simple_test
class PerftestMultiPair(PerftestFlows):
    #: The perftest program each pair runs.
    program = parameter(list(TESTS), type=str)

    #: Concurrent pairs.
    pairs = parameter([1, 2, 4, 8], type=int)

    @run_after('init')
    def describe(self):
        self.test = self.program
        self.experiments, self.figures, self.report_metrics = TESTS[self.program]
        self.descr = f'{self.pairs} concurrent {self.program} pairs'

    def flows(self):
        ends, self.placement = endpoints(self.current_partition)
        return [flow(i, *ends) for i in range(self.pairs)]
