"""The base of the MPI families (IMB, OSU, NPB, ibrepro-bench): one MPI program in one layout (nodes x processes
per node), with the plugins every MPI case mixes in, listed in the order ReFrame runs their hooks (the MRO)."""

import reframe as rfm

from . import DEFAULT_TIME_LIMIT, Injection, Knobs, PaperExperiment, Placement
from .layout import NodeLayout


class MPIRun(rfm.RunOnlyRegressionTest, Injection, Placement, Knobs, PaperExperiment, NodeLayout):
    """An MPI program on the partitions with feature ``mpi``; a family names its tool and environments."""

    level = 'mpi'
    valid_systems = ['+mpi']
    time_limit = DEFAULT_TIME_LIMIT
