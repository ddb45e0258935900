"""NCCL's bus bandwidth between the GPUs of one node and of two (nccl-tests ``all_reduce_perf``, ``sendrecv_perf``):
the papers' collectives and their 2x1 bandwidth (000/003 Sec. IV.C.1-2, 002 Sec. 3.7) as GPU nodes run them today,
through NCCL over the fabric (catalog row 46).

One rank per GPU (``gpus_per_node`` ranks on each node, ``-g 1``): nccl-tests gives a node's local rank N its GPU N,
so every rank holds all of its node's GPUs (``--gpus-per-node``) and uses one; the output's ``# Using devices`` lines
say which, and a case where fewer ranks said theirs, or two shared one, fails. The ranks are not bound
(``--cpu-bind=none``): NCCL pins its threads to the CPUs near each rank's GPU itself. ``NCCL_DEBUG=INFO`` makes NCCL
say the path it chose; across two nodes a case fails unless it sent over the partition's network (extras
``nccl_network``, NCCL's name for it, default ``IB``: InfiniBand and RoCE alike), with GPUDirect RDMA where the
partition has the feature ``gpudirect`` (:mod:`ibrepro.nccl_transport`); ``nccl_transport`` records what it said.
Variables: ``bw_<bytes>``, nccl-tests' bus bandwidth (MB/s), and ``lat_<bytes>``, its time (us), out of place.

Runs where a partition has the feature ``gpu`` (and ``nodes2`` for two nodes) and an environment has nccl-tests built
with MPI (feature ``nccl``: configs/spack/gpu-mpi) for GPU memory (feature ``cuda``).
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ibrepro import nccl_transport, parsers
from ibrepro.rfm import PaperExperiment, Placement
from ibrepro.rfm.knobs import powers_of_two

#: nccl-tests program -> what it measures
COLLECTIVES = {'all_reduce': 'all-reduce (sum of floats)', 'sendrecv': 'send/receive between ring neighbours'}

# The section's one table: (collective, nodes) -> (catalog rows, the papers' figures: none, it continues theirs)
FIGURES = {(collective, nodes): ([46], []) for collective in COLLECTIVES for nodes in (1, 2)}


@rfm.simple_test
class NcclBusBandwidth(rfm.RunOnlyRegressionTest, Placement, PaperExperiment):
    #: The nccl-tests program, without its ``_perf``.
    collective = parameter(list(COLLECTIVES), type=str)

    #: Nodes: one (NCCL's paths inside a node) or two (the fabric between them).
    nodes = parameter([1, 2], type=int)

    #: The size sweep (``-b``, ``-e``, doubling): 8 B (latency) to 1 GiB (the bus bandwidth's plateau).
    min_bytes = variable(int, value=8)
    max_bytes = variable(int, value=1 << 30)

    #: What NCCL said of the path it chose: its networks and channels (set after the run).
    nccl_transport = variable(dict, value={}, loggable=True)

    #: Per rank: its node, CUDA device and PCI address, as nccl-tests printed them (set after the run).
    gpu_ranks = variable(dict, value={}, loggable=True)

    valid_systems = ['+gpu']
    valid_prog_environs = ['+nccl +cuda']
    tool = 'nccl'
    level = 'gpu'
    time_limit = '20m'

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = FIGURES[(self.collective, self.nodes)]
        self.job_nodes = self.nodes
        if self.nodes > 1:
            self.valid_systems = [f'{spec} +nodes{self.nodes}' for spec in self.valid_systems]
        self.descr = (f'NCCL {COLLECTIVES[self.collective]}: bus bandwidth between the GPUs of '
                      f'{"one node" if self.nodes == 1 else f"{self.nodes} nodes"}, one rank per GPU (nccl-tests '
                      f'{self.collective}_perf)')

    def program_name(self):
        return f'{self.collective}_perf'

    @run_after('setup')
    def need_gpus_per_node(self):
        gpus = self.current_partition.extras.get('gpus_per_node')
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            self.skip_for([f'partition {self.current_partition.fullname} gives no gpus_per_node (its GPUs per node, '
                           'one rank each)'])
        elif self.nodes == 1 and gpus < 2:
            self.skip_for([f'partition {self.current_partition.fullname} has one GPU per node: no NCCL path inside '
                           'a node to measure'])

    @run_before('run')
    def set_command(self):
        if not 8 <= self.min_bytes <= self.max_bytes <= parsers.MAX_SIZE:
            raise ValueError(f'min_bytes={self.min_bytes}, max_bytes={self.max_bytes}: need 8 <= min <= max <= 2^50')
        gpus = self.current_partition.extras['gpus_per_node']
        self.num_tasks_per_node = gpus
        self.num_tasks = gpus * self.nodes
        self.executable = self.program_name()
        self.executable_opts = ['-b', str(self.min_bytes), '-e', str(self.max_bytes), '-f', '2', '-g', '1']
        # NCCL says the network and each channel's transport (INIT) and what its net plugin found (NET)
        self.env_vars = {'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET', **self.env_vars}
        if self.current_partition.scheduler.registered_name == 'slurm':
            self.job.options += [f'--gpus-per-node={int(gpus)}']     # every rank sees its node's GPUs, uses one

    def unmeasured_sizes(self, table):
        have = set(table.sizes())
        return [size for size in powers_of_two(self.min_bytes, self.max_bytes) if size not in have]

    def _bind(self):
        # no CPU binding: NCCL pins each rank's threads near its GPU ("Setting affinity for GPU N"), which a
        # binding of all ranks near the HCA would override; the nodes are the case's alone (Placement: exclusive)
        self.apply_launch_policy(tasks_per_node=self.num_tasks_per_node, bind=False)

    def diagnose(self):
        parsed, table = super().diagnose()
        ranks = parsed.meta.get('ranks') or []
        held = {(r['host'], r['bus']) for r in ranks}
        if len(ranks) != self.num_tasks or len(held) != len(ranks):
            raise SanityError(f'{len(ranks)} of {self.num_tasks} ranks said their GPU, on {len(held)} distinct GPUs: '
                              'one rank per GPU was promised (nccl-tests\' "# Using devices" lines)')
        self.gpu_ranks = {f'rank {r["rank"]}': {'host': r['host'], 'device': r['device'], 'bus': r['bus'],
                                                'gpu': r['gpu']} for r in ranks}
        self.nccl_transport = nccl_transport.summary(parsed.meta)
        extras = self.current_partition.extras
        wrong = nccl_transport.problem(parsed.meta, self.nodes,
                                       network=extras.get('nccl_network', nccl_transport.DEFAULT_NETWORK),
                                       gpudirect='gpudirect' in self.current_partition.features)
        if wrong:
            raise SanityError(wrong)
        return parsed, table
