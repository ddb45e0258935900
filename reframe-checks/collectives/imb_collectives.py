"""MPI collective latency with the Intel MPI Benchmarks, as the papers measured it with Pallas PMB.

000 Sec. IV.C.2 (Figs. 15-17): MPI_Alltoall, MPI_Bcast, MPI_Allgather at 4x1 (one process per node, 4 nodes).
002 Sec. 3.7 (Figs. 11-12): MPI_Alltoall and MPI_Allreduce on 8 nodes. The default is 000's 4x1; set
``-S num_ranks=8`` for 002's layout.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.imb import IMBBenchmark

# IMB benchmark -> (catalog rows, figures it reproduces)
BENCHMARKS = {
    'Alltoall': ([14, 30], ['000-fig15', '002-fig11']),
    'Bcast': ([14], ['000-fig16']),
    'Allgather': ([14], ['000-fig17']),
    'Allreduce': ([30], ['002-fig12']),
}


@rfm.simple_test
class IMBCollective(IMBBenchmark):
    #: The IMB-MPI1 collective benchmark.
    benchmark = parameter(list(BENCHMARKS), type=str)

    valid_systems = ['+mpi']
    level = 'collective'
    num_ranks = 4
    report_metrics = ['lat']

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = BENCHMARKS.get(self.benchmark, ([], []))
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI collective latency (t_avg)'
