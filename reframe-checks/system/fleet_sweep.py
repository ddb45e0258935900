"""The fleet's per-node state sweep: which node, HCA port or PCIe link of a partition is degraded, tonight.

The papers' central finding is that the host bus, not the link, sets the ceiling (PCI-X vs PCI Express, PCIe 1.1 vs
2.0): a slot trained to x8, a port at 2X or an HCA on the far socket is exactly such a ceiling, and it shows in the
node's own state before any traffic. One job with one task on every idle node of the partition (ReFrame's flexible
allocation, ``--flex-alloc-nodes``, default ``idle``) reads each node's state on the node itself
(``ibrepro fleet node``: ports, each PCIe link up to the root port, error counters, firmware, board id, the HCA's
NUMA node); :mod:`ibrepro.fleet` judges them against the partition's extras (``rdma_devices`` x ``ib_ports``,
``expected_port``, ``hca_numa_node``, ``gpu_hca_distance``), against physics (a link below the lesser of its ends'
maxima) and against the fleet's majority per board id. The case fails naming each faulty component with its
evidence; what could not be read (no counters on mlx4, no PCIe on soft-RoCE) is recorded as not judged.

Run it with ``reframe -c reframe-checks/system/fleet_sweep.py -r`` (tag ``fleet``); the states and faults are the
loggable variables ``fleet_state`` and ``fleet_faults`` of the stored session.
"""

import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from ibrepro.fleet import sweep as fleet_sweep
from ibrepro.rfm import launch, system


@rfm.simple_test
class FleetSweep(rfm.RunOnlyRegressionTest):
    descr = 'the state of every idle node of the partition, judged component by component (ibrepro fleet)'
    valid_systems = ['+ib', '+roce']
    valid_prog_environs = ['*']
    num_tasks = 0                       # flexible: one task per node ReFrame allocates (--flex-alloc-nodes)
    num_tasks_per_node = 1
    exclusive_access = True
    # each task runs ibrepro on its node, with the partition's Python (ibrepro.rfm.system.node_python)
    executable_opts = ['-m', 'ibrepro.cli', 'fleet', 'node']
    tags = {'system', 'fleet'}

    #: sysfs root each node reads (another root only for tests or containers)
    sysfs_root = variable(str, value='/sys')

    #: host -> the topology it read (set after the run)
    fleet_state = variable(typ.Dict[str, dict], value={}, loggable=True)

    #: the faults found, each {component, fault, evidence} (set after the run)
    fleet_faults = variable(typ.List[dict], value=[], loggable=True)

    #: what could not be judged, and why (set after the run)
    fleet_not_judged = variable(typ.List[str], value=[], loggable=True)

    @run_after('setup')
    def once_per_partition(self):
        # the nodes' state does not depend on the programming environment: the partition's first one reads it
        first = self.current_partition.environs[0].name
        self.skip_if(self.current_environ.name != first, f'read once per partition, in environment {first}')

    @run_before('run')
    def set_options(self):
        if self.is_dry_run():
            # a dry run asks Slurm nothing (a flexible job would ask scontrol for the idle nodes, absent or down on
            # the machine where a site first generates its scripts): one task on each node the partition declares
            self.num_tasks = max(1, int(self.current_partition.extras.get('nodes') or 1))
        system.use_the_nodes_python(self)
        self.executable_opts = [*self.executable_opts, '--sysfs', shlex.quote(self.sysfs_root)]
        if self.current_partition.scheduler.registered_name == 'local':
            self.job.launcher = getlauncher('local')()     # one node: this one

    @sanity_function
    def judged(self):
        path = os.path.join(self.stagedir, sn.evaluate(self.stdout))
        with open(path, errors='replace') as f:
            states, problems = fleet_sweep.read_lines([(path, f.read())])
        if problems:
            raise SanityError('; '.join(problems))
        if not states:
            raise SanityError(f'no node state in {path}')
        extras = self.current_partition.extras
        expected = {k: extras[k] for k in ('rdma_devices', 'ib_ports', 'expected_port', 'gpu_hca_distance')
                    if k in extras}
        try:        # each HCA against the NUMA node the partition says it sits on (one number: the MPI rail's)
            numa = launch.hca_numa_nodes(extras)
        except ValueError as err:
            raise SanityError(f'partition {self.current_partition.name}: {err}') from None
        if numa:
            expected['hca_numa_node'] = numa
        result = fleet_sweep.sweep(states, expected)
        self.fleet_state, self.fleet_faults, self.fleet_not_judged = states, result['faults'], result['skipped']
        if result['faults']:
            raise SanityError(f'{len(result["faults"])} fault(s) on {result["nodes"]} node(s): ' + '; '.join(
                f"{f['component']}: {f['fault']} ({f['evidence']})" for f in result['faults']))
        return True
