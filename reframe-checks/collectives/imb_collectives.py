"""MPI collective latency with the Intel MPI Benchmarks, as the papers measured it with Pallas PMB.

000 Sec. IV.C.2 (Figs. 15-17): MPI_Alltoall, MPI_Bcast, MPI_Allgather at 4x1 (one process per node, 4 nodes).
002 Sec. 3.7 (Figs. 11-12): MPI_Alltoall and MPI_Allreduce on 8 nodes (8x1). ``1x2`` (two processes on one
node) is no layout of the papers: the smallest collective, which every system can run.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.imb import IMBBenchmark

# (IMB benchmark, layout) -> (catalog rows, figures it reproduces)
PAPERS = {
    ('Alltoall', '4x1'): ([14], ['000-fig15']),
    ('Bcast', '4x1'): ([14], ['000-fig16']),
    ('Allgather', '4x1'): ([14], ['000-fig17']),
    ('Alltoall', '8x1'): ([30], ['002-fig11']),
    ('Allreduce', '8x1'): ([30], ['002-fig12']),
}


@rfm.simple_test
class IMBCollective(IMBBenchmark):
    #: The IMB-MPI1 collective benchmark.
    benchmark = parameter(['Alltoall', 'Bcast', 'Allgather', 'Allreduce'], type=str)

    #: ``<nodes>x<processes per node>``: the papers' 4x1 (000) and 8x1 (002), or one node's 1x2.
    layout = parameter(['4x1', '8x1', '1x2'], type=str)

    level = 'collective'
    report_metrics = ['lat']

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = PAPERS.get((self.benchmark, self.layout), ([], []))
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI collective latency (t_avg), layout {self.layout}'
