"""NCCL's bus bandwidth between the GPUs of one node and of two (nccl-tests ``all_reduce_perf``, ``sendrecv_perf``):
the papers' collectives and their 2x1 bandwidth (000/003 Sec. IV.C.1-2, 002 Sec. 3.7) as GPU nodes run them today,
through NCCL over the fabric (catalog row 46).

One rank per GPU, not bound (NCCL pins its threads near each GPU), ``NCCL_DEBUG=INFO``; across two nodes a case fails
unless NCCL says it sent over the partition's network, with GPUDirect RDMA where the partition has ``gpudirect``
(:class:`ibrepro.rfm.nccl.NcclTests`). Variables: ``bw_<bytes>``, nccl-tests' bus bandwidth (MB/s), and
``lat_<bytes>``, its time (us), out of place.

Runs where a partition has the feature ``gpu`` (extras ``gpus_per_node``; ``nodes2`` for two nodes) and an environment
has nccl-tests built with MPI (feature ``nccl``: configs/spack/gpu-mpi) for GPU memory (feature ``cuda``).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from ibrepro.rfm.nccl import NcclTests

#: nccl-tests program -> what it measures
COLLECTIVES = {'all_reduce': 'all-reduce (sum of floats)', 'sendrecv': 'send/receive between ring neighbours'}

# The section's one table: (collective, nodes) -> (catalog rows, the papers' figures: none, it continues theirs)
FIGURES = {(collective, nodes): ([46], []) for collective in COLLECTIVES for nodes in (1, 2)}


@rfm.simple_test
class NcclBusBandwidth(NcclTests):
    #: The nccl-tests program, without its ``_perf``.
    collective = parameter(list(COLLECTIVES), type=str)

    #: Nodes: one (NCCL's paths inside a node) or two (the fabric between them).
    nodes = parameter([1, 2], type=int)

    valid_systems = ['+gpu']
    valid_prog_environs = ['+nccl +cuda']

    @run_after('init')
    def describe(self):
        self.nccl_collective, self.num_nodes, self.job_nodes = self.collective, self.nodes, self.nodes
        self.experiments, self.figures = FIGURES[(self.collective, self.nodes)]
        if self.nodes > 1:
            self.valid_systems = [f'{spec} +nodes{self.nodes}' for spec in self.valid_systems]
        self.descr = (f'NCCL {COLLECTIVES[self.collective]}: bus bandwidth between the GPUs of '
                      f'{"one node" if self.nodes == 1 else f"{self.nodes} nodes"}, one rank per GPU (nccl-tests '
                      f'{self.collective}_perf)')
