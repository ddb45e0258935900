"""Real nccl-tests outputs (tests/fixtures/nccl-tests) replayed through the NCCL family's check logic on this machine.

Each case is :class:`ibrepro.rfm.nccl.NcclTests` with the ranks and nodes the output was produced with, whose program
is ``cat <fixture>`` run by the local launcher: sanity (the parser's diagnosis, the sweep, one rank per GPU, the path
NCCL said it chose) and the performance variables are exactly those of a real run. Only the GPU partition and
environment are dropped: the fixtures need no GPU.
"""

import os

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, run_before

from ibrepro.rfm.nccl import NcclTests

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'fixtures', 'nccl-tests')

# fixture -> (program, nodes, GPUs per node, -b, -e the output was produced with, the network the case promises)
NCCL = {
    'all-reduce-gh200-2x4-cscs.txt': ('all_reduce', 2, 4, 8, 1 << 27, ''),
    'all-reduce-gh200-2x1-sarus.txt': ('all_reduce', 2, 1, 1 << 20, 1 << 27, ''),
    'all-reduce-t4-2x1-efa-tagged.txt': ('all_reduce', 2, 1, 4, 1 << 30, ''),
    'all-reduce-t4-2x1-efa-tagged.txt as efa': ('all_reduce', 2, 1, 4, 1 << 30, 'AWS Libfabric'),
    'all-reduce-p40-2x1-roce-koordinator.txt': ('all_reduce', 2, 1, 1 << 21, 1 << 31, ''),
}


@rfm.simple_test
class NcclReplay(NcclTests):
    #: The output to replay (and, after " as ", what differs from the first case of the same output).
    output_file = parameter(list(NCCL), type=str)

    valid_systems = ['*']
    valid_prog_environs = ['mpich']

    @run_after('init')
    def describe(self):
        (self.nccl_collective, self.num_nodes, self._gpus, self.min_bytes, self.max_bytes,
         self.nccl_network) = NCCL[self.output_file]

    @run_after('setup')
    def need_gpus_per_node(self):
        self.gpus_per_node = self._gpus        # the output's, not a partition's

    def program_name(self):
        return None             # the program is `cat`

    @run_before('run')
    def replay(self):
        self.job.launcher = getlauncher('local')()
        self.executable = 'cat'
        self.executable_opts = [os.path.join(FIXTURES, self.output_file.split(' as ')[0])]
