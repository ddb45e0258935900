"""Where a check's MPI processes run (the papers' layouts) and what it needs from a partition and environment.

The papers name their layouts "4x1" (four nodes, one process each) and "4x2" (two each). A layout is part of
the experiment: 4x1 shrunk to 2 processes on one node would measure shared memory, not the network, under
the same check name and references. So a check whose layout does not fit the partition (extras ``nodes`` and
``cores_per_node``), or whose tools or MPI library the environment lacks (its ``features``), is SKIPPED with
the reason, never shrunk. The checks select broadly (``valid_systems = ['+mpi']``) so that ReFrame lists them
everywhere and says why one does not run, instead of silently leaving it out.
"""

import re

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

#: What a missing feature means to the user, and where to get it.
FEATURE_HINTS = {
    'osu': ('OSU Micro-Benchmarks', 'not on PyPI or Debian: Spack osu-micro-benchmarks, modules or PATH'),
    'npb': ('NAS Parallel Benchmarks', 'not on PyPI or Debian: Spack npb, modules or PATH'),
    'mvapich2': ('MVAPICH2 with the mrail device, which reads the MV2_* variables',
                 'Spack mvapich2 fabrics=mrail'),
    'ib': ('InfiniBand HCA', ''),
    'perftest': ('perftest', 'apt-get install perftest, or Spack perftest'),
    'dual-port': ('second HCA port', ''),
}

_LAYOUT = re.compile(r'(\d+)x(\d+)')


def parse_layout(text):
    """``'4x2'`` -> ``(4, 2)``: nodes and processes per node, as the papers write them."""
    m = _LAYOUT.fullmatch(text)
    if not m or not all(int(g) for g in m.groups()):
        raise ValueError(f'invalid layout {text!r}: expected <nodes>x<processes per node>, e.g. 4x1')

    return int(m.group(1)), int(m.group(2))


def unmet_requirements(partition, environ, nodes, ranks_per_node, partition_features=(),
                       environ_features=(), oversubscribe=False):
    """Why ``nodes`` x ``ranks_per_node`` processes cannot run on ``partition`` with ``environ`` (a list)."""
    reasons = []
    layout = f'layout {nodes}x{ranks_per_node}'
    have_nodes = partition.extras.get('nodes')
    if have_nodes is not None and int(have_nodes) < nodes:
        reasons.append(f'{layout} needs {nodes} nodes; {partition.fullname} has {have_nodes} (extras nodes)')

    cores = partition.extras.get('cores_per_node')
    if cores is not None and int(cores) < ranks_per_node and not oversubscribe:
        reasons.append(f'{layout} needs {ranks_per_node} cores per node; {partition.fullname} has {cores} '
                       '(extras cores_per_node)')

    reasons += [_lacks(partition.fullname, f) for f in partition_features if f not in partition.features]
    reasons += [_lacks(f'environment {environ.name!r}', f) for f in environ_features
                if f not in environ.features]
    return reasons


def _lacks(where, feature):
    if feature not in FEATURE_HINTS:
        return f'{where} lacks feature {feature!r}'

    what, hint = FEATURE_HINTS[feature]
    return f'{where} has no {what} (feature {feature!r}' + (f'; {hint})' if hint else ')')


class NodeLayout(rfm.RegressionTestPlugin):
    """Mixin: run ``num_nodes`` x ``ranks_per_node`` processes, or skip saying what is missing."""

    #: Nodes the paper's layout spans.
    num_nodes = variable(int, value=1)

    #: MPI processes on each node; consecutive ranks share a node (block mapping).
    ranks_per_node = variable(int, value=1)

    #: Partition features the experiment needs (e.g. ``['ib', 'dual-port']``); a partition without them
    #: skips the check, naming them.
    required_partition_features = variable(typ.List[str], value=[])

    #: Environment features the experiment needs: its tools (``osu``, ``npb``) and MPI library
    #: (``mvapich2``); an environment without them skips the check, naming them.
    required_environ_features = variable(typ.List[str], value=[])

    #: Allow more processes per node than cores (for what is not timed, e.g. memory use), where the
    #: partition allows it (extras ``oversubscribe``: a scheduler such as Slurm refuses it by default).
    allow_oversubscription = variable(bool, value=False)

    #: Launcher options for block mapping (ranks 0..n-1 on the first node), by launcher name. Multi-pair
    #: tests pair rank i with rank i + pairs, so block mapping puts each pair across the two nodes.
    block_mapping_options = variable(typ.Dict[str, typ.List[str]], value={'srun': ['--distribution=block']})

    @run_after('setup')
    def skip_unless_layout_fits(self):
        reasons = unmet_requirements(self.current_partition, self.current_environ, self.num_nodes,
                                     self.ranks_per_node, self.required_partition_features,
                                     self.required_environ_features,
                                     self.allow_oversubscription and self.current_partition.extras.get(
                                         'oversubscribe', False))
        self.skip_for(reasons)

    @run_before('run')
    def place_ranks(self):
        self.num_tasks = self.num_nodes * self.ranks_per_node
        self.num_tasks_per_node = self.ranks_per_node
        if self.num_nodes > 1 and self.ranks_per_node > 1:
            self.job.launcher.options += self.block_mapping_options.get(self.job.launcher.registered_name, [])
