"""Our own benchmarks (benchmarks/, ``ibrepro-bench``) driven by ReFrame.

MPI programs (002 Sec. 3.2-3.8) run like any MPI benchmark in a layout: ``2x1`` (two nodes, the papers'
inter-node runs) or ``1x2`` (one node: 002's intra-node comparison). The verbs program ``ibrepro_rdma``
(000/003 two-port striping and binding) is a client/server pair run by the pair runner (:mod:`ibrepro.pair`),
addressed through RDMA CM: each end publishes the IPv4 address of each of its rails at run time (IPoIB on
InfiniBand, the RoCE GID's address on Ethernet), and the client connects to the server's rails from its own.
"""

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from . import DEFAULT_TIME_LIMIT, Knobs, PaperExperiment, Placement, expand_sizes, size_bytes
from .layout import parse_layout
from .mpi import MPIRun
from .pair_runner import PairRunner, rails


def size_range(sizes):
    """``message_sizes`` as the benchmarks' ``-m MIN:MAX``: one size ``4096`` is ``4096:4096``; ValueError naming
    the knob for anything else."""
    lo, colon, hi = sizes.partition(':')
    hi = hi if colon else lo
    try:
        if size_bytes(lo) > size_bytes(hi):
            raise ValueError
    except (ValueError, IndexError):
        raise ValueError(f'message_sizes must be SIZE or MIN:MAX in bytes with K/M/G suffixes (e.g. 4096, '
                         f'0:4M), got {sizes!r:.60}') from None
    return f'{lo.strip()}:{hi.strip()}'


def expected_sizes(sizes):
    """The rows an ibrepro-bench ``-m MIN:MAX`` sweep prints: 0 first if MIN is 0, then powers of two."""
    return expand_sizes(size_range(sizes))


def _arg(value):
    """A knob's value as a program argument: ``10`` for 10.0, as the user wrote it."""
    return f'{value:g}' if isinstance(value, float) else str(value)


class BenchMPI(MPIRun):
    """One ibrepro-bench MPI program in one layout."""

    tool = 'bench'
    valid_prog_environs = ['+ibrepro-bench']

    #: The program (ibrepro_overhead, ibrepro_bilat, ibrepro_bibw, ibrepro_overlap, ibrepro_reuse, ibrepro_memory).
    program = variable(str)

    # The common knobs: ``message_sizes`` -> ``-m MIN:MAX`` (empty: the program's default sweep),
    # ``iterations`` -> ``-i``, ``warmup`` -> ``-x``.

    #: Deprecated (use ``message_sizes``).
    sizes = variable(str, value='')

    #: More options, as the program takes them.
    extra_options = variable(typ.List[str], value=[])

    #: Whether the program sweeps message sizes (``-m``); the memory program does not.
    sweeps_sizes = True

    #: The family's own options, ``{program flag: the variable that gives its value}`` (``{'-W': 'window'}``).
    program_flags = {}

    def program_options(self):
        """Options the family adds: :attr:`program_flags` (a family with other options overrides this)."""
        return [arg for flag, name in self.program_flags.items() for arg in (flag, _arg(getattr(self, name)))]

    def program_name(self):
        return self.program

    @run_after('init')
    def set_layout(self):
        self.num_nodes, self.ranks_per_node = parse_layout(self.layout)

    @run_before('run')
    def set_command(self):
        self.executable = self.program
        sizes = self.message_sizes or self.deprecated('sizes', 'message_sizes', self.sizes, '')
        sweep = sizes and self.sweeps_sizes
        self.executable_opts = self.program_options() + (['-m', size_range(sizes)] if sweep else [])
        for option, value in (('-i', self.iterations), ('-x', self.warmup)):
            if value is not None and self.sweeps_sizes:   # a program without a sweep (ibrepro_memory) has no -i/-x
                self.executable_opts += [option, str(value)]
        self.executable_opts += self.extra_options
        if sweep:
            self.expected_sizes = expected_sizes(sizes)


class BenchRDMA(rfm.RunOnlyRegressionTest, PairRunner, Placement, Knobs, PaperExperiment):
    """``ibrepro_rdma`` client/server flows: one server and one client process, each on its own node (or,
    on one node, on its own rail), driving every rail of the node. One round: the program sweeps its sizes
    (``-m``) and drives its ports and pairs itself."""

    tool = 'bench'
    level = 'multirail'
    valid_prog_environs = ['+ibrepro-rdma']
    time_limit = DEFAULT_TIME_LIMIT

    #: ``ibrepro_rdma`` options for the client (the server takes them from the client).
    client_options = variable(typ.List[str], value=[])

    #: Concurrent pairs of processes (``-P``); each pair is a client and a server process.
    pairs = variable(int, value=1)

    #: RDMA CM port of pair 0.
    cm_port = variable(int, value=18620)

    #: Deprecated (use ``message_sizes``, which this family passes to ``-m MIN:MAX``).
    sizes = variable(str, value='')

    def program_name(self):
        return 'ibrepro_rdma'

    def spec_options(self):
        return {'wait_listen': False}

    def flows(self):
        nrails = len(rails(self.current_partition))
        two_nodes = int(self.current_partition.extras.get('nodes', 1)) >= 2
        server, client = (1, 0) if two_nodes else (0, 1)
        # the server's rails, and the client's end of each: on one node the rails are cabled to each other,
        # so the server's rail i is reached from the client's rail nrails-1-i
        server_rails = ','.join(f'{{addr:{server}:{i}}}' for i in range(nrails))
        sources = ','.join(f'{{addr:{client}:{i if two_nodes else nrails - 1 - i}}}' for i in range(nrails))
        common = ['-P', str(self.pairs), '-p', str(self.cm_port), '-T', str(self.pair_timeout)]
        argv = ['ibrepro_rdma', *common, *self.client_options]
        sizes = self.message_sizes or self.deprecated('sizes', 'message_sizes', self.sizes, '')
        if sizes:
            argv += ['-m', size_range(sizes)]
            self.expected_sizes = expected_sizes(sizes)
        if self.iterations is not None:     # timed iterations per size; default: the papers' counts
            argv += ['-i', str(self.iterations), '-I', str(self.iterations)]
        if self.warmup is not None:
            argv += ['-x', str(self.warmup), '-X', str(self.warmup)]
        if nrails > 1 or not two_nodes:
            argv += ['--source', sources]
        self.placement = 'two nodes' if two_nodes else 'one node'
        # each of the -P processes a side forks on its own CPU near the device (the runner pins them)
        return [{'id': 0, 'port': self.cm_port,
                 'server': {'node': server, 'rail': 0, 'argv': ['ibrepro_rdma', *common], 'processes': self.pairs},
                 'client': {'node': client, 'rail': 0, 'argv': [*argv, server_rails], 'processes': self.pairs}}]
