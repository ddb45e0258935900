"""Where a check's MPI processes run (the papers' layouts) and what it needs from a partition and environment.

The papers name their layouts "4x1" (four nodes, one process each) and "4x2" (two each). A layout is part of
the experiment: 4x1 shrunk to 2 processes on one node would measure shared memory, not the network, under
the same check name and references. Layouts are never shrunk: what a layout needs is a *hard requirement*,
selected through features, so a partition or environment that cannot run a case is not a candidate for it
(``reframe -l`` lists only what can run, and a nightly run carries no pile of skipped cases):

* partition features: ``nodes<N>`` for a layout over N >= 2 nodes and ``cores<P>`` for P >= 2 processes per node
  (P rounded up to a power of two; a partition declares ``nodes2``, ``nodes4``, ... and ``cores2``, ``cores4``, ...
  up to its size: :func:`ibrepro.rfmconfig.layout_features`), ``oversubscribe`` for a layout allowed to exceed the
  cores (what is not timed, e.g. memory use), and whatever the experiment needs (``ib``, ``dual-port``);
* environment features: the tools and MPI library (``osu``, ``mvapich2``).

``ibrepro catalog`` explains, for every family, which of these a system lacks. A partition whose extras say less
than its features (``nodes``, ``cores_per_node``) still skips the case, with the reason.
"""

import re

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, variable

from .. import vocabulary

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
    if feature not in vocabulary.HINTS:
        return f'{where} lacks feature {feature!r}'

    what, how = vocabulary.HINTS[feature]
    return f'{where} lacks {what} (feature {feature!r}; to provide it: {how})'


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
    allow_oversubscription = variable(typ.Bool, value=False)    # typ.Bool: -S ...=false is False

    #: Launcher options for block mapping (ranks 0..n-1 on the first node), by launcher name. Multi-pair
    #: tests pair rank i with rank i + pairs, so block mapping puts each pair across the two nodes.
    block_mapping_options = variable(typ.Dict[str, typ.List[str]], value={'srun': ['--distribution=block']})

    # always_last: after the family's own init hooks have chosen the layout and requirements
    @run_after('init', always_last=True)
    def select_by_features(self):
        """The layout's hard requirements as features of ``valid_systems`` / ``valid_prog_environs``."""
        self.job_nodes = self.num_nodes
        needs = [f'+nodes{self.num_nodes}'] if self.num_nodes > 1 else []
        needs += [f'+{f}' for f in self.required_partition_features]
        cores = [f'+cores{1 << (self.ranks_per_node - 1).bit_length()}'] if self.ranks_per_node > 1 else []
        # a layout that may oversubscribe runs where the cores suffice, or where oversubscribing is allowed
        alternatives = [cores, ['+oversubscribe']] if cores and self.allow_oversubscription else [cores]
        self.valid_systems = [' '.join(dict.fromkeys([*spec.split(), *needs, *alt]))
                              for spec in self.valid_systems for alt in alternatives]
        env_needs = [f'+{f}' for f in self.required_environ_features]
        # an environment built for GPU memory (feature cuda) runs the GPU families; the host-memory ones run once,
        # in the plain environments
        env_needs += [] if 'cuda' in self.required_environ_features else ['-cuda']
        self.valid_prog_environs = [' '.join([spec, *(n for n in env_needs if n not in spec.split())])
                                    for spec in self.valid_prog_environs]

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
