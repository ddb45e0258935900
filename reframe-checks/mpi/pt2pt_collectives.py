"""MPI-level latency, bandwidth and collectives, as the papers measured them (000/003 Sec. IV.C, 001 Sec. 5.1,
002 Sec. 3.1, 3.3, 3.6, 3.7).

Point to point, two processes: ``2x1`` one per node (000/003 Sec. IV.C.1 Figs. 12-14, 001 Sec. 5.1 Fig. 2, 002
Sec. 3.1 and 3.3 Figs. 1, 2, 4, 5), ``1x2`` both on one node (002 Sec. 3.6 Figs. 9-10, intra-node: the MPI's
shared-memory path, and the only layout of a one-node system such as ``local``). Latency is one-way (half the
ping-pong round trip); bandwidth is windowed, uni- or bi-directional. Collectives (000 Sec. IV.C.2 Figs. 15-17:
MPI_Alltoall, MPI_Bcast, MPI_Allgather at 4x1, one process per node on 4 nodes; 002 Sec. 3.7 Figs. 11-12:
MPI_Alltoall and MPI_Allreduce on 8 nodes, 8x1): latency, IMB's t_avg. ``1x2`` collectives are no layout of the
papers: the smallest collective, which every system can run. Neither paper states message sizes: each tool's
default sweep stands. 002 Sec. 4.7 (Figs. 26-27) repeats the latency and the W = 16 bandwidth with the HCA on a
66 MHz PCI bus (a partition with that hardware).

The papers used Pallas PMB; the tools today: the Intel MPI Benchmarks (``IMBPointToPoint``, ``IMBCollective``), the
same benchmarks timed as IMB-MPI1 times them by our ``ibrepro_imb`` where IMB is not built (``BenchIMB``: the
simulated testbeds in CI, whose SimGrid ``smpicc`` builds it, or a site's fresh MPI), the OSU Micro-Benchmarks
(``OSU*``), and MVAPICH2 with one port or two ports striped (``MVAPICH2MultiRailCollective``, 000's Figs. 15-17 with
one and two ports). Sendrecv is the nearest public test of 002's bi-directional latency; Exchange is IMB's
both-neighbour exchange.

Window sizes (osu_bw/osu_bibw -W): 002 Fig. 2 plots the bandwidth for several windows but its text names only
W = 16 (and says performance grows with W, and that Quadrics drops "when the window size exceeds 16"). The default
sweep is 4, 16, 64: the named 16, one step of 4x below and above it, and 64 is OMB's default, the window of every
run whose paper states none (000/003, 001). Other windows: ``-P window=1,2,4,8,16,32,64``. 002's bi-directional
test (Fig. 5) names W = 16. Point-to-point and collectives share one file because ``BenchIMB`` times both and is
one test family (its stored history is keyed by its name and parameters).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable

from ibrepro.rfm.bench import BenchMPI
from ibrepro.rfm.imb import REDUCTIONS, IMBBenchmark
from ibrepro.rfm.layout import parse_layout
from ibrepro.rfm import mvapich2
from ibrepro.rfm.mvapich2 import MVAPICH2Benchmark
from ibrepro.rfm.osu import OSUBenchmark

# The papers' figures, shared by every tool: ``<quantity>-<nodes>x<processes per node>`` -> (catalog rows, figures).
# A collective row adds that layout to every collective tool.
FIGURES = {
    'latency-2x1': ([11, 16, 22], ['000-fig12', '003-fig12', '001-fig2', '002-fig1']),
    'bandwidth-2x1': ([12, 17, 23], ['000-fig13', '003-fig13', '001-fig2', '002-fig2']),
    'bibandwidth-2x1': ([13, 18, 26], ['000-fig14', '003-fig14', '001-fig2', '002-fig5']),
    'bilatency-2x1': ([25], ['002-fig4']),
    'latency-1x2': ([29], ['002-fig9']),
    'bandwidth-1x2': ([29], ['002-fig10']),
    'pci-bus-latency-2x1': ([37], ['002-fig26']),
    'pci-bus-bandwidth-2x1': ([37], ['002-fig27']),
    'alltoall-4x1': ([14], ['000-fig15']),
    'bcast-4x1': ([14], ['000-fig16']),
    'allgather-4x1': ([14], ['000-fig17']),
    'alltoall-8x1': ([30], ['002-fig11']),
    'allreduce-8x1': ([30], ['002-fig12']),
}

COLLECTIVES = ['alltoall', 'bcast', 'allgather', 'allreduce']

#: The collective rows of FIGURES, ``<operation>-<layout>``, in their order.
PAPER_COLLECTIVES = [key for key in FIGURES if key.split('-')[0] in COLLECTIVES]

#: Layouts of the collective families: the papers' and one node's 1x2.
COLLECTIVE_LAYOUTS = list(dict.fromkeys([key.split('-', 1)[1] for key in PAPER_COLLECTIVES] + ['1x2']))

# IMB point-to-point benchmark -> (quantity, metrics to record)
IMB_PT2PT = {
    'PingPong': ('latency', ['lat', 'bw']),
    'Uniband': ('bandwidth', ['bw', 'msgrate']),
    'Biband': ('bibandwidth', ['bw', 'msgrate']),
    'Sendrecv': ('bilatency', ['lat', 'bw']),
    'Exchange': ('bilatency', ['lat', 'bw']),
}

#: The window of runs whose paper states none: OMB's default.
DEFAULT_WINDOW = 64


def papers(key, seeds=lambda seed: True):
    """(catalog rows, figures) of FIGURES[key] whose seed paper ``seeds`` accepts; ([], []) for no row."""
    from ibrepro import catalog

    rows, figures = FIGURES.get(key, ([], []))
    return ([r for r in rows if any(seeds(s) for s in catalog.experiment(r)['seeds'])],
            [f for f in figures if seeds(f.split('-')[0])])


def imb_case(benchmark, layout):
    """(catalog rows, figures, metrics) of an IMB benchmark (PMB's name) in a layout."""
    if benchmark in IMB_PT2PT:
        quantity, metrics = IMB_PT2PT[benchmark]
        return (*papers(f'{quantity}-{layout}'), metrics)
    return (*papers(f'{benchmark.lower()}-{layout}'), ['lat'])


# -- point to point --------------------------------------------------------------------------------------

@rfm.simple_test
class OSULatency(OSUBenchmark):
    """osu_latency: one-way latency (half the ping-pong round trip)."""

    osu_benchmark = 'osu_latency'
    num_nodes = 2

    @run_after('init')
    def describe(self):
        rows, figures = papers('latency-2x1')
        more_rows, more_figures = papers('pci-bus-latency-2x1')
        self.experiments, self.figures = rows + more_rows, figures + more_figures
        self.descr = 'OSU osu_latency: MPI latency, 2 processes on 2 nodes'


@rfm.simple_test
class OSUBandwidth(OSUBenchmark):
    """osu_bw: uni-directional bandwidth with a window of W messages in flight."""

    #: OMB -W, messages sent back to back before the receiver replies.
    window = parameter([4, 16, DEFAULT_WINDOW], type=int)

    osu_benchmark = 'osu_bw'
    num_nodes = 2

    @run_after('init')
    def describe(self):
        # 002 Fig. 2 plots several windows; the papers that state none ran OMB's default
        rows, figures = papers('bandwidth-2x1', lambda seed: seed == '002' or self.window == DEFAULT_WINDOW)
        if self.window == 16:
            more_rows, more_figures = papers('pci-bus-bandwidth-2x1')
            rows, figures = rows + more_rows, figures + more_figures
        self.experiments, self.figures = rows, figures
        self.descr = f'OSU osu_bw -W {self.window}: MPI uni-directional bandwidth, 2 processes on 2 nodes'


@rfm.simple_test
class OSUBiBandwidth(OSUBenchmark):
    """osu_bibw: bi-directional bandwidth, both sides sending W messages at once."""

    #: OMB -W: 16 in 002 Fig. 5; OMB's default 64 where the paper states none.
    window = parameter([16, DEFAULT_WINDOW], type=int)

    osu_benchmark = 'osu_bibw'
    num_nodes = 2

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = papers('bibandwidth-2x1', lambda seed: (seed == '002') == (self.window == 16))
        self.descr = f'OSU osu_bibw -W {self.window}: MPI bi-directional bandwidth, 2 processes on 2 nodes'


@rfm.simple_test
class OSUIntraNode(OSUBenchmark):
    """Both processes on one node: the MPI's shared-memory path (002 Sec. 3.6)."""

    #: The OMB program: latency (002 Fig. 9) or bandwidth (002 Fig. 10, OMB's default window).
    benchmark = parameter(['osu_latency', 'osu_bw'], type=str)

    #: Messages in flight of osu_bw (OMB ``-W``); None: OMB's 64.
    window = variable(int, type(None), value=None)

    num_nodes = 1
    ranks_per_node = 2

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.experiments, self.figures = papers('latency-1x2' if self.benchmark == 'osu_latency' else 'bandwidth-1x2')
        self.descr = f'OSU {self.benchmark}: intra-node MPI, 2 processes on 1 node'


@rfm.simple_test
class IMBPointToPoint(IMBBenchmark):
    #: The IMB-MPI1 benchmark.
    benchmark = parameter(list(IMB_PT2PT), type=str)

    #: ``<nodes>x<processes per node>``: 2x1 across two nodes, 1x2 within one node.
    layout = parameter(['2x1', '1x2'], type=str)

    level = 'mpi'

    @run_after('init')
    def describe(self):
        self.experiments, self.figures, self.report_metrics = imb_case(self.benchmark, self.layout)
        if self.layout == '1x2':
            self.tags |= {'intra-node'}
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI point-to-point, 2 processes, layout {self.layout}'


# -- collectives -----------------------------------------------------------------------------------------

@rfm.simple_test
class IMBCollective(IMBBenchmark):
    #: The IMB-MPI1 collective benchmark.
    benchmark = parameter(['Alltoall', 'Bcast', 'Allgather', 'Allreduce'], type=str)

    #: ``<nodes>x<processes per node>``: the papers' 4x1 (000) and 8x1 (002), or one node's 1x2.
    layout = parameter(COLLECTIVE_LAYOUTS, type=str)

    level = 'collective'
    report_metrics = ['lat']

    @run_after('init')
    def describe(self):
        self.experiments, self.figures, _ = imb_case(self.benchmark, self.layout)
        self.table_benchmark = self.benchmark
        self.descr = f'IMB {self.benchmark}: MPI collective latency (t_avg), layout {self.layout}'


@rfm.simple_test
class OSUCollective(OSUBenchmark):
    """OMB's collectives in the papers' layouts; other layouts: ``-P case=osu_allreduce-16x1``."""

    #: The OMB collective and the layout, ``<program>-<nodes>x<processes per node>``.
    case = parameter([f'osu_{key}' for key in PAPER_COLLECTIVES], type=str)

    level = 'collective'

    @run_after('init')
    def describe(self):
        self.osu_benchmark, _, layout = self.case.rpartition('-')
        self.num_nodes, self.ranks_per_node = parse_layout(layout)
        self.experiments, self.figures = papers(self.case.removeprefix('osu_'))
        self.descr = f'OSU {self.osu_benchmark}: MPI collective latency at {layout}'


@rfm.simple_test
class MVAPICH2MultiRailCollective(MVAPICH2Benchmark):
    """The collectives of 000 Figs. 15-17 at 4x1 with one port and with both ports striped (MVAPICH2's multi-rail
    support over the partition's two rails, :mod:`ibrepro.rfm.mvapich2`). The broadcast sends whole messages
    (binomial tree, ``WHOLE_MESSAGE_BCAST``): MVAPICH2 2.3.7's tuned one left the second rail idle."""

    #: The OMB collective.
    benchmark = parameter([f'osu_{key[:-4]}' for key in PAPER_COLLECTIVES if key.endswith('-4x1')], type=str)

    #: HCA ports MVAPICH2 uses: 1 or 2 (striping above 8192 B).
    ports = parameter([1, 2], type=int)

    level = 'multirail'
    num_nodes = 4
    required_partition_features = ['ib', 'dual-port']

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.rail_policy = '1-port' if self.ports == 1 else '2-port-striping'
        self.experiments, self.figures = papers(f'{self.benchmark.removeprefix("osu_")}-4x1')
        self.descr = f'MVAPICH2 {self.benchmark} on {self.ports} HCA port(s), 4x1'
        if self.benchmark == 'osu_bcast':
            # one and two ports alike, so that they differ only by striping
            self.env_vars = {**self.env_vars, **mvapich2.WHOLE_MESSAGE_BCAST}


# -- both, timed by our ibrepro_imb ------------------------------------------------------------------------

@rfm.simple_test
class BenchIMB(BenchMPI):
    """IMB-MPI1's timing of one of the papers' PMB benchmarks, in one layout, by ``ibrepro_imb`` (IMB's sources are
    on no package registry; our program builds with SimGrid's ``smpicc``). It stays a family of its own rather than
    a parameter of the IMB families: its stored history is keyed by its name (``BenchIMB``) and would not carry
    over."""

    #: ``<IMB benchmark>-<nodes>x<processes per node>``.
    case = parameter(['PingPong-2x1', 'Uniband-2x1', 'Biband-2x1', 'PingPong-1x2', 'Uniband-1x2']
                     + [f'{b}-{layout}' for b in ('Alltoall', 'Bcast', 'Allgather', 'Allreduce')
                        for layout in dict.fromkeys(COLLECTIVE_LAYOUTS + ['4x2'])], type=str)

    #: The IMB benchmark (from the case).
    benchmark = variable(str, value='')

    #: The layout (from the case).
    layout = variable(str, value='')

    program = 'ibrepro_imb'

    @run_after('init')
    def set_layout(self):
        self.benchmark, _, self.layout = self.case.rpartition('-')
        self.num_nodes, self.ranks_per_node = parse_layout(self.layout)
        self.experiments, self.figures, self.report_metrics = imb_case(self.benchmark, self.layout)
        self.level = 'mpi' if self.benchmark in IMB_PT2PT else 'collective'
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
