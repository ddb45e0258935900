"""The papers' Pallas PMB benchmarks timed as IMB-MPI1 times them, by our ``ibrepro_imb``, where IMB is not built.

The same experiments as the IMB families (``IMBPointToPoint``, ``IMBCollective``), for systems whose MPI has no
IMB: the simulated testbeds in CI (IMB's sources are on no package registry; our program builds with SimGrid's
``smpicc``), or a site's fresh MPI. PingPong, Uniband, Biband: two processes, ``2x1`` (the papers) or ``1x2``
(002 Sec. 3.6, intra-node). Alltoall, Bcast, Allgather, Allreduce: 000's ``4x1`` (Figs. 15-17) and 002's ``8x1``
(Figs. 11-12), plus ``4x2`` (two processes per node) and ``1x2``. Collective latency is IMB's t_avg.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable

from ibrepro.rfm.bench import BenchMPI
from ibrepro.rfm.imb import REDUCTIONS
from ibrepro.rfm.layout import parse_layout

# case -> (catalog rows, figures, metrics to record); the same papers' figures as the IMB families
CASES = {
    'PingPong-2x1': ([11, 16, 22], ['000-fig12', '003-fig12', '001-fig2', '002-fig1'], ['lat', 'bw']),
    'Uniband-2x1': ([12, 17, 23], ['000-fig13', '003-fig13', '001-fig2', '002-fig2'], ['bw', 'msgrate']),
    'Biband-2x1': ([13, 18, 26], ['000-fig14', '003-fig14', '001-fig2', '002-fig5'], ['bw', 'msgrate']),
    'PingPong-1x2': ([29], ['002-fig9'], ['lat', 'bw']),
    'Uniband-1x2': ([29], ['002-fig10'], ['bw', 'msgrate']),
    'Alltoall-4x1': ([14], ['000-fig15'], ['lat']),
    'Bcast-4x1': ([14], ['000-fig16'], ['lat']),
    'Allgather-4x1': ([14], ['000-fig17'], ['lat']),
    'Alltoall-8x1': ([30], ['002-fig11'], ['lat']),
    'Allreduce-8x1': ([30], ['002-fig12'], ['lat']),
    **{f'{b}-{layout}': ([], [], ['lat']) for b in ('Alltoall', 'Bcast', 'Allgather', 'Allreduce')
       for layout in ('4x1', '4x2', '8x1', '1x2') if f'{b}-{layout}' not in
       ('Alltoall-4x1', 'Bcast-4x1', 'Allgather-4x1', 'Alltoall-8x1', 'Allreduce-8x1')},
}

POINT_TO_POINT = ('PingPong', 'Uniband', 'Biband')


@rfm.simple_test
class BenchIMB(BenchMPI):
    """IMB-MPI1's timing of one of the papers' PMB benchmarks, in one layout."""

    #: ``<IMB benchmark>-<nodes>x<processes per node>``.
    case = parameter(list(CASES), type=str)

    #: The IMB benchmark (from the case).
    benchmark = variable(str, value='')

    #: The layout (from the case).
    layout = variable(str, value='')

    program = 'ibrepro_imb'

    @run_after('init')
    def set_layout(self):
        self.benchmark, _, self.layout = self.case.rpartition('-')
        self.num_nodes, self.ranks_per_node = parse_layout(self.layout)
        self.experiments, self.figures, self.report_metrics = CASES[self.case]
        self.level = 'mpi' if self.benchmark in POINT_TO_POINT else 'collective'
        self.table_benchmark = self.benchmark
        if self.layout.startswith('1x'):
            self.tags |= {'intra-node'}
        self.descr = f'{self.benchmark} timed as IMB-MPI1 times it (ibrepro_imb), layout {self.layout}'

    def program_options(self):
        # the common knobs: iterations (-i, IMB's -iter: the most per size, default 1000, fewer above 40 KiB:
        # 40 MiB per size), warmup (-x), message_sizes (-m)
        return ['-b', self.benchmark]

    @run_before('run')
    def reductions_start_at_one_float(self):
        if self.benchmark in REDUCTIONS:
            self.expected_sizes = [s for s in self.expected_sizes if s == 0 or s % 4 == 0]
