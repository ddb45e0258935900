"""Real OSU and NPB outputs (tests/fixtures) replayed through the families' check logic on this machine.

Each case is the library base of a family (ibrepro.rfm.osu.OSUBenchmark, ibrepro.rfm.npb.NPBBenchmark) with the
layout the output was produced with, whose program is ``cat <fixture>`` run by the local launcher: sanity
(the parser's diagnosis, the completeness of the sweep, the process count) and the performance variables are
exactly those of a real run. Only the layout/tool requirements are dropped: the fixtures need no nodes.
"""

import os

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before

from ibrepro.rfm.npb import NPBBenchmark, parse_case
from ibrepro.rfm.osu import OSUBenchmark

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'fixtures')

# fixture -> (OMB program, nodes, processes per node, -m the output was produced with)
OSU = {
    'osu/7.4/osu_latency-2.txt': ('osu_latency', 2, 1, ''),
    'osu/5.3/osu_latency-2.txt': ('osu_latency', 2, 1, ''),
    'osu/7.4/osu_mbw_mr-4.txt': ('osu_mbw_mr', 2, 2, '1:65536'),
    'osu/7.4/osu_mbw_mr-2.txt': ('osu_mbw_mr', 2, 2, ''),                  # 1 pair where 2 were asked for
    'osu/5.9/osu_bw-1.txt': ('osu_bw', 2, 1, ''),                          # one process
    'osu/5.3/osu_latency.badopt_m-2.txt': ('osu_latency', 2, 1, '8192'),   # OMB 5.3 has no -m
    'osu/7.4/osu_allreduce.validate-2.txt': ('osu_allreduce', 2, 1, '1:4096'),
    'osu/7.4/osu_allreduce.mpich_timeout-4.txt': ('osu_allreduce', 4, 1, ''),
    'osu/7.4/osu_latency.m8192-2.txt': ('osu_latency', 2, 1, ''),          # stops at 8 KiB
    # the launcher failed before any benchmark ran (tests/fixtures/mpi-failures)
    'mpi-failures/openmpi-4.1.4.root-refusal-2.txt': ('osu_latency', 2, 1, ''),
    'mpi-failures/openmpi-4.1.4.launches-mpich-5.0.2-2.txt': ('osu_latency', 2, 1, ''),
}

# fixture -> NPB case it is replayed as
NPB = {
    'npb/3.4.2/is.A-4.txt': 'is.A-4x1',
    'npb/3.3.1/ft.A-4.txt': 'ft.A-2x2',
    'npb/3.4.2/is.B-2.txt': 'is.B-4x1',                         # ran with 2 processes, not 4
    'npb/3.4.2/ft.A.niter4_verify_fail-2.txt': 'ft.A-2x1',
    'npb/3.4.2/is.A.nonpow2_abort-3.txt': 'is.A-1x2',           # 3 processes: IS aborts
}


class Replay(rfm.RegressionTestPlugin):
    """``cat`` the fixture once with the local launcher. First among the bases: its hooks replace the
    family's."""

    @run_after('init', always_last=True)
    def select_by_features(self):
        """The fixtures need no nodes, tools or features: any partition, the environment make setup gives."""
        self.valid_systems, self.valid_prog_environs = ['*'], ['mpich']

    @run_after('setup')
    def skip_unless_layout_fits(self):
        """The fixtures need no nodes, tools or features."""

    def program_name(self):
        return None             # the program is `cat`

    @run_before('run')
    def replay(self):
        self.job.launcher = getlauncher('local')()
        self.executable = 'cat'
        self.executable_opts = [os.path.join(FIXTURES, self.fixture_file)]


@rfm.simple_test
class OSUReplay(Replay, OSUBenchmark):
    #: The OSU output to replay.
    fixture_file = parameter(list(OSU), type=str)


    @run_after('init')
    def describe(self):
        self.osu_benchmark, self.num_nodes, self.ranks_per_node, self.message_sizes = OSU[self.fixture_file]


@rfm.simple_test
class NPBReplay(Replay, NPBBenchmark):
    #: The NPB output to replay.
    fixture_file = parameter(list(NPB), type=str)


    @run_after('init')
    def describe(self):
        self.npb_program, self.npb_class, self.num_nodes, self.ranks_per_node, self.channel = \
            parse_case(NPB[self.fixture_file])
