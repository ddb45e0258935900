"""NAS Parallel Benchmarks (NPB-MPI 3.3.x, 3.4.x) driven by ReFrame: the base of the application family.

A run is named as the papers describe it: ``is.B-4x1`` is IS class B on 4 nodes with one process each;
``-loopback`` turns off MVAPICH2's shared-memory channel (``MV2_USE_SHARED_MEM=0``) so processes on one node
talk through the HCA (001's "No-SMP" mode). Sanity is the benchmark's own verification (the parser fails on
"Verification = UNSUCCESSFUL", a wrong process count, an abort); the performance variables are ``time`` (s)
and ``mops`` (Mop/s total).

Binary names: NPB 3.4 builds one ``is.B.x`` for any process count; NPB 3.3.x builds one binary per count,
``is.B.4``. ``npb_binary`` (or the environment's extras ``npb_binary``) is a pattern with ``{program}``,
``{cls}`` and ``{ranks}``; the default is NPB 3.4's.
"""

import os
import re

from reframe.core.builtins import run_after, run_before, variable

from . import mvapich2
from .layout import parse_layout
from .mpi import MPIRun

PROGRAMS = ('bt', 'cg', 'ep', 'ft', 'is', 'lu', 'mg', 'sp')
CLASSES = 'SWABCDEF'

#: Intra-node channels: the MPI's shared memory, or network loopback (MVAPICH2 only).
CHANNELS = ('shm', 'loopback')

#: NPB 3.4's binary name; NPB 3.3.x: '{program}.{cls}.{ranks}'.
NPB34_BINARY = '{program}.{cls}.x'

_CASE = re.compile(r'([a-z]{2})\.([A-Z])-(\d+x\d+)(?:-(\w+))?')


def parse_case(case):
    """``'is.B-4x1'`` -> ``('is', 'B', 4, 1, 'shm')``; ``'ft.B-2x8-loopback'`` -> ``(..., 'loopback')``."""
    m = _CASE.fullmatch(case)
    if not m or m.group(1) not in PROGRAMS or m.group(2) not in CLASSES \
            or (m.group(4) or 'shm') not in CHANNELS:
        raise ValueError(f'invalid NPB case {case!r}: expected <program>.<class>-<nodes>x<processes per node>'
                         f'[-loopback] with program in {", ".join(PROGRAMS)} and class in {CLASSES}, '
                         'e.g. is.B-4x1')

    nodes, per_node = parse_layout(m.group(3))
    return m.group(1), m.group(2), nodes, per_node, m.group(4) or 'shm'


class NPBBenchmark(MPIRun):
    """One NPB-MPI program, class and layout."""

    tool = 'npb'
    level = 'app'
    valid_prog_environs = ['+npb']     # environments without NPB are not candidates (ibrepro catalog says why)
    report_metrics = ['time', 'mops']

    #: The NPB program: bt, cg, ep, ft, is, lu, mg or sp.
    npb_program = variable(str)

    #: The problem class (S, W, A..F).
    npb_class = variable(str, value='B')

    #: How intra-node messages travel: ``shm`` (the MPI's shared memory) or ``loopback`` (through the
    #: HCA; sets MVAPICH2's MV2_USE_SHARED_MEM=0, so it needs an environment with feature ``mvapich2``).
    channel = variable(str, value='shm')

    #: Binary name pattern ({program}, {cls}, {ranks}); empty: the environment's extras ``npb_binary``,
    #: else NPB 3.4's ``{program}.{cls}.x``. NPB 3.3.x: ``{program}.{cls}.{ranks}``.
    npb_binary = variable(str, value='')

    #: Directory of the NPB binaries; empty: found on PATH (the environment, a Spack view, modules).
    npb_bin_dir = variable(str, value='')

    # always_last: after the family's init hook has chosen the channel, before NodeLayout selects by the features
    # (rfm.HOOK_ORDER)
    @run_after('init', always_last=True)
    def require_tools(self):
        self.required_environ_features = ['npb']
        if self.channel == 'loopback':
            # MV2_USE_SHARED_MEM is MVAPICH2's; other MPIs would silently keep shared memory
            self.required_environ_features += ['mvapich2']
            self.required_partition_features = ['ib']

    def program_name(self):
        return self.binary()

    def binary(self):
        """The NPB binary of this case: the pattern filled in, in ``npb_bin_dir`` if that is set."""
        ranks = self.num_nodes * self.ranks_per_node
        pattern = self.npb_binary or self.current_environ.extras.get('npb_binary', NPB34_BINARY)
        try:
            binary = pattern.format(program=self.npb_program, cls=self.npb_class, ranks=ranks)
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(f'npb_binary {pattern!r}: {err!r}; the placeholders are {{program}}, {{cls}} '
                             'and {ranks}') from None
        return os.path.join(self.npb_bin_dir, binary)

    @run_before('run')
    def set_command(self):
        ranks = self.num_nodes * self.ranks_per_node
        self.executable = self.binary()
        self.table_benchmark = self.npb_program.upper()
        self.table_params = {'class': self.npb_class, 'processes': ranks}
        if self.channel == 'loopback':
            self.env_vars = {**self.env_vars, **mvapich2.NETWORK_LOOPBACK}
