"""OSU Micro-Benchmarks (OMB 5.x, 7.x) driven by ReFrame: the base of the OSU check families.

Options are passed only when a check or the user sets them, so OMB's defaults (and OMB 5.3, which knows only
``-x``/``-i`` for point-to-point tests) keep working: ``-m`` needs OMB >= 5.4.0 for point-to-point tests,
``-W`` for osu_bw/osu_bibw OMB >= 5.4.2 (OMB CHANGES); older versions reject them and the parser says so
("osu_bw rejected the command line: option 'W'"). The papers state no MPI-level iteration counts, so OMB's
own iterations and warm-up stand unless ``-S iterations=...``/``-S warmup=...`` are given.
"""

import os

import reframe.utility.typecheck as typ
from reframe.core.builtins import run_before, variable

from . import expand_sizes
from .knobs import powers_of_two
from .mpi import MPIRun

#: OMB programs -> (default largest message size, metrics to record). OMB's defaults: 4 MiB for
#: point-to-point tests (MAX_MSG_SIZE 1<<22), 1 MiB for collectives (1<<20).
BENCHMARKS = {
    'osu_latency': (1 << 22, ['lat']),
    'osu_bw': (1 << 22, ['bw']),
    'osu_bibw': (1 << 22, ['bw']),
    'osu_multi_lat': (1 << 22, ['lat']),
    'osu_mbw_mr': (1 << 22, ['bw', 'msgrate']),
    'osu_alltoall': (1 << 20, ['lat']),
    'osu_bcast': (1 << 20, ['lat']),
    'osu_allgather': (1 << 20, ['lat']),
    'osu_allreduce': (1 << 20, ['lat']),
}

#: Programs that take a window size (-W); OMB 5.3's osu_mbw_mr spells it -w, so it is not set by default.
WINDOWED = {'osu_bw', 'osu_bibw', 'osu_mbw_mr'}

#: Reductions start at sizeof(float) = 4 bytes in OMB 5.x (7.x starts at 1 with MPI_CHAR).
REDUCTIONS = {'osu_allreduce', 'osu_reduce'}


#: Job-script line for environments made of modules: Spack's osu-micro-benchmarks module puts OMB 5's directories on
#: PATH (libexec/osu-micro-benchmarks/mpi/{pt2pt,collective,one-sided,startup}), but OMB 7 keeps its programs one
#: level down (pt2pt/standard, collective/blocking, ...): add those that exist under what PATH already holds.
OMB7_ON_PATH = ('_omb7=; _ifs=$IFS; IFS=:; for d in $PATH; do case $d in */libexec/osu-micro-benchmarks/mpi/*) '
                'for s in standard blocking non_blocking persistent; do [ -d "$d/$s" ] && _omb7="$_omb7:$d/$s"; '
                'done;; esac; done; IFS=$_ifs; export PATH="$PATH$_omb7"')


def expected_sizes(benchmark, message_sizes=''):
    """Message sizes an OMB run must report: powers of two from the smallest to the largest.

    ``message_sizes`` is OMB's ``-m [min:]max``; empty means OMB's default range. Size 0 (OMB 5.x
    latency tests print it) is never required, so 5.x and 7.x outputs both pass.
    """
    largest, _ = BENCHMARKS.get(benchmark, (1 << 22, []))
    lo, hi = 1, largest
    if message_sizes:
        low, _, high = message_sizes.rpartition(':')
        lo, hi = max(int(low or 1), 1), int(high)

    if benchmark in REDUCTIONS:
        lo = max(lo, 4)

    return powers_of_two(lo, hi)


class OSUBenchmark(MPIRun):
    """One OMB program over its message-size sweep, in the paper's layout."""

    tool = 'osu'
    valid_prog_environs = ['+osu']     # environments without OMB are not candidates (ibrepro catalog says why)
    required_environ_features = ['osu']

    #: The OMB program (osu_latency, osu_bw, ...); the family sets it, usually from a parameter.
    osu_benchmark = variable(str)

    #: Directory of the OMB programs; empty: found on PATH (the environment, a Spack view, modules).
    osu_bin_dir = variable(str, value='')

    # The common knobs: ``message_sizes`` -> OMB ``-m min:max`` (empty: OMB's default range, 1 B to 4 MiB
    # point-to-point, 1 MiB collectives, which covers every figure of the papers); ``iterations`` -> ``-i``;
    # ``warmup`` -> ``-x`` (None: OMB's defaults: the papers state none at MPI level); the families' ``window``
    # (a parameter of OSUBandwidth/OSUBiBandwidth, a variable of the others) -> ``-W``.

    #: Deprecated name of ``window`` (OMB ``-W``), read with a warning where the family's ``window`` is unset;
    #: goes in the next release.
    window_size = variable(int, type(None), value=None)

    #: More OMB options, appended as given.
    extra_options = variable(typ.List[str], value=[])

    def program_name(self):
        return os.path.join(self.osu_bin_dir, self.osu_benchmark)

    def omb_sizes(self):
        """OMB's ``-m min:max`` for ``message_sizes`` ('' for OMB's own range)."""
        if not self.message_sizes:
            return ''
        sizes = expand_sizes(self.message_sizes)
        return f'{sizes[0]}:{sizes[-1]}' if len(sizes) > 1 else str(sizes[0])

    @run_before('run')
    def set_command(self):
        self.executable = os.path.join(self.osu_bin_dir, self.osu_benchmark)
        if self.current_environ.modules and not self.osu_bin_dir and OMB7_ON_PATH not in self.prerun_cmds:
            self.prerun_cmds = [OMB7_ON_PATH] + self.prerun_cmds
        opts = []
        sizes = self.omb_sizes()
        if sizes:
            opts += ['-m', sizes]
        if self.iterations is not None:
            opts += ['-i', str(self.iterations)]
        if self.warmup is not None:
            opts += ['-x', str(self.warmup)]
        # the family's window: a parameter of osu_bw/osu_bibw, a variable of osu_mbw_mr, absent elsewhere
        window = getattr(self, 'window', None)
        old = self.deprecated('window_size', 'window', self.window_size, None)
        window = window if window is not None else old
        if window is not None and self.osu_benchmark in WINDOWED:
            opts += ['-W', str(window)]

        self.executable_opts = opts + self.extra_options
        self.expected_sizes = expected_sizes(self.osu_benchmark, sizes)
        if not self.report_metrics:
            self.report_metrics = BENCHMARKS.get(self.osu_benchmark, (0, []))[1]
        if self.osu_benchmark == 'osu_mbw_mr':
            # OMB prints "# [ pairs: N ]": proves the launcher started 2N processes
            self.table_params = {'pairs': self.num_nodes * self.ranks_per_node // 2}
