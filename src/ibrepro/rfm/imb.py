"""Intel MPI Benchmarks (the Pallas PMB the papers used) driven by ReFrame.

The common knobs: ``message_sizes`` (consecutive powers of two are given to IMB as ``-msglog``, where IMB always adds
size 0; any other list as a ``-msglen`` file of exactly those sizes, written to the stage directory),
``iterations`` (``-iter``). IMB fixes its warm-up (and Uniband/Biband's window) inside the benchmark: ``warmup``
cannot be applied, and a case given one fails at setup, saying so.
"""

import os

from reframe.core.builtins import run_after, run_before, variable

from . import expand_sizes
from .layout import parse_layout
from .mpi import MPIRun

#: The ``-msglen`` file in the stage directory (sizes that are not a -msglog sweep).
MSGLEN_FILE = 'msglen.txt'

#: IMB benchmarks whose message sizes start at sizeof(float): IMB sends at least one reduction element.
REDUCTIONS = {'Allreduce', 'Reduce', 'Reduce_scatter', 'Reduce_scatter_block'}


def expected_sizes(msglog, benchmark):
    """The message sizes IMB reports for ``-msglog [min:]max``: 0, then 2^min .. 2^max."""
    lo, _, hi = msglog.rpartition(':')
    lo, hi = int(lo or 0), int(hi)
    sizes = [0] + [2 ** k for k in range(lo, hi + 1)]
    if benchmark in REDUCTIONS:
        sizes = [0] + [s for s in sizes[1:] if s >= 4]

    return sorted(set(sizes))


class IMBBenchmark(MPIRun):
    """One IMB-MPI1 benchmark over the whole message-size sweep, in one layout (nodes x processes per node)."""

    tool = 'imb'
    valid_prog_environs = ['+imb']

    #: The IMB-MPI1 executable: from the impi-rt wheel (make setup), a Spack view, modules or PATH.
    imb_binary = variable(str, value='IMB-MPI1')

    #: Deprecated (use ``message_sizes``): IMB's ``-msglog [min:]max``. The default 0:22 (0 and 1 B..4 MiB)
    #: covers the papers' sweeps (their figures end at 1 MiB or 4 MiB).
    msglog = variable(str, value='0:22')

    #: IMB ``-iter`` (``iterations``): the most repetitions per message size. The papers state no MPI-level
    #: iteration count (003 gives 1000 warm-up + 10,000 only for its VAPI tests), so IMB's default of 1000 stands;
    #: IMB lowers it for large messages (iter_policy dynamic) and its warm-up is fixed inside IMB.
    iterations = 1000

    #: IMB ``-time``: the most seconds spent on one message size before IMB prints "time-out".
    time_per_sample = variable(float, value=10.0)

    def program_name(self):
        return self.imb_binary

    @run_after('init')
    def set_layout(self):
        self.num_nodes, self.ranks_per_node = parse_layout(self.layout)

    def imb_msglog(self):
        """IMB's ``-msglog lo:hi`` for ``message_sizes`` (or the deprecated ``msglog``); None when the sizes are no
        such sweep (:meth:`imb_msglen` lists them)."""
        if not self.message_sizes:
            return self.msglog
        sizes = [s for s in expand_sizes(self.message_sizes) if s]
        logs = [s.bit_length() - 1 for s in sizes]
        if not sizes or any(1 << k != s for k, s in zip(logs, sizes)) or logs != list(range(logs[0], logs[-1] + 1)):
            return None
        return f'{logs[0]}:{logs[-1]}'

    def imb_msglen(self):
        """The message sizes of a ``-msglen`` file: exactly ``message_sizes`` (IMB adds no 0 to them)."""
        sizes = expand_sizes(self.message_sizes)
        if self.table_benchmark in REDUCTIONS and any(0 < s < 4 for s in sizes):
            raise ValueError(f'message_sizes {self.message_sizes!r}: {self.table_benchmark} sends at least one '
                             '4-byte element')
        return sizes

    @run_after('setup')
    def refuse_what_imb_cannot_take(self):
        if self.warmup is not None:
            raise ValueError('IMB fixes its warm-up inside the benchmark: warmup cannot be set for the IMB families')

    @run_before('run')
    def set_command(self):
        ranks = self.num_nodes * self.ranks_per_node
        msglog = self.imb_msglog()
        if msglog:
            sizes = ['-msglog', msglog]
            self.expected_sizes = expected_sizes(msglog, self.table_benchmark)
        else:
            self.expected_sizes = self.imb_msglen()
            with open(os.path.join(self.stagedir, MSGLEN_FILE), 'w') as f:
                f.write(''.join(f'{s}\n' for s in self.expected_sizes))
            sizes = ['-msglen', MSGLEN_FILE]
        self.executable = self.imb_binary
        self.executable_opts = [self.table_benchmark, *sizes, '-npmin', str(ranks),
                                '-iter', str(self.iterations), '-time', f'{self.time_per_sample:g}']
        self.table_params = {'processes': ranks}
