"""ReFrame pieces of the soft-RoCE nodes: the ``softroce`` launcher, the system and its environment.

``configs/softroce.py`` is ``rfmconfig.site_configuration(systems=[system()], environments=[environment()])``.
Importing this module registers the launcher.

Jobs run on the host (``local`` scheduler, ReFrame prefix inside the directory shared into the guests, so a
stage directory has the same path in the guests). Partitions:

* ``dualport``: one guest, rxe0 <-> rxe1 cabled back to back. Launcher ``softroce``: every command runs in
  guest n0 through its agent.
* ``nodes2``: two guests, n0:rxe2 <-> n1:rxe2. Launcher ``local``: the job (``ibrepro pair``) runs on the
  host and reaches each guest through ``node_exec``, as it reaches nodes through ``srun`` elsewhere.

Partition extras read by the perftest families (:mod:`ibrepro.rfm.perftest`): ``nodes``, ``rdma_devices``,
``perftest_addresses`` (per node index, the address the out-of-band exchange connects to), ``node_exec``
(prefix running one side on node ``{node}``); ``emulated`` (TCG: not performance data) and
``perftest_options`` (options every perftest run needs here: a QP timeout longer than an emulated round
trip, see ci/softroce/README.md).
"""

import shlex
import sys

from reframe.core.backends import register_launcher
from reframe.core.launchers import JobLauncher

from . import guests, run_dir, share_dir

#: rxe retransmits with perftest's default QP timeout (-u 14: 67 ms) when the emulated CPUs are busy, and a
#: latency test whose QP exhausts its retries waits forever; -u 20 is 4.3 s
PERFTEST_OPTIONS = ['-u', '20']


def guest_exec(node):
    """The argv prefix that runs a command in guest ``node`` ('n0', 'n1', or 'n{node}' for node_exec)."""
    return [sys.executable, '-m', 'ibrepro.softroce.guestexec', f'--run-dir={run_dir()}',
            f'--node={node}']


@register_launcher('softroce')
class SoftRoCELauncher(JobLauncher):
    """Runs each command in the guest named by the partition's ``access`` (``--node=n0``), as ReFrame's
    ssh launcher takes its host from ``access``; launcher ``env_vars`` reach the guest as ``--env``."""

    def command(self, job):
        node = next((a.split('=', 1)[1] for a in job.sched_access if a.startswith('--node=')), 'n0')
        env = [f'--env={k}={v}' for k, v in self.env_vars.items()]
        return [shlex.quote(arg) for arg in guest_exec(node) + env]


def _extras(**extras):
    return {'emulated': True, 'perftest_options': PERFTEST_OPTIONS, 'cores_per_node': 4,
            'ib_ports': 1,   # each rxe device has one port: perftest's dual-port mode (-O) cannot run
            'interconnect': 'soft-RoCE (rdma_rxe, RoCE v2) in QEMU TCG guests', **extras}


def system():
    """The ``softroce`` system (start its guests with `ibrepro softroce up [--nodes 2]`)."""
    common = {'scheduler': 'local', 'environs': ['rxe-guest'], 'time_limit': '20m',
              'max_jobs': 1}   # TCG is CPU-hungry; perftest ports are per guest
    return {
        'name': 'softroce',
        'descr': 'soft-RoCE (rdma_rxe) in QEMU TCG guests: runs end to end, numbers are not performance data',
        'hostnames': ['.*'],
        'modules_system': 'nomod',
        'prefix': str(share_dir() / 'reframe'),
        'partitions': [
            {**common, 'name': 'dualport', 'launcher': 'softroce', 'access': ['--node=n0'],
             'descr': 'one guest, rxe0 <-> rxe1 cabled back to back (veth)',
             'features': ['ib', 'roce', 'rxe', 'dual-port', 'nodes1'],
             'extras': _extras(nodes=1, rdma_devices=['rxe0', 'rxe1'],
                               perftest_addresses=[guests.address('n0', 'rxe0'),
                                                   guests.address('n0', 'rxe1')],
                               node_exec=guest_exec('n0'))},
            {**common, 'name': 'nodes2', 'launcher': 'local',
             'descr': 'two guests, n0:rxe2 <-> n1:rxe2 (QEMU socket link on 127.0.0.1)',
             'features': ['ib', 'roce', 'rxe', 'nodes2'],
             'extras': _extras(nodes=2, rdma_devices=['rxe2'],
                               perftest_addresses=[guests.address('n0', 'rxe2'),
                                                   guests.address('n1', 'rxe2')],
                               node_exec=guest_exec('n{node}'))},
        ],
    }


def environment():
    """What the guest image provides: perftest 4.5, rdma-core 44 (ibv_*), iproute2's rdma."""
    return {'name': 'rxe-guest', 'features': ['perftest', 'verbs'], 'target_systems': ['softroce'],
            'extras': {'about': 'the soft-RoCE guest image (ibrepro softroce build)'}}
