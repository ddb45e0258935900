"""Multi-pair MPI latency and aggregate bandwidth with the OSU Micro-Benchmarks (001 Sec. 5.1, Figs. 3-5).

"We launch 2, 4, or 8 MPI processes on each physical node. Each MPI process on a node is paired with one
process on the other node" and the pairs run simultaneously: N pairs are 2N processes on 2 nodes, N per node.
OMB pairs rank i with rank i + N, so ranks are mapped in blocks (the first N on the first node). The window
of osu_mbw_mr is OMB's default (64): 001 states none.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.osu import OSUBenchmark

# OMB program -> (catalog rows, what it measures)
BENCHMARKS = {
    'osu_multi_lat': ([19], 'multi-pair latency'),
    'osu_mbw_mr': ([20], 'multi-pair aggregate bandwidth and message rate'),
}


@rfm.simple_test
class OSUMultiPair(OSUBenchmark):
    #: The OMB multi-pair program.
    benchmark = parameter(list(BENCHMARKS), type=str)

    #: Pairs communicating at once, one process of each pair per node.
    pairs = parameter([2, 4, 8], type=int)

    #: Messages in flight of osu_mbw_mr (OMB ``-W``); None: OMB's 64 (001 states none).
    window = variable(int, type(None), value=None)

    num_nodes = 2

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.ranks_per_node = self.pairs
        self.experiments, what = BENCHMARKS.get(self.benchmark, ([], self.benchmark))
        self.descr = f'OSU {self.benchmark}: {what}, {self.pairs} pairs on 2 nodes'
