"""MPI collective latency with the OSU Micro-Benchmarks, in the papers' layouts.

000 Sec. IV.C.2 (Figs. 15-17): MPI_Alltoall, MPI_Bcast, MPI_Allgather at 4x1 (one process per node on 4
nodes). 002 Sec. 3.7 (Figs. 11-12): MPI_Alltoall and MPI_Allreduce on 8 nodes (8x1). The papers used Pallas
PMB (the IMB family reproduces that); OMB measures the same operations. Neither paper states message sizes:
OMB's default sweep (1 B to 1 MiB) stands.

A case is ``<program>-<nodes>x<processes per node>``; other layouts: ``-P case=osu_allreduce-16x1``.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.layout import parse_layout
from ibrepro.rfm.osu import OSUBenchmark

# case -> (catalog rows, figures)
CASES = {
    'osu_alltoall-4x1': ([14], ['000-fig15']),
    'osu_bcast-4x1': ([14], ['000-fig16']),
    'osu_allgather-4x1': ([14], ['000-fig17']),
    'osu_alltoall-8x1': ([30], ['002-fig11']),
    'osu_allreduce-8x1': ([30], ['002-fig12']),
}


@rfm.simple_test
class OSUCollective(OSUBenchmark):
    #: The OMB collective and the layout, ``<program>-<nodes>x<processes per node>``.
    case = parameter(list(CASES), type=str)

    level = 'collective'

    @run_after('init')
    def describe(self):
        self.osu_benchmark, _, layout = self.case.rpartition('-')
        self.num_nodes, self.ranks_per_node = parse_layout(layout)
        self.experiments, self.figures = CASES.get(self.case, ([], []))
        self.descr = f'OSU {self.osu_benchmark}: MPI collective latency at {layout}'
