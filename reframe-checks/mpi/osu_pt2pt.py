"""MPI point-to-point latency and bandwidth with the OSU Micro-Benchmarks, as the papers measured them.

Inter-node: two processes on two nodes, one each (000/003 Sec. IV.C.1 Figs. 12-14, 001 Sec. 5.1 Fig. 2, 002 Sec. 3.1
and 3.3 Figs. 1, 2, 5); intra-node: both processes on one node (002 Sec. 3.6 Figs. 9-10).

Window sizes (osu_bw/osu_bibw -W): 002 Fig. 2 plots the bandwidth for several windows but its text names
only W = 16 (and says performance grows with W, and that Quadrics drops "when the window size exceeds 16").
The default sweep is 4, 16, 64: the named 16, one step of 4x below and above it, and 64 is OMB's default,
the window of every run whose paper states none (000/003, 001). Other windows: ``-P window=1,2,4,8,16,32,64``.
002's bi-directional test (Fig. 5) names W = 16.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, variable

from ibrepro.rfm.osu import OSUBenchmark

#: The window of runs whose paper states none: OMB's default.
DEFAULT_WINDOW = 64

# catalog rows and figures of the papers' inter-node runs
LATENCY = ([11, 16, 22, 37], ['000-fig12', '003-fig12', '001-fig2', '002-fig1', '002-fig26'])
BANDWIDTH = ([12, 17], ['000-fig13', '003-fig13', '001-fig2'])
BIBANDWIDTH = ([13, 18], ['000-fig14', '003-fig14', '001-fig2'])


@rfm.simple_test
class OSULatency(OSUBenchmark):
    """osu_latency: one-way latency (half the ping-pong round trip)."""

    osu_benchmark = 'osu_latency'
    num_nodes = 2

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = LATENCY
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
        self.window_size = self.window
        rows, figures = BANDWIDTH if self.window == DEFAULT_WINDOW else ([], [])
        self.experiments = rows + [23] + ([37] if self.window == 16 else [])
        self.figures = figures + ['002-fig2'] + (['002-fig27'] if self.window == 16 else [])
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
        self.window_size = self.window
        self.experiments, self.figures = BIBANDWIDTH if self.window == DEFAULT_WINDOW else ([26], ['002-fig5'])
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
        self.experiments = [29]
        self.figures = ['002-fig9'] if self.benchmark == 'osu_latency' else ['002-fig10']
        self.descr = f'OSU {self.benchmark}: intra-node MPI, 2 processes on 1 node'
