"""Host-device copies over each GPU's PCI Express link, beside the link's limit (nvbandwidth): the papers' I/O-bus
experiment (000/003 Sec. IV.B, PCI-X against PCIe x8; 001 Sec. 5.1, PCIe 2.0 against 1.1) on today's GPU nodes,
where a GPU that trained at x8 or a generation below its slot is the bus fault sites hunt (catalog row 44).

One case per copy (:data:`ibrepro.gpu.COPIES`), every GPU of the node in one run: nvbandwidth measures them in turn,
each its own variable ``bw_gpu<N>`` (MB/s). Before it the job records the node's PCIe state with the partition's
Python (``ibrepro topology --json``); the loggable ``gpu_links`` puts each GPU beside the link it trained to and the
fraction of that link's data rate its copy reached. One process with the whole node (exclusive, ``srun --whole
--cpu-bind=none``): nvbandwidth's host buffers are where the kernel puts them, as an unbound application's.

Runs where a partition has the feature ``gpu`` (extras ``gpus_per_node``: the GPUs its job asks Slurm for) and an
environment provides ``nvbandwidth`` (Spack's builtin package, a module or a prefix).
"""

import json
import os
import shlex

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, variable
from reframe.core.exceptions import SanityError

from ibrepro import gpu, parsers
from ibrepro.rfm import PaperExperiment, Placement
from ibrepro.rfm.system import PACKAGE_DIR, node_python

# The section's one table: copy -> (catalog rows, the papers' figures: none, it continues their bus experiment)
FIGURES = {copy: ([44], []) for copy in gpu.COPIES}

#: Where the job writes the node's topology (stage directory).
TOPOLOGY_FILE = 'node-topology.json'


class _PerGpu:
    """The values of one copy as the performance stage reads a table's: ``bw_gpu<N>`` in MB/s."""

    metrics = {'bw': 'bw_mbps'}

    def __init__(self, values):
        self.values = values

    def metric_values(self):
        return [(name, value, 'MB/s') for name, value in self.values]


@rfm.simple_test
class GpuHostDevice(rfm.RunOnlyRegressionTest, Placement, PaperExperiment):
    #: The copy measured (:data:`ibrepro.gpu.COPIES`).
    copy = parameter(list(gpu.COPIES), type=str)

    #: nvbandwidth's buffer size in MiB (``-b``; its default 512) and its samples (``-i``; its default 3).
    buffer_mib = variable(int, value=512)
    samples = variable(int, value=3)

    #: Per GPU: its PCI address, the link it trained to, that link's limit and the fraction reached (after the run).
    gpu_links = variable(dict, value={}, loggable=True)

    valid_systems = ['+gpu']
    valid_prog_environs = ['+nvbandwidth']
    tool = 'nvbandwidth'
    level = 'gpu'
    executable = 'nvbandwidth'
    num_tasks = 1
    time_limit = '10m'

    @run_after('init')
    def describe(self):
        self.experiments, self.figures = FIGURES[self.copy]
        testcase, what = gpu.COPIES[self.copy]
        self.descr = f'GPU host-device copies, {what}, beside each GPU\'s PCIe link (nvbandwidth {testcase})'

    def program_name(self):
        return 'nvbandwidth'

    @run_before('run')
    def set_command(self):
        self.executable_opts = ['-j', '-t', gpu.COPIES[self.copy][0], '-b', str(self.buffer_mib),
                                '-i', str(self.samples)]
        python = shlex.quote(node_python(self.current_partition))
        self._add_prerun([f'PYTHONPATH={shlex.quote(str(PACKAGE_DIR))} {python} -m ibrepro.cli topology --json '
                          f'> {TOPOLOGY_FILE}'])
        gpus = self.current_partition.extras.get('gpus_per_node')
        if gpus and self.current_partition.scheduler.registered_name == 'slurm':
            self.job.options += [f'--gpus-per-node={int(gpus)}']     # the GPUs in the job's cgroup: all of them

    def _bind(self):
        # the process sees every CPU of its node (srun --whole, no binding): its host buffers stay where the kernel
        # puts them, as an unbound application's; the node is the check's alone (Placement: exclusive)
        self.apply_launch_policy(tasks_per_node=1, bind=False)

    def diagnose(self):
        stdout = self._read(self.stdout.evaluate())
        stderr = self._read(self.stderr.evaluate())
        try:
            parsed = parsers.parse_text(stdout, source=f'{self.name} stdout', tool=self.tool)
            values = gpu.copy_values(parsed, self.copy)
        except (parsers.ParseError, gpu.GpuError) as err:
            tail = ' '.join(stderr.strip().splitlines()[-3:])[:300]
            raise SanityError(f'{err}' + (f' (stderr: {tail})' if tail else '')) from None
        if self.job.exitcode:
            raise SanityError(f'nvbandwidth exited with code {self.job.exitcode}')
        try:
            with open(os.path.join(self.stagedir, TOPOLOGY_FILE)) as f:
                topo = json.load(f)
        except (OSError, ValueError) as err:     # the copies stand; their links are then unknown, and said so
            topo = {'message': f'{TOPOLOGY_FILE}: {err}'}
        self.gpu_links = gpu.beside_links(values, parsed, topo)
        return parsed, _PerGpu(values)
