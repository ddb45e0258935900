"""nccl-tests driven by ReFrame: the base of the NCCL family (reframe-checks/gpu/nccl.py).

One rank per GPU (``gpus_per_node`` ranks on each node, ``-g 1``): nccl-tests gives a node's local rank N its GPU N,
so every rank holds all of its node's GPUs (``--gpus-per-node``) and uses one; the output's ``# Using devices`` lines
say which, and a case where fewer ranks said theirs, or two shared one, fails. The ranks are not bound
(``--cpu-bind=none``): NCCL pins its threads to the CPUs near each rank's GPU itself. ``NCCL_DEBUG=INFO`` makes NCCL
say the path it chose; across nodes a case fails unless it sent over the partition's network (``nccl_network``, else
the partition's extras ``nccl_network``, else ``IB``: InfiniBand and RoCE alike), with GPUDirect RDMA where the
partition has the feature ``gpudirect`` (:mod:`ibrepro.nccl_transport`); ``nccl_transport`` records what it said.
"""

import reframe as rfm
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from .. import nccl_transport, parsers
from . import PaperExperiment, Placement
from .knobs import powers_of_two


class NcclTests(rfm.RunOnlyRegressionTest, Placement, PaperExperiment):
    """One nccl-tests program (``<collective>_perf``) over a size sweep, one rank per GPU on ``num_nodes`` nodes."""

    tool = 'nccl'
    level = 'gpu'
    time_limit = '20m'

    #: The nccl-tests program without its ``_perf`` (``all_reduce``, ``sendrecv``); the family sets it.
    nccl_collective = variable(str)

    #: Nodes the case spans (the family sets it, and ``job_nodes`` with it, in its init hook).
    num_nodes = variable(int, value=1)

    #: The size sweep (``-b``, ``-e``, doubling): 8 B (latency) to 1 GiB (the bus bandwidth's plateau).
    min_bytes = variable(int, value=8)
    max_bytes = variable(int, value=1 << 30)

    #: NCCL's name of the network the case must send over across nodes; empty: the partition's extras
    #: ``nccl_network``, else ``IB``.
    nccl_network = variable(str, value='')

    #: GPUs per node, one rank each (set in setup from the partition's extras ``gpus_per_node``).
    gpus_per_node = variable(int, value=0)

    #: What NCCL said of the path it chose: its networks and channels (set after the run).
    nccl_transport = variable(dict, value={}, loggable=True)

    #: Per rank: its node, CUDA device and PCI address, as nccl-tests printed them (set after the run).
    gpu_ranks = variable(dict, value={}, loggable=True)

    def program_name(self):
        return f'{self.nccl_collective}_perf'

    @run_after('setup')
    def need_gpus_per_node(self):
        gpus = self.current_partition.extras.get('gpus_per_node')
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            self.skip_for([f'partition {self.current_partition.fullname} gives no gpus_per_node (its GPUs per node, '
                           'one rank each)'])
        elif self.num_nodes == 1 and gpus < 2:
            self.skip_for([f'partition {self.current_partition.fullname} has one GPU per node: no NCCL path inside '
                           'a node to measure'])
        else:
            self.gpus_per_node = gpus

    @run_before('run')
    def set_command(self):
        if not 4 <= self.min_bytes <= self.max_bytes <= parsers.MAX_SIZE:     # 4: one float
            raise ValueError(f'min_bytes={self.min_bytes}, max_bytes={self.max_bytes}: need 4 <= min <= max <= 2^50')
        self.num_tasks_per_node = self.gpus_per_node
        self.num_tasks = self.gpus_per_node * self.num_nodes
        self.executable = f'{self.nccl_collective}_perf'
        self.executable_opts = ['-b', str(self.min_bytes), '-e', str(self.max_bytes), '-f', '2', '-g', '1']
        # NCCL says the network and each channel's transport (INIT) and what its net plugin found (NET)
        self.env_vars = {'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET', **self.env_vars}
        if self.current_partition.scheduler.registered_name == 'slurm':
            self.job.options += [f'--gpus-per-node={self.gpus_per_node}']   # every rank sees its node's GPUs

    def _bind(self):
        # no CPU binding: NCCL pins each rank's threads near its GPU ("Setting affinity for GPU N"), which a
        # binding of all ranks near the HCA would override; the nodes are the case's alone (Placement: exclusive)
        self.apply_launch_policy(tasks_per_node=self.num_tasks_per_node, bind=False)

    def unmeasured_sizes(self, table):
        have = set(table.sizes())
        return [size for size in powers_of_two(self.min_bytes, self.max_bytes) if size not in have]

    def diagnose(self):
        parsed, table = super().diagnose()
        ranks = parsed.meta.get('ranks') or []
        held = {(r['host'], r['bus']) for r in ranks}
        if len(ranks) != self.num_tasks or len(held) != len(ranks):
            raise SanityError(f'{len(ranks)} of {self.num_tasks} ranks said their GPU, on {len(held)} distinct GPUs: '
                              'one rank per GPU was promised (nccl-tests\' "# Using devices" lines)')
        hosts = {r['host'] for r in ranks}
        if len(hosts) != self.num_nodes:
            raise SanityError(f'the ranks ran on {len(hosts)} node(s) ({", ".join(sorted(hosts))}), '
                              f'{self.num_nodes} were promised')
        self.gpu_ranks = {f'rank {r["rank"]}': {'host': r['host'], 'device': r['device'], 'bus': r['bus'],
                                                'gpu': r['gpu']} for r in ranks}
        self.nccl_transport = nccl_transport.summary(parsed.meta)
        network = (self.nccl_network or self.current_partition.extras.get('nccl_network')
                   or nccl_transport.DEFAULT_NETWORK)
        wrong = nccl_transport.problem(parsed.meta, self.num_nodes, network=network,
                                       gpudirect='gpudirect' in self.current_partition.features)
        if wrong:
            raise SanityError(wrong)
        return parsed, table
