"""MPI point-to-point latency and bandwidth with the Intel MPI Benchmarks (Pallas PMB in the papers).

PingPong is the MPI ping-pong latency (one-way, half the round trip) and its bandwidth; Uniband and Biband are
the windowed uni- and bi-directional bandwidths; Sendrecv is the nearest public test of 002's bi-directional
latency; Exchange is IMB's both-neighbour exchange. Two processes: ``2x1`` one per node (the papers), ``1x2``
both on one node (002 Sec. 3.6, intra-node; the only layout of a one-node system such as ``local``).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.imb import IMBBenchmark

# IMB benchmark -> (catalog rows, figures it reproduces, metrics to record), for the papers' 2x1 layout
BENCHMARKS = {
    'PingPong': ([11, 16, 22], ['000-fig12', '003-fig12', '001-fig2', '002-fig1'], ['lat', 'bw']),
    'Uniband': ([12, 17, 23], ['000-fig13', '003-fig13', '001-fig2', '002-fig2'], ['bw', 'msgrate']),
    'Biband': ([13, 18, 26], ['000-fig14', '003-fig14', '001-fig2', '002-fig5'], ['bw', 'msgrate']),
    'Sendrecv': ([25], ['002-fig4'], ['lat', 'bw']),
    'Exchange': ([25], ['002-fig4'], ['lat', 'bw']),
}

# the intra-node layout reproduces 002's SMP latency (Fig. 9) and bandwidth (Fig. 10)
INTRA_NODE = {'PingPong': ([29], ['002-fig9']), 'Uniband': ([29], ['002-fig10'])}


@rfm.simple_test
class IMBPointToPoint(IMBBenchmark):
    #: The IMB-MPI1 benchmark.
    benchmark = parameter(list(BENCHMARKS), type=str)

    #: ``<nodes>x<processes per node>``: 2x1 across two nodes, 1x2 within one node.
    layout = parameter(['2x1', '1x2'], type=str)

    level = 'mpi'

    @run_after('init')
    def describe(self):
        experiments, figures, self.report_metrics = BENCHMARKS.get(self.benchmark, ([], [], []))
        if self.layout == '1x2':
            experiments, figures = INTRA_NODE.get(self.benchmark, ([], []))
            self.tags |= {'intra-node'}
        self.experiments, self.figures = experiments, figures
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI point-to-point, 2 processes, layout {self.layout}'
