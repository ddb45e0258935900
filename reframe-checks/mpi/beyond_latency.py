"""What latency and bandwidth alone miss (002 Sec. 3.2-3.8), measured by our own MPI benchmarks (benchmarks/mpi).

Host overhead inside the latency test, bi-directional latency and bandwidth, the computation that overlaps a
non-blocking exchange, buffer reuse, and the memory of an MPI program, each inter-node (``2x1``, the papers) and
intra-node (``1x2``, 002 Sec. 3.6: the same programs, placement from the launcher).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.bench import BenchMPI

LAYOUTS = ['2x1', '1x2']

# The section's one table: quantity -> (catalog rows, the papers' figures, the metrics reported, the program's own
# options {flag: the variable that gives its value}). Figs. 4-5 (rows 25-26) are drawn with the other tools of
# bi-directional latency and bandwidth in pt2pt_collectives.py: here the rows only (the catalog tags the figure).
FIGURES = {
    'overhead': ([24], ['002-fig3'], ['overhead', 'lat'], {}),
    'bilatency': ([25], [], ['lat'], {}),
    'bibandwidth': ([26], [], ['bw', 'msgrate'], {'-W': 'window'}),
    'overlap': ([27], ['002-fig6'], ['overlap', 'lat'], {'-t': 'tolerance'}),
    'reuse-lat': ([28], ['002-fig7'], ['lat'], {'-M': 'mode', '-R': 'reuse', '--max-memory': 'max_memory'}),
    'reuse-bw': ([28], ['002-fig8'], ['bw'], {'-M': 'mode', '-R': 'reuse', '--max-memory': 'max_memory'}),
    'memory': ([31], ['002-fig13'], ['mem'], {}),
}


class _Quantity(BenchMPI):
    """A program of this section: its row of :data:`FIGURES` by ``quantity`` (the metrics unless set with -S)."""

    #: The row of FIGURES (a plain attribute: what the class measures, not a knob).
    quantity = None

    def quantity_of(self):
        return self.quantity

    @run_after('init')
    def describe(self):
        self.experiments, self.figures, metrics, self.program_flags = FIGURES[self.quantity_of()]
        self.report_metrics = self.report_metrics or metrics


class _BothLayouts(_Quantity):
    layout = parameter(LAYOUTS, type=str)


@rfm.simple_test
class HostOverhead(_BothLayouts):
    """Time inside MPI_Send and MPI_Recv of the ping-pong latency test (002 Sec. 3.2, Fig. 3)."""

    program = 'ibrepro_overhead'
    quantity = 'overhead'


@rfm.simple_test
class BiDirectionalLatency(_BothLayouts):
    """Both sides send at the same time (002 Sec. 3.3, Fig. 4)."""

    program = 'ibrepro_bilat'
    quantity = 'bilatency'


@rfm.simple_test
class BiDirectionalBandwidth(_BothLayouts):
    """Both sides stream a window of W messages at once (002 Sec. 3.3, Fig. 5: W = 16)."""

    #: Messages in flight per direction; 002 names W = 16.
    window = variable(int, value=16)

    program = 'ibrepro_bibw'
    quantity = 'bibandwidth'


@rfm.simple_test
class OverlapPotential(_BothLayouts):
    """The longest computation that does not raise the latency of a non-blocking exchange (002 Sec. 3.4, Fig. 6).

    002 states no tolerance: ours is 10 % (``-t``), the search a doubling then a bisection per size."""

    #: Allowed rise of the round trip, in percent.
    tolerance = variable(float, value=10.0)

    program = 'ibrepro_overlap'
    quantity = 'overlap'


@rfm.simple_test
class BufferReuse(_BothLayouts):
    """Latency or bandwidth when only R % of the iterations reuse a buffer (002 Sec. 3.5, Figs. 7-8)."""

    #: ``lat`` (Fig. 7) or ``bw`` (Fig. 8).
    mode = parameter(['lat', 'bw'], type=str)

    #: Percentage of iterations on the reused buffer; the rest use buffers never touched before.
    reuse = parameter([0, 50, 100], type=int)

    #: Fresh buffers per rank and size are capped at this many MiB (the row then runs fewer iterations).
    max_memory = variable(int, value=1024)

    program = 'ibrepro_reuse'

    def quantity_of(self):
        return f'reuse-{self.mode}'


@rfm.simple_test
class MemoryUsage(_Quantity):
    """Resident memory of an MPI program that only synchronises, against the process count (002 Sec. 3.8,
    Fig. 13: one process per node). ``1xN`` layouts give the one-node trend."""

    layout = parameter(['2x1', '4x1', '8x1', '1x1', '1x2', '1x4'], type=str)
    program = 'ibrepro_memory'
    quantity = 'memory'
    table_benchmark = 'memory'
    allow_oversubscription = True      # memory, not time: four processes on two cores measure the same
    sweeps_sizes = False
