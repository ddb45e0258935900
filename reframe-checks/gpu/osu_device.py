"""MPI point-to-point latency and bandwidth between GPU memories (OSU ``-d cuda D D``), one rank per node, each
rank's GPU chosen on its node by its PCIe distance from the rank's HCA: the MPI level of GPUDirect RDMA by PCIe
distance (catalog row 45, beside the verbs level in gpudirect.py), the papers' 2x1 latency and bandwidth (000/003
Sec. IV.C.1, 001 Sec. 5.1) with the data in GPU memory.

Each rank runs through ``pcie_distance.py`` (:mod:`ibrepro.pcie_distance`, copied into the stage directory): it
finds on its node the NVIDIA GPU nearest to (or farthest from) the partition's MPI rail, makes it the rank's only
CUDA device (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``CUDA_VISIBLE_DEVICES``), says which on stderr, and runs the OSU
program; the job holds all of the node's GPUs (``--gpus-per-node``), so the index in PCI order is that GPU's. The
ranks are bound near the rail's HCA as every MPI case is; ``gpu_placement`` records each rank's GPU and distance,
and a rank that found none, or one at another distance than the partition's extras say (``gpu_hca_distance``,
``gpu_far_distance``), fails the case.

Runs where a partition has the feature ``gpudirect`` and an environment has a CUDA-aware MPI with OSU built
``+cuda`` (features ``osu`` and ``cuda``: configs/spack/gpu-mpi).
"""

import os
import shutil

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ibrepro import pcie_distance
from ibrepro.rfm.launch import partition_rail
from ibrepro.rfm.osu import OSUBenchmark
from ibrepro.rfm.system import node_python

# OMB program -> what it measures
BENCHMARKS = {'osu_latency': 'latency', 'osu_bw': 'uni-directional bandwidth',
              'osu_bibw': 'bi-directional bandwidth'}

# The section's one table: (program, GPU) -> (catalog rows, the papers' figures: none, it continues theirs)
FIGURES = {(program, gpu): ([45], []) for program in BENCHMARKS for gpu in ('near', 'far')}

#: The partition's extras that say which distance the near and the far GPU have.
EXPECTED = {'near': 'gpu_hca_distance', 'far': 'gpu_far_distance'}


@rfm.simple_test
class OSUDevicePointToPoint(OSUBenchmark):
    #: The OMB program.
    benchmark = parameter(list(BENCHMARKS), type=str)

    #: Which GPU each rank's buffers are in: the nearest to its HCA, or the farthest.
    gpu = parameter(['near', 'far'], type=str)

    #: Per rank: the GPU it used and its PCIe distance from the rank's HCA (set after the run).
    gpu_placement = variable(dict, value={}, loggable=True)

    num_nodes = 2
    required_partition_features = ['gpudirect']
    required_environ_features = ['osu', 'cuda']

    @run_after('init')
    def describe(self):
        self.osu_benchmark = self.benchmark
        self.experiments, self.figures = FIGURES[(self.benchmark, self.gpu)]
        self.descr = (f'OSU {self.benchmark} -d cuda: MPI {BENCHMARKS[self.benchmark]} between the memories of the '
                      f'GPUs {"nearest to" if self.gpu == "near" else "farthest from"} the HCA, 2 processes on 2 '
                      'nodes')

    @run_after('setup')
    def need_a_far_gpu(self):
        if self.gpu == 'far' and not self.current_partition.extras.get('gpu_far_distance'):
            self.skip_for([f'partition {self.current_partition.fullname} gives no gpu_far_distance (the PCIe '
                           'distance of its farthest GPU from the HCA): set it where a GPU sits farther than the '
                           'nearest'])

    @run_before('run')
    def run_in_gpu_memory(self):
        rail = partition_rail(self.current_partition.extras)
        if rail is None:
            raise ValueError(f'partition {self.current_partition.fullname} names no rdma_devices: a GPU is chosen by '
                             'its distance from the MPI rail\'s HCA')
        shutil.copy(pcie_distance.__file__, os.path.join(self.stagedir, 'pcie_distance.py'))
        self.executable_opts = ['pcie_distance.py', '--device', rail[0], '--gpu', self.gpu, '--',
                                self.executable, '-d', 'cuda', *self.executable_opts, 'D', 'D']
        self.executable = node_python(self.current_partition)
        gpus = self.current_partition.extras.get('gpus_per_node')
        if gpus and self.current_partition.scheduler.registered_name == 'slurm':
            self.job.options += [f'--gpus-per-node={int(gpus)}']     # all: the index in PCI order is the GPU's

    def diagnose(self):
        lines = [line for line in self._read(self.stderr.evaluate()).splitlines() if line.startswith('ibrepro gpu: ')]
        refused = [line for line in lines if not pcie_distance.RANK_GPU.match(line)]
        if refused:      # a rank that found no such GPU ran nothing: its reason, not the empty output's
            raise SanityError(refused[0][len('ibrepro gpu: '):])
        result = super().diagnose()
        said = [m.groups() for m in map(pcie_distance.RANK_GPU.match, lines) if m]
        if len(said) < self.num_nodes * self.ranks_per_node:
            raise SanityError(f'{len(said)} of {self.num_nodes * self.ranks_per_node} ranks said which GPU they '
                              'used (ibrepro gpu: lines on stderr)')
        expected = self.current_partition.extras.get(EXPECTED[self.gpu])
        placement = {}
        for host, rank, address, distance, device, choice in said:
            if expected and distance != expected:
                raise SanityError(f'rank {rank} on {host} found its {choice} GPU {address} at PCIe distance '
                                  f'{distance} from {device}, but the partition says {expected} '
                                  f'({EXPECTED[self.gpu]}): the node is not as its partition describes')
            placement[f'rank {rank} on {host}'] = {'address': address, 'distance': distance, 'device': device}
        self.gpu_placement = placement
        return result
