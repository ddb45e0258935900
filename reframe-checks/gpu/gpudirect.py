"""GPUDirect RDMA by PCIe distance: RDMA write bandwidth and RDMA read latency from and into GPU memory, with the GPU
nearest to the HCA and the farthest, beside the same case in host memory (perftest built with CUDA; catalog row 45).

The papers placed the adapter on the I/O bus and measured what the bus cost (000/003 Sec. IV.B: PCI-X against PCI
Express x8; 001 Sec. 5.1: PCIe 2.0 against 1.1). On a GPU node the data's place on the PCIe tree is the choice: a
GPU behind the HCA's own PCIe switch (PIX) against one across the socket interconnect (SYS), as ``nvidia-smi topo
-m`` names the distances. Each side of the flow runs on CPUs near its rail's HCA (the pair runner's binding); its
buffers are in the memory of the GPU the runner picks on that node by its PCIe distance from the same HCA (sysfs,
:mod:`ibrepro.pcie_distance`), given to perftest as ``--use_cuda_bus_id=<PCI address>``. ``flow_windows`` and
``gpu_placement`` record the GPU and its distance on each side.

perftest refuses CUDA for RDMA write latency (it polls the last byte of the buffer): latency is RDMA read, the
papers' Fig. 4 (row 3), polled on the completion queue. Bandwidth is the papers' Fig. 6 (row 5) method.

Runs where a partition has the feature ``gpudirect`` (and ``ib`` or ``roce``) and an environment has feature ``cuda``
with perftest (a perftest built with CUDA: Spack ``perftest +cuda``). The far GPU is measured where the partition's
extras give ``gpu_far_distance``, the distance of the farthest GPU from the HCA (a node whose GPUs all sit at one
distance has no far case); ``gpu_hca_distance`` and ``gpu_far_distance``, where given, are what the runner must
find: a node that is not as its partition says fails the case, naming the GPU.
"""

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ibrepro.rfm.perftest import PerftestFlows

# operation -> (perftest program and options, iterations, metrics, catalog rows)
OPERATIONS = {
    'write_bw': (['ib_write_bw', '-t', '64', '--perform_warm_up'], 6400, ['bw', 'msgrate'], [45]),
    'read_lat': (['ib_read_lat'], 10000, ['lat'], [45]),
}

#: Where each side's buffers are: host memory, or the GPU nearest to / farthest from its rail's HCA.
MEMORY = {'host': None, 'gpu-near': 'near', 'gpu-far': 'far'}

# The section's one table: (operation, memory) -> (catalog rows, the papers' figures: none, it continues theirs)
FIGURES = {(op, memory): (OPERATIONS[op][3], []) for op in OPERATIONS for memory in MEMORY}

#: The partition's extras that say which distance the near and the far GPU have.
EXPECTED = {'near': 'gpu_hca_distance', 'far': 'gpu_far_distance'}


@rfm.simple_test
class GpuDirectRdma(PerftestFlows):
    #: The verbs operation: RDMA write bandwidth, or RDMA read latency.
    operation = parameter(list(OPERATIONS), type=str)

    #: Where both sides' buffers are (:data:`MEMORY`).
    memory = parameter(list(MEMORY), type=str)

    #: The option that puts perftest's buffers in one GPU's memory, ``{gpu}`` its PCI address.
    gpu_options = variable(list, value=['--use_cuda_bus_id={gpu}'])

    #: Per side: the GPU it used and its PCIe distance from the side's HCA (set after the run).
    gpu_placement = variable(dict, value={}, loggable=True)

    valid_prog_environs = ['+perftest +cuda']
    required_partition_features = ['gpudirect']

    @run_after('init')
    def describe(self):
        (self.test, *self.extra_options), self.iterations, self.report_metrics, _ = OPERATIONS[self.operation]
        self.experiments, self.figures = FIGURES[(self.operation, self.memory)]
        where = {'host': 'host memory', 'gpu-near': 'the GPU nearest to the HCA',
                 'gpu-far': 'the GPU farthest from the HCA'}[self.memory]
        what = 'RDMA write bandwidth' if self.operation == 'write_bw' else 'RDMA read latency'
        self.descr = f'GPUDirect RDMA by PCIe distance: {what}, buffers in {where} (perftest {self.test})'

    @run_after('setup')
    def need_a_far_gpu(self):
        if MEMORY[self.memory] == 'far' and not self.current_partition.extras.get('gpu_far_distance'):
            self.skip_for([f'partition {self.current_partition.fullname} gives no gpu_far_distance (the PCIe '
                           'distance of its farthest GPU from the HCA): set it where a GPU sits farther than the '
                           'nearest'])

    def flows(self):
        flows = super().flows()
        choice = MEMORY[self.memory]
        if choice:
            for flow in flows:
                flow['server']['gpu'] = flow['client']['gpu'] = choice
        return flows

    def spec_options(self):
        options = super().spec_options()
        if MEMORY[self.memory]:
            options['gpu_options'] = list(self.gpu_options)
        return options

    @run_before('run')
    def ask_for_the_gpus(self):
        # every GPU of the node in the job's cgroup: the runner picks one by its distance, not by Slurm's choice
        gpus = self.current_partition.extras.get('gpus_per_node')
        if gpus and self.current_partition.scheduler.registered_name == 'slurm':
            self.job.options += [f'--gpus-per-node={int(gpus)}']

    def check_rounds(self):
        """Each side used the GPU it was to use, at the distance the partition says (where it says one)."""
        super().check_rounds()
        choice = MEMORY[self.memory]
        if not choice:
            return
        extras = self.current_partition.extras
        placement = {}
        for window in self.flow_windows:
            gpu = window.get('gpu')
            side = f'{window["side"]} on {window["host"]}'
            if not isinstance(gpu, dict) or gpu.get('choice') != choice:
                raise SanityError(f'flow {window["flow"]}: the {side} recorded no {choice} GPU (it ran in host '
                                  'memory?)')
            expected = extras.get(EXPECTED[choice])
            if expected and gpu.get('distance') != expected:
                raise SanityError(f'flow {window["flow"]}: the {side} found its {choice} GPU {gpu.get("address")} at '
                                  f'PCIe distance {gpu.get("distance")} from {window.get("device")}, but the partition '
                                  f'says {expected} ({EXPECTED[choice]}): the node is not as its partition describes')
            placement[side] = {'address': gpu.get('address'), 'distance': gpu.get('distance'),
                               'device': window.get('device')}
        self.gpu_placement = placement
