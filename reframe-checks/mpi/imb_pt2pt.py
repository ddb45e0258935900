"""MPI point-to-point latency and bandwidth with the Intel MPI Benchmarks (Pallas PMB in the papers).

PingPong is the MPI ping-pong latency (one-way, half the round trip) and its bandwidth; Uniband and Biband are
the windowed uni- and bi-directional bandwidths; Sendrecv is the nearest public test of 002's bi-directional
latency; Exchange is IMB's both-neighbour exchange. Two processes, one per node where there are nodes.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.imb import IMBBenchmark

# IMB benchmark -> (catalog rows, figures it reproduces, metrics to record)
BENCHMARKS = {
    'PingPong': ([11, 16, 22], ['000-fig12', '003-fig12', '001-fig2', '002-fig1'], ['lat', 'bw']),
    'Uniband': ([12, 17, 23], ['000-fig13', '003-fig13', '001-fig2', '002-fig2'], ['bw', 'msgrate']),
    'Biband': ([13, 18, 26], ['000-fig14', '003-fig14', '001-fig2', '002-fig5'], ['bw', 'msgrate']),
    'Sendrecv': ([25], ['002-fig4'], ['lat', 'bw']),
    'Exchange': ([25], ['002-fig4'], ['lat', 'bw']),
}


@rfm.simple_test
class IMBPointToPoint(IMBBenchmark):
    #: The IMB-MPI1 benchmark.
    benchmark = parameter(list(BENCHMARKS), type=str)

    valid_systems = ['+mpi']
    level = 'mpi'

    @run_after('init')
    def describe(self):
        self.experiments, self.figures, self.report_metrics = BENCHMARKS.get(self.benchmark, ([], [], []))
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI point-to-point, 2 processes'
